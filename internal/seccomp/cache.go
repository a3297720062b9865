//go:build linux

package seccomp

import (
	"sync"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/net/bpf"
)

var built sync.Map // plan.Seccomp -> []bpf.RawInstruction

// Cached is Build, assembled once per plan.Seccomp for the life of the process:
// the program depends on nothing else, and the kernel copies it when it is
// installed. The caller must not modify the returned slice.
func Cached(cfg plan.Seccomp) ([]bpf.RawInstruction, error) {
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
