package spec

import "slices"

// Guarantee names. A profile waives one by naming it. What enforces each,
// per backend and kernel, is the guarantee ledger (internal/ledger).
const (
	GNoNetwork      = "no-network"
	GCleanEnv       = "no-inherited-env"
	GCredentials    = "no-credential-files"
	GNoInheritedFDs = "no-inherited-fds"
	GFSWrite        = "fs-write-confined"
	GFSRead         = "fs-read-confined"
	GFSMetadata     = "fs-metadata-confined"
	GGitPersistence = "no-git-persistence"
	GUnixSockets    = "no-foreign-unix-sockets"
	GSignals        = "no-foreign-signals"
	GProcInspect    = "no-process-inspection"
	GTerminal       = "no-terminal-injection"
	GKernelSurface  = "reduced-kernel-surface"
	GResources      = "bounded-resources"
	GProcesses      = "bounded-processes"
	GTreeKill       = "tree-kill"
	GNoPrivilege    = "no-privilege"
)

var guarantees = []string{
	GNoNetwork, GCleanEnv, GCredentials, GNoInheritedFDs, GFSWrite, GFSRead, GFSMetadata, GGitPersistence,
	GUnixSockets, GSignals, GProcInspect, GTerminal, GKernelSurface,
	GResources, GProcesses, GTreeKill, GNoPrivilege,
}

// Guarantees returns every guarantee name in report order (a copy: no
// caller can change what others see).
func Guarantees() []string { return slices.Clone(guarantees) }

// KnownGuarantee reports whether name is a guarantee (one a profile may
// waive).
func KnownGuarantee(name string) bool { return slices.Contains(guarantees, name) }
