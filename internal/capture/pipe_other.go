//go:build !linux

package capture

import "os"

// GrowPipe does nothing where pipes cannot be resized (F_SETPIPE_SZ is
// Linux's); the default size works, only with more context switches.
func GrowPipe(*os.File, int) {}
