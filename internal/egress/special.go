package egress

import "net/netip"

// specialRange is an address range a resolved name may not lead to unless
// the profile names it: the proxy would otherwise let the command reach
// the launcher's own host, its local network or a cloud metadata service
// through an allowed name that resolves there (DNS rebinding).
type specialRange struct {
	prefix netip.Prefix
	why    string
}

// specialRanges is the table of special ranges (RFC 6890 and its
// successors), besides what netip's predicates cover in isSpecial.
var specialRanges = func() []specialRange {
	rows := []struct{ p, why string }{
		{"0.0.0.0/8", "this network"},
		{"100.64.0.0/10", "shared address space (carrier-grade NAT)"},
		{"169.254.0.0/16", "link-local (cloud metadata at 169.254.169.254)"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation"},
		{"192.88.99.0/24", "6to4 relay anycast"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"240.0.0.0/4", "reserved"},
		{"255.255.255.255/32", "broadcast"},
		{"64:ff9b::/96", "NAT64 (embeds an IPv4 address)"},
		{"64:ff9b:1::/48", "local-use NAT64"},
		{"100::/64", "discard-only"},
		{"2001::/32", "Teredo (embeds an IPv4 address)"},
		{"2001:db8::/32", "documentation"},
		{"2002::/16", "6to4 (embeds an IPv4 address)"},
		{"fc00::/7", "unique local"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local"},
		{"fd00:ec2::254/128", "cloud metadata (AWS IPv6)"},
	}
	out := make([]specialRange, len(rows))
	for i, r := range rows {
		out[i] = specialRange{netip.MustParsePrefix(r.p), r.why}
	}
	return out
}()

// special says why ip is special, or "" when it is an ordinary public
// unicast address.
func special(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return "invalid address"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		// Checked again in the table, for the metadata note.
	case ip.IsMulticast():
		return "multicast"
	}
	for _, r := range specialRanges {
		if r.prefix.Contains(ip) {
			return r.why
		}
	}
	if ip.IsLinkLocalUnicast() {
		return "link-local"
	}
	return ""
}
