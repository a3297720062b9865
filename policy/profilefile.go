package policy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/spec"
)

// maxProfileSize bounds what loadProfile reads.
const maxProfileSize = 1 << 20

// profileError is a problem in a profile file, located by file, line and
// key. It wraps spec.ErrInvalidSpec.
type profileError struct {
	File string
	// Line is 1-based.
	Line int
	// Key is the dotted TOML key ("limits.memory", "read_exec[2]"), or
	// "" for a syntax error before any key.
	Key string
	Msg string
	// More counts further problems found in the same file.
	More int
}

func (e *profileError) Error() string {
	key := e.Key
	if key == "" {
		key = "(syntax)"
	}
	s := fmt.Sprintf("%v: profile %s:%d: %s: %s", spec.ErrInvalidSpec, e.File, e.Line, key, e.Msg)
	switch {
	case e.More == 1:
		s += " (and 1 more problem)"
	case e.More > 1:
		s += fmt.Sprintf(" (and %d more problems)", e.More)
	}
	return s
}

// Unwrap returns spec.ErrInvalidSpec.
func (e *profileError) Unwrap() error { return spec.ErrInvalidSpec }

// ResolveProfile returns the profile --profile names: a name without '/'
// is a built-in; anything with a '/' is a profile file
// (loadProfile), so "./ci.toml" loads a file in the current directory.
func ResolveProfile(nameOrPath string) (Profile, error) {
	if !strings.Contains(nameOrPath, "/") {
		p, err := lookupProfile(nameOrPath)
		if err != nil && strings.HasSuffix(nameOrPath, ".toml") {
			return p, fmt.Errorf("%w (a profile file needs a path with a '/', e.g. ./%s)", err, nameOrPath)
		}
		return p, err
	}
	return loadProfile(nameOrPath)
}

