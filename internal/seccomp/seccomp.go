//go:build linux

// Package seccomp builds and installs the seccomp-BPF filter that confine
// applies to an untrusted command right before execve.
//
// The filter is a denylist (everything not named is allowed), generated
// from rules that are data (rule.go; docs/seccomp.md lists them) and
// assembled with golang.org/x/net/bpf so that every argument comparison
// looks at the low 32 bits only — the kernel truncates int arguments, so a check on
// the full 64-bit value could be dodged by setting high bits — and so that
// syscalls of any other ABI than the native one kill the process instead of
// slipping past rules written for native numbers.
//
// Outline of the program:
//
//  1. arch != native AUDIT_ARCH -> KILL_PROCESS (i386 int 0x80, AArch32).
//  2. amd64: nr & 0x40000000 (the x32 ABI) -> KILL_PROCESS. This also
//     catches nr -1, which the kernel would only answer with ENOSYS and
//     which no program issues on purpose.
//  3. A balanced binary search on nr over the syscalls that have a rule;
//     every other nr ends in ALLOW after ~log2(rules) comparisons that read
//     nothing but nr and arch. The kernel (5.11+) evaluates such paths once
//     per nr when the filter is attached and then skips the filter entirely
//     for those syscalls, so read, write, openat, mmap, futex... cost
//     nothing; rules that inspect arguments are reached only by their own nr.
//  4. Per-syscall returns: SECCOMP_RET_ERRNO (so tools print an error rather
//     than die), SECCOMP_RET_USER_NOTIF for calls the supervisor decides, or
//     a short block that tests argument words first.
package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"sort"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
)

// The architectures the filter can be built for (plan.Seccomp.Arch); any
// other, the empty one included, fails to build.
const (
	AMD64 plan.Arch = "amd64" // x86_64 (AUDIT_ARCH_X86_64)
	ARM64 plan.Arch = "arm64" // aarch64 little-endian (AUDIT_ARCH_AARCH64)
)

// NativeArch returns the GOARCH of the running binary if the filter supports it.
func NativeArch() (plan.Arch, error) {
	switch a := plan.Arch(runtime.GOARCH); a {
	case AMD64, ARM64:
		return a, nil
	}
	return "", fmt.Errorf("seccomp: unsupported GOARCH %q", runtime.GOARCH)
}

// archInfo returns the AUDIT_ARCH value and syscall table of a.
func archInfo(a plan.Arch) (uint32, map[string]uint32, error) {
	switch a {
	case AMD64:
		return unix.AUDIT_ARCH_X86_64, amd64Nr, nil
	case ARM64:
		return unix.AUDIT_ARCH_AARCH64, arm64Nr, nil
	}
	return 0, nil, fmt.Errorf("seccomp: unsupported arch %q", a)
}

// Rule is one line of the policy the filter enforces, for documentation
// and `confine check`.
type Rule struct {
	Syscall string // name in the kernel's syscall table
	Nr      uint32 // number on the configuration's Arch
	// When is the condition on the arguments under which the rule
	// applies, in C-like notation on the low 32 bits of each argument;
	// empty means always.
	When   string
	Errno  unix.Errno // the error the call fails with; 0 if Notify
	Notify bool       // the call is handed to the supervisor instead
}

// String formats r as one line, e.g. "socket if domain != AF_UNIX:
// EAFNOSUPPORT (address family not supported by protocol)".
func (r Rule) String() string {
	s := r.Syscall
	if r.When != "" {
		s += " if " + r.When
	}
	if r.Notify {
		return s + ": notify supervisor"
	}
	return fmt.Sprintf("%s: %s (%s)", s, unix.ErrnoName(r.Errno), r.Errno.Error())
}

// Denied returns the rules the filter built from cfg enforces, sorted by
// syscall name. It is derived from the same table Build compiles, so it
// cannot drift from the filter. Besides these, every syscall of a foreign
// ABI (and, on amd64, of the x32 ABI) kills the process.
func Denied(cfg plan.Seccomp) ([]Rule, error) {
	return builtin.denied(cfg)
}

