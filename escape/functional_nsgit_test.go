//go:build linux

package escape

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// createScript makes names every way a command does (modes under a umask,
// a fifo, symlinks, a hard link, a rename, O_EXCL, a setgid directory,
// read-only places, ".." above the root, absolute and dangling symlinks,
// a directory descriptor, /dev/shm, /dev/stderr) and lists what it made,
// with owners. Its last line tries a nested .git.
const createScript = `r() { "$@" 2>&1 | sed 's/^[a-z]*: //'; echo "[$*] rc=$?"; }
umask 027
r mkdir -m 0775 d1
r mkdir d1/d2
r touch f1
r mkfifo p1
r ln -s f1 s1
r ln f1 h1
r mv f1 d1/f1m
r sh -c 'set -C; echo a > d1/f1m'
r mkdir sg; chmod 2775 sg; r mkdir sg/inner; r touch sg/file
r touch /usr/newfile
r sh -c 'mkdir /tmp/x$$ 2>/dev/null && rmdir /tmp/x$$'
r sh -c 'echo q > /dev/shm/q && cat /dev/shm/q'
r sh -c 'cd d1/d2 && touch ../../up1 && mkdir ../../../../../../top'
r ln -s /etc/passwd abs
r sh -c 'echo x > abs'
r ln -s /nonexist/zz dang
r sh -c 'echo x > dang'
r mkdir d1/d2/
r mkdir d1//d3///
r touch d1/d2/../../t2
r sh -c 'exec 3<d1; cd /; echo hi > /proc/self/fd/3/viafd'
r sh -c 'echo hi > /dev/stderr'
r rmdir gone
r sh -c 'ln -s nothere dang2 && echo hi > dang2 && cat nothere'
r sh -c 'echo w > newtop && echo w2 >> newtop && cat newtop'
r sh -c 'mkdir -p build/a/b && echo z > build/a/b/f && echo y >> build/a/b/f && cat build/a/b/f'
r sh -c 'exec 3<>build/a/b/f; echo rw >&3; cat build/a/b/f'
r truncate -s 1 build/a/b/f
r chmod 600 build/a/b/f
r mv build/a build/a2
r ln build/a2/b/f hardtop
r rm -r build/a2/b
r rmdir build/a2/b
r rm nonexist
r rm -rf build
r rm newtop
r rmdir nonexist
r rmdir sg
r sh -c 'echo x > /proc/self/fd/77/x'
r sh -c 'echo x > /proc/self/nonexist/x'
r sh -c 'echo x > /proc/thread-self/nonexist/x'
find . -mindepth 1 ! -path './.git*' -printf '%p %M %U:%G %l\n' | sort
mkdir d1/.git 2>/dev/null; echo "nested .git: $?"
`

