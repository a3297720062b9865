package cli

import "runtime/debug"

// Version, when set at link time (-ldflags "-X
// github.com/confine-sandbox/confine/internal/cli.Version=v1.2.3"), is
// confine's version; otherwise versionString takes it from the build info.
var Version string

// versionString is confine's version, never empty: the link-time Version,
// else the module version of a `go install ...@version`, else the VCS
// revision the build was stamped with (devel+REVISION, -dirty when the
// tree had changes), else "devel" (a build without VCS stamping).
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionFrom(Version, bi)
}

func versionFrom(linked string, bi *debug.BuildInfo) string {
	if linked != "" {
		return linked
	}
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "devel+" + rev + dirty
}
