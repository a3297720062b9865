//go:build linux && !amd64 && !arm64

package main

// sysFstatat is unknown here; statLoop falls back to unix.Stat.
var sysFstatat = -1
