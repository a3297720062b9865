//go:build linux

// Package landlock builds and enforces the Landlock part of confine's
// sandbox: filesystem access rights, TCP bind/connect denial and IPC
// scoping, applied by a process to its own thread just before it execs the
// confined command.
//
// The system calls, their attribute structs and the access-right constants
// come from Go-Landlock's low-level package
// (github.com/landlock-lsm/go-landlock/landlock/syscall, imported as ll).
// Its high-level API is not used: (1) its best-effort mode silently
// downgrades to "restrict nothing" and its strict mode is expressed as
// presets, while confine must handle exactly the rights of the running
// kernel's ABI and fail loudly otherwise, so the handled rights are
// computed here from the ABI; and (2) its all-threads enforcement needs
// libpsx (cgo pthread wrapping) below ABI 8. confine's stage 2 restricts
// the one locked thread that then calls execve, and execve discards every
// other thread, so the single-thread ll.LandlockRestrictSelf covers the
// command; the AllThreads variants are never called. x/sys/unix is used
// only for what ll lacks: open(O_PATH), fstat, fstatfs and
// prctl(PR_SET_NO_NEW_PRIVS).
//
// Landlock does not cover, at ABI 7: chmod, chown, utimes, xattrs and
// stat on any path; connect() to pathname unix sockets (ABI 9 adds
// RESOLVE_UNIX, handled here when present); ioctls on descriptors opened
// before enforcement. Other layers must close those gaps.
package landlock

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
)

// Rights of rules, from the ABI table's (rights.go).
const (
	// fileRights are the rights the kernel accepts on a rule whose path is
	// not a directory; anything else there is EINVAL. RESOLVE_UNIX is left
	// out on purpose: we cannot test it on a file rule here, and dropping
	// it only narrows access.
	fileRights = ll.AccessFSExecute |
		ll.AccessFSWriteFile |
		ll.AccessFSReadFile |
		fsTruncate | fsIoctlDev

	readExecRights = ll.AccessFSExecute |
		ll.AccessFSReadFile |
		ll.AccessFSReadDir

	// deviceRights omit TRUNCATE: the kernel ignores O_TRUNC on
	// non-regular files, so "echo x > /dev/null" needs only WRITE_FILE.
	// noDeviceNodes are handled but never granted, even in ReadWrite:
	// a root command could otherwise mknod a disk's block device in its
	// worktree and open it there, outside every other rule.
	noDeviceNodes = ll.AccessFSMakeChar | ll.AccessFSMakeBlock

	deviceRights = ll.AccessFSReadFile |
		ll.AccessFSWriteFile | fsIoctlDev
)

// Deferred is a rule Prepare checked but left to the caller to add.
type Deferred struct {
	Path     string
	Rights   uint64
	Optional bool
}

// Ruleset is a prepared Landlock ruleset. The descriptor is close-on-exec;
// to hand it to another process pass it explicitly (e.g. exec.Cmd
// ExtraFiles), and wrap it there with FromFD.
type Ruleset struct {
	// FD is the ruleset descriptor, -1 once closed.
	FD int
	// ABI is the kernel's Landlock ABI the ruleset was built for.
	ABI int
	// HandledFS, HandledNet and Scoped are the rights and scopes the
	// ruleset restricts (zero when unknown, as after FromFD).
	HandledFS  uint64
	HandledNet uint64
	Scoped     uint64
	// Skipped lists optional paths that did not exist.
	Skipped []string
	// Deferred are the rules Prepare's deferred kept out.
	Deferred []Deferred
	// Resolved maps each path given to where it resolves (symlinks
	// followed) and whether it is a directory, for callers that need it
	// too.
	Resolved map[string]Resolution

	fsTypes map[uint64]int64 // st_dev -> statfs f_type
}

// Resolution is where a root resolves, and whether it is a directory.
type Resolution struct {
	Path string
	Dir  bool
}

// ABI returns the running kernel's Landlock ABI version and its bitmask of
// fixed errata. It fails when the kernel lacks Landlock or it is disabled.
func ABI() (abi int, errata int, err error) {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOSYS):
			return 0, 0, fmt.Errorf("landlock unavailable: kernel built without CONFIG_SECURITY_LANDLOCK (landlock_create_ruleset: %w)", err)
		case errors.Is(err, unix.EOPNOTSUPP):
			return 0, 0, fmt.Errorf("landlock unavailable: disabled at boot; add \"landlock\" to the lsm= kernel parameter (landlock_create_ruleset: %w)", err)
		}
		return 0, 0, fmt.Errorf("landlock unavailable: landlock_create_ruleset(VERSION): %w", err)
	}
	e, err := ll.LandlockGetErrata()
	if err != nil || e < 0 {
		// Kernels predating the errata query fixed none we know of.
		e = 0
	}
	return simulatedABI(v), e, nil
}

