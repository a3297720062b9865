//go:build unix

package confine

import "github.com/confine-sandbox/confine/internal/tmpdir"

type warmState struct {
	dirs tmpdir.Pool
	nets netPools
}

func (s *warmState) close() {
	s.dirs.Close()
	s.nets.close()
}

// privateDir is a run's own private directory under parent for uid:gid:
// from w's pool (made ahead, checked again when taken), or made now when
// w is nil.
func (w *Warm) privateDir(parent string, uid, gid int) (*tmpdir.Dir, error) {
	if w == nil {
		return tmpdir.CreateIn(parent, uid, gid)
	}
	return w.s.dirs.Take(parent, uid, gid)
}

// refillPrivate makes privateDir's directories for parent and uid:gid
// ahead, in the background (nothing when w is nil).
func (w *Warm) refillPrivate(parent string, uid, gid int) {
	if w != nil {
		w.s.dirs.Refill(parent, uid, gid)
	}
}
