//go:build linux

// Package git is Tier 1's git: fixed subcommands (status, diff, log, show,
// add, commit) that execute nothing a repository or a model could have
// written.
//
// How: the real git runs, but never on the repository's own configuration,
// and inside a Tier 2 confine run.
//
//   - git reads its repository configuration from the git directory, and
//     the configuration is where every program git runs is named (hooks
//     path, core.fsmonitor, core.pager, core.editor, core.sshCommand,
//     diff.external, diff.*.textconv, filter.*, credential.helper,
//     gpg.program, include.path, includeIf, ...). So git is given a private
//     git directory (a "shadow") whose config holds only a short list of
//     inert keys copied from the repository's (format version, object
//     format, filemode and the like, each value checked), whose objects,
//     refs, packed-refs and logs are symlinks to the repository's, and
//     whose HEAD and info/exclude are copies; the index is the
//     repository's (GIT_INDEX_FILE). No include is followed, no hook
//     directory exists, and .gitattributes drivers name no program
//     without a configuration that defines them.
//   - Command-line overrides (-c, which outrank every file) set each
//     executable key to something inert anyway, and the diff commands get
//     --no-ext-diff --no-textconv; commit gets --no-verify --no-gpg-sign.
//   - The environment is built from scratch: no GIT_* variable of the
//     caller's reaches git (GIT_CONFIG_*, GIT_EXTERNAL_DIFF, GIT_DIR, ...).
//     HOME is the run's private directory, so no global configuration is
//     read, and GIT_CONFIG_NOSYSTEM=1, GIT_ATTR_NOSYSTEM=1.
//   - Nothing under .git may lead git out of the root: every symlink in it
//     must resolve beneath the root and every alternate object store lie
//     inside it, checked before git runs and after (containGitDir); git's
//     stderr is sanitised so that no file content it quotes reaches the
//     caller (docs/guard-tier1.md).
//   - And git itself runs under Tier 2 (confine.RunCommand, profile
//     "default"): writes only in the work tree and the shadow, no
//     network, so even a way around all of the above would stay confined.
//
// A pure-Go implementation (go-git) was the alternative: it runs no
// program at all, but it is a large dependency of the CLI (binary size and
// start-up are measured), and its status, index handling and diff differ
// from git's in the corners; the real git gives the user git's own
// answers.
package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/confine-sandbox/confine/hostop"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Errors.
var (
	// ErrNotRepo: the root has no .git directory (a .git file, as in a
	// linked worktree or a submodule, is not supported yet).
	ErrNotRepo = errors.New("not a git work tree with a .git directory")
	// ErrBadArg: a revision, path or message that could be taken for an
	// option, or has characters git would interpret.
	ErrBadArg = errors.New("bad git argument")
	// ErrGit: git ran and failed; Result holds its output.
	ErrGit = errors.New("git failed")
)

// Result is one git operation's outcome.
type Result struct {
	// Subcommand is status, diff, log, show, add or commit.
	Subcommand string `json:"subcommand"`
	// Args are git's arguments after the fixed options.
	Args     []string    `json:"args"`
	ExitCode int         `json:"exit_code"`
	Stdout   spec.Stream `json:"stdout"`
	Stderr   spec.Stream `json:"stderr"`
	// Status is the parsed `status`: one entry per path.
	Status []StatusEntry `json:"status,omitempty"`
	// Log is the parsed `log`.
	Log []LogEntry `json:"log,omitempty"`
	// Backend is the confine backend git ran under.
	Backend string `json:"backend"`
}

// StatusEntry is one line of `git status --porcelain`: X and Y are the
// index and work-tree status letters.
type StatusEntry struct {
	X    string `json:"index"`
	Y    string `json:"worktree"`
	Path string `json:"path"`
	Orig string `json:"orig,omitempty"`
}

// LogEntry is one commit of `git log`.
type LogEntry struct {
	Hash    string `json:"hash"`
	Author  string `json:"author"`
	Email   string `json:"email"`
	Time    int64  `json:"time"`
	Subject string `json:"subject"`
}