// loadProfile reads and validates a profile file. A profile file is TOML;
// every key is optional, and a missing one takes the built-in default (see
// Profile for the precedence of defaults, profile and flags):
//
//	name        = "ci-build"          # default: the file name without .toml
//	description = "what it is for"
//	tier        = 2                   # 0-3; only 2 runs (CheckTier)
//	read_exec   = ["/opt/toolchain"]  # read+exec roots beyond the system set
//	writable    = ["/var/cache/ci"]   # writable roots beyond workdir and temp
//	devices     = ["/dev/kvm"]        # device nodes beyond DefaultDevices()
//	network     = "deny-all"          # or "allowlist" (with [allowlist])
//	waive       = ["no-foreign-signals"]  # guarantee names (spec.Guarantees())
//	require_namespaces = true         # refuse where user namespaces do not work
//	host_ops    = ["read_file", "git_read"]  # tier 1 only: the Tier 1 operations
//
//	[env]
//	passthrough = ["GOFLAGS", "CI_*"] # from the caller's environment
//	waive       = ["NODE_OPTIONS"]    # exact names the sanitiser would refuse
//	[env.set]
//	GOPROXY = "off"
//
//	[allowlist]                       # only with network = "allowlist"
//	hosts  = ["allowed.test", "*.example.com:8443", "127.0.0.1:*"]
//	groups = ["go", "npm"]            # registry groups (registryGroupNames)
//	special_addresses = ["10.1.0.0/16"]  # special ranges names may resolve to
//	[allowlist.resolve]               # names pinned to addresses, no DNS
//	"registry.internal" = ["10.1.2.3"]
//	[allowlist.credentials."api.example.com"]  # the proxy adds the secret
//	header = "Authorization"
//	env    = "EXAMPLE_TOKEN"          # from the caller's environment
//	prefix = "Bearer "
//
//	[guard]                           # the persistence guard's set (docs/guard.md)
//	refuse = ["envrc"]                # rows refused instead of reported
//	report = ["git-hooks"]            # rows reported instead of refused
//	                                  # (a git row: no-git-persistence is waived)
//	[guard.add.makefile]              # a row of the profile's own
//	pattern = "**/Makefile"           # components; "*" one, "**" any number
//	action  = "refuse"                # or "report"
//	why     = "make runs it"
//
//	[limits]                          # 0 or absent: the default
//	wall_time = "5m"                  # durations: "30s", "5m", "1h30m"
//	cpu_time = "10m"
//	kill_grace = "2s"
//	memory = "2GiB"                   # sizes: "512KiB", "2GiB", or bytes
//	file_size = "1GiB"
//	output_limit = "1MiB"
//	max_procs = 256                   # counts: integers
//	open_files = 1024
//
// loadProfile refuses a file that is not regular, larger than 1 MiB, or
// writable by every user (anyone could then rewrite the sandbox's policy).
// The durations and sizes take what ParseDuration and ParseSize take, but
// a duration must be a string. Every
// problem is a *profileError naming the file, line and key, wrapping
// spec.ErrInvalidSpec; when there are several, the first by line is
// returned and counts the rest:
//
//   - a syntax error, an unknown key, or a value of the wrong type;
//   - a path that is relative, not normalised ("/a/../b", "/a/"), or has NUL;
//   - read_exec "/" (unless the profile waives fs-read-confined), a writable
//     root that is, contains or lies in a system root (/, /usr, /bin, /sbin,
//     /lib*, /etc, /boot, /proc, /sys, /dev; /dev/shm is allowed) unless the
//     profile waives fs-write-confined, and a device outside /dev or one of
//     /dev/mem, /dev/kmem, /dev/port, /dev/kmsg;
//   - contradictory grants: a path both read_exec and writable, a read_exec
//     root inside a writable root (Landlock rights add up, so it would be
//     writable after all; a writable root inside a read_exec root is the
//     intended refinement and is allowed), a variable both passed through
//     and set, and any entry listed twice;
//   - an unknown guarantee name in waive, an unknown tier (not 0-3), a
//     negative or malformed limit, a network policy other than deny-all
//     or allowlist, an [allowlist] without network = "allowlist", and an
//     allowlist entry Allowlist.Compile refuses;
//   - an env.set entry the sanitiser refuses (SanitizeEnv, with the
//     profile's own env.waive) or a path-list value with an empty,
//     relative or unnormalised component, and an exact env.passthrough
//     name the sanitiser refuses unless waived;
//   - a [guard] change guardset.New refuses: an unknown row, a row moved
//     to what it does by default or twice, an added row whose name is
//     taken or not [a-z0-9][a-z0-9._-]*, whose pattern is absolute, has
//     "..", '*' inside a component or names nothing, or whose action is
//     not refuse or report;
//   - a name that is not [A-Za-z0-9][A-Za-z0-9._-]* (at most 64 bytes) or
//     is a built-in's: a capability names its profile, and a file must not
//     pass for a built-in.
//
// Tier 0, 1 and 3 load: CheckTier refuses them when a run is asked for.
func loadProfile(path string) (Profile, error) {
	// O_NONBLOCK: a FIFO must not hang the open; it is refused below.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: profile: %v", spec.ErrInvalidSpec, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Profile{}, fmt.Errorf("%w: profile: %v", spec.ErrInvalidSpec, err)
	}
	switch {
	case !st.Mode().IsRegular():
		return Profile{}, fmt.Errorf("%w: profile %s: not a regular file", spec.ErrInvalidSpec, path)
	case st.Mode().Perm()&0o002 != 0:
		return Profile{}, fmt.Errorf("%w: profile %s: writable by every user (mode %#o); chmod o-w it", spec.ErrInvalidSpec, path, st.Mode().Perm())
	case st.Size() > maxProfileSize:
		return Profile{}, fmt.Errorf("%w: profile %s: larger than %d bytes", spec.ErrInvalidSpec, path, maxProfileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxProfileSize+1))
	if err != nil {
		return Profile{}, fmt.Errorf("%w: profile %s: %v", spec.ErrInvalidSpec, path, err)
	}
	if len(data) > maxProfileSize {
		return Profile{}, fmt.Errorf("%w: profile %s: larger than %d bytes", spec.ErrInvalidSpec, path, maxProfileSize)
	}
	return parseProfile(data, path)
}

