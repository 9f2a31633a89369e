package ipv6

import "net/netip"

// The policy table of RFC 6724 section 2.1, the default one of section
// 2.1's list: a precedence that orders destinations (section 6, rule 6)
// and a label that pairs a source with destinations of its kind (section
// 5 rule 6, section 6 rule 5). An IPv4 address is looked up as its
// IPv4-mapped form (section 3.1). The longest prefix that matches an
// address gives its row.

type policy struct {
	prefix            netip.Prefix
	precedence, label uint8
}

// policyTable is section 2.1's default table, longest prefixes first.
var policyTable = []policy{
	{netip.MustParsePrefix("::1/128"), 50, 0},       // loopback
	{netip.MustParsePrefix("::ffff:0:0/96"), 35, 4}, // IPv4-mapped: IPv4
	{netip.MustParsePrefix("::/96"), 1, 3},          // IPv4-compatible, deprecated
	{netip.MustParsePrefix("2001::/32"), 5, 5},      // Teredo
	{netip.MustParsePrefix("2002::/16"), 30, 2},     // 6to4
	{netip.MustParsePrefix("3ffe::/16"), 1, 12},     // 6bone, returned
	{netip.MustParsePrefix("fec0::/10"), 1, 11},     // site-local, deprecated
	{netip.MustParsePrefix("fc00::/7"), 3, 13},      // unique local
	{netip.MustParsePrefix("::/0"), 40, 1},          // the rest of IPv6
}

func lookupPolicy(a netip.Addr) policy {
	if a.Is4() {
		a = netip.AddrFrom16(a.As16())
	}
	a = a.WithZone("")
	for _, p := range policyTable {
		if p.prefix.Contains(a) {
			return p
		}
	}
	return policyTable[len(policyTable)-1]
}

// Precedence is a's precedence in the default policy table (RFC 6724
// section 2.1): higher is preferred as a destination.
func Precedence(a netip.Addr) int { return int(lookupPolicy(a).precedence) }

// Label is a's label in the default policy table (RFC 6724 section 2.1):
// a source and a destination of one label are of one kind (native IPv6,
// IPv4, unique local, 6to4...).
func Label(a netip.Addr) int { return int(lookupPolicy(a).label) }

// SelectionScope is a's scope as RFC 6724 compares scopes, for either
// family: an IPv6 address's own (AddrScope), and for IPv4 section 3.2's
// mapping: loopback (127/8) and link-local (169.254/16) addresses are
// link-local, the rest global.
func SelectionScope(a netip.Addr) Scope {
	if !a.Is4() {
		return AddrScope(a)
	}
	if a.IsLoopback() || a.IsLinkLocalUnicast() {
		return ScopeLinkLocal
	}
	return ScopeGlobal
}
