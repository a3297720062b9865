package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/confine-sandbox/confine/spec"
)

// defaultPassthrough are the variables a run takes from the caller's
// environment when they are set there, without being asked: locale,
// terminal, time zone and colour preferences. An entry ending in '*' is a
// prefix pattern. None of them carries a secret or names code to load; a
// pattern match that the sanitiser would refuse (an LC_ name that looks like
// a secret, say) is left out and reported by BuildEnv, never passed.
//
// Treat the slice as read-only.
var defaultPassthrough = []string{
	"LANG", "LANGUAGE", "LC_*",
	"TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE",
	"COLUMNS", "LINES",
	"TZ",
	"SOURCE_DATE_EPOCH",
}

// DefaultPassthrough returns a copy of the list, so that no caller can change it for
// the others.
func DefaultPassthrough() []string { return slices.Clone(defaultPassthrough) }

// envRule is one class of variables the sanitiser refuses. match gets the
// name upper-cased (ASCII), so every rule is case-insensitive: npm, for one,
// reads npm_config__authToken as readily as NPM_CONFIG__AUTHTOKEN.
type envRule struct {
	class string
	match func(upper string) bool
}

func exact(names ...string) func(string) bool {
	return func(u string) bool {
		for _, n := range names {
			if u == n {
				return true
			}
		}
		return false
	}
}

func prefix(ps ...string) func(string) bool {
	return func(u string) bool {
		for _, p := range ps {
			if strings.HasPrefix(u, p) {
				return true
			}
		}
		return false
	}
}

// notSecret are names the "looks like a secret" patterns match that are
// known to carry none.
var notSecret = []string{"TOKENIZERS_PARALLELISM"}

// envRules are checked in order; the first match names the class in the
// refusal.
var envRules = []envRule{
	// A path to code the dynamic loader maps into every program (or, for
	// GCONV_PATH, glibc's iconv loads).
	{"dynamic-loader variable", func(u string) bool {
		return strings.HasPrefix(u, "LD_") || strings.HasPrefix(u, "DYLD_") || u == "GCONV_PATH"
	}},
	// Code an interpreter or shell runs before the program's own.
	{"interpreter start-up hook", func(u string) bool {
		return exact("BASH_ENV", "ENV", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT",
			"PYTHONSTARTUP", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")(u) ||
			strings.HasPrefix(u, "BASH_FUNC_")
	}},
	// GIT_CONFIG_COUNT/KEY_n/VALUE_n, GIT_CONFIG_PARAMETERS, GIT_CONFIG_GLOBAL,
	// GIT_CONFIG_SYSTEM and the old GIT_CONFIG inject or redirect git's
	// configuration, which can name commands (core.sshCommand,
	// core.fsmonitor, credential helpers, aliases) and hooks.
	// GIT_CONFIG_NOSYSTEM is the exception: it can only switch a source off
	// (/etc/gitconfig), never add or redirect one, and confine sets it
	// itself.
	{"git configuration override", func(u string) bool {
		return u != "GIT_CONFIG_NOSYSTEM" && (u == "GIT_CONFIG" || strings.HasPrefix(u, "GIT_CONFIG_"))
	}},
	// GIT_DIR and GIT_COMMON_DIR choose the repository whose config and
	// hooks git runs; GIT_WORK_TREE, GIT_INDEX_FILE and GIT_OBJECT_DIRECTORY
	// only choose data and pass.
	{"git repository redirect", exact("GIT_DIR", "GIT_COMMON_DIR")},
	// Variables whose value git (or ssh, or go) runs as a command, or a
	// directory it runs commands from.
	{"command hook", exact(
		"GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EXEC_PATH",
		"GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
		"GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR", "GOAUTH",
	)},
	{"agent socket", exact("SSH_AUTH_SOCK", "GPG_AGENT_INFO")},
	{"cloud credentials", func(u string) bool {
		return prefix("AWS_", "GCP_", "GCLOUD_", "CLOUDSDK_", "AZURE_", "ALIBABA_CLOUD_", "ALICLOUD_", "OCI_CLI_")(u) ||
			exact("GOOGLE_APPLICATION_CREDENTIALS", "KUBECONFIG")(u) ||
			strings.HasPrefix(u, "GOOGLE_") && strings.HasSuffix(u, "_CREDENTIALS")
	}},
	{"registry or API token", func(u string) bool {
		return exact("NPM_TOKEN", "NODE_AUTH_TOKEN", "CARGO_REGISTRY_TOKEN", "PYPI_TOKEN",
			"TWINE_PASSWORD", "GH_TOKEN", "GITHUB_TOKEN", "GITLAB_TOKEN", "CI_JOB_TOKEN",
			"DOCKER_AUTH_CONFIG", "DOCKER_CONFIG", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
			"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEM_HOST_API_KEY", "NUGET_API_KEY",
			"NETRC", "GNUPGHOME")(u) ||
			strings.HasPrefix(u, "CARGO_REGISTRIES_") && strings.HasSuffix(u, "_TOKEN")
	}},
	{"name looks like a secret", func(u string) bool {
		for _, n := range notSecret {
			if u == n {
				return false
			}
		}
		for _, s := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "APIKEY", "API_KEY", "PRIVATE_KEY", "ACCESS_KEY"} {
			if strings.Contains(u, s) {
				return true
			}
		}
		for _, s := range []string{"_KEY", "_KEY_ID", "_AUTH", "_PASS", "_PWD", "_PAT"} {
			if strings.HasSuffix(u, s) {
				return true
			}
		}
		return false
	}},
}

