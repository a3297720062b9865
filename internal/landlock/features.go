package landlock

import "fmt"

// Feature names, for FeatureByName and the guarantee ledger.
const (
	FeatFS       = "filesystem"
	FeatRefer    = "refer"
	FeatTruncate = "truncate"
	FeatTCP      = "tcp"
	FeatIoctlDev = "ioctl-dev"
	FeatScope    = "scope"
	FeatAudit    = "audit"
	FeatThreads  = "tsync"
	FeatUnix     = "resolve-unix"
)

// Feature is what one Landlock ABI added.
type Feature struct {
	Name   string
	ABI    int
	Kernel string // the first mainline release with it
	What   string
	// FS, Net and Scoped are the rights or scopes the ABI added (what a
	// ruleset built for it handles).
	FS, Net, Scoped uint64
}

// Need says what a run lacks without f, for refusals.
func (f Feature) Need() string {
	return fmt.Sprintf("Landlock ABI >= %d (%s, Linux %s)", f.ABI, f.What, f.Kernel)
}

// features is the one table of Landlock ABI facts: every decision keyed on
// the ABI (handled rights, TCP rules, scopes, the guarantees they back)
// reads it.
var features = []Feature{
	{Name: FeatFS, ABI: 1, Kernel: "5.13", What: "filesystem access rights", FS: fsV1},
	{Name: FeatRefer, ABI: 2, Kernel: "5.19", What: "REFER: renames and links across directories", FS: fsRefer},
	{Name: FeatTruncate, ABI: 3, Kernel: "6.2", What: "TRUNCATE right", FS: fsTruncate},
	{Name: FeatTCP, ABI: 4, Kernel: "6.7", What: "TCP bind/connect rules", Net: netTCP},
	{Name: FeatIoctlDev, ABI: 5, Kernel: "6.10", What: "IOCTL_DEV right", FS: fsIoctlDev},
	{Name: FeatScope, ABI: 6, Kernel: "6.12", What: "abstract unix socket and signal scopes", Scoped: scopeAll},
	{Name: FeatAudit, ABI: 7, Kernel: "6.15", What: "audit log flags"},
	{Name: FeatThreads, ABI: 8, Kernel: "6.18", What: "all-threads enforcement"},
	{Name: FeatUnix, ABI: 9, Kernel: "7.0", What: "pathname unix socket rules", FS: fsResolveUnix},
}

// Features returns the table, oldest ABI first.
func Features() []Feature { return append([]Feature(nil), features...) }

// FeatureByName looks a feature up.
func FeatureByName(name string) (Feature, bool) {
	for _, f := range features {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// Has reports whether ABI abi has the named feature.
func Has(abi int, name string) bool {
	f, ok := FeatureByName(name)
	return ok && abi >= f.ABI
}

// handledFS returns every filesystem right the given ABI knows.
func handledFS(abi int) uint64 {
	var h uint64
	for _, f := range features {
		if abi >= f.ABI {
			h |= f.FS
		}
	}
	return h
}