// Repo runs git on the work tree that is a Host's root.
type Repo struct {
	h *hostop.Host
	// Git is the git binary (default: the first git in /usr/bin, /bin,
	// /usr/local/bin).
	Git string
	// Limits bound git's run (output, time); zero fields take the
	// defaults.
	Limits spec.Limits
	// Author, when set ("Name <email>"), is the commit author and
	// committer; otherwise user.name and user.email from the repository's
	// configuration are used.
	Author string
}

// New returns a Repo for h's root, which must hold a .git directory.
func New(h *hostop.Host) *Repo { return &Repo{h: h} }

func (r *Repo) gitPath() (string, error) {
	if r.Git != "" {
		return r.Git, nil
	}
	for _, d := range []string{"/usr/bin", "/bin", "/usr/local/bin"} {
		p := filepath.Join(d, "git")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath("git")
}

// Status is `git status --porcelain`, with untracked files.
func (r *Repo) Status(ctx context.Context) (Result, error) {
	res, err := r.run(ctx, policy.OpGitRead, "status", []string{"--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=all"}, nil)
	if err == nil {
		res.Status = parseStatus(res.Stdout.Head)
	}
	return res, err
}

// Diff is `git diff` of the work tree against the index, or with staged
// of the index against HEAD, limited to paths when given.
func (r *Repo) Diff(ctx context.Context, staged bool, paths ...string) (Result, error) {
	args := []string{"--no-ext-diff", "--no-textconv", "--no-color"}
	if staged {
		args = append(args, "--cached")
	}
	ps, err := r.paths(paths)
	if err != nil {
		return Result{Subcommand: "diff"}, err
	}
	return r.run(ctx, policy.OpGitRead, "diff", append(append(args, "--"), ps...), nil)
}

// Log is `git log` of at most n commits (<= 0: 20) reachable from rev
// (default HEAD).
func (r *Repo) Log(ctx context.Context, n int, rev string) (Result, error) {
	if n <= 0 {
		n = 20
	}
	args := []string{"--no-color", "--no-show-signature", "-z", "--format=%H%x1f%an%x1f%ae%x1f%at%x1f%s", "-n", strconv.Itoa(n)}
	if rev != "" {
		if err := checkRev(rev); err != nil {
			return Result{Subcommand: "log"}, err
		}
		args = append(args, "--end-of-options", rev)
	}
	res, err := r.run(ctx, policy.OpGitRead, "log", args, nil)
	if err == nil {
		res.Log = parseLog(res.Stdout.Head)
	}
	return res, err
}

// Show is `git show` of rev (default HEAD): the commit and its patch.
func (r *Repo) Show(ctx context.Context, rev string) (Result, error) {
	args := []string{"--no-ext-diff", "--no-textconv", "--no-color", "--no-show-signature"}
	if rev != "" {
		if err := checkRev(rev); err != nil {
			return Result{Subcommand: "show"}, err
		}
		args = append(args, "--end-of-options", rev)
	}
	return r.run(ctx, policy.OpGitRead, "show", args, nil)
}

// Add is `git add` of paths (relative to the root; at least one).
func (r *Repo) Add(ctx context.Context, paths ...string) (Result, error) {
	if len(paths) == 0 {
		return Result{Subcommand: "add"}, fmt.Errorf("%w: add needs at least one path", ErrBadArg)
	}
	ps, err := r.paths(paths)
	if err != nil {
		return Result{Subcommand: "add"}, err
	}
	return r.run(ctx, policy.OpGitWrite, "add", append([]string{"--"}, ps...), nil)
}

// Commit is `git commit` of the index with message (from standard input,
// never an editor), without hooks or signing.
func (r *Repo) Commit(ctx context.Context, message string) (Result, error) {
	if strings.TrimSpace(message) == "" {
		return Result{Subcommand: "commit"}, fmt.Errorf("%w: empty commit message", ErrBadArg)
	}
	return r.run(ctx, policy.OpGitWrite, "commit", []string{"--no-verify", "--no-gpg-sign", "--no-edit", "--cleanup=verbatim", "-F", "-"}, []byte(message))
}

// paths checks each path as a confined path (relative, no "..") and
// passes them as literal pathspecs (--literal-pathspecs: no ":(magic)").
func (r *Repo) paths(ps []string) ([]string, error) {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		cp, err := r.h.Root().ReadPath(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadArg, err)
		}
		out = append(out, cp.Rel())
	}
	return out, nil
}

