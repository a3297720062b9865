//go:build linux

package linuxrun

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/confine-sandbox/confine/internal/egress"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/launch"
	"github.com/confine-sandbox/confine/internal/planner"
	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/internal/tmpdir"
	"github.com/confine-sandbox/confine/internal/warmcache"
	"github.com/confine-sandbox/confine/spec"
)

// run is what prepare made for one RunCommand.
type run struct {
	primary planner.Planned
	// core is the plan the run falls back to when primary's namespaces
	// cannot be set up; nil when it may not (coreRefusal says why).
	core        *planner.Planned
	required    bool
	coreRefusal string
	tmp         *tmpdir.Dir
	cgroup      string
	// memCgroup is the run's memory cgroup, for the plans whose backend
	// uses one (created by the launch).
	memCgroup string
	// caches are the profile's warm caches, NAME=DIR (internal/warmcache).
	caches []string
	// goProg serves the GOCACHE cache, reading the caller's through; nil
	// when there is none (internal/warmcache).
	goProg *warmcache.GoProg
}

// prepare creates what the run's plans name (the private directory,
// the cgroups' paths, the warm caches and their GOCACHEPROG server) and
// builds the plans: backend's, and, where its launch may fall back
// (launch.Backend.FallsBack) unless required forbids leaving it or the
// core cannot enforce the run's guarantees, the core's to fall back to. ce is the caller's environment, privateDir
// makes the private directory (Request.PrivateDir), eg is the run's egress
// proxy (nil: none).
func prepare(in *planner.Inputs, ce warmcache.Env, privateDir func(parent string, uid, gid int) (*tmpdir.Dir, error), eg *egress.Run, backend provider.Provider, required bool) (*run, error) {
	td := warmcache.StablePrivate(ce, in.Profile, in.Dir, in.UID, in.RW)
	if td == nil {
		var err error
		if td, err = privateDir(tempDir(ce), in.UID, in.GID); err != nil {
			return nil, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
		}
	}
	var err error
	r := &run{tmp: td}
	if in.WantPidsGroup {
		// Created by the launch if the run joins it.
		r.cgroup = filepath.Join(in.Host.PidsCgroupRoot, "confine-"+randHex())
	}
	r.caches = warmcache.For(ce, in.Profile, in.Dir, in.UID, in.RW)
	if own := planner.GetEnv(r.caches, "GOCACHE"); own != "" && !planner.HasEnv(in.Env, "GOCACHE") && !planner.HasEnv(in.Env, "GOCACHEPROG") {
		// Without it the run's first build in a work directory is cold.
		r.goProg, _ = warmcache.StartGoProg(ce, own, td.Scratch(), in.Limits.FileSizeBytes)
	}
	if in.UsesMemoryCgroup() {
		r.memCgroup = filepath.Join(in.Host.MemoryCgroup.Parent, "confine-"+randHex())
	}
	res := r.resources(eg)
	if r.primary, err = in.Build(backend, res); err != nil {
		r.cleanup()
		return nil, err
	}
	if b, ok := launch.For(r.primary.Plan.Backend); !ok || !b.FallsBack() {
		return r, nil
	}
	r.required = required
	if required {
		return r, nil
	}
	core, _ := provider.Lookup(provider.Core)
	switch c, err := in.Build(core, res); {
	case err != nil:
		r.coreRefusal = "the core cannot take over: " + strings.TrimPrefix(err.Error(), spec.ErrUnavailable.Error()+": ")
	default:
		r.core = &c
	}
	return r, nil
}

// resources are what the run's plans name of what prepare made.
func (r *run) resources(eg *egress.Run) planner.Resources {
	res := planner.Resources{Tmp: r.tmp, PidsCgroup: r.cgroup, MemoryCgroup: r.memCgroup, Caches: r.caches}
	if r.goProg != nil {
		res.GoProgEnv, res.GoProgExe = r.goProg.Env, r.goProg.Exe
	}
	if eg != nil {
		res.EgressEnv, res.EgressProxy = eg.Env, eg.Addr().String()
	}
	return res
}

// fallback is what launch runs when the primary plan's namespaces cannot
// be set up.
func (r *run) fallback() launch.Fallback {
	if r.core == nil {
		return launch.Fallback{Required: r.required, Refusal: r.coreRefusal}
	}
	return launch.Fallback{Plan: r.core.Plan}
}

// stopGoProg stops the run's GOCACHEPROG server, if any; once its tree
// is gone, nothing talks to it.
func (r *run) stopGoProg() {
	if r.goProg != nil {
		_ = r.goProg.Close()
		r.goProg = nil
	}
}

func (r *run) cleanup() {
	r.stopGoProg()
	r.tmp.Remove()
	if r.cgroup != "" {
		_ = host.RemoveCgroup(r.cgroup)
	}
	if r.memCgroup != "" {
		_ = host.RemoveCgroup(r.memCgroup)
	}
}