// envRefusal returns why the sanitiser refuses a variable named name (the
// class: "dynamic-loader variable", "cloud credentials", ...), or "" if the
// name is not refused. Waivers are not considered. Matching is
// case-insensitive (ASCII).
func envRefusal(name string) string {
	u := upperASCII(name)
	for _, r := range envRules {
		if r.match(u) {
			return r.class
		}
	}
	return ""
}

// checkEnvName rejects what cannot be a variable name: empty, or holding a
// byte outside printable ASCII ('!'..'~'), or '='. Programs look variables
// up by exact bytes, so nothing legitimate needs more, and a name with
// spaces or control bytes could only serve to slip past a rule.
func checkEnvName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: environment: empty variable name", spec.ErrInvalidSpec)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' || c == '=' {
			return fmt.Errorf("%w: environment: variable name %q: byte %#02x is not allowed (printable ASCII without '=' only)", spec.ErrInvalidSpec, name, c)
		}
	}
	return nil
}

// urlCredentials reports whether v holds a URL with a password in it
// (scheme://user:password@host), as pip and git index URLs often do.
func urlCredentials(v string) bool {
	for {
		i := strings.Index(v, "://")
		if i < 0 {
			return false
		}
		v = v[i+3:]
		end := strings.IndexAny(v, "/?# \t\n")
		if end < 0 {
			end = len(v)
		}
		auth := v[:end]
		if at := strings.LastIndexByte(auth, '@'); at >= 0 && strings.IndexByte(auth[:at], ':') >= 0 {
			return true
		}
	}
}

// checkEntry checks one NAME=VALUE entry and returns its name and value.
func checkEntry(kv string, waived map[string]bool) (name, val string, err error) {
	name, val, ok := strings.Cut(kv, "=")
	if !ok {
		return "", "", fmt.Errorf("%w: environment: entry %q is not NAME=VALUE", spec.ErrInvalidSpec, kv)
	}
	if err := checkEnvName(name); err != nil {
		return "", "", err
	}
	if strings.IndexByte(val, 0) >= 0 {
		return "", "", fmt.Errorf("%w: environment: %s: value contains NUL", spec.ErrInvalidSpec, name)
	}
	if waived[name] {
		return name, val, nil
	}
	if class := envRefusal(name); class != "" {
		return "", "", fmt.Errorf("%w: environment: %s is refused (%s; a profile may waive it by naming it in env.waive)", spec.ErrInvalidSpec, name, class)
	}
	if urlCredentials(val) {
		return "", "", fmt.Errorf("%w: environment: %s is refused (its value holds a URL with a password; a profile may waive it by naming it in env.waive)", spec.ErrInvalidSpec, name)
	}
	return name, val, nil
}

