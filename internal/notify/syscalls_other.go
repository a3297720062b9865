//go:build linux && !amd64 && !arm64

package notify

// nativeArch is not known for this architecture: every notification is
// refused and Syscalls returns nothing.
const nativeArch = 0

var sysTable = map[int32]sysEntry{}
