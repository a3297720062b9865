//go:build linux

package host

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// MemoryCgroup is where per-run memory cgroups are made: inside the
// launcher's own memory cgroup where the hierarchy allows it, so that
// every bound on the caller still holds for its runs (a run never leaves
// the caller's accounting). On cgroup v2 a cgroup that holds a process
// cannot give its children a memory controller (the "no internal
// processes" rule; only the root is exempt), so there runs are made
// beside the launcher: in the nearest ancestor that may have them, and
// no larger than the smallest memory.max of the cgroups between (Cap).
type MemoryCgroup struct {
	// Parent is the directory runs get a child of: the launcher's own
	// memory cgroup, or on v2 the nearest ancestor of it that can hold
	// one.
	Parent string `json:"parent"`
	// V2 says the hierarchy is cgroup v2 (memory.max, memory.peak,
	// memory.events), not v1 (memory.limit_in_bytes, ...).
	V2 bool `json:"v2,omitempty"`
	// Pids says a run's cgroup gets the pids controller too (v2: pids
	// enabled for Parent's children). A v2 process is in one cgroup
	// only: a run that joins its memory cgroup leaves any pids cgroup,
	// so it is bounded there (CreateMemoryCgroup's pids).
	Pids bool `json:"pids,omitempty"`
	// Cap is the smallest memory.max of the launcher's cgroups that a
	// run made in Parent leaves (0: none, or none is bounded): a run is
	// never allowed more than the caller was.
	Cap int64 `json:"cap,omitempty"`
}

// ErrNoMemoryCgroup says no per-run memory cgroup can be made here.
var ErrNoMemoryCgroup = errors.New("no writable memory cgroup")

// memoryCgroup finds where this launcher can make its runs' memory
// cgroups (see MemoryCgroup).
func memoryCgroup() (MemoryCgroup, error) {
	v, err := selfView()
	if err != nil {
		return MemoryCgroup{}, err
	}
	return v.memoryCgroup(swapActive("/proc/swaps"), func(p string) bool {
		return unix.Access(p, unix.W_OK) == nil
	})
}

// cgroupView is a process's cgroups (controller -> path, "" for v2) and
// the cgroup mounts of its mount table.
type cgroupView struct {
	own    map[string]string
	mounts []cgroupMount
}

func readView(cgroupFile, mountinfo string) (cgroupView, error) {
	own, err := ownCgroups(cgroupFile)
	if err != nil {
		return cgroupView{}, err
	}
	mounts, err := cgroupMounts(mountinfo)
	if err != nil {
		return cgroupView{}, err
	}
	return cgroupView{own: own, mounts: mounts}, nil
}

// selfView is this process's cgroupView, read once per process (as the
// probe's memory cgroup is): /proc/self/mountinfo is the costly read of a
// launch's host facts (0.3 ms and more with many mounts). What the
// cgroups allow (their limit files) is read at every use.
var selfView = sync.OnceValues(func() (cgroupView, error) {
	return readView("/proc/self/cgroup", "/proc/self/mountinfo")
})

// findMemoryCgroup is memoryCgroup over the given files: the process's
// cgroup file, its mountinfo, whether the host has swap in use, and
// which paths it may write.
//
// On v1 the run's cgroup is a child of the launcher's own: the directory
// and its tasks file must be writable (root, or a delegated hierarchy).
// On v2 it is a child of the launcher's own cgroup where that has the
// memory controller enabled for its children (the root cgroup), or else
// of the nearest ancestor that has: the directory and its cgroup.procs
// writable (moving a process between two cgroups takes write access to
// the cgroup.procs of their common ancestor). That is where systemd
// delegates: a user's processes sit in scopes of app.slice inside
// user@UID.service, all owned by the user, with memory enabled down to
// the scopes.
func findMemoryCgroup(cgroupFile, mountinfo string, swap bool, writable func(string) bool) (MemoryCgroup, error) {
	v, err := readView(cgroupFile, mountinfo)
	if err != nil {
		return MemoryCgroup{}, err
	}
	return v.memoryCgroup(swap, writable)
}

func (v cgroupView) memoryCgroup(swap bool, writable func(string) bool) (MemoryCgroup, error) {
	own := v.own
	for _, m := range v.mounts {
		var rel string
		var ok bool
		switch {
		case !m.v2 && m.memory:
			rel, ok = own["memory"]
		case m.v2:
			rel, ok = own[""]
		}
		if !ok {
			continue
		}
		sub, err := filepath.Rel(m.root, rel)
		if err != nil || strings.HasPrefix(sub, "..") {
			// Our cgroup lies outside what this mount shows.
			continue
		}
		dir := filepath.Join(m.point, sub)
		if !m.v2 {
			if writable(dir) && writable(filepath.Join(dir, "tasks")) {
				return MemoryCgroup{Parent: dir}, nil
			}
			continue
		}
		if mc, ok := v2Parent(m.point, dir, swap, writable); ok {
			return mc, nil
		}
	}
	return MemoryCgroup{}, ErrNoMemoryCgroup
}

