//go:build unix && !linux

package confine

// netPools: network namespaces made ahead are Linux's.
type netPools struct{}

func (netPools) close() {}
