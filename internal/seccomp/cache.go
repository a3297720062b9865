//go:build linux

package seccomp

import (
	"sync"

	"golang.org/x/net/bpf"
)

var built sync.Map // Config -> []bpf.RawInstruction

// Cached is Build, assembled once per Config for the life of the process:
// the program depends on nothing else, and the kernel copies it when it is
// installed. The caller must not modify the returned slice.
func Cached(cfg Config) ([]bpf.RawInstruction, error) {
	if p, ok := built.Load(cfg); ok {
		return p.([]bpf.RawInstruction), nil
	}
	p, err := Build(cfg)
	if err != nil {
		return nil, err
	}
	built.Store(cfg, p)
	return p, nil
}
