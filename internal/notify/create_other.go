//go:build linux && !amd64 && !arm64

package notify

var createSysTable = map[int32]sysEntry{}
