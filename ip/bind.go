package ip

import "net/netip"

// Binding is the local address a socket (a TCP listener, a UDP endpoint)
// is bound to, with the families it takes, by the rules of Linux's
// sockets with net.ipv6.bindv6only at its default of 0, which Go's net
// relies on:
//
//   - a specific address takes datagrams to it alone;
//   - 0.0.0.0 takes every IPv4 address of the host (an AF_INET socket);
//   - :: takes every address of the host of either family (an AF_INET6
//     socket, which meets IPv4 peers at IPv4-mapped addresses: the stack
//     names them by their plain IPv4 address instead, as Go's net shows
//     them), unless V6Only (IPV6_V6ONLY, RFC 3493 section 5.3) restricts
//     it to IPv6.
//
// TCP and UDP share it, so that both demultiplex and refuse a second
// binding alike.
type Binding struct {
	Addr   netip.Addr
	V6Only bool // meaningful for :: only
}

// families are a binding's address families, as a set.
type families uint8

const (
	family4 families = 1 << iota
	family6
)

func (b Binding) families() families {
	switch {
	case b.Addr.Is4():
		return family4
	case b.Addr.IsUnspecified() && !b.V6Only:
		return family4 | family6
	}
	return family6
}

func familyOf(a netip.Addr) families {
	if a.Is4() {
		return family4
	}
	return family6
}

// Wildcard reports whether the binding is to an unspecified address.
func (b Binding) Wildcard() bool { return b.Addr.IsUnspecified() }

// Takes reports whether the binding takes a datagram to dst, one of the
// host's addresses: the binding's own address, or any of a family it
// takes when it is a wildcard one.
func (b Binding) Takes(dst netip.Addr) bool {
	if !b.Wildcard() {
		return b.Addr == dst
	}
	return b.families()&familyOf(dst) != 0
}

// Reaches reports whether a socket bound so may send to dst: a specific
// address, or a wildcard one, sends within its families only, as a
// socket of one family does (EINVAL, or EAFNOSUPPORT, otherwise).
func (b Binding) Reaches(dst netip.Addr) bool {
	return b.families()&familyOf(dst) != 0
}

// Conflicts reports whether b and o cannot be bound to the same port at
// once (without SO_REUSEADDR): two bindings conflict when some address
// would be taken by both. So a dual-stack :: conflicts with every binding
// on its port, 0.0.0.0 and a V6Only :: do not conflict with each other,
// and a specific address conflicts with itself and with the wildcards of
// its family.
func (b Binding) Conflicts(o Binding) bool {
	if !b.Wildcard() && !o.Wildcard() {
		return b.Addr == o.Addr
	}
	return b.families()&o.families() != 0
}

// Scoped returns dst with the zone of r's source when dst is a
// link-local address given without one, as a route out of the only
// interface takes it: a transport keys its flows by the zoned addresses
// the network layer delivers with (Header), so it must name the peer
// that way too.
func Scoped(dst netip.Addr, r Route) netip.Addr {
	if dst.Zone() != "" || !dst.IsLinkLocalUnicast() || r.Src.Zone() == "" {
		return dst
	}
	return dst.WithZone(r.Src.Zone())
}