// denied is Denied on the tables t.
func (t tables) denied(cfg plan.Seccomp) ([]Rule, error) {
	es, err := t.entries(cfg)
	if err != nil {
		return nil, err
	}
	var rules []Rule
	for _, e := range es {
		for _, r := range describe(e.rules, e.ret) {
			r.Syscall, r.Nr = e.name, e.nr
			rules = append(rules, r)
		}
	}
	sort.SliceStable(rules, func(i, j int) bool { return rules[i].Syscall < rules[j].Syscall })
	return rules, nil
}

// Build compiles the filter for cfg.
func Build(cfg plan.Seccomp) ([]bpf.RawInstruction, error) {
	return builtin.build(cfg)
}

// build is Build on the tables t.
func (t tables) build(cfg plan.Seccomp) ([]bpf.RawInstruction, error) {
	prog, err := t.program(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble: %w", err)
	}
	if len(raw) > maxInsns {
		return nil, fmt.Errorf("seccomp: filter has %d instructions, kernel limit is %d", len(raw), maxInsns)
	}
	return raw, nil
}

// maxInsns is BPF_MAXINSNS, the kernel's limit on a classic BPF program.
const maxInsns = 4096

// Offsets in struct seccomp_data. Both supported ABIs are little-endian,
// so the low 32 bits of args[i] are the first word of the 64-bit slot.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

func argLow(i int) uint32 { return offArgs + 8*uint32(i) }

// x32Bit is __X32_SYSCALL_BIT: x32 calls share the x86_64 AUDIT_ARCH and
// differ only by this bit in nr.
const x32Bit = 0x40000000

// leafSize is how many segments a tree leaf tests linearly; below ~4 a
// further split costs as many comparisons as it saves.
const leafSize = 3

// program generates the filter as x/net/bpf instructions.
func (t tables) program(cfg plan.Seccomp) ([]bpf.Instruction, error) {
	audit, _, err := archInfo(cfg.Arch)
	if err != nil {
		return nil, err
	}
	es, err := t.entries(cfg)
	if err != nil {
		return nil, err
	}
	a := newAssembler()
	kill := a.ret(unix.SECCOMP_RET_KILL_PROCESS)
	allow := a.ret(unix.SECCOMP_RET_ALLOW)

	a.loadWord(offArch)
	a.jumpIf(bpf.JumpEqual, audit, next, kill)
	a.loadWord(offNr)
	if cfg.Arch == AMD64 {
		a.jumpIf(bpf.JumpBitsSet, x32Bit, kill, next)
	}

	// Each entry becomes a segment; neighbouring nrs with the same plain
	// return merge into one range (e.g. amd64 mount..reboot, the new
	// mount API 428..433), which shrinks the tree.
	type segment struct {
		lo, hi uint32
		act    label
	}
	var segs []segment
	type pending struct {
		at label
		e  *entry
	}
	var blocks []pending
	for i := range es {
		e := &es[i]
		if len(e.rules) > 0 {
			l := a.newLabel()
			blocks = append(blocks, pending{l, e})
			segs = append(segs, segment{e.nr, e.nr, l})
			continue
		}
		act := a.ret(e.ret)
		if n := len(segs); n > 0 && segs[n-1].act == act && segs[n-1].hi+1 == e.nr {
			segs[n-1].hi = e.nr
			continue
		}
		segs = append(segs, segment{e.nr, e.nr, act})
	}

	// tree emits a binary search over segs; A holds nr throughout.
	var tree func(segs []segment)
	tree = func(segs []segment) {
		if len(segs) <= leafSize {
			for i, s := range segs {
				miss := allow
				if i < len(segs)-1 {
					miss = a.newLabel()
				}
				if s.lo == s.hi {
					a.jumpIf(bpf.JumpEqual, s.lo, s.act, miss)
				} else {
					a.jumpIf(bpf.JumpGreaterOrEqual, s.lo, next, miss)
					a.jumpIf(bpf.JumpGreaterThan, s.hi, miss, s.act)
				}
				if miss != allow {
					a.mark(miss)
				}
			}
			if len(segs) == 0 {
				a.jump(allow)
			}
			return
		}
		mid := len(segs) / 2
		right := a.newLabel()
		a.jumpIf(bpf.JumpGreaterOrEqual, segs[mid].lo, right, next)
		tree(segs[:mid])
		a.mark(right)
		tree(segs[mid:])
	}
	tree(segs)

	for _, b := range blocks {
		a.mark(b.at)
		compileRules(a, b.e.rules, b.e.ret)
	}
	return a.program()
}

