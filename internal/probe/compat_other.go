//go:build linux && !amd64

package probe

import "runtime"

func vSocketcall32([]string) result {
	return na("the i386 compat ABI probe needs amd64, not %s", runtime.GOARCH)
}

func vX32Syscall([]string) result {
	return na("the x32 ABI probe needs amd64, not %s", runtime.GOARCH)
}
