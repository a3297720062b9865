// Package credpath knows where credentials live under a directory a run
// may read (~/.ssh, .npmrc, a cargo home's credentials...) and splits a
// read grant around them: Landlock allows only, so "root except X" is a
// grant of X's siblings, down every directory that leads to an X.
package credpath

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/confine-sandbox/confine/spec"
)

// credentialPaths are paths, relative to a granted directory, that hold
// credentials and stay unreadable even when that directory is granted.
var credentialPaths = []string{
	".cargo/credentials.toml", ".cargo/credentials",
	".npmrc", ".yarnrc.yml", ".netrc", ".pypirc", ".git-credentials",
	".docker/config.json", ".config/gh/hosts.yml", ".config/gcloud",
	".aws", ".ssh", ".kube/config", ".gnupg",
}

// cargoHomeCredentials apply when the granted directory is itself a cargo
// home (CARGO_HOME or ~/.cargo).
var cargoHomeCredentials = []string{"credentials.toml", "credentials"}

// SplitReadGrant returns what to grant instead of root so that no credential
// path beneath it is covered, and the credential paths it left out. Landlock
// is allow-only and hierarchical, so "root except X" means granting X's
// siblings one by one, down every directory that leads to an X. Symlinks
// among those siblings are not granted (a rule would land on the link's
// target). Entries created in those directories later are not covered by
// any grant. extra are further absolute paths inside root to leave out
// (confine's own control surfaces, internal/ctlpaths), whether or not
// they exist yet.
func SplitReadGrant(root string, extra ...string) (grants, excluded []string, err error) {
	rel := Under(root)
	var secrets []string
	for _, p := range extra {
		if spec.Within(p, root) && p != root {
			secrets = append(secrets, p) // a missing one: its place stays ungranted
		}
	}
	for _, r := range rel {
		p := filepath.Join(root, r)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		secrets = append(secrets, p)
		// A dotfile manager's symlink: the secret's bytes live at the
		// target, which must stay ungranted too.
		if t, err := filepath.EvalSymlinks(p); err == nil && t != p && spec.Within(t, root) {
			secrets = append(secrets, t)
		}
	}
	if len(secrets) == 0 {
		return []string{root}, nil, nil
	}
	sort.Strings(secrets)
	secrets = slices.Compact(secrets)
	grants, err = Split(root, secrets)
	if err != nil {
		return nil, nil, fmt.Errorf("re-deny credentials under %s: %w", root, err)
	}
	return grants, secrets, nil
}

// Under returns the credential paths, relative to root, that
// must stay unreadable when root is granted: the common list, and cargo's
// credential files when root is itself a cargo home.
func Under(root string) []string {
	rel := slices.Clone(credentialPaths)
	if filepath.Base(root) == ".cargo" || fileExists(filepath.Join(root, "config.toml")) && fileExists(filepath.Join(root, "registry")) {
		rel = append(rel, cargoHomeCredentials...)
	}
	return rel
}

// Find lists the credential paths present directly under root.
func Find(root string) []string {
	var found []string
	for _, r := range credentialPaths {
		p := filepath.Join(root, r)
		if _, err := os.Lstat(p); err == nil {
			found = append(found, p)
		}
	}
	return found
}

// Split returns the entries beneath dir to grant so that none of secrets
// (absolute paths beneath dir) is covered: dir's entries, descending into
// those that lead to a secret, without symlinks.
func Split(dir string, secrets []string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case slices.Contains(secrets, p):
			continue
		case e.Type()&os.ModeSymlink != 0:
			// A rule on a symlink lands on its target, which may be
			// anywhere (or a secret). Targets inside root are granted
			// through their own entries; the link still resolves.
			continue
		case leadsTo(p, secrets):
			sub, err := Split(p, secrets)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		default:
			out = append(out, p)
		}
	}
	return out, nil
}

func leadsTo(p string, secrets []string) bool {
	for _, s := range secrets {
		if strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
