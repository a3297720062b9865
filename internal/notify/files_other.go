//go:build linux && !amd64 && !arm64

package notify

var fileSysTable = map[int32]sysEntry{}
