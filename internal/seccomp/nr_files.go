//go:build linux

package seccomp

// Numbers of the file calls fileRules names (see nr.go for the sources),
// kept apart from nr.go's tables and merged into them at start-up.
var (
	filesAMD64Nr = map[string]uint32{
		"open": 2, "creat": 85, "link": 86, "rename": 82, "truncate": 76,
		"mknod": 133, "openat": 257, "mknodat": 259, "renameat": 264,
		"linkat": 265, "renameat2": 316, "openat2": 437,
		"mkdir": 83, "symlink": 88, "mkdirat": 258, "symlinkat": 266,
		"unlink": 87, "rmdir": 84, "unlinkat": 263,
		"setgroups": 116,
	}
	// arm64 has only the *at forms.
	filesARM64Nr = map[string]uint32{
		"mknodat": 33, "linkat": 37, "renameat": 38, "truncate": 45,
		"openat": 56, "renameat2": 276, "openat2": 437,
		"mkdirat": 34, "symlinkat": 36, "unlinkat": 35,
		"setgroups": 159,
	}
)

func init() {
	for n, nr := range filesAMD64Nr {
		amd64Nr[n] = nr
	}
	for n, nr := range filesARM64Nr {
		arm64Nr[n] = nr
	}
}
