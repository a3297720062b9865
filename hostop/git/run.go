//go:build linux

package git

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/hostop"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// run authorises op, builds the shadow git directory, runs git under Tier
// 2 and records the operation.
func (r *Repo) run(ctx context.Context, op policy.HostOp, sub string, args []string, stdin []byte) (Result, error) {
	res := Result{Subcommand: sub, Args: args}
	done, err := r.h.Begin(op, append([]string{"git", sub}, args...)...)
	if err != nil {
		return res, err
	}
	res, err = r.runGit(ctx, sub, args, stdin)
	return res, done(err)
}

func (r *Repo) runGit(ctx context.Context, sub string, args []string, stdin []byte) (Result, error) {
	res := Result{Subcommand: sub, Args: args}
	root := r.h.Root().Path()
	gitBin, err := r.gitPath()
	if err != nil {
		return res, fmt.Errorf("git: %w", err)
	}
	sh, err := newShadow(r.h.Root(), root)
	if err != nil {
		return res, err
	}
	defer sh.remove()
	argv := []string{"--no-pager", "--literal-pathspecs", "--git-dir=" + sh.dir, "--work-tree=" + root}
	argv = append(argv, overrides(sh.hooks)...)
	argv = append(argv, sub)
	argv = append(argv, args...)
	env := []string{
		"PATH=/usr/bin:/bin",
		"GIT_INDEX_FILE=" + filepath.Join(root, ".git", "index"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"LC_ALL=C",
	}
	if sub == "commit" {
		name, email := r.identity(sh)
		if name == "" || email == "" {
			return res, fmt.Errorf("%w: no author: set Repo.Author (--author) or user.name and user.email in the repository's config", ErrBadArg)
		}
		env = append(env, "GIT_AUTHOR_NAME="+name, "GIT_AUTHOR_EMAIL="+email, "GIT_COMMITTER_NAME="+name, "GIT_COMMITTER_EMAIL="+email)
	}
	eng, err := policy.NewEngine()
	if err != nil {
		return res, err
	}
	// git itself writes the repository's objects, index and refs: it is
	// the trusted writer the persistence guard keeps untrusted commands
	// from imitating. It reads its configuration and hooks from the
	// shadow, never from .git, so the guard is waived for it alone.
	if err := eng.Register(tier1GitProfile); err != nil {
		return res, err
	}
	c, err := eng.Mint(tier1GitProfile.Name, "tier1-git", 0)
	if err != nil {
		return res, err
	}
	s := spec.CommandSpec{
		Program:   gitBin,
		Args:      argv,
		Worktree:  root,
		Env:       env,
		ReadWrite: []string{sh.dir},
		Profile:   tier1GitProfile.Name,
		Limits:    r.Limits,
		Stdin:     stdin,
	}
	cr, err := confine.RunCommand(ctx, c, s)
	res.Backend = cr.Backend
	cr.Stderr.Head, cr.Stderr.Tail = sanitize(cr.Stderr.Head, sh.dir), sanitize(cr.Stderr.Tail, sh.dir)
	res.ExitCode, res.Stdout, res.Stderr = cr.ExitCode, cr.Stdout, cr.Stderr
	if cerr := containGitDir(r.h.Root()); cerr != nil {
		res.Stdout, res.Stderr = spec.Stream{}, spec.Stream{}
		return res, fmt.Errorf("%w (it appeared while git ran: its output is withheld)", cerr)
	}
	if err != nil {
		return res, fmt.Errorf("git %s under confine: %w", sub, err)
	}
	if cr.TimedOut || cr.Signal != 0 || cr.ExitCode != 0 {
		why := lastLine(cr.Stderr.Text())
		if why == "" {
			why = lastLine(cr.Stdout.Text()) // "nothing to commit" goes to stdout
		}
		return res, fmt.Errorf("%w: git %s: exit %d: %s", ErrGit, sub, cr.ExitCode, strings.TrimSpace(why))
	}
	if err := sh.syncHead(); err != nil {
		return res, err
	}
	return res, nil
}

// tier1GitProfile is the default profile with the persistence guard
// waived (see Run).
var tier1GitProfile = policy.Profile{Name: "tier1-git", Tier: policy.TierSandboxed, Devices: policy.DefaultDevices(),
	Network: spec.DenyAll, Waive: []string{spec.GGitPersistence}}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// shadow is the private git directory git is pointed at.
type shadow struct {
	root   *hostop.Root
	dir    string
	hooks  string
	head   []byte
	config map[string]string
}

// inert are the repository configuration keys copied into the shadow,
// each with the values it may take. Nothing else is copied: no key that
// names a program, no include.
var inert = map[string]func() *regexp.Regexp{
	"core.repositoryformatversion": lazyRE(`^[01]$`),
	"core.filemode":                boolRE,
	"core.symlinks":                boolRE,
	"core.ignorecase":              boolRE,
	"core.precomposeunicode":       boolRE,
	"core.logallrefupdates":        lazyRE(`^(?i:true|false|yes|no|on|off|1|0|always)$`),
	"core.autocrlf":                lazyRE(`^(?i:true|false|input)$`),
	"core.eol":                     lazyRE(`^(?i:lf|crlf|native)$`),
	"extensions.objectformat":      lazyRE(`^(?i:sha1|sha256)$`),
	"user.name":                    lazyRE(`^[^\x00-\x1f<>"\\]{1,200}$`),
	"user.email":                   lazyRE(`^[^\x00-\x1f<>"\\\s]{1,200}$`),
}

var boolRE = lazyRE(`^(?i:true|false|yes|no|on|off|1|0)$`)

var headRE = lazyRE(`^(ref: refs/heads/[A-Za-z0-9._/+-]{1,200}|[0-9a-f]{40}|[0-9a-f]{64})\n?$`)

func newShadow(root *hostop.Root, rootPath string) (*shadow, error) {
	// .git must be a directory of the root, not a symlink. (The shadow's
	// symlinks name paths in it; what git finds there, it finds inside the
	// Tier 2 run, which cannot reach beyond the work tree and the shadow.)
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(rootPath, ".git"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, fmt.Errorf("%w: %s", ErrNotRepo, rootPath)
	}
	// Nothing git may read under .git leads out of the root: checked
	// here, before anything is read (refused, git not run), and again
	// after git ran (runGit: a link that appeared meanwhile withholds
	// git's output).
	if err := containGitDir(root); err != nil {
		return nil, err
	}
	sh := &shadow{root: root, config: map[string]string{}}
	headP, _ := root.ReadPath(".git/HEAD")
	h, err := hostop.Read(headP, 4096)
	if err != nil {
		return nil, fmt.Errorf("%w: HEAD: %w", ErrNotRepo, err)
	}
	if !headRE().Match(h.Content.Head) {
		return nil, fmt.Errorf("%w: HEAD holds %q", ErrNotRepo, h.Content.Head)
	}
	sh.head = h.Content.Head
	cfgP, _ := root.ReadPath(".git/config")
	if c, err := hostop.Read(cfgP, 1<<20); err == nil && !c.Content.Truncated {
		sh.config = parseConfig(c.Content.Head)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: config: %w", ErrNotRepo, err)
	}
	dir, err := os.MkdirTemp("", "confine-git-")
	if err != nil {
		return nil, err
	}
	sh.dir = dir
	sh.hooks = filepath.Join(dir, "no-hooks")
	fail := func(err error) (*shadow, error) { sh.remove(); return nil, err }
	if err := os.Mkdir(sh.hooks, 0o555); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), sh.head, 0o644); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), sh.configText(), 0o644); err != nil {
		return fail(err)
	}
	real := filepath.Join(rootPath, ".git")
	for _, n := range []string{"objects", "refs", "packed-refs", "logs", "shallow"} {
		if _, err := os.Lstat(filepath.Join(real, n)); err != nil && n != "objects" && n != "refs" {
			continue
		}
		if err := os.Symlink(filepath.Join(real, n), filepath.Join(dir, n)); err != nil {
			return fail(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "info"), 0o755); err != nil {
		return fail(err)
	}
	exP, _ := root.ReadPath(".git/info/exclude")
	if ex, err := hostop.Read(exP, 1<<20); err == nil && !ex.Content.Truncated {
		if err := os.WriteFile(filepath.Join(dir, "info", "exclude"), ex.Content.Head, 0o644); err != nil {
			return fail(err)
		}
	}
	// A root launcher runs git as the work tree's owner: the shadow must
	// be theirs.
	if os.Geteuid() == 0 {
		var rs unix.Stat_t
		if err := unix.Stat(rootPath, &rs); err == nil && rs.Uid != 0 {
			_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error {
				return os.Lchown(p, int(rs.Uid), int(rs.Gid))
			})
		}
	}
	return sh, nil
}