var revRE = lazyRE(`^[A-Za-z0-9_./~^@{}+-]{1,200}$`)

// lazyRE compiles pattern on first use. A {1,200} repetition compiles to
// a program of some 800 KB, and the confine binary starts for every run:
// compiled at init it cost each start about 200 page faults and 1 ms,
// though only git operations use it.
func lazyRE(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// checkRev refuses a revision that could be an option or names a file
// (git would read ":path" or "rev:path" blobs, which is fine, but keep the
// grammar small and obvious).
func checkRev(rev string) error {
	if strings.HasPrefix(rev, "-") || !revRE().MatchString(rev) || strings.Contains(rev, "..") {
		return fmt.Errorf("%w: revision %q", ErrBadArg, rev)
	}
	return nil
}

func parseStatus(out []byte) []StatusEntry {
	var es []StatusEntry
	recs := bytes.Split(out, []byte{0})
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if len(rec) < 4 {
			continue
		}
		e := StatusEntry{X: string(rec[0]), Y: string(rec[1]), Path: string(rec[3:])}
		if rec[0] == 'R' || rec[0] == 'C' {
			if i+1 < len(recs) {
				e.Orig = string(recs[i+1])
				i++
			}
		}
		es = append(es, e)
	}
	return es
}

func parseLog(out []byte) []LogEntry {
	var es []LogEntry
	for _, rec := range bytes.Split(out, []byte{0}) {
		f := strings.Split(strings.TrimLeft(string(rec), "\n"), "\x1f")
		if len(f) != 5 {
			continue
		}
		t, _ := strconv.ParseInt(f[3], 10, 64)
		es = append(es, LogEntry{Hash: f[0], Author: f[1], Email: f[2], Time: t, Subject: f[4]})
	}
	return es
}

// overrides are -c settings, which outrank every configuration file:
// every key whose value git runs (or that turns on something that runs a
// program) set to an inert value. The shadow config holds none of these
// keys already; this is the second line.
func overrides(hooks string) []string {
	kv := [][2]string{
		{"core.hooksPath", hooks},
		{"core.fsmonitor", "false"},
		{"core.untrackedCache", "false"},
		{"core.pager", "cat"},
		{"core.editor", "false"},
		{"sequence.editor", "false"},
		{"core.sshCommand", "false"},
		{"core.gitProxy", "false"},
		{"core.askPass", "false"},
		{"core.alternateRefsCommand", ""},
		{"diff.external", ""},
		{"credential.helper", ""},
		{"gpg.program", "false"},
		{"gpg.openpgp.program", "false"},
		{"gpg.x509.program", "false"},
		{"gpg.ssh.program", "false"},
		{"commit.gpgSign", "false"},
		{"log.showSignature", "false"},
		{"protocol.allow", "never"},
		{"uploadpack.packObjectsHook", ""},
		{"gc.auto", "0"},
		{"maintenance.auto", "false"},
		{"fetch.recurseSubmodules", "false"},
		{"submodule.recurse", "false"},
		{"diff.ignoreSubmodules", "all"},
		{"status.submoduleSummary", "false"},
		{"safe.directory", "*"},
		{"core.attributesFile", "/dev/null"},
		{"core.excludesFile", "/dev/null"},
		{"color.ui", "false"},
		{"advice.detachedHead", "false"},
	}
	out := make([]string, 0, 2*len(kv)+4)
	for _, p := range kv {
		out = append(out, "-c", p[0]+"="+p[1])
	}
	return out
}
