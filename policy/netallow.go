package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/confine-sandbox/confine/spec"
)

// Allowlist is a profile's egress allowlist (network = "allowlist"). An
// empty one denies everything; "*" is accepted only as an explicit entry.
// The launcher's egress proxy checks every connection against it before
// any DNS lookup.
type Allowlist struct {
	// Hosts are entries "HOST[:PORT]": an exact name ("proxy.golang.org"),
	// an explicit wildcard "*.example.com" (subdomains only, not
	// example.com itself), "*" (any host), or an IP literal ("127.0.0.1",
	// "[::1]"). PORT is a number or "*"; without one the entry allows
	// port 443 only.
	Hosts []string `json:"hosts,omitempty"`
	// Groups name registry groups (registryGroupNames): one grant for
	// "package install" from a registry.
	Groups []string `json:"groups,omitempty"`
	// Special are address prefixes ("10.0.0.0/8", "127.0.0.1/32") that
	// resolved names may have although they are loopback, private,
	// link-local or otherwise special; everything else special is
	// refused after resolution. An IP-literal host entry names its own
	// address already.
	Special []string `json:"special_addresses,omitempty"`
	// Resolve pins names to addresses (like curl --resolve or
	// /etc/hosts): the proxy uses them instead of DNS for those names.
	// A name must also be allowed by Hosts or Groups, and a special
	// address it maps to must still be named in Special.
	Resolve map[string][]string `json:"resolve,omitempty"`
	// Credentials are hosts the proxy adds a credential for (see
	// CredentialRoute).
	Credentials map[string]CredentialRoute `json:"credentials,omitempty"`
}

// hostRule is one parsed allowlist entry.
type hostRule struct {
	// Pattern is a lower-case name, "*.domain", "*" or an IP literal
	// (without brackets).
	Pattern string
	// Port is the port allowed; anyPort allows every port.
	Port int
	// Entry is the entry as the profile wrote it (or "group:NAME").
	Entry string
}

// anyPort in a hostRule allows every port.
const anyPort = -1

// defaultAllowPort is the port of an entry that names none.
const defaultAllowPort = 443

// registryGroups are the named groups of package registries, as the
// public registries serve them over HTTPS.
var registryGroups = map[string][]string{
	"go":     {"proxy.golang.org", "sum.golang.org"},
	"npm":    {"registry.npmjs.org"},
	"pypi":   {"pypi.org", "files.pythonhosted.org"},
	"crates": {"crates.io", "index.crates.io", "static.crates.io"},
}

// registryGroupNames lists the registry group names.
func registryGroupNames() []string {
	n := make([]string, 0, len(registryGroups))
	for k := range registryGroups {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// registryGroupHosts returns the hosts of a registry group, or false.
func registryGroupHosts(name string) ([]string, bool) {
	h, ok := registryGroups[name]
	return slices.Clone(h), ok
}

// NormalizeHost lower-cases a host name and drops one trailing dot, and
// checks it is a DNS name (labels of [a-z0-9-], not starting or ending
// with '-', at most 63 bytes each, 253 in all) or an IP literal (IPv6
// with or without brackets, no zone). It returns IP literals in
// netip.Addr's form, IPv4-mapped IPv6 unmapped.
func NormalizeHost(h string) (string, error) {
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", fmt.Errorf("%q is not an IPv6 literal", h)
		}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", fmt.Errorf("%q: an address with a zone is not allowed", h)
		}
		return a.Unmap().String(), nil
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("host name %q: want 1 to 253 bytes", h)
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("host name %q: bad label %q", h, l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Errorf("host name %q: byte %q is not allowed (want letters, digits, '-' and '.')", h, c)
			}
		}
	}
	// All-numeric final labels are IPv4 in some other spelling
	// ("127.1", "0x7f.1"): never a name.
	if last := h[strings.LastIndexByte(h, '.')+1:]; strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") && strings.Trim(last[2:], "0123456789abcdef") == "" {
		return "", fmt.Errorf("host %q looks like an IPv4 address in a non-standard form", h)
	}
	return h, nil
}

// parseHostEntry parses one Hosts entry.
func parseHostEntry(e string) (hostRule, error) {
	r := hostRule{Entry: e, Port: defaultAllowPort}
	host, port := e, ""
	switch {
	case strings.HasPrefix(e, "["):
		end := strings.IndexByte(e, ']')
		if end < 0 {
			return r, fmt.Errorf("entry %q: unclosed '['", e)
		}
		host, port = e[:end+1], strings.TrimPrefix(e[end+1:], ":")
		if port == "" && len(e) > end+1 {
			return r, fmt.Errorf("entry %q: want [ADDR]:PORT", e)
		}
	case strings.Count(e, ":") == 1:
		host, port, _ = strings.Cut(e, ":")
		if port == "" {
			return r, fmt.Errorf("entry %q: empty port", e)
		}
	case strings.Count(e, ":") > 1:
		// A bare IPv6 literal, no port.
	}
	switch port {
	case "":
	case "*":
		r.Port = anyPort
	default:
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return r, fmt.Errorf("entry %q: port %q: want 1-65535 or *", e, port)
		}
		r.Port = n
	}
	switch {
	case host == "*":
		r.Pattern = "*"
	case strings.HasPrefix(host, "*."):
		h, err := NormalizeHost(host[2:])
		if err != nil {
			return r, fmt.Errorf("entry %q: %v", e, err)
		}
		if _, err := netip.ParseAddr(h); err == nil {
			return r, fmt.Errorf("entry %q: a wildcard needs a domain, not an address", e)
		}
		if !strings.Contains(h, ".") {
			return r, fmt.Errorf("entry %q: a wildcard over a top-level domain is too wide; write \"*\" if that is meant", e)
		}
		r.Pattern = "*." + h
	case strings.Contains(host, "*"):
		return r, fmt.Errorf("entry %q: '*' is allowed only as the whole host or as a leading \"*.\"", e)
	default:
		h, err := NormalizeHost(host)
		if err != nil {
			return r, fmt.Errorf("entry %q: %v", e, err)
		}
		r.Pattern = h
	}
	return r, nil
}