// v2Parent walks from dir (the launcher's cgroup) up to the mount point
// for the first cgroup runs can be made in (see findMemoryCgroup).
func v2Parent(point, dir string, swap bool, writable func(string) bool) (MemoryCgroup, bool) {
	var limit int64
	for d := dir; ; d = filepath.Dir(d) {
		if mc, ok := v2Candidate(d, swap, writable); ok {
			mc.Cap = limit
			return mc, true
		}
		if d == point || !strings.HasPrefix(d, point+"/") {
			return MemoryCgroup{}, false
		}
		// A run made above d leaves d: it takes d's bound with it.
		if b, err := os.ReadFile(filepath.Join(d, "memory.max")); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && (limit == 0 || v < limit) {
				limit = v
			}
		}
	}
}

// v2Candidate says whether runs can be made in d: the memory controller
// enabled for its children, d and its cgroup.procs writable, and where
// the host has swap, memory.swap.max for the children (the root has
// none; without it a run could not be kept out of the host's swap, see
// CreateMemoryCgroup).
func v2Candidate(d string, swap bool, writable func(string) bool) (MemoryCgroup, bool) {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
	if err != nil {
		return MemoryCgroup{}, false
	}
	ctl := strings.TrimSpace(string(b))
	if !containsWord(ctl, "memory") {
		return MemoryCgroup{}, false
	}
	if swap {
		if _, err := os.Stat(filepath.Join(d, "memory.swap.max")); err != nil {
			return MemoryCgroup{}, false
		}
	}
	if !writable(d) || !writable(filepath.Join(d, "cgroup.procs")) {
		return MemoryCgroup{}, false
	}
	return MemoryCgroup{Parent: d, V2: true, Pids: containsWord(ctl, "pids")}, true
}