// TestCreateNamespacesAsKernel runs createScript in a git work tree under
// landlock+namespaces and under the core, each twice: guarded, where the
// supervisor performs every name the script creates (and, under the core,
// every write, removal and truncation in entries made during the run), and
// with no-git-persistence waived, where the kernel does. Everything but the
// nested .git must come out the same (errors, modes, owners), as root and
// as 65534. A granted directory the script removes first must not fail the
// supervisor's later calls.
func TestCreateNamespacesAsKernel(t *testing.T) {
	for _, u := range testutil.Users(t) {
		for _, backend := range []string{"namespaces", "core"} {
			t.Run(u.Name+"/"+backend, func(t *testing.T) {
				e := newEnv(t, u, true)
				if backend == "namespaces" {
					requireNamespaces(e)
				}
				profile := filepath.Join(testutil.Workdir(t, u.UID), "waive-git.toml")
				if err := os.WriteFile(profile, []byte("name = \"git-writes\"\nwaive = [\"no-git-persistence\"]\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				out := map[bool]string{}
				for _, guarded := range []bool{true, false} {
					wd := testutil.Workdir(t, u.UID)
					we := &env{t: t, user: u, confined: true, wd: wd}
					we.file(wd, ".git/HEAD", 0o644)
					we.file(wd, "gone/.keep", 0o644)
					if err := os.Remove(filepath.Join(wd, "gone", ".keep")); err != nil {
						t.Fatal(err)
					}
					args := []string{"run", "--workdir", wd, "--backend", backend, "--rw", filepath.Join(wd, "gone")}
					if !guarded {
						args = append(args, "--profile", profile)
					}
					o := cliRun(t, u, wd, nil, append(args, "--", "sh", "-c", createScript)...)
					if o.code != 0 {
						t.Fatalf("guarded %v: exit %d\nstdout: %s\nstderr: %s", guarded, o.code, o.stdout, o.stderr)
					}
					out[guarded] = o.stdout
				}
				g, gok := strings.CutSuffix(out[true], "nested .git: 1\n")
				k, kok := strings.CutSuffix(out[false], "nested .git: 0\n")
				if !gok || !kok {
					t.Fatalf("nested .git: want refused when guarded, made when waived\nguarded:\n%s\nwaived:\n%s", out[true], out[false])
				}
				if g != k {
					t.Fatalf("the supervisor's calls differ from the kernel's\nguarded:\n%s\nwaived (kernel):\n%s", g, k)
				}
				t.Logf("%d lines the same", strings.Count(g, "\n"))
			})
		}
	}
}

// TestRenameMountAsKernel: under landlock+namespaces the guarded .git is
// a read-only mount in the command's tree, and a rename of it must fail as
// the kernel fails it there (EBUSY), whoever performs the rename: within
// one directory the kernel does it at every Landlock ABI; across
// directories at ABI 1 (simulated: -tags confine_simabi with
// CONFINE_SIM_LANDLOCK_ABI=1) the supervisor's emulation (notify's
// renameLink), which must resolve in the command's tree, not its own,
// where .git is an ordinary directory. As root and 65534, with the
// control: unconfined, both renames succeed.
func TestRenameMountAsKernel(t *testing.T) {
	const script = `"$0" rename-out .git g; "$0" rename-out g .git; "$0" rename-out .git src/g`
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			requireNamespacesABI(newEnv(t, u, true), 1, "")
			for _, confined := range []bool{false, true} {
				wd := testutil.Workdir(t, u.UID)
				we := &env{t: t, user: u, confined: confined, wd: wd}
				we.file(wd, ".git/HEAD", 0o644)
				we.file(wd, "src/main.c", 0o644)
				var o outcome
				if confined {
					o = cliRun(t, u, wd, nil, "run", "--workdir", wd, "--ro", probeDir, "--backend", "namespaces", "--", "sh", "-c", script, probePath)
				} else {
					o = execute(t, asUser(u, wd, "sh", "-c", script, probePath))
				}
				var got []string
				for _, l := range strings.Split(strings.TrimSpace(o.stdout), "\n") {
					var r probeReport
					if err := json.Unmarshal([]byte(l), &r); err != nil {
						t.Fatalf("confined %v: probe output %q: %v\nstderr: %s", confined, l, err, o.stderr)
					}
					got = append(got, r.Outcome+": "+r.Detail)
				}
				if len(got) != 3 {
					t.Fatalf("confined %v: %d probe reports, want 3: %q\nstderr: %s", confined, len(got), got, o.stderr)
				}
				for i, g := range got {
					switch {
					case !confined && i != 2 && !strings.HasPrefix(g, "escaped"):
						t.Fatalf("control: rename %d did not happen: %s", i, g)
					case confined && i != 1 && !(strings.HasPrefix(g, "blocked") && strings.Contains(g, "EBUSY")):
						t.Fatalf("confined: rename %d: %s; want blocked with EBUSY, as the kernel answers for a mount point", i, g)
					}
				}
				if !confined && !strings.HasPrefix(got[2], "escaped") {
					t.Fatalf("control: rename into src did not happen: %s", got[2])
				}
				t.Logf("confined %v: %q", confined, got)
			}
		})
	}
}
