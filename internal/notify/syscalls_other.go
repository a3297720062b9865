//go:build linux && !amd64 && !arm64

package notify

// nativeArch is not known for this architecture: every notification is
// refused and Syscalls returns nothing (seccomp has no numbers for it).
const nativeArch = 0