// SanitizeEnv checks the NAME=VALUE entries a caller asked for (--env,
// CommandSpec.Env, a profile's env.set) and returns the child's
// environment: one entry per name, the last one given winning, sorted by
// name. Nothing is ever dropped silently: a malformed entry, a name outside
// printable ASCII, a value with NUL, or a variable of a refused class (see
// envRefusal: loader variables, interpreter hooks, git configuration and
// command hooks, agent sockets, cloud credentials, registry tokens, names
// that look like secrets), or a value holding a URL with a password, is an
// error naming the variable. Every refused variable is named, not just the
// first. waived lists exact, case-sensitive variable names a profile waives
// (env.waive); a waived variable skips the class and URL rules, not the
// syntax rules. Path-list variables are checked separately, against the
// run's roots, by ValidateEnvPaths.
func SanitizeEnv(entries []string, waived []string) ([]string, error) {
	w := make(map[string]bool, len(waived))
	for _, n := range waived {
		w[n] = true
	}
	vals := make(map[string]string, len(entries))
	var errs []string
	for _, kv := range entries {
		name, val, err := checkEntry(kv, w)
		if err != nil {
			errs = append(errs, strings.TrimPrefix(err.Error(), spec.ErrInvalidSpec.Error()+": environment: "))
			continue
		}
		vals[name] = val
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: environment: %s", spec.ErrInvalidSpec, strings.Join(errs, "; "))
	}
	out := make([]string, 0, len(vals))
	for n, v := range vals {
		out = append(out, n+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// checkPassthroughPattern accepts a passthrough entry: a variable name, or
// a name prefix followed by one trailing '*' ("LC_*").
func checkPassthroughPattern(p string) error {
	n := strings.TrimSuffix(p, "*")
	if err := checkEnvName(n); err != nil {
		return err
	}
	if strings.Contains(n, "*") {
		return fmt.Errorf("%w: environment: passthrough %q: '*' may only end a pattern", spec.ErrInvalidSpec, p)
	}
	return nil
}

// EnvSources are what a run's environment is built from, in increasing
// precedence.
type EnvSources struct {
	// Caller is the caller's environment (os.Environ()). Only the
	// variables Passthrough names are read from it.
	Caller []string
	// Passthrough are names (or "PREFIX*" patterns) copied from Caller
	// when set there: defaultPassthrough plus the profile's
	// env.passthrough. An exact name that is refused is an error; a
	// pattern match that is refused is left out and reported.
	Passthrough []string
	// Set are NAME=VALUE entries in increasing precedence: the profile's
	// env.set, then the command line's --env (NAME alone is resolved
	// from the caller by the CLI, and refused like any other entry),
	// then CommandSpec.Env.
	Set []string
	// Waive are exact variable names the profile waives (env.waive).
	Waive []string
}

// BuildEnv builds a child's environment from scratch: Passthrough variables
// present in Caller, then Set, all checked by SanitizeEnv. skipped lists
// the caller's variables that matched only a passthrough pattern and are
// refused, so a caller can say what it left out. It does not add PATH,
// HOME or TMPDIR, and does not check path lists (ValidateEnvPaths).
func BuildEnv(src EnvSources) (env, skipped []string, err error) {
	w := make(map[string]bool, len(src.Waive))
	for _, n := range src.Waive {
		w[n] = true
	}
	for _, p := range src.Passthrough {
		if err := checkPassthroughPattern(p); err != nil {
			return nil, nil, err
		}
	}
	var entries []string
	for _, kv := range src.Caller {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		exactly, byPattern := passMatch(name, src.Passthrough)
		switch {
		case exactly:
			entries = append(entries, kv)
		case byPattern:
			if _, _, err := checkEntry(kv, w); err != nil {
				skipped = append(skipped, name)
				continue
			}
			entries = append(entries, kv)
		}
	}
	env, err = SanitizeEnv(append(entries, src.Set...), src.Waive)
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(skipped)
	return env, skipped, nil
}

// passMatch reports whether name is listed exactly, or matched by a
// "PREFIX*" pattern, in pass.
func passMatch(name string, pass []string) (exactly, byPattern bool) {
	for _, p := range pass {
		if pre, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, pre) {
				byPattern = true
			}
		} else if p == name {
			exactly = true
		}
	}
	return exactly, byPattern
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