// Prepare creates a ruleset handling every filesystem right of the running
// kernel's ABI (plus TCP and scopes when asked) and adds p's rules to it.
// guarded are paths inside ReadWrite roots that stay read-only (the
// persistence guard's .git; plan.Plan.LandlockGuarded). Landlock rights are
// inherited by everything below the directory they are granted on, so a
// root holding one is granted read and execute only, and its entries one
// by one: every entry with the root's rights except the guarded path and
// the directories on the way to it, whose entries get the same treatment.
// Those directories' own entries are then fixed: nothing can be created,
// removed or renamed in them.
// deferred, when not nil, names paths that are checked here but added by
// the caller later, where the path will name another inode (the /proc a
// new PID namespace mounts): they go to Ruleset.Deferred instead.
// It fails, naming the path, if a non-optional path cannot be opened or is
// of a kind the list does not allow; and if DenyTCP or Scope is asked for on
// a kernel too old to enforce it.
func Prepare(p plan.Landlock, guarded []string, deferred func(path string) bool) (*Ruleset, error) {
	abi, _, err := ABI()
	if err != nil {
		return nil, err
	}
	if abi < 1 {
		return nil, fmt.Errorf("landlock unavailable: kernel reports ABI %d", abi)
	}
	// ll passes the whole RulesetAttr (up to the ABI 10 quiet fields) to
	// the kernel, which accepts a larger struct as long as the fields it
	// does not know are zero. They are: net and scoped are set only after
	// the ABI checks below, and the quiet fields never.
	attr := ll.RulesetAttr{HandledAccessFS: handledFS(abi)}
	if p.DenyTCP {
		if f, _ := FeatureByName(FeatTCP); abi < f.ABI {
			return nil, fmt.Errorf("landlock ABI %d cannot deny TCP: needs %s", abi, f.Need())
		}
		attr.HandledAccessNet = netTCP
	}
	if p.Scope {
		if f, _ := FeatureByName(FeatScope); abi < f.ABI {
			return nil, fmt.Errorf("landlock ABI %d cannot scope abstract unix sockets and signals: needs %s", abi, f.Need())
		}
		attr.Scoped = scopeAll
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return nil, fmt.Errorf("landlock_create_ruleset (ABI %d, fs %#x, net %#x, scoped %#x): %w", abi, attr.HandledAccessFS, attr.HandledAccessNet, attr.Scoped, err)
	}
	if fd < 0 {
		return nil, fmt.Errorf("landlock_create_ruleset (ABI %d): invalid descriptor %d", abi, fd)
	}
	r := &Ruleset{FD: fd, ABI: abi, HandledFS: attr.HandledAccessFS, HandledNet: attr.HandledAccessNet, Scoped: attr.Scoped}

	optional := make(map[string]bool, len(p.Optional))
	for _, o := range p.Optional {
		optional[filepath.Clean(o)] = true
	}
	lists := []struct {
		kind   ruleKind
		paths  []string
		rights uint64
	}{
		{kindReadExec, p.ReadExec, readExecRights},
		{kindReadWrite, p.ReadWrite, attr.HandledAccessFS &^ noDeviceNodes},
		{kindDevice, p.Devices, deviceRights & attr.HandledAccessFS},
	}
	for _, l := range lists {
		for _, path := range l.paths {
			if l.kind == kindReadWrite && guardedWithin(guarded, path) {
				if _, err := os.Lstat(path); optional[filepath.Clean(path)] && errors.Is(err, fs.ErrNotExist) {
					r.Skipped = append(r.Skipped, path)
					continue
				}
				if err := r.addAround(path, guarded, l.rights); err != nil {
					r.Close()
					return nil, err
				}
				continue
			}
			later := deferred != nil && deferred(path)
			skipped, err := r.addPath(l.kind, path, l.rights, optional[filepath.Clean(path)], later)
			if err != nil {
				r.Close()
				return nil, err
			}
			if skipped {
				r.Skipped = append(r.Skipped, path)
			}
		}
	}
	return r, nil
}

// guardedWithin says some guarded path lies strictly inside root.
func guardedWithin(guarded []string, root string) bool {
	for _, g := range guarded {
		if strings.HasPrefix(g, strings.TrimSuffix(root, "/")+"/") {
			return true
		}
	}
	return false
}

// maxGuardEntries bounds the rules one directory on the way to a guarded
// path may need (each entry is one rule).
const maxGuardEntries = 10000

