//go:build linux

package escape

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// TestFileWork is real work that renames and links across directories
// inside the work directory, run on the host's Landlock ABI and meant to be
// run again under -tags confine_simabi with CONFINE_SIM_LANDLOCK_ABI=1 (no
// REFER right: Landlock alone refuses every such rename with EXDEV, and
// rename(2) has no fallback) and 2. Unlike mv, which falls back to copying,
// the python job calls rename(2) and link(2) directly, so it fails unless
// the supervisor performs them.
func TestFileWork(t *testing.T) {
	type job struct {
		name  string
		needs []string
		files map[string]string
		cmd   []string
		want  string
	}
	gitc := "git -c user.name=t -c user.email=t@example.com "
	jobs := []job{
		{name: "python-rename-link-across-dirs", needs: []string{"python3"},
			files: map[string]string{"rl.py": pyRenameLink},
			cmd:   []string{"python3", "rl.py"}, want: "rename ok\ndir rename ok\nexchange ok\nlink ok\ntruncate ok\n"},
		{name: "git-init-add-commit-mv-gc", needs: []string{"git"},
			cmd: []string{"sh", "-c", "set -e; git init -q r; cd r; mkdir -p src/deep; echo hi > src/deep/a.txt; " +
				"git add -A; " + gitc + "commit -qm init; " + gitc + "mv src/deep/a.txt b.txt; " + gitc + "commit -qm mv; " +
				"git gc -q; git log --oneline | wc -l"},
			want: "2\n"},
		{name: "npm-offline-install-extract-rename", needs: []string{"npm", "node", "tar"},
			cmd: []string{"sh", "-c", `set -e; mkdir -p src/package/lib
echo '{"name":"x","version":"1.0.0","main":"lib/i.js"}' > src/package/package.json
echo 'module.exports = "from x"' > src/package/lib/i.js
tar -C src -czf x.tgz package
echo '{"name":"app","version":"1.0.0"}' > package.json
npm install --offline --no-audit --no-fund ./x.tgz >/dev/null
node -e 'console.log(require("x"))'`},
			want: "from x\n"},
	}
	abi := host.Probe().LandlockABI
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			for _, j := range jobs {
				t.Run(j.name, func(t *testing.T) {
					for _, n := range j.needs {
						if _, err := exec.LookPath(n); err != nil {
							t.Skipf("not applicable on this host: %s missing (%v)", n, err)
						}
					}
					wd := testutil.Workdir(t, u.UID)
					for name, body := range j.files {
						p := filepath.Join(wd, name)
						if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
							t.Fatal(err)
						}
						if os.Geteuid() == 0 {
							if err := os.Chown(p, u.UID, u.UID); err != nil {
								t.Fatal(err)
							}
						}
					}
					args := []string{"run", "--workdir", wd, "--timeout", workTimeout().String()}
					args = append(args, waiveMissing(t, u)...)
					args = append(append(args, "--"), j.cmd...)
					o := cliRun(t, u, wd, nil, args...)
					if o.code != 0 || !strings.Contains(o.stdout, j.want) {
						t.Fatalf("file work failed in the sandbox as %s on Landlock ABI %d: exit %d, want stdout containing %q\nstdout: %s\nstderr: %s",
							u.Name, abi, o.code, j.want, o.stdout, o.stderr)
					}
					t.Logf("ok on Landlock ABI %d in %v", abi, o.elapsed.Round(1e6))
				})
			}
		})
	}
}

const pyRenameLink = `import os
os.makedirs("d1/sub/x", exist_ok=True)
os.makedirs("d2", exist_ok=True)
with open("d1/f", "w") as f:
    f.write("data")
os.rename("d1/f", "d2/f")
print("rename ok", flush=True)
os.rename("d1/sub", "d2/sub")
assert os.path.isdir("d2/sub/x")
print("dir rename ok", flush=True)
with open("d1/e", "w") as f:
    f.write("e")
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if libc.syscall(316 if os.uname().machine == "x86_64" else 276, AT_FDCWD, b"d1/e", AT_FDCWD, b"d2/f", RENAME_EXCHANGE) != 0:
    raise OSError(ctypes.get_errno(), "renameat2(RENAME_EXCHANGE)")
assert open("d2/f").read() == "e" and open("d1/e").read() == "data"
print("exchange ok", flush=True)
os.link("d2/f", "d1/g")
assert os.stat("d1/g").st_ino == os.stat("d2/f").st_ino
print("link ok", flush=True)
os.truncate("d1/g", 0)
assert os.stat("d2/f").st_size == 0
print("truncate ok", flush=True)
`

// TestRootsNosuid checks that where the run has a mount namespace of its
// own (landlock+namespaces, bubblewrap), the work directory, the private
// temp dir and a read-only root are mounted nosuid: a set-user-ID file
// found or left there never runs with its owner's privileges inside the run,
// on top of no_new_privs. The core has no mounts of its own; there the
// set-ID refusals of the seccomp filter and the supervisor hold alone.
func TestRootsNosuid(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skipf("not applicable on this host: python3 missing (%v)", err)
	}
	const script = `import os
for p in (".", os.environ["TMPDIR"], "/usr/bin"):
    print(p if p != os.environ["TMPDIR"] else "tmp", "nosuid" if os.statvfs(p).f_flag & os.ST_NOSUID else "SUID")
`
	for _, u := range testutil.Users(t) {
		for _, backend := range []string{"namespaces", "bwrap"} {
			t.Run(u.Name+"/"+backend, func(t *testing.T) {
				if backend == "bwrap" {
					requireBwrap(t, u)
				}
				wd := testutil.Workdir(t, u.UID)
				args := append([]string{"run", "--workdir", wd, "--backend", backend}, waiveMissing(t, u)...)
				o := cliRun(t, u, wd, nil, append(args, "--", "python3", "-c", script)...)
				if o.code == 125 && strings.Contains(o.stderr, "unavailable") {
					t.Skipf("not applicable here as %s (%s): %s", u.Name, testutil.Mode(), fx.OneLine(o.stderr, 300))
				}
				want := ". nosuid\ntmp nosuid\n/usr/bin nosuid\n"
				if o.code != 0 || o.stdout != want {
					t.Fatalf("exit %d, stdout %q, want %q\nstderr: %s", o.code, o.stdout, want, o.stderr)
				}
			})
		}
	}
}
