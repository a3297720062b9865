package seatbelt

import "slices"

// SystemReadExec returns the macOS roots every run may read and execute: the
// system runtime (the dyld shared cache lives under /System), the Unix
// userland, and Apple's developer tools. Already canonical. /private/etc
// is not granted wholesale (it holds sudoers, master.passwd, ssh host
// keys): only the entries ordinary programs read.
func SystemReadExec() []string { return slices.Clone(systemReadExec) }

var systemReadExec = []string{
	"/System",
	"/usr",
	"/bin",
	"/sbin",
	"/Library/Developer",
	"/Library/Apple/usr",
	"/private/etc/hosts",
	"/private/etc/passwd",
	"/private/etc/group",
	"/private/etc/shells",
	"/private/etc/services",
	"/private/etc/protocols",
	"/private/etc/ssl",
	"/private/etc/localtime",
	"/private/var/db/timezone",
	"/private/etc/profile",
	"/private/etc/bashrc",
	"/private/etc/zshrc",
	"/private/etc/zprofile",
}

// Devices returns the device nodes a run may read and write.
func Devices() []string { return slices.Clone(devices) }

var devices = []string{
	"/dev/null",
	"/dev/zero",
	"/dev/random",
	"/dev/urandom",
	"/dev/stdout",
	"/dev/stderr",
	"/dev/tty",
	"/dev/dtracehelper",
}

// SandboxExec is where macOS ships the tool that applies a profile. It is
// looked for at run time; a host without it refuses every run.
const SandboxExec = "/usr/bin/sandbox-exec"
