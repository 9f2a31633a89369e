package ipv6

import (
	"math/bits"
	"net/netip"
)

// Source address selection (RFC 6724 section 5). The candidates are the
// host's addresses that are not tentative (RFC 4862 section 5.4), of any
// interface (the weak host model, as IPv4's), except that an address
// scoped to a link is a candidate only on its own interface (RFC 4007
// section 9), and a destination scoped to a link takes only the outgoing
// interface's addresses (as Linux does, and section 4 recommends: another
// link's address may not be reachable from there). Of the rules, these
// apply to a host with one address per prefix:
//
//	rule 1, prefer the same address (the destination is the host's own:
//	        Route has answered Local before it gets here);
//	rule 2, prefer the appropriate scope;
//	rule 3, avoid deprecated addresses (and optimistic ones, RFC 4429
//	        section 2.1);
//	rule 5, prefer the outgoing interface;
//	rule 6, prefer matching label (the default policy table, policy.go:
//	        a unique local destination from a unique local source);
//	rule 7, prefer temporary addresses (RFC 8981), as Linux's
//	        use_tempaddr=2 does: a host that forms them wants them used;
//	rule 8, use the longest matching prefix.
//
// Rule 4 (home addresses, Mobile IPv6) has nothing to choose between: the
// stack has no such addresses.

// selectSource returns the best source for dst, of scope scD, out of
// iface, or nil when there is no candidate. A table is never changed in
// place (tables.update changes a copy), so the address stays as it is.
func (t *table) selectSource(dst netip.Addr, scD Scope, iface *Interface) *Address {
	var best *Address
	onlyOut := scD.linkScoped()
	for i := range t.addrs {
		c := &t.addrs[i]
		if c.State == Tentative || ((onlyOut || c.scope.linkScoped()) && c.Iface != iface) {
			continue
		}
		if best == nil || better(c, best, dst, scD, iface) {
			best = c
		}
	}
	return best
}

// better reports whether a is a better source than b for dst, of scope
// scD, out of iface, by the rules above in order; on a tie the earlier
// address, b, stays.
func better(a, b *Address, dst netip.Addr, scD Scope, iface *Interface) bool {
	sa, sb := a.Prefix.Addr(), b.Prefix.Addr()
	// Rule 1.
	if sa == dst || sb == dst {
		return sa == dst
	}
	// Rule 2: the smallest scope that reaches the destination.
	scA, scB := a.scope, b.scope
	if scA < scB {
		return scA >= scD
	}
	if scB < scA {
		return scB < scD
	}
	// Rule 3.
	if a.State.avoided() != b.State.avoided() {
		return b.State.avoided()
	}
	// Rule 5.
	if (a.Iface == iface) != (b.Iface == iface) {
		return a.Iface == iface
	}
	// Rule 6.
	if ld := Label(dst); (Label(sa) == ld) != (Label(sb) == ld) {
		return Label(sa) == ld
	}
	// Rule 7.
	if a.Temporary != b.Temporary {
		return a.Temporary
	}
	// Rule 8.
	return commonPrefixLen(a, dst) > commonPrefixLen(b, dst)
}

// commonPrefixLen is RFC 6724 section 2.2's CommonPrefixLen(S, D): the
// bits S and D share, counted no further than S's prefix, since the
// interface identifier says nothing about where D is.
func commonPrefixLen(s *Address, d netip.Addr) int {
	return CommonPrefixLen(s.Prefix.Addr(), d, s.Prefix.Bits())
}

// CommonPrefixLen returns how many leading bits a and b share, at most
// limit.
func CommonPrefixLen(a, b netip.Addr, limit int) int {
	x, y := a.As16(), b.As16()
	n := 0
	for i := range x {
		if x[i] != y[i] {
			n += bits.LeadingZeros8(x[i] ^ y[i])
			break
		}
		n += 8
	}
	return min(n, limit)
}
