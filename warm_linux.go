//go:build linux

package confine

import (
	"sync"

	"github.com/confine-sandbox/confine/internal/nsinit"
)

// netPools is the network namespaces a privileged server makes ahead
// (nsinit.NetPool), started by the first namespaced run; none where this
// process may not make and join them.
type netPools struct {
	once sync.Once
	pool *nsinit.NetPool
}

func (n *netPools) close() {
	n.once.Do(func() {})
	n.pool.Close()
}

// netPool is w's pool of network namespaces, or nil (w nil, or this
// process cannot use one: runs then make their own).
func (w *Warm) netPool() *nsinit.NetPool {
	if w == nil {
		return nil
	}
	n := &w.s.nets
	n.once.Do(func() { n.pool, _ = nsinit.NewNetPool() })
	return n.pool
}