// parseProfile validates profile TOML read from file (used for messages and
// for the default name); see loadProfile.
func parseProfile(data []byte, file string) (Profile, error) {
	root, err := parseTree(data)
	if err != nil {
		pe := &profileError{File: file, Line: 1, Msg: err.Error()}
		var te toml.ParseError
		if errors.As(err, &te) {
			pe.Msg = te.Message
			pe.Key = te.LastKey
			if te.Position.Line > 0 {
				pe.Line = te.Position.Line
			}
		}
		return Profile{}, pe
	}
	d := &decoder{file: file}
	p := d.profile(root)
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool {
			if d.errs[i].Line != d.errs[j].Line {
				return d.errs[i].Line < d.errs[j].Line
			}
			return d.errs[i].Key < d.errs[j].Key
		})
		e := d.errs[0]
		e.More = len(d.errs) - 1
		return Profile{}, e
	}
	p.Source = file
	return p, nil
}

// node is one key of the document with its line: a table (kids != nil) or
// a value.
type node struct {
	line int
	kids map[string]*node
	val  any
}

// errLineProbe is returned by lineProbe so that the decoder reports the
// position of the key being decoded.
var errLineProbe = errors.New("line probe")

type lineProbe struct{}

func (lineProbe) UnmarshalTOML(any) error { return errLineProbe }

// parseTree decodes TOML into a tree of keys with their lines. toml v1.6.0
// keeps key positions private, but reports the position of the current
// key when an Unmarshaler fails; decoding each key's Primitive into
// lineProbe yields its line. Implicit tables (from dotted keys) have none
// and take their first child's.
func parseTree(data []byte) (root *node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("TOML decoder failed: %v", r)
		}
	}()
	var top map[string]toml.Primitive
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		return nil, err
	}
	root = &node{line: 1, kids: map[string]*node{}}
	for k, p := range top {
		root.kids[k] = buildNode(&md, p)
	}
	return root, nil
}

func buildNode(md *toml.MetaData, p toml.Primitive) *node {
	n := &node{}
	var pe toml.ParseError
	if err := md.PrimitiveDecode(p, lineProbe{}); errors.As(err, &pe) {
		n.line = pe.Position.Line
	}
	var v any
	if err := md.PrimitiveDecode(p, &v); err != nil {
		return n
	}
	if _, ok := v.(map[string]any); !ok {
		n.val = v
		return n
	}
	// A table (toml v1.6.0 decodes a non-table into a map without error,
	// hence the check above).
	var sub map[string]toml.Primitive
	if md.PrimitiveDecode(p, &sub) != nil {
		return n
	}
	n.kids = make(map[string]*node, len(sub))
	first := 0
	for k, q := range sub {
		c := buildNode(md, q)
		n.kids[k] = c
		if c.line > 0 && (first == 0 || c.line < first) {
			first = c.line
		}
	}
	if n.line == 0 {
		n.line = first
	}
	return n
}

// decoder walks the tree against the schema and collects every problem.
type decoder struct {
	file string
	errs []*profileError
}

