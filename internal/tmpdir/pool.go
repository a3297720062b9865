//go:build unix

package tmpdir

import (
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Pool keeps run's own private directories made ahead of the runs that
// take them, for a long-lived launcher (confine serve): making one costs
// a few directory creations, up to a millisecond on ext4, which a pooled
// one has paid before its run asks. Each is made exactly as CreateIn
// makes it, is handed to one run only (never reused: the run's janitor
// removes it, as any run's own), and is checked again when taken
// (Take): a directory that is no longer an empty one of the expected
// owner and mode, or no longer lies where its parent resolves to now,
// is removed and a new one made in its place. Pools are keyed by parent
// and owner, so runs as different uids never share one.
type Pool struct {
	// Size is how many directories are kept ready for each key
	// (<= 0: 4, a server's default run slots on 2 CPUs); Keys bounds the
	// keys kept (<= 0: 8; the least recently used one's directories are
	// removed).
	Size, Keys int

	mu     sync.Mutex
	ready  map[poolKey][]*Dir
	order  []poolKey // least recently used first
	fills  map[poolKey]bool
	closed bool
	wg     sync.WaitGroup
}

type poolKey struct {
	parent   string
	uid, gid int
}

// Take returns a private directory under parent for uid:gid, as
// CreateIn(parent, uid, gid) does: a pooled one when a valid one is
// ready, else a new one. The pool is refilled by Refill, which the
// caller calls once its run no longer needs the CPU (so that making the
// next directories does not slow the run down on a busy host).
func (p *Pool) Take(parent string, uid, gid int) (*Dir, error) {
	k := poolKey{parent, uid, gid}
	var d *Dir
	for {
		d = p.pop(k)
		if d == nil || d.valid(k) {
			break
		}
		Remove(d.Root)
	}
	if d != nil {
		return d, nil
	}
	return CreateIn(parent, uid, gid)
}

// Refill makes the directories of parent and uid:gid up to Size in the
// background.
func (p *Pool) Refill(parent string, uid, gid int) { p.refill(poolKey{parent, uid, gid}) }

// Close removes the directories still pooled; Take then makes a new one
// each time.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	var all []*Dir
	for _, ds := range p.ready {
		all = append(all, ds...)
	}
	p.ready = nil
	p.mu.Unlock()
	for _, d := range all {
		Remove(d.Root)
	}
}

func (p *Pool) size() int {
	if p.Size <= 0 {
		return 4
	}
	return p.Size
}

func (p *Pool) keys() int {
	if p.Keys <= 0 {
		return 8
	}
	return p.Keys
}

// pop takes a ready directory of k (nil when there is none), and marks k
// as the most recently used key.
func (p *Pool) pop(k poolKey) *Dir {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touch(k)
	ds := p.ready[k]
	if len(ds) == 0 {
		return nil
	}
	d := ds[len(ds)-1]
	p.ready[k] = ds[:len(ds)-1]
	return d
}

// refill makes k's directories up to Size in the background (one filler
// per key at a time), and drops the least recently used keys beyond Keys.
func (p *Pool) refill(k poolKey) {
	p.mu.Lock()
	if p.closed || p.fills[k] {
		p.mu.Unlock()
		return
	}
	if p.fills == nil {
		p.fills, p.ready = map[poolKey]bool{}, map[poolKey][]*Dir{}
	}
	p.touch(k)
	var stale []*Dir
	for len(p.order) > p.keys() {
		old := p.order[0]
		p.order = p.order[1:]
		stale = append(stale, p.ready[old]...)
		delete(p.ready, old)
	}
	p.fills[k] = true
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		for _, d := range stale {
			Remove(d.Root)
		}
		for {
			p.mu.Lock()
			n, closed := len(p.ready[k]), p.closed
			if closed || n >= p.size() || !p.used(k) {
				delete(p.fills, k)
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			d, err := CreateIn(k.parent, k.uid, k.gid)
			if err == nil {
				err = d.Wait()
				if err != nil {
					Remove(d.Root)
				}
			}
			p.mu.Lock()
			if err != nil || p.closed || !p.used(k) {
				delete(p.fills, k)
				p.mu.Unlock()
				if err == nil {
					Remove(d.Root)
				}
				return
			}
			p.ready[k] = append(p.ready[k], d)
			p.mu.Unlock()
		}
	}()
}

// touch makes k the most recently used key; p.mu is held.
func (p *Pool) touch(k poolKey) {
	for i, o := range p.order {
		if o == k {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
	p.order = append(p.order, k)
}

// used says k is still among the kept keys; p.mu is held.
func (p *Pool) used(k poolKey) bool {
	for _, o := range p.order {
		if o == k {
			return true
		}
	}
	return false
}

// valid says d is still what CreateIn made for k: Root lies in what the
// parent resolves to now, and Root, Home and Tmp are directories (not
// symlinks) of the expected owner with mode 0700, Home and Tmp empty.
func (d *Dir) valid(k poolKey) bool {
	parent := k.parent
	if parent == "" {
		parent = os.TempDir()
	}
	if r, err := filepath.EvalSymlinks(parent); err != nil || r != filepath.Dir(d.Root) {
		return false
	}
	uid := k.uid
	if uid < 0 {
		uid = os.Geteuid()
	}
	for _, p := range []string{d.Root, d.Home, d.Tmp} {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o7777 != 0o700 || int(st.Uid) != uid ||
			k.gid >= 0 && int(st.Gid) != k.gid {
			return false
		}
	}
	root := names(d.Root)
	slices.Sort(root)
	return slices.Equal(root, []string{HomeName, TmpName}) && len(names(d.Home)) == 0 && len(names(d.Tmp)) == 0
}

// names are up to three of dir's entries: none for an empty one, and a
// name no directory of ours holds ("?") for one that cannot be opened.
func names(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return []string{"?"}
	}
	defer f.Close()
	n, err := f.Readdirnames(3)
	if err != nil && len(n) == 0 {
		return nil
	}
	return n
}