// ownCgroups reads /proc/self/cgroup: controller -> path ("" for v2).
func ownCgroups(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			out[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out, nil
}

type cgroupMount struct {
	root, point string
	v2, memory  bool
}

// cgroupMounts lists the cgroup mounts of mountinfo: v1 mounts with the
// memory controller, and cgroup2 mounts.
func cgroupMounts(path string) ([]cgroupMount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		m := cgroupMount{root: unescapeMount(a[3]), point: unescapeMount(a[4])}
		switch b[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, o := range strings.Split(b[2], ",") {
				m.memory = m.memory || o == "memory"
			}
			if !m.memory {
				continue
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// CreateMemoryCgroup creates the per-run memory cgroup dir (a child of
// mc.Parent) bounded at max bytes, with no swap: memory.max and
// memory.swap.max 0 on v2; memory.limit_in_bytes and
// memory.memsw.limit_in_bytes on v1. Where the kernel does not account
// swap (no memsw or swap.max file) and the host has swap, a tree at its
// bound would be swapped out rather than stopped: on v1 memory.swappiness
// 0 keeps the cgroup's own reclaim from swapping; on v2 there is no such
// knob, and the cgroup is refused (ErrSwapUnbounded).
//
// pids > 0 bounds the cgroup's tasks too (v2 only, pids.max): the run
// leaves its pids cgroup when it joins this one, since a v2 process is in
// one cgroup only. Without the pids controller there the cgroup is
// refused (ErrNoPidsController).
func CreateMemoryCgroup(mc MemoryCgroup, dir string, max, pids int64) error {
	return createMemoryCgroup(mc, dir, max, pids, swapActive("/proc/swaps"))
}

// ErrNoPidsController says a v2 memory cgroup that must bound the run's
// tasks as well has no pids.max.
var ErrNoPidsController = errors.New("the pids controller is not enabled for the memory cgroup (no pids.max)")

// ErrSwapUnbounded says a memory cgroup here could not keep a run out of
// the host's swap.
var ErrSwapUnbounded = errors.New("the host has swap and the kernel does not account it per cgroup (no memory.swap.max)")

// swapActive says whether the swaps file lists a device or file in use.
// Unreadable counts as active: the bound must not be assumed.
func swapActive(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return true
	}
	return len(strings.Split(strings.TrimSpace(string(b)), "\n")) > 1
}

func createMemoryCgroup(mc MemoryCgroup, dir string, max, pids int64, swap bool) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	v := []byte(strconv.FormatInt(max, 10))
	set := func(name string, val []byte) error {
		err := os.WriteFile(filepath.Join(dir, name), val, 0)
		if err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
		return nil
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	var err error
	switch {
	case mc.V2:
		if err = set("memory.max", v); err != nil {
			break
		}
		if exists("memory.swap.max") {
			err = set("memory.swap.max", []byte("0"))
		} else if swap {
			err = ErrSwapUnbounded
		}
		if err != nil || pids <= 0 {
			break
		}
		if !exists("pids.max") {
			err = ErrNoPidsController
			break
		}
		err = set("pids.max", []byte(strconv.FormatInt(pids, 10)))
	default:
		if err = set("memory.limit_in_bytes", v); err != nil {
			break
		}
		if exists("memory.memsw.limit_in_bytes") {
			err = set("memory.memsw.limit_in_bytes", v)
		} else if swap {
			err = set("memory.swappiness", []byte("0"))
		}
	}
	if err != nil {
		_ = os.Remove(dir)
		return err
	}
	return nil
}

// MemoryStats is what a run's memory cgroup recorded.
type MemoryStats struct {
	// Peak is the highest memory use of the tree, in bytes (0 where the
	// kernel does not record it: v2 before Linux 5.19).
	Peak int64
	// OOMKills counts processes the kernel killed for reaching the bound.
	OOMKills int64
}

// ReadMemoryStats reads the peak and the OOM kills of a run's memory
// cgroup.
func ReadMemoryStats(mc MemoryCgroup, dir string) (MemoryStats, error) {
	var s MemoryStats
	peak, events, key := "memory.max_usage_in_bytes", "memory.oom_control", "oom_kill"
	if mc.V2 {
		peak, events = "memory.peak", "memory.events"
	}
	if b, err := os.ReadFile(filepath.Join(dir, peak)); err == nil {
		s.Peak, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	b, err := os.ReadFile(filepath.Join(dir, events))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+" "); ok {
			s.OOMKills, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return s, nil
}

// DefaultMemoryShare is the share of the machine's RAM a run may hold by
// default: 1/DefaultMemoryShare of MemTotal.
const DefaultMemoryShare = 2

// DefaultMemoryBound is a run's memory bound when neither its profile
// nor its spec sets one: half the machine's RAM, and never more than the
// caller's own memory cgroups allow (a run bounded above its caller would
// be OOM-killed with the caller, rather than stopped at its own bound).
// fallback is returned where MemTotal cannot be read.
//
// MemTotal and where the caller's cgroups are (selfView) are read once per
// process; their limits at every call.
func DefaultMemoryBound(fallback int64) int64 {
	var files []string
	if v, err := selfView(); err == nil {
		files = v.limitFiles()
	}
	return boundOf(selfMemTotal(), readLimits(files), fallback)
}

// selfMemTotal is this machine's MemTotal, read once per process.
var selfMemTotal = sync.OnceValue(func() int64 { return memTotal("/proc/meminfo") })

func defaultMemoryBound(meminfo, cgroupFile, mountinfo string, fallback int64) int64 {
	return boundOf(memTotal(meminfo), CallerMemoryLimit(cgroupFile, mountinfo), fallback)
}

// boundOf is the default bound from MemTotal (0: unknown) and the
// caller's cgroup limit (0: none).
func boundOf(total, limit, fallback int64) int64 {
	b := fallback
	if total > 0 {
		b = total / DefaultMemoryShare
	}
	if limit > 0 && limit < b {
		b = limit
	}
	return b
}

// memTotal reads MemTotal from a meminfo file, in bytes (0: unknown).
func memTotal(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// unboundedMemory: a cgroup limit at or above it means none (v1 writes
// the largest page-aligned int64 for "no limit").
const unboundedMemory = 1 << 62

// CallerMemoryLimit is the smallest memory limit of the cgroups the
// process of cgroupFile is in, from its own cgroup up to the root its
// mounts show (memory.max on v2, memory.limit_in_bytes on v1, on every
// mount of either): 0 when none is bounded or none can be read. In a
// container with its own cgroup namespace that root is the container's
// cgroup, whose limit is the container's.
func CallerMemoryLimit(cgroupFile, mountinfo string) int64 {
	v, err := readView(cgroupFile, mountinfo)
	if err != nil {
		return 0
	}
	return readLimits(v.limitFiles())
}

// limitFiles are the memory limit files of v's cgroups, from each own
// cgroup up to the root its mount shows (memory.max on v2,
// memory.limit_in_bytes on v1, on every mount of either).
func (v cgroupView) limitFiles() []string {
	var out []string
	for _, m := range v.mounts {
		key, file := "memory", "memory.limit_in_bytes"
		if m.v2 {
			key, file = "", "memory.max"
		}
		rel, ok := v.own[key]
		if !ok {
			continue
		}
		sub, err := filepath.Rel(m.root, rel)
		if err != nil || strings.HasPrefix(sub, "..") {
			continue
		}
		for d := filepath.Join(m.point, sub); ; d = filepath.Dir(d) {
			out = append(out, filepath.Join(d, file))
			if d == m.point || !strings.HasPrefix(d, m.point+"/") {
				break
			}
		}
	}
	return out
}

// readLimits is the smallest limit the files hold (0: none is bounded
// or none can be read).
func readLimits(files []string) int64 {
	var limit int64
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err == nil && v > 0 && v < unboundedMemory && (limit == 0 || v < limit) {
				limit = v
			}
		}
	}
	return limit
}
