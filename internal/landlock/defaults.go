package landlock

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// systemRoots hold programs and libraries. /bin, /lib... are symlinks on
// merged-/usr systems; the rule then lands on the target, which is fine.
var systemRoots = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
}

// etcEntries are the parts of /etc ordinary programs read. /etc is never
// granted wholesale so that shadow, gshadow, ssh host keys, ssl/private and
// credential-bearing configs (npmrc, pip.conf, gitconfig with tokens in
// URLs, machine-id as a host fingerprint) stay unreadable.
var etcEntries = []string{
	// dynamic loader
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.preload",
	// name service and networking configuration (public data)
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf",
	"/etc/resolv.conf", "/etc/gai.conf", "/etc/protocols", "/etc/services", "/etc/networks",
	"/etc/hostname",
	// time, locale, identification
	"/etc/localtime", "/etc/timezone", "/etc/locale.alias", "/etc/locale.conf",
	"/etc/os-release", "/etc/lsb-release", "/etc/debian_version", "/etc/alpine-release",
	"/etc/redhat-release", "/etc/fedora-release",
	// public certificates; /etc/ssl/private and /etc/pki/tls/private stay out
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/pki/tls/certs",
	"/etc/pki/ca-trust",
	// shells and terminals
	"/etc/profile", "/etc/bash.bashrc", "/etc/inputrc", "/etc/terminfo",
	// misc data files
	"/etc/alternatives", "/etc/mime.types", "/etc/magic", "/etc/magic.mime", "/etc/perl",
	"/etc/fonts",
}

// procEntries are the non-process top-level /proc entries worth reading.
// Landlock rules follow inodes, so a rule on /proc would cover every
// /proc/<pid>; entries are therefore granted one by one. Left out: self,
// thread-self, mounts and net (symlinks into the preparer's own pid dir),
// kernel-internal views (kallsyms, kcore, keys, kmsg, kpage*, iomem,
// ioports, slabinfo, timer_list) and cmdline (boot parameters can hold
// secrets).
var procEntries = []string{
	"/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/uptime",
	"/proc/version", "/proc/filesystems", "/proc/swaps", "/proc/vmstat", "/proc/cgroups",
	"/proc/pressure",
	// /proc/sys stays read-only: Landlock grants no write here.
	"/proc/sys",
}

// sysEntries are the only sysfs parts granted: CPU topology (glibc's
// get_nprocs, nproc, runtimes sizing thread pools) and THP settings (the Go
// runtime reads them at start-up).
var sysEntries = []string{
	"/sys/devices/system/cpu",
	"/sys/kernel/mm/transparent_hugepage",
}

// defaultDevices are the harmless character devices.
var defaultDevices = []string{
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
}

// ProcEntries returns the /proc entries granted read access by default. It
// never contains /proc itself, /proc/self, /proc/thread-self or a pid dir.
func ProcEntries() []string {
	return append([]string(nil), procEntries...)
}

// SysEntries returns the /sys entries granted read access by default.
func SysEntries() []string {
	return append([]string(nil), sysEntries...)
}

// DefaultSystemReadExec returns the read+exec set that lets ordinary
// programs run: system program and library roots, the non-secret parts of
// /etc, ProcEntries and SysEntries. Entries may be missing on a given host,
// so callers should also list them in plan.Landlock.Optional.
func DefaultSystemReadExec() []string {
	out := append([]string(nil), systemRoots...)
	out = append(out, etcEntries...)
	// Python's per-version config dirs (/etc/python3, /etc/python3.11).
	out = append(out, globDir("/etc", "python3*")...)
	out = append(out, procEntries...)
	return append(out, sysEntries...)
}

// DefaultDevices() returns the character devices granted by default. The
// caller should give the command no controlling terminal (setsid): opening
// /dev/tty then fails with ENXIO, and IOCTL_DEV on it cannot be used for
// TIOCSTI injection into the caller's terminal.
func DefaultDevices() []string {
	return append([]string(nil), defaultDevices...)
}

// globbed is what globDir found, by directory and pattern.
var globbed sync.Map

type globEntry struct {
	dir   os.FileInfo
	names []string
}

// globSettled is how long a directory must have been unchanged before
// globDir remembers what it found there: a directory's modification time
// comes from a clock that ticks every few milliseconds, and a change in
// the same tick as the listing would leave it as it was.
const globSettled = time.Second

// globDir is filepath.Glob of pattern (names directly in dir). Listing
// /etc took 0.15 ms of every run a server starts, so the answer is
// remembered while dir stays the same directory with the same
// modification time and size (an entry added, removed or renamed changes
// them; docs/performance-launch.md). The names are what the glob returns
// anyway: each is resolved again when its rule is added, and a missing
// one is optional.
func globDir(dir, pattern string) []string {
	key := dir + "\x00" + pattern
	start := time.Now()
	fi, err := os.Stat(dir)
	if err != nil {
		return nil
	}
	if e, ok := globbed.Load(key); ok {
		c := e.(globEntry)
		if os.SameFile(c.dir, fi) && c.dir.ModTime().Equal(fi.ModTime()) && c.dir.Size() == fi.Size() {
			return slices.Clone(c.names)
		}
	}
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return nil
	}
	if start.Sub(fi.ModTime()) >= globSettled {
		globbed.Store(key, globEntry{fi, slices.Clone(m)})
	}
	return m
}
