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

	mu    sync.Mutex
	ready map[poolKey][]*Dir
	order []poolKey // least recently used first
	// want are the keys to refill, in order; one filler at a time makes
	// their directories, one after another (a launcher's threads are
	// the uid's tasks too: RLIMIT_NPROC counts them against its runs).
	want    []poolKey
	stale   []*Dir // of evicted keys, for the filler to remove
	filling bool
	closed  bool
	wg      sync.WaitGroup
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
	all := p.stale
	for _, ds := range p.ready {
		all = append(all, ds...)
	}
	p.ready, p.stale = nil, nil
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

// refill queues k to be filled up to Size in the background, by the one
// filler (started when none runs), and drops the least recently used
// keys beyond Keys.
func (p *Pool) refill(k poolKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.ready == nil {
		p.ready = map[poolKey][]*Dir{}
	}
	p.touch(k)
	for len(p.order) > p.keys() {
		old := p.order[0]
		p.order = p.order[1:]
		p.stale = append(p.stale, p.ready[old]...)
		delete(p.ready, old)
	}
	if !slices.Contains(p.want, k) {
		p.want = append(p.want, k)
	}
	if p.filling {
		return
	}
	p.filling = true
	p.wg.Add(1)
	go p.fill()
}

// fill removes the evicted keys' directories and makes the wanted keys'
// until none is left to do.
func (p *Pool) fill() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		stale := p.stale
		p.stale = nil
		var k poolKey
		todo := false
		for len(p.want) > 0 && !todo {
			k, p.want = p.want[0], p.want[1:]
			todo = !p.closed && p.used(k) && len(p.ready[k]) < p.size()
		}
		if !todo && len(stale) == 0 {
			p.filling = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		for _, d := range stale {
			Remove(d.Root)
		}
		if !todo {
			continue
		}
		for {
			d, err := create(k.parent, k.uid, k.gid, false)
			if err != nil {
				break
			}
			p.mu.Lock()
			if p.closed || !p.used(k) {
				p.mu.Unlock()
				Remove(d.Root)
				break
			}
			p.ready[k] = append(p.ready[k], d)
			full := len(p.ready[k]) >= p.size()
			p.mu.Unlock()
			if full {
				break
			}
		}
	}
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
