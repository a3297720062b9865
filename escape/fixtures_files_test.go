//go:build linux

package escape

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// oldABI makes a row's confined run really happen on an old Landlock ABI
// (real, or simulated with -tags confine_simabi), where the default profile
// refuses to run for want of guarantees the ledger cannot meet there (signal
// and abstract-socket scoping below ABI 6, ...): it waives exactly those the
// ledger finds missing for the core backend, and requires the probe's own
// report, so that a refused run cannot pass for a blocked attack. A waiver
// switches no mechanism off: what the row attacks is enforced (or not)
// whatever the profile says, and the attack itself is the verdict.
func oldABI(setup func(e *env) fixture) func(e *env) fixture {
	return func(e *env) fixture {
		f := setup(e)
		if !e.confined {
			return f
		}
		f.mustReport = true
		f.cliArgs = append(f.cliArgs, waiveMissing(e.t, e.user)...)
		return f
	}
}

// waiveMissing returns the `confine run` flags of a profile that waives
// exactly the guarantees the ledger finds missing for the core backend on
// this host's (possibly simulated) Landlock ABI, as u; none when nothing is
// missing.
func waiveMissing(t *testing.T, u testutil.User) []string {
	t.Helper()
	h := host.Probe()
	facts := ledger.Facts{LandlockABI: h.LandlockABI, Seccomp: h.Seccomp, RootCommand: u.UID == 0, PidsCgroup: h.PidsCgroupRoot != ""}
	var waive []string
	for _, d := range ledger.Decide([]ledger.Layer{ledger.Core}, facts) {
		if d.Missing != "" {
			waive = append(waive, strconv.Quote(d.Name))
		}
	}
	if len(waive) == 0 {
		return nil
	}
	dir, err := os.MkdirTemp(testutil.SharedDir(t), "profile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	prof := filepath.Join(dir, "waive.toml")
	body := fmt.Sprintf("name = \"old-abi\"\nwaive = [%s]\n", strings.Join(waive, ", "))
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prof, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("Landlock ABI %d: waiving %s, which the ledger cannot meet here", h.LandlockABI, strings.Join(waive, ", "))
	return []string{"--profile", prof}
}

// oldABIRows are rows of fixtures_test.go that attack what the old-ABI file
// mechanisms enforce (truncate's and rename's handlers): they run under
// oldABI too.
var oldABIRows = []string{
	"write-file-outside", "write-file-new-outside", "write-file-ro-root", "append-file-outside",
	"truncate-file-outside", "truncate-file-ro-root", "chmod-outside", "chmod-ro-root",
	"fchmod-ro-outside", "fchmod-ro-ro-root", "rename-out", "rename-in", "link-out", "link-in-then-write",
	"symlink-write", "symlink-write-new", "mknod-in-workdir", "mknod-outside", "mknod-fifo-outside", "tmp-write",
}

// withFileVectors puts the old-ABI rows of cases under oldABI and appends
// fileVectors.
func withFileVectors(cases []vcase) []vcase {
	for i := range cases {
		if slices.Contains(oldABIRows, cases[i].name) {
			cases[i].setup = oldABI(cases[i].setup)
		}
	}
	return append(append(append(append(append(append(append(cases, fileVectors()...), gitVectors()...), nestGitVectors()...), ctlPlaneVectors()...), gitTreeVectors()...), guardProfileVectors()...), warmVectors()...)
}

// fileVectors are the rows for set-ID files, truncation without write
// access and renames or links across the writable roots' boundary (issue
// 10). Run them under `-tags confine_simabi` with CONFINE_SIM_LANDLOCK_ABI=1
// and 2 too: there truncate(2) and O_TRUNC (ABI < 3) and rename and link
// (ABI 1) take the old-ABI paths.
func fileVectors() []vcase {
	// setID is the effect "path exists with one of bits".
	setID := func(path string, bits uint32) func() (bool, string) {
		return func() (bool, string) {
			st, err := statOf(path)
			if err != nil {
				return false, fmt.Sprintf("%s does not exist", path)
			}
			return st.Mode&bits != 0, fmt.Sprintf("%s has mode %#o, owner %d:%d", path, st.Mode&0o7777, st.Uid, st.Gid)
		}
	}
	newFile := func(mode string, bits uint32) func(e *env) fixture {
		return func(e *env) fixture {
			p := filepath.Join(e.wd, "tool")
			return fixture{args: []string{p, mode}, effect: setID(p, bits)}
		}
	}
	chmodTo := func(mode string, bits uint32) func(e *env) fixture {
		return func(e *env) fixture {
			p := e.file(e.wd, "tool", 0o755)
			return fixture{args: []string{p, mode}, effect: setID(p, bits)}
		}
	}
	cases := []vcase{
		{name: "chmod-setuid-workdir", vector: "chmod", setup: chmodTo("4755", unix.S_ISUID)},
		{name: "chmod-setgid-workdir", vector: "chmod", setup: chmodTo("2755", unix.S_ISGID)},
		{name: "open-creat-setuid", vector: "open-creat-mode", setup: newFile("4755", unix.S_ISUID)},
		{name: "open-creat-setgid", vector: "open-creat-mode", setup: newFile("2755", unix.S_ISGID)},
		{name: "mknod-setuid", vector: "mknod-mode", setup: newFile("4755", unix.S_ISUID)},
		{name: "openat2-creat-setuid", vector: "openat2-creat-mode", setup: newFile("4755", unix.S_ISUID)},
		{name: "open-tmpfile-setuid", vector: "open-tmpfile-mode", setup: func(e *env) fixture {
			p := filepath.Join(e.wd, "tool")
			return fixture{args: []string{e.wd, "tool", "4755"}, effect: setID(p, unix.S_ISUID)}
		}},

		// Truncation with no write access (Landlock TRUNCATE from ABI 3;
		// the filter and truncate's handler below).
		{name: "open-rdonly-trunc-outside", vector: "open-trunc", setup: func(e *env) fixture {
			p := e.outsideFile("victim")
			return fixture{args: []string{p, "rdonly"}, effect: contentChanged(p)}
		}},
		{name: "open-rdonly-trunc-ro-root", vector: "open-trunc", setup: func(e *env) fixture {
			ro := e.freshDir("ro-")
			p := e.file(ro, "victim", 0o644)
			return fixture{args: []string{p, "rdonly"}, cliArgs: []string{"--ro", ro}, effect: contentChanged(p)}
		}},
		{name: "open-accmode3-trunc-ro-root", vector: "open-trunc", setup: func(e *env) fixture {
			ro := e.freshDir("ro-")
			p := e.file(ro, "victim", 0o644)
			return fixture{args: []string{p, "accmode3"}, cliArgs: []string{"--ro", ro}, effect: contentChanged(p)}
		}},
		{name: "openat2-trunc-ro-root", vector: "openat2-trunc", setup: func(e *env) fixture {
			ro := e.freshDir("ro-")
			p := e.file(ro, "victim", 0o644)
			return fixture{args: []string{p}, cliArgs: []string{"--ro", ro}, effect: contentChanged(p)}
		}},
		{name: "truncate-via-workdir-symlink", vector: "truncate-file", setup: func(e *env) fixture {
			victim := e.outsideFile("victim")
			link := filepath.Join(e.wd, "innocent")
			e.symlink(victim, link)
			return fixture{args: []string{link}, effect: contentChanged(victim)}
		}},

		// Rename and link across the boundary, the ways the ABI-1
		// handlers resolve them.
		{name: "link-in-follow-then-write", vector: "linkat-follow", setup: func(e *env) fixture {
			victim := e.outsideFile("victim")
			link := filepath.Join(e.wd, "innocent")
			e.symlink(victim, link)
			sub := filepath.Join(e.wd, "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				e.t.Fatal(err)
			}
			e.own(sub, e.user.UID)
			alias := filepath.Join(sub, "alias")
			script := `"$0" linkat-follow "$1" "$2" && "$0" append-file "$2"`
			return fixture{command: []string{"sh", "-c", script, probePath, link, alias}, effect: contentChanged(victim)}
		}},
		{name: "rename-exchange-out", vector: "rename-exchange", setup: func(e *env) fixture {
			victim := e.outsideFile("victim")
			mine := filepath.Join(e.wd, "mine")
			if err := os.WriteFile(mine, []byte("planted by the run\n"), 0o644); err != nil {
				e.t.Fatal(err)
			}
			e.own(mine, e.user.UID)
			return fixture{args: []string{mine, victim}, effect: contentChanged(victim)}
		}},
	}
	for i := range cases {
		cases[i].setup = oldABI(cases[i].setup)
	}
	return cases
}