// CompiledAllowlist is an Allowlist parsed and expanded, ready to match.
type CompiledAllowlist struct {
	rules   []hostRule
	special []netip.Prefix
	resolve map[string][]netip.Addr
	creds   map[string]CredentialRoute
}

// Compile parses every entry, expands the groups and refuses duplicates
// and unknown groups. Errors wrap spec.ErrInvalidSpec.
func (a Allowlist) Compile() (*CompiledAllowlist, error) {
	c := &CompiledAllowlist{}
	seen := map[string]bool{}
	for _, e := range a.Hosts {
		r, err := parseHostEntry(e)
		if err != nil {
			return nil, fmt.Errorf("%w: allowlist: %v", spec.ErrInvalidSpec, err)
		}
		key := r.Pattern + ":" + strconv.Itoa(r.Port)
		if seen[key] {
			return nil, fmt.Errorf("%w: allowlist: entry %q is listed twice", spec.ErrInvalidSpec, e)
		}
		seen[key] = true
		c.rules = append(c.rules, r)
		if ip, err := netip.ParseAddr(r.Pattern); err == nil {
			c.special = append(c.special, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	for _, g := range a.Groups {
		hosts, ok := registryGroups[g]
		if !ok {
			return nil, fmt.Errorf("%w: allowlist: unknown registry group %q (known: %s)", spec.ErrInvalidSpec, g, strings.Join(registryGroupNames(), ", "))
		}
		for _, h := range hosts {
			c.rules = append(c.rules, hostRule{Pattern: h, Port: defaultAllowPort, Entry: "group:" + g})
		}
	}
	for _, s := range a.Special {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Masked() != p || p.Addr().Zone() != "" {
			return nil, fmt.Errorf("%w: allowlist: special address %q: want a canonical prefix such as 10.0.0.0/8 or 127.0.0.1/32", spec.ErrInvalidSpec, s)
		}
		if p.Addr().Is4In6() {
			return nil, fmt.Errorf("%w: allowlist: special address %q: write IPv4 prefixes in IPv4 form", spec.ErrInvalidSpec, s)
		}
		if p.Bits() == 0 {
			return nil, fmt.Errorf("%w: allowlist: special address %q would name every address", spec.ErrInvalidSpec, s)
		}
		c.special = append(c.special, p)
	}
	for name, addrs := range a.Resolve {
		h, err := NormalizeHost(name)
		if err != nil || h != name {
			return nil, fmt.Errorf("%w: allowlist: resolve %q: want a normalised host name", spec.ErrInvalidSpec, name)
		}
		if _, err := netip.ParseAddr(h); err == nil {
			return nil, fmt.Errorf("%w: allowlist: resolve %q: an address needs no resolving", spec.ErrInvalidSpec, name)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%w: allowlist: resolve %q: no address", spec.ErrInvalidSpec, name)
		}
		if c.resolve == nil {
			c.resolve = map[string][]netip.Addr{}
		}
		for _, s := range addrs {
			ip, err := netip.ParseAddr(s)
			if err != nil || ip.Zone() != "" {
				return nil, fmt.Errorf("%w: allowlist: resolve %q: %q is not an IP address", spec.ErrInvalidSpec, name, s)
			}
			c.resolve[h] = append(c.resolve[h], ip.Unmap())
		}
	}
	if err := c.compileCredentials(a); err != nil {
		return nil, err
	}
	return c, nil
}

// Lookup returns the addresses the profile pins host to, if any.
func (c *CompiledAllowlist) Lookup(host string) ([]netip.Addr, bool) {
	if c == nil {
		return nil, false
	}
	a, ok := c.resolve[host]
	return slices.Clone(a), ok
}

// Match says whether host:port is allowed and by which entry. host must
// be NormalizeHost's output; anything else never matches. A name matches
// an exact entry or a "*.domain" entry it lies under; an IP literal
// matches only an entry with the same address, or "*".
func (c *CompiledAllowlist) Match(host string, port int) (entry string, ok bool) {
	if c == nil {
		return "", false
	}
	if n, err := NormalizeHost(host); err != nil || n != host {
		return "", false
	}
	for _, r := range c.rules {
		if r.Port != anyPort && r.Port != port {
			continue
		}
		switch {
		case r.Pattern == "*", r.Pattern == host:
			return r.Entry, true
		case strings.HasPrefix(r.Pattern, "*.") && strings.HasSuffix(host, r.Pattern[1:]):
			return r.Entry, true
		}
	}
	return "", false
}

// Names reports whether the profile names ip as a special address it may
// reach (a special_addresses prefix or an IP-literal host entry).
func (c *CompiledAllowlist) Names(ip netip.Addr) bool {
	if c == nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range c.special {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