func (d *decoder) fail(line int, key, format string, args ...any) {
	if line <= 0 {
		line = 1
	}
	d.errs = append(d.errs, &profileError{File: d.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// validProfileName: 1 to 64 of [A-Za-z0-9._-], starting with a letter or
// digit. (A regexp with {0,63} compiled at start-up cost every CLI run
// some 900 allocations.)
func validProfileName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// systemRoots may not be written, contain or be inside a writable root
// unless fs-write-confined is waived.
var systemRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/proc", "/sys", "/dev"}

// writableInDev are the /dev directories a writable root may be.
var writableInDev = []string{"/dev/shm"}

// deniedDevices give raw access to kernel or physical memory, I/O ports or
// the kernel log.
var deniedDevices = []string{"/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg"}

func (d *decoder) profile(root *node) Profile {
	p := Profile{Tier: TierSandboxed, Network: spec.DenyAll}
	known := map[string]bool{
		"name": true, "description": true, "tier": true, "read_exec": true, "writable": true,
		"devices": true, "network": true, "waive": true, "env": true, "limits": true,
		"require_namespaces": true, "host_ops": true, "allowlist": true, "guard": true,
	}
	d.unknown(root, nil, known)
	k := root.kids

	// Guarantee waivers first: root checks depend on them.
	if n := k["waive"]; n != nil {
		p.Waive = d.strings(n, "waive")
		for i, w := range p.Waive {
			if !spec.KnownGuarantee(w) {
				d.fail(n.line, fmt.Sprintf("waive[%d]", i), "unknown guarantee %q (known: %s)", w, strings.Join(spec.Guarantees(), ", "))
			}
		}
	}
	d.identity(&p, k)
	d.network(&p, k)
	d.roots(&p, k)
	d.devices(&p, k)
	if n := k["require_namespaces"]; n != nil {
		if b, ok := n.val.(bool); ok && n.kids == nil {
			p.RequireNamespaces = b
		} else {
			d.fail(n.line, "require_namespaces", "want a boolean, got %s", nodeType(n))
		}
	}
	d.hostOps(&p, k)
	if n := k["env"]; n != nil {
		p.Env = d.env(n)
	}
	if n := k["limits"]; n != nil {
		p.Limits = d.limits(n)
	}
	if n := k["guard"]; n != nil {
		p.Guard = d.guard(n, p)
	}
	return p
}

// guard decodes [guard] and validates it with guardset.New, which p's
// waivers (decoded first) take part in.
func (d *decoder) guard(n *node, p Profile) *Guard {
	if n.kids == nil {
		d.fail(n.line, "guard", "want a table { refuse, report, add }, got %s", nodeType(n))
		return nil
	}
	d.unknown(n, []string{"guard"}, map[string]bool{"refuse": true, "report": true, "add": true})
	g := &Guard{}
	errs := len(d.errs)
	if x := n.kids["refuse"]; x != nil {
		g.Refuse = d.strings(x, "guard.refuse")
	}
	if x := n.kids["report"]; x != nil {
		g.Report = d.strings(x, "guard.report")
	}
	if a := n.kids["add"]; a != nil {
		if a.kids == nil {
			d.fail(a.line, "guard.add", "want a table of NAME = { pattern, action, why }, got %s", nodeType(a))
		}
		names := make([]string, 0, len(a.kids))
		for name := range a.kids {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			v := a.kids[name]
			key := "guard.add." + toml.Key{name}.String()
			if v.kids == nil {
				d.fail(v.line, key, "want a table { pattern, action, why }, got %s", nodeType(v))
				continue
			}
			d.unknown(v, []string{"guard", "add", name}, map[string]bool{"pattern": true, "action": true, "why": true})
			e := GuardEntry{Name: name}
			for k, dst := range map[string]*string{"pattern": &e.Pattern, "action": &e.Action, "why": &e.Why} {
				if x := v.kids[k]; x != nil {
					*dst = d.string(x, key+"."+k)
				}
			}
			if _, ok := guardActions[e.Action]; !ok {
				d.fail(v.line, key+".action", "want \"refuse\" or \"report\", got %q", e.Action)
			}
			g.Add = append(g.Add, e)
		}
	}
	if len(d.errs) > errs {
		return nil
	}
	p.Guard = g
	if _, err := p.GuardPolicy(); err != nil {
		// Located at the change refused: the added row's table, or
		// the last list naming the row moved.
		line, key := n.line, "guard"
		var ce *guardset.ChangeError
		if errors.As(err, &ce) {
			if a := n.kids["add"]; ce.Added && a != nil && a.kids[ce.Row] != nil {
				line, key = a.kids[ce.Row].line, "guard.add."+toml.Key{ce.Row}.String()
			}
			for _, l := range []struct {
				name  string
				names []string
			}{{"refuse", g.Refuse}, {"report", g.Report}} {
				if i := slices.Index(l.names, ce.Row); i >= 0 && !ce.Added {
					line, key = n.kids[l.name].line, fmt.Sprintf("guard.%s[%d]", l.name, i)
				}
			}
		}
		d.fail(line, key, "%v", err)
		return nil
	}
	return g
}

// identity decodes name, description and tier.
func (d *decoder) identity(p *Profile, k map[string]*node) {
	if n := k["name"]; n != nil {
		if p.Name = d.string(n, "name"); n.kids == nil {
			if _, ok := n.val.(string); ok {
				d.checkName(n.line, "name", p.Name)
			}
		}
	} else {
		p.Name = strings.TrimSuffix(filepath.Base(d.file), ".toml")
		if !validProfileName(p.Name) || isBuiltin(p.Name) {
			d.fail(1, "name", "the file name gives the profile name %q, which is not usable (%s); set name = \"...\"", p.Name, d.nameProblem(p.Name))
		}
	}
	if n := k["description"]; n != nil {
		p.Description = d.string(n, "description")
	}
	if n := k["tier"]; n != nil {
		if t, ok := d.int(n, "tier"); ok {
			if t < int64(TierNone) || t > int64(TierHostile) {
				d.fail(n.line, "tier", "unknown tier %d (tiers are 0-3)", t)
			} else {
				p.Tier = Tier(t)
			}
		}
	}
}

// network decodes network and the [allowlist] it may ask for.
func (d *decoder) network(p *Profile, k map[string]*node) {
	if n := k["network"]; n != nil {
		switch v := d.string(n, "network"); v {
		case "":
			if _, ok := n.val.(string); ok {
				d.fail(n.line, "network", "empty network policy (want %q)", spec.DenyAll)
			}
		case string(spec.DenyAll):
		case string(spec.Allowlist):
			p.Network = spec.Allowlist
			p.Allowlist = &Allowlist{}
		default:
			d.fail(n.line, "network", "unknown network policy %q (want %q or %q)", v, spec.DenyAll, spec.Allowlist)
		}
	}
	if n := k["allowlist"]; n != nil {
		if p.Network != spec.Allowlist {
			d.fail(n.line, "allowlist", "an [allowlist] needs network = %q", spec.Allowlist)
		} else {
			p.Allowlist = d.allowlist(n)
		}
	}
}

// roots decodes read_exec and writable, which the waivers (decoded first)
// may widen.
func (d *decoder) roots(p *Profile, k map[string]*node) {
	if n := k["read_exec"]; n != nil {
		p.ReadExec = d.paths(n, "read_exec")
		for i, r := range p.ReadExec {
			if r == "/" && !contains(p.Waive, spec.GFSRead) {
				d.fail(n.line, fmt.Sprintf("read_exec[%d]", i), "\"/\" would make every file readable; waive %s to allow it", spec.GFSRead)
			}
		}
	}
	if n := k["writable"]; n != nil {
		p.Writable = d.paths(n, "writable")
		for i, w := range p.Writable {
			key := fmt.Sprintf("writable[%d]", i)
			if msg := systemOverlap(w); msg != "" && !contains(p.Waive, spec.GFSWrite) {
				d.fail(n.line, key, "%s; waive %s to allow it", msg, spec.GFSWrite)
			}
			for j, r := range p.ReadExec {
				switch {
				case r == w:
					d.fail(n.line, key, "%q is also in read_exec: a path is either read-only or writable", w)
				case spec.Within(r, w):
					d.fail(k["read_exec"].line, fmt.Sprintf("read_exec[%d]", j), "%q lies inside writable root %q and would be writable too (Landlock rights add up)", r, w)
				}
			}
		}
	}
}

// devices decodes devices: the defaults plus what the file adds.
func (d *decoder) devices(p *Profile, k map[string]*node) {
	if n := k["devices"]; n != nil {
		devs := d.paths(n, "devices")
		for i, dev := range devs {
			key := fmt.Sprintf("devices[%d]", i)
			switch {
			case !strings.HasPrefix(dev, "/dev/"):
				d.fail(n.line, key, "device %q is not under /dev", dev)
			case contains(deniedDevices, dev):
				d.fail(n.line, key, "device %q gives raw access to the kernel or the machine and is never granted", dev)
			}
		}
		p.Devices = append([]string(nil), DefaultDevices()...)
		for _, dev := range devs {
			if !contains(p.Devices, dev) {
				p.Devices = append(p.Devices, dev)
			}
		}
	} else {
		p.Devices = append([]string(nil), DefaultDevices()...)
	}
}

// hostOps decodes host_ops, which only a tier 1 profile may list.
func (d *decoder) hostOps(p *Profile, k map[string]*node) {
	if n := k["host_ops"]; n != nil {
		p.HostOps = d.strings(n, "host_ops")
		for i, o := range p.HostOps {
			if !knownHostOp(o) {
				d.fail(n.line, fmt.Sprintf("host_ops[%d]", i), "unknown host operation %q (known: %s)", o, hostOpNames())
			}
		}
		if p.Tier != TierStructured {
			d.fail(n.line, "host_ops", "host operations belong to a tier 1 profile (this one is tier %d)", p.Tier)
		}
	}
}

func isBuiltin(name string) bool {
	_, ok := builtins[name]
	return ok || isRecipe(name)
}

func (d *decoder) nameProblem(name string) string {
	if isBuiltin(name) {
		return "it is a built-in profile's name"
	}
	return "want [A-Za-z0-9][A-Za-z0-9._-]*, at most 64 bytes"
}

func (d *decoder) checkName(line int, key, name string) {
	if !validProfileName(name) || isBuiltin(name) {
		d.fail(line, key, "profile name %q is not usable: %s", name, d.nameProblem(name))
	}
}

// CheckWritableRoot refuses a writable root that is, contains or lies
// inside a system directory (/usr, /etc, /dev, ...; /dev/shm excepted),
// whatever asked for it: a profile file, --rw, --workdir or a library
// caller. Only a waiver of fs-write-confined lifts it.
func CheckWritableRoot(w string) error {
	if msg := systemOverlap(w); msg != "" {
		return fmt.Errorf("%w: writable root %s; waive %s to allow it", spec.ErrInvalidSpec, msg, spec.GFSWrite)
	}
	return nil
}

// systemOverlap says why a writable root w touches a system root, or "".
func systemOverlap(w string) string {
	if w == "/" {
		return "\"/\" would make every file writable"
	}
	for _, dir := range writableInDev {
		if spec.Within(w, dir) {
			return ""
		}
	}
	for _, s := range systemRoots {
		switch {
		case spec.Within(w, s):
			return fmt.Sprintf("%q lies inside system root %s", w, s)
		case spec.Within(s, w):
			return fmt.Sprintf("%q contains system root %s", w, s)
		}
	}
	return ""
}

func (d *decoder) env(n *node) EnvPolicy {
	var e EnvPolicy
	if n.kids == nil {
		d.fail(n.line, "env", "want a table ([env]), got %s", nodeType(n))
		return e
	}
	d.unknown(n, []string{"env"}, map[string]bool{"passthrough": true, "set": true, "waive": true})
	if w := n.kids["waive"]; w != nil {
		e.Waive = d.strings(w, "env.waive")
		for i, name := range e.Waive {
			if err := checkEnvName(name); err != nil {
				d.fail(w.line, fmt.Sprintf("env.waive[%d]", i), "%s", trimSentinel(err))
			}
		}
	}
	if pt := n.kids["passthrough"]; pt != nil {
		e.Passthrough = d.strings(pt, "env.passthrough")
		for i, name := range e.Passthrough {
			key := fmt.Sprintf("env.passthrough[%d]", i)
			if err := checkPassthroughPattern(name); err != nil {
				d.fail(pt.line, key, "%s", trimSentinel(err))
				continue
			}
			if strings.HasSuffix(name, "*") || contains(e.Waive, name) {
				continue
			}
			if class := envRefusal(name); class != "" {
				d.fail(pt.line, key, "%s is refused (%s); name it in env.waive to pass it", name, class)
			}
		}
	}
	if s := n.kids["set"]; s != nil {
		if s.kids == nil {
			d.fail(s.line, "env.set", "want a table of NAME = \"VALUE\" ([env.set]), got %s", nodeType(s))
			return e
		}
		names := make([]string, 0, len(s.kids))
		for name := range s.kids {
			names = append(names, name)
		}
		sort.Strings(names)
		waived := map[string]bool{}
		for _, w := range e.Waive {
			waived[w] = true
		}
		for _, name := range names {
			v := s.kids[name]
			key := "env.set." + toml.Key{name}.String()
			val, ok := v.val.(string)
			if !ok {
				d.fail(v.line, key, "want a string value, got %s", nodeType(v))
				continue
			}
			if _, _, err := checkEntry(name+"="+val, waived); err != nil {
				d.fail(v.line, key, "%s", strings.TrimPrefix(trimSentinel(err), "environment: "))
				continue
			}
			if isPathListVar(name) {
				for _, c := range pathListComponents(name, val) {
					if err := checkPathSyntax(c); err != nil {
						d.fail(v.line, key, "%v", err)
						break
					}
				}
			}
			if contains(e.Passthrough, name) {
				d.fail(v.line, key, "%s is both in env.passthrough and env.set; keep one", name)
			}
			e.Set = append(e.Set, name+"="+val)
		}
	}
	return e
}

func (d *decoder) allowlist(n *node) *Allowlist {
	a := &Allowlist{}
	if n.kids == nil {
		d.fail(n.line, "allowlist", "want a table ([allowlist]), got %s", nodeType(n))
		return a
	}
	d.unknown(n, []string{"allowlist"}, map[string]bool{"hosts": true, "groups": true, "special_addresses": true, "resolve": true, "credentials": true})
	if cr := n.kids["credentials"]; cr != nil {
		a.Credentials = d.credentials(cr)
	}
	if r := n.kids["resolve"]; r != nil {
		if r.kids == nil {
			d.fail(r.line, "allowlist.resolve", "want a table of NAME = [\"ADDRESS\", ...] ([allowlist.resolve]), got %s", nodeType(r))
		} else {
			for name, v := range r.kids {
				key := "allowlist.resolve." + toml.Key{name}.String()
				addrs := d.strings(v, key)
				if _, err := (Allowlist{Resolve: map[string][]string{name: addrs}}).Compile(); err != nil {
					d.fail(v.line, key, "%s", strings.TrimPrefix(trimSentinel(err), "allowlist: "))
					continue
				}
				if a.Resolve == nil {
					a.Resolve = map[string][]string{}
				}
				a.Resolve[name] = addrs
			}
		}
	}
	lists := []struct {
		key string
		dst *[]string
	}{{"hosts", &a.Hosts}, {"groups", &a.Groups}, {"special_addresses", &a.Special}}
	for _, l := range lists {
		v := n.kids[l.key]
		if v == nil {
			continue
		}
		key := "allowlist." + l.key
		for i, s := range d.strings(v, key) {
			// Check each entry alone, so the message names its index.
			one := Allowlist{}
			switch l.key {
			case "hosts":
				one.Hosts = []string{s}
			case "groups":
				one.Groups = []string{s}
			default:
				one.Special = []string{s}
			}
			if _, err := one.Compile(); err != nil {
				d.fail(v.line, fmt.Sprintf("%s[%d]", key, i), "%s", strings.TrimPrefix(trimSentinel(err), "allowlist: "))
				continue
			}
			*l.dst = append(*l.dst, s)
		}
	}
	if _, err := a.Compile(); err != nil {
		d.fail(n.line, "allowlist", "%s", trimSentinel(err))
	}
	return a
}

// credentials decodes [allowlist.credentials."HOST"] tables; their
// hosts are checked against the allowlist by Compile.
func (d *decoder) credentials(n *node) map[string]CredentialRoute {
	if n.kids == nil {
		d.fail(n.line, "allowlist.credentials", "want a table of HOST = { header, env, prefix, ca_file }, got %s", nodeType(n))
		return nil
	}
	out := map[string]CredentialRoute{}
	for host, v := range n.kids {
		key := "allowlist.credentials." + toml.Key{host}.String()
		if v.kids == nil {
			d.fail(v.line, key, "want a table { header, env, prefix, ca_file }, got %s", nodeType(v))
			continue
		}
		d.unknown(v, []string{"allowlist", "credentials", host}, map[string]bool{"header": true, "env": true, "prefix": true, "ca_file": true, "port": true})
		var r CredentialRoute
		for name, dst := range map[string]*string{"header": &r.Header, "env": &r.Env, "prefix": &r.Prefix, "ca_file": &r.CAFile} {
			if x := v.kids[name]; x != nil {
				*dst = d.string(x, key+"."+name)
			}
		}
		if x := v.kids["port"]; x != nil {
			if p, ok := d.int(x, key+".port"); ok {
				r.Port = int(p)
			}
		}
		if err := checkCredential(host, r); err != nil {
			d.fail(v.line, key, "%s", err)
			continue
		}
		out[host] = r
	}
	return out
}

func (d *decoder) limits(n *node) spec.Limits {
	var l spec.Limits
	if n.kids == nil {
		d.fail(n.line, "limits", "want a table ([limits]), got %s", nodeType(n))
		return l
	}
	durs := map[string]*time.Duration{"wall_time": &l.WallTime, "cpu_time": &l.CPUTime, "kill_grace": &l.KillGrace}
	sizes := map[string]*int64{"memory": &l.MemoryBytes, "file_size": &l.FileSizeBytes, "output_limit": &l.OutputBytes}
	counts := map[string]*int64{"max_procs": &l.MaxProcs, "open_files": &l.OpenFiles}
	known := map[string]bool{}
	for _, m := range []map[string]*int64{sizes, counts} {
		for k := range m {
			known[k] = true
		}
	}
	for k := range durs {
		known[k] = true
	}
	d.unknown(n, []string{"limits"}, known)
	for name, v := range n.kids {
		key := "limits." + name
		switch {
		case durs[name] != nil:
			s, ok := v.val.(string)
			if !ok {
				d.fail(v.line, key, "want a duration string such as \"30s\" or \"5m\", got %s", nodeType(v))
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(s), "-") {
				d.fail(v.line, key, "negative duration %q", s)
				continue
			}
			dur, err := spec.ParseDuration(s)
			if err != nil {
				d.fail(v.line, key, "%v", err)
				continue
			}
			*durs[name] = dur
		case sizes[name] != nil:
			switch x := v.val.(type) {
			case int64:
				if x < 0 {
					d.fail(v.line, key, "negative size %d", x)
					continue
				}
				*sizes[name] = x
			case string:
				if strings.HasPrefix(strings.TrimSpace(x), "-") {
					d.fail(v.line, key, "negative size %q", x)
					continue
				}
				sz, err := spec.ParseSize(x)
				if err != nil {
					d.fail(v.line, key, "%v", err)
					continue
				}
				*sizes[name] = sz
			default:
				d.fail(v.line, key, "want a size such as \"2GiB\" or a byte count, got %s", nodeType(v))
			}
		case counts[name] != nil:
			x, ok := v.val.(int64)
			if !ok {
				d.fail(v.line, key, "want an integer, got %s", nodeType(v))
				continue
			}
			if x < 0 {
				d.fail(v.line, key, "negative count %d", x)
				continue
			}
			*counts[name] = x
		}
	}
	return l
}

// unknown reports every key of table n not in known.
func (d *decoder) unknown(n *node, path []string, known map[string]bool) {
	names := make([]string, 0, len(n.kids))
	for k := range n.kids {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if known[k] {
			continue
		}
		keys := make([]string, 0, len(known))
		for kk := range known {
			keys = append(keys, kk)
		}
		sort.Strings(keys)
		full := toml.Key(append(append([]string(nil), path...), k)).String()
		d.fail(n.kids[k].line, full, "unknown key (known here: %s)", strings.Join(keys, ", "))
	}
}

func (d *decoder) string(n *node, key string) string {
	s, ok := n.val.(string)
	if !ok {
		d.fail(n.line, key, "want a string, got %s", nodeType(n))
		return ""
	}
	if strings.IndexByte(s, 0) >= 0 {
		d.fail(n.line, key, "contains NUL")
		return ""
	}
	return s
}

func (d *decoder) int(n *node, key string) (int64, bool) {
	x, ok := n.val.(int64)
	if !ok {
		d.fail(n.line, key, "want an integer, got %s", nodeType(n))
	}
	return x, ok
}

// strings decodes a list of strings, refusing duplicates.
func (d *decoder) strings(n *node, key string) []string {
	list, ok := n.val.([]any)
	if !ok {
		d.fail(n.line, key, "want a list of strings, got %s", nodeType(n))
		return nil
	}
	out := make([]string, 0, len(list))
	seen := map[string]bool{}
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			d.fail(n.line, fmt.Sprintf("%s[%d]", key, i), "want a string, got %s", typeName(x))
			continue
		}
		if seen[s] {
			d.fail(n.line, fmt.Sprintf("%s[%d]", key, i), "%q is listed twice", s)
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// paths decodes a list of absolute, normalised paths.
func (d *decoder) paths(n *node, key string) []string {
	ps := d.strings(n, key)
	out := ps[:0]
	for i, p := range ps {
		if err := checkPathSyntax(p); err != nil {
			msg := strings.Replace(err.Error(), "component", "path", 1)
			if p == "" {
				msg = "empty path"
			}
			d.fail(n.line, fmt.Sprintf("%s[%d]", key, i), "%s", msg)
			continue
		}
		out = append(out, p)
	}
	return out
}

// nodeType names what a node holds, for messages.
func nodeType(n *node) string {
	if n.kids != nil {
		return "a table"
	}
	return typeName(n.val)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case []map[string]any:
		return "an array of tables"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date/time"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func trimSentinel(err error) string {
	return strings.TrimPrefix(err.Error(), spec.ErrInvalidSpec.Error()+": ")
}