func (sh *shadow) remove() {
	if sh.dir != "" {
		_ = os.Chmod(sh.hooks, 0o755)
		_ = os.RemoveAll(sh.dir)
	}
}

func (sh *shadow) configText() []byte {
	var b strings.Builder
	sections := map[string][]string{}
	var order []string
	for _, k := range sortedKeys(sh.config) {
		sec, key, _ := strings.Cut(k, ".")
		if _, ok := sections[sec]; !ok {
			order = append(order, sec)
		}
		sections[sec] = append(sections[sec], "\t"+key+" = "+strconv.Quote(sh.config[k])+"\n")
	}
	if _, ok := sh.config["core.repositoryformatversion"]; !ok {
		b.WriteString("[core]\n\trepositoryformatversion = 0\n")
	}
	b.WriteString("[core]\n\tbare = false\n")
	for _, sec := range order {
		b.WriteString("[" + sec + "]\n")
		for _, l := range sections[sec] {
			b.WriteString(l)
		}
	}
	return []byte(b.String())
}

// parseConfig reads the simple subset of git's configuration syntax the
// inert keys use: [section] headers (no subsection) and key = value lines.
// Only keys listed in inert with a value that matches are kept, so a
// misparse can drop a key, never let one through that names a program.
func parseConfig(b []byte) map[string]string {
	out := map[string]string{}
	sec := ""
	for _, raw := range strings.Split(string(b), "\n") {
		l := strings.TrimSpace(raw)
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		if l[0] == '[' {
			end := strings.IndexByte(l, ']')
			sec = ""
			if end > 0 && !strings.ContainsAny(l[1:end], " \t\"") {
				sec = strings.ToLower(l[1:end])
			}
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || sec == "" {
			continue
		}
		k = sec + "." + strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		if re, ok := inert[k]; ok && re().MatchString(v) {
			out[k] = v
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// identity is the commit identity: Repo.Author, else the repository's
// user.name and user.email.
func (r *Repo) identity(sh *shadow) (string, string) {
	if a := strings.TrimSpace(r.Author); a != "" {
		name, rest, ok := strings.Cut(a, "<")
		email := strings.TrimSuffix(strings.TrimSpace(rest), ">")
		if ok && inert["user.name"]().MatchString(strings.TrimSpace(name)) && inert["user.email"]().MatchString(email) {
			return strings.TrimSpace(name), email
		}
		return "", ""
	}
	return sh.config["user.name"], sh.config["user.email"]
}

// syncHead carries a detached HEAD that git moved (a commit) back to the
// repository; a symbolic HEAD moved its branch through the refs symlink.
func (sh *shadow) syncHead() error {
	b, err := os.ReadFile(filepath.Join(sh.dir, "HEAD"))
	if err != nil || string(b) == string(sh.head) {
		return nil
	}
	if !headRE().Match(b) || strings.HasPrefix(string(b), "ref:") {
		return nil
	}
	// git's own HEAD: the trusted writer's, past the guard.
	p, err := sh.root.GitWritePath(".git/HEAD")
	if err != nil {
		return err
	}
	_, err = hostop.Write(p, b, hostop.WriteOptions{NoCreate: true})
	return err
}