// errno is the filter return that fails a call with e.
func errno(e unix.Errno) uint32 {
	return unix.SECCOMP_RET_ERRNO | (uint32(e) & unix.SECCOMP_RET_DATA)
}

// entry is the rule for one syscall on one arch: the argument rules tried
// in order, and the return when none decides (for most calls, the only
// return).
type entry struct {
	name  string
	nr    uint32
	rules []argRule
	ret   uint32
}

// notifiedCall is a row of notifiedCalls.
type notifiedCall struct {
	names []string
	on    func(plan.Seccomp) bool // the plan.Seccomp switch that turns it on
}

// notifiedCalls are the calls handed to the supervisor whatever their
// arguments, each with the plan.Seccomp switch that turns it on. A new one is a
// row here, its numbers in sysnums, and its handler in internal/notify.
var notifiedCalls = []notifiedCall{
	{metadataCalls, func(c plan.Seccomp) bool { return c.NotifyMetadata }},
	{[]string{"connect"}, func(c plan.Seccomp) bool { return c.NotifyConnect }},
	{forkCalls, func(c plan.Seccomp) bool { return c.NotifyFork }},
	{[]string{"truncate"}, func(c plan.Seccomp) bool { return c.NotifyTruncate || c.NotifyGuardTree }},
	{renameCalls, func(c plan.Seccomp) bool { return c.NotifyRename || c.NotifyCreate }},
	{createCalls, func(c plan.Seccomp) bool { return c.NotifyCreate }},
	{credCalls, func(c plan.Seccomp) bool { return c.NotifyCreate }},
	{removeCalls, func(c plan.Seccomp) bool { return c.NotifyGuardTree }},
}

// tables are the data a filter is built from besides its argument rules:
// the system call numbers and the calls notified whole. builtin is the
// filter's; a test builds from tables with one more row.
type tables struct {
	nums     []sysnum
	notified []notifiedCall
}

var builtin = tables{nums: sysnums, notified: notifiedCalls}

// entries lists the rules for cfg.Arch sorted by nr; names the arch lacks
// are skipped.
func (t tables) entries(cfg plan.Seccomp) ([]entry, error) {
	if _, _, err := archInfo(cfg.Arch); err != nil {
		return nil, err
	}
	table := numbers(t.nums, cfg.Arch)
	var es []entry
	seen := map[string]bool{}
	var dup error
	add := func(e entry) {
		if seen[e.name] && dup == nil {
			dup = errors.New("seccomp: two rules for " + e.name)
		}
		seen[e.name] = true
		nr, ok := table[e.name]
		if !ok {
			return
		}
		e.nr = nr
		es = append(es, e)
	}
	for _, n := range epermCalls {
		add(entry{name: n, ret: errno(unix.EPERM)})
	}
	for _, n := range enosysCalls {
		add(entry{name: n, ret: errno(unix.ENOSYS)})
	}
	for _, b := range argRules(cfg) {
		add(b)
	}
	for _, b := range fileRules(cfg) {
		add(b)
	}
	for _, c := range t.notified {
		if c.on(cfg) {
			for _, n := range c.names {
				add(entry{name: n, ret: unix.SECCOMP_RET_USER_NOTIF})
			}
		}
	}
	for _, e := range procEntries(cfg) {
		add(e)
	}
	if restartsSigchld(cfg) {
		add(sigchldEntry())
	}
	if dup != nil {
		return nil, dup
	}
	sort.Slice(es, func(i, j int) bool { return es[i].nr < es[j].nr })
	for i := 1; i < len(es); i++ {
		if es[i].nr == es[i-1].nr {
			return nil, errors.New("seccomp: " + es[i].name + " and " + es[i-1].name + " share a number")
		}
	}
	return es, nil
}

// entries is builtin's.
func entries(cfg plan.Seccomp) ([]entry, error) { return builtin.entries(cfg) }
