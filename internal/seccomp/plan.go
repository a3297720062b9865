//go:build linux

package seccomp

import "github.com/confine-sandbox/confine/internal/plan"

// FromPlan is the Config for a plan's Seccomp section on arch (after
// plan.Seccomp.Effective): the one conversion every launch path uses, so
// that no flag is dropped on the way.
func FromPlan(arch Arch, s plan.Seccomp) Config {
	return Config{Arch: arch, NotifyMetadata: s.NotifyMetadata, NotifyConnect: s.NotifyConnect,
		AllowUnixDgram: s.AllowUnixDgram, NotifyInet: s.NotifyInet, ReportInet: s.ReportInet, NotifyProcTargets: s.NotifyProcTargets, NotifySignals: s.NotifySignals,
		NotifyTruncate: s.NotifyTruncate, NotifyRename: s.NotifyRename, NotifyFork: s.NotifyFork,
		NotifyCreate: s.NotifyCreate, NotifyGuardTree: s.NotifyGuardTree}
}