// ErrGuardEntries: a directory on the way to a guarded path has more
// entries than maxGuardEntries.
var ErrGuardEntries = errors.New("too many entries to grant one by one")

// addAround grants root (a ReadWrite root holding guarded paths) read and
// execute, and its entries rights one by one, skipping the guarded paths
// and descending into the directories that lead to one. Entries are opened
// without following symlinks (a symlink entry gets nothing of its own: it
// cannot be replaced without the root's rights), and only directories and
// regular files get a rule; every rule is on an object inside root, with
// at most root's rights, so it never grants more than the root would have.
func (r *Ruleset) addAround(root string, guarded []string, rights uint64) error {
	if _, err := r.addPath(kindReadWrite, root, readExecRights, false, false); err != nil {
		return err
	}
	dir, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("landlock: read-write path %q: %w", root, err)
	}
	f := os.NewFile(uintptr(dir), root)
	defer f.Close()
	names, err := f.Readdirnames(maxGuardEntries + 1)
	if err != nil && len(names) == 0 && !errors.Is(err, io.EOF) {
		return fmt.Errorf("landlock: read-write path %q: %w", root, err)
	}
	if len(names) > maxGuardEntries {
		return fmt.Errorf("landlock: read-write path %q holds a guarded path and more than %d entries: %w", root, maxGuardEntries, ErrGuardEntries)
	}
	for _, n := range names {
		p := filepath.Join(root, n)
		switch {
		case slices.Contains(guarded, p):
			continue
		case guardedWithin(guarded, p):
			if err := r.addAround(p, guarded, rights); err != nil {
				return err
			}
			continue
		}
		fd, err := unix.Openat(dir, n, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // gone since the listing
			}
			return fmt.Errorf("landlock: read-write path %q: %w", p, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		if err == nil {
			want := rights
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
			case unix.S_IFREG:
				want &= fileRights
			default:
				want = 0
			}
			if want != 0 {
				err = ll.LandlockAddPathBeneathRule(r.FD, &ll.PathBeneathAttr{AllowedAccess: want, ParentFd: fd}, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("landlock: read-write path %q: %w", p, err)
		}
	}
	return nil
}

type ruleKind int

const (
	kindReadExec ruleKind = iota
	kindReadWrite
	kindDevice
)

func (k ruleKind) String() string {
	switch k {
	case kindReadExec:
		return "read-exec path"
	case kindReadWrite:
		return "read-write path"
	default:
		return "device"
	}
}

// addPath adds one path-beneath rule. It reports skipped=true when an
// optional path does not exist.
func (r *Ruleset) addPath(kind ruleKind, path string, rights uint64, optional, deferred bool) (skipped bool, err error) {
	if !filepath.IsAbs(path) {
		return false, fmt.Errorf("landlock: %s %q is not absolute", kind, path)
	}
	// A path without symlinks resolves to itself cleaned: one openat2
	// then spares the readlink of /proc/self/fd that checkPath needs
	// otherwise (most of Prepare's time, over sixty paths a run).
	direct := true
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil && !errors.Is(err, unix.ENOENT) {
		// ELOOP: a symlink on the way; ENOSYS: no openat2 (before 5.6).
		direct = false
		fd, err = unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		if optional && errors.Is(err, unix.ENOENT) {
			return true, nil
		}
		return false, fmt.Errorf("landlock: %s %q: %w", kind, path, err)
	}
	defer unix.Close(fd)

	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("landlock: %s %q: fstat: %w", kind, path, err)
	}
	resolved, err := r.checkPath(kind, path, fd, &st, direct)
	if err != nil {
		return false, err
	}
	if r.Resolved == nil {
		r.Resolved = make(map[string]Resolution, 64)
	}
	r.Resolved[path] = Resolution{resolved, st.Mode&unix.S_IFMT == unix.S_IFDIR}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= fileRights
	}
	if deferred {
		r.Deferred = append(r.Deferred, Deferred{Path: path, Rights: rights, Optional: optional})
		return false, nil
	}
	attr := ll.PathBeneathAttr{AllowedAccess: rights, ParentFd: fd}
	if err := ll.LandlockAddPathBeneathRule(r.FD, &attr, 0); err != nil {
		return false, fmt.Errorf("landlock: %s %q: landlock_add_rule(rights %#x): %w", kind, path, rights, err)
	}
	return false, nil
}

