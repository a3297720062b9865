//go:build linux

package main

import "golang.org/x/sys/unix"

var sysFstatat = unix.SYS_NEWFSTATAT