// AddDeferred adds d with its path resolved beneath root, an O_PATH
// descriptor of another mount namespace's root (openat2 RESOLVE_IN_ROOT),
// as that namespace's init added it: a supervisor thread that acts in the
// command's tree gets the command's rules for what exists only there.
func (r *Ruleset) AddDeferred(root int, d Deferred) error {
	fd, err := unix.Openat2(root, d.Path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		if d.Optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("landlock: deferred %q: %w", d.Path, err)
	}
	defer unix.Close(fd)
	attr := ll.PathBeneathAttr{AllowedAccess: d.Rights, ParentFd: fd}
	if err := ll.LandlockAddPathBeneathRule(r.FD, &attr, 0); err != nil {
		return fmt.Errorf("landlock: deferred %q: landlock_add_rule(rights %#x): %w", d.Path, d.Rights, err)
	}
	return nil
}

// checkPath refuses rules that would quietly defeat the sandbox: "/" (it
// covers /proc/<pid> of every process and all secrets), /proc wholesale or
// any per-process /proc entry, writable procfs/sysfs, /dev wholesale and
// device nodes granted other than one by one through Devices.
func (r *Ruleset) checkPath(kind ruleKind, path string, fd int, st *unix.Stat_t, direct bool) (string, error) {
	typ := st.Mode & unix.S_IFMT
	resolved := filepath.Clean(path)
	if !direct {
		// Without /proc we cannot see where a symlink led; the cleaned
		// name still catches the direct cases.
		if l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil {
			resolved = l
		}
	}
	refuse := func(why string) (string, error) {
		if resolved != path {
			return "", fmt.Errorf("landlock: %s %q (resolves to %q): %s", kind, path, resolved, why)
		}
		return "", fmt.Errorf("landlock: %s %q: %s", kind, path, why)
	}
	if resolved == "/" {
		return refuse("granting / would expose every file, including /proc/<pid> of other processes")
	}
	// One fstatfs per filesystem: a run names some sixty paths on three
	// or four of them.
	fsType, ok := r.fsTypes[st.Dev]
	if !ok {
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(fd, &sfs); err != nil {
			return "", fmt.Errorf("landlock: %s %q: fstatfs: %w", kind, path, err)
		}
		fsType = int64(sfs.Type)
		if r.fsTypes == nil {
			r.fsTypes = make(map[uint64]int64, 4)
		}
		r.fsTypes[st.Dev] = fsType
	}
	switch fsType {
	case unix.PROC_SUPER_MAGIC:
		if kind == kindReadWrite {
			return refuse("procfs is never granted write access")
		}
		rest, ok := strings.CutPrefix(resolved, "/proc/")
		if !ok {
			return refuse("procfs outside /proc or /proc itself: rules there would cover /proc/<pid> of other processes")
		}
		first, _, _ := strings.Cut(rest, "/")
		if first == "self" || first == "thread-self" || isDigits(first) {
			return refuse("per-process /proc entries are never granted: a rule attaches to one process's inode")
		}
	case unix.SYSFS_MAGIC:
		if kind == kindReadWrite {
			return refuse("sysfs is never granted write access")
		}
	}
	if resolved == "/dev" {
		return refuse("/dev is never granted wholesale; list device nodes in Devices")
	}
	isDev := typ == unix.S_IFCHR || typ == unix.S_IFBLK
	switch {
	case kind == kindDevice && typ != unix.S_IFCHR:
		return refuse("not a character device")
	case kind != kindDevice && isDev:
		return refuse("device nodes must be listed in Devices")
	}
	return resolved, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// WritableDirRights are the rights a read-write directory rule grants.
func (r *Ruleset) WritableDirRights() uint64 { return r.HandledFS &^ noDeviceNodes }

// Close releases the ruleset descriptor. Enforcement already done stays in
// force.
func (r *Ruleset) Close() error {
	if r == nil || r.FD < 0 {
		return nil
	}
	err := unix.Close(r.FD)
	r.FD = -1
	return err
}

// RestrictSelf enforces the ruleset on the calling OS thread and on
// everything that thread later execs or forks. It sets no_new_privs on the
// thread first (Landlock requires it without CAP_SYS_ADMIN, and the command
// must not regain privileges through set-uid binaries anyway).
//
// Other threads of the process stay unrestricted: the caller must exec the
// command from this same thread. RestrictSelf therefore locks the calling
// goroutine to its thread and never unlocks it, so the goroutine cannot
// migrate to an unrestricted thread before its execve.
func (r *Ruleset) RestrictSelf() error {
	if r == nil || r.FD < 0 {
		return errors.New("landlock: RestrictSelf on a closed or missing ruleset: refusing to run unconfined")
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("landlock: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	// Single-thread on purpose (see the package comment): no TSYNC flag,
	// no AllThreads variant.
	if err := ll.LandlockRestrictSelf(r.FD, 0); err != nil {
		if errors.Is(err, unix.E2BIG) {
			return fmt.Errorf("landlock_restrict_self: too many stacked rulesets: %w", err)
		}
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}
