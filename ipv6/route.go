package ipv6

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/wire"
)

// Interfaces, addresses, multicast groups and routes: an immutable table
// behind an atomic pointer, as IPv4's, which the data path reads without a
// lock and every change copies. Neighbour discovery, DAD and SLAAC drive it
// through AddAddress, SetAddressState, AddRoute and their removals.

// LinkOutput is how IPv6 reaches an interface's link: neighbour discovery
// over Ethernet.
type LinkOutput interface {
	// Output sends a datagram to nextHop on the link: a unicast
	// neighbour, whose link-layer address neighbour discovery resolves
	// (RFC 4861 section 7.2), or a multicast group, whose link-layer
	// address is mapped from it (RFC 2464 section 7). It takes ownership
	// of pkt and must not block.
	Output(nextHop netip.Addr, pkt *buffer.Packet)
}

// Interface is an IPv6 interface: a link with addresses and groups.
type Interface struct {
	p    *Protocol
	name string
	mtu  atomic.Int32 // the link's, or lower from a router advertisement
	out  LinkOutput
	caps link.Capabilities
	nd   NeighborDiscovery // set before the link delivers; read by the dealer

	forwarding atomic.Bool // forwarding mode (forward.go)
}

// NeighborDiscovery takes the neighbour discovery and MLD messages that
// arrive on an interface (package ndp). Handle runs in the IPv6 dealer's
// goroutine and owns pkt; reassembled says the datagram came in fragments.
type NeighborDiscovery interface {
	Handle(pkt *buffer.Packet, h ip.Header, reassembled bool)
}

// SetNeighborDiscovery gives the interface the neighbour discovery of its
// link. It is set before the link delivers its first datagram.
func (i *Interface) SetNeighborDiscovery(nd NeighborDiscovery) { i.nd = nd }

// Name returns the interface's name, which is the zone of its scoped
// addresses (RFC 4007 section 11).
func (i *Interface) Name() string { return i.name }

// MTU returns the interface's link MTU.
func (i *Interface) MTU() int { return int(i.mtu.Load()) }

// SetLinkMTU sets the interface's MTU to an advertised one (RFC 4861
// section 6.3.4: a Router Advertisement's MTU option, which ndp checks
// against the link's own MTU and IPv6's minimum).
func (i *Interface) SetLinkMTU(mtu int) { i.mtu.Store(int32(mtu)) }

// Deliver hands a batch the interface's link received to the IPv6 dealer,
// marked as the interface's: link-local addresses and multicast groups are
// an interface's own, so the dealer must know where a datagram came in. It
// is the NIC's handler for EtherType 0x86DD, runs in the NIC's receive
// goroutine, never blocks, and takes ownership of b.
func (i *Interface) Deliver(b *buffer.Batch) {
	b.From = i
	i.p.in.Deliver(b)
}

// AddrState is where an address is in its life (RFC 4862 section 5.5.4).
type AddrState uint8

// The states.
const (
	// Tentative: duplicate address detection has not finished; the
	// address is neither a source nor a destination, though its
	// solicited-node group is joined so that DAD hears the others (RFC
	// 4862 sections 5.4 and 5.4.2).
	Tentative AddrState = iota
	// Preferred: in use.
	Preferred
	// Deprecated: valid, but its preferred lifetime has ended: still a
	// destination, and a source only where no preferred address fits
	// (RFC 4862 section 5.5.4, RFC 6724 rule 3).
	Deprecated
	// Optimistic: duplicate address detection has not finished, but
	// the address is used meanwhile, as a deprecated one is (RFC 4429
	// section 2.1: "available for use but should not be used if another
	// suitable address is available").
	Optimistic
)

var addrStateText = [...]string{"tentative", "preferred", "deprecated", "optimistic"}

// avoided reports whether source selection takes an address in the state
// only where no other fits (RFC 6724 rule 3, RFC 4429 section 2.1).
func (s AddrState) avoided() bool { return s == Deprecated || s == Optimistic }

// String names the state.
func (s AddrState) String() string {
	if int(s) < len(addrStateText) {
		return addrStateText[s]
	}
	return fmt.Sprintf("AddrState(%d)", uint8(s))
}

// Address is an address assigned to an interface.
type Address struct {
	Prefix netip.Prefix // the address and the length of its on-link prefix
	Iface  *Interface
	State  AddrState
	// Temporary marks a temporary address (RFC 8981), which source
	// selection prefers (RFC 6724 rule 7).
	Temporary bool
	// scope is AddrScope of the address, kept with it because source
	// selection asks for it of every candidate on every Route: for each
	// echo reply and unconnected UDP datagram.
	scope Scope
}

// Route is an entry of the routing table (package route, shared with
// IPv4): an on-link prefix, or a route through a router, usually by its
// link-local address, ::/0 for a default router; among routes to one
// prefix the router of the highest preference is chosen (RFC 4191).
type Route = route.Route[*Interface]

// group is a multicast group joined on an interface.
type group struct {
	addr  netip.Addr
	iface *Interface
}

// table is an immutable snapshot of interfaces, addresses, groups and
// routes: the data path reads it without locks; changes copy it.
type table struct {
	ifaces []*Interface
	addrs  []Address
	groups []group
	routes route.Table[*Interface]
}

type tables struct {
	mu  sync.Mutex // serialises writers
	cur atomic.Pointer[table]
}

func (t *tables) init()        { t.cur.Store(&table{}) }
func (t *tables) load() *table { return t.cur.Load() }
func (t *tables) update(f func(*table) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.cur.Load()
	n := &table{
		ifaces: slices.Clone(old.ifaces),
		addrs:  slices.Clone(old.addrs),
		groups: slices.Clone(old.groups),
		routes: old.routes.Clone(),
	}
	if err := f(n); err != nil {
		return err
	}
	t.cur.Store(n)
	return nil
}

// AddInterface adds an interface of the given link MTU whose datagrams
// leave through out, on a link that performs the offloads in caps (the
// zero Capabilities for none).
func (p *Protocol) AddInterface(name string, mtu int, caps link.Capabilities, out LinkOutput) (*Interface, error) {
	if mtu < wire.IPv6MinMTU {
		return nil, fmt.Errorf("ipv6: interface %s: MTU %d below the minimum of %d (RFC 8200 section 5)", name, mtu, wire.IPv6MinMTU)
	}
	i := &Interface{p: p, name: name, out: out, caps: caps}
	i.mtu.Store(int32(mtu))
	err := p.tables.update(func(t *table) error {
		if t.iface(name) != nil {
			return fmt.Errorf("ipv6: interface %s already exists", name)
		}
		t.ifaces = append(t.ifaces, i)
		return nil
	})
	return i, err
}

// Interface returns the named interface: the zone of a scoped address.
func (p *Protocol) Interface(name string) (*Interface, bool) {
	i := p.tables.load().iface(name)
	return i, i != nil
}

func (t *table) iface(name string) *Interface {
	for _, i := range t.ifaces {
		if i.name == name {
			return i
		}
	}
	return nil
}

// AddAddress assigns prefix's address to iface in the given state and, for
// a prefix shorter than /128 outside fe80::/10 (link-local destinations go
// by their zone), adds the on-link route for it. An address that DAD must
// check is added Tentative and made Preferred by SetAddressState.
func (p *Protocol) AddAddress(iface *Interface, prefix netip.Prefix, state AddrState) error {
	return p.addAddress(Address{Prefix: prefix, Iface: iface, State: state})
}

// AddTemporary is AddAddress for a temporary address (RFC 8981), which
// source selection prefers to the interface's public ones.
func (p *Protocol) AddTemporary(iface *Interface, prefix netip.Prefix, state AddrState) error {
	return p.addAddress(Address{Prefix: prefix, Iface: iface, State: state, Temporary: true})
}

func (p *Protocol) addAddress(ad Address) error {
	prefix, iface := ad.Prefix, ad.Iface
	a := prefix.Addr()
	if !prefix.IsValid() || !a.Is6() || a.Is4In6() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
		return fmt.Errorf("ipv6: %v is not a unicast IPv6 address with a prefix", prefix)
	}
	return p.tables.update(func(t *table) error {
		if _, ok := t.local(a); ok {
			return fmt.Errorf("ipv6: address %v already assigned", a)
		}
		ad.scope = AddrScope(a)
		t.addrs = append(t.addrs, ad)
		if prefix.Bits() < 128 && !a.IsLinkLocalUnicast() {
			t.routes.Add(Route{Dst: prefix, Iface: iface})
		}
		return nil
	})
}

// SetAddressState moves address a to state: Preferred when DAD succeeds,
// Deprecated when its preferred lifetime ends.
func (p *Protocol) SetAddressState(a netip.Addr, state AddrState) error {
	return p.tables.update(func(t *table) error {
		for i := range t.addrs {
			if t.addrs[i].Prefix.Addr() == a {
				t.addrs[i].State = state
				return nil
			}
		}
		return fmt.Errorf("ipv6: address %v not assigned", a)
	})
}

// RemoveAddress unassigns a (a duplicate found by DAD, a lifetime ended),
// with the on-link route added with it unless another address of the
// interface is on the same prefix. Routes through gateways stay, where
// IPv4 takes those the prefix alone reached: neighbour discovery resolves
// a neighbour on the link whatever prefixes the host holds (RFC 4861
// section 5.2 asks the prefix list only whether a destination is on-link),
// and Linux's IPv6 keeps them too.
func (p *Protocol) RemoveAddress(a netip.Addr) error {
	return p.tables.update(func(t *table) error {
		i := slices.IndexFunc(t.addrs, func(ad Address) bool { return ad.Prefix.Addr() == a })
		if i < 0 {
			return fmt.Errorf("ipv6: address %v not assigned", a)
		}
		gone := t.addrs[i]
		t.addrs = slices.Delete(t.addrs, i, i+1)
		on := gone.Prefix.Masked()
		for _, ad := range t.addrs {
			if ad.Iface == gone.Iface && ad.Prefix.Masked() == on {
				return nil
			}
		}
		t.routes.Remove(Route{Dst: on, Iface: gone.Iface})
		return nil
	})
}

// Addresses returns a copy of the assigned addresses.
func (p *Protocol) Addresses() []Address { return slices.Clone(p.tables.load().addrs) }

// AddressState returns a's state, and false when a is not assigned.
func (p *Protocol) AddressState(a netip.Addr) (AddrState, bool) {
	ad, ok := p.tables.load().local(a.WithZone(""))
	return ad.State, ok
}

// JoinGroup joins a multicast group on iface, so that datagrams to it are
// taken. The all-nodes group and the solicited-node groups of the
// interface's addresses are joined without asking (RFC 4291 section 2.8).
func (p *Protocol) JoinGroup(iface *Interface, g netip.Addr) error {
	if !g.Is6() || !g.IsMulticast() {
		return fmt.Errorf("ipv6: %v is not an IPv6 multicast group", g)
	}
	g = g.WithZone("")
	return p.tables.update(func(t *table) error {
		if !slices.Contains(t.groups, group{g, iface}) {
			t.groups = append(t.groups, group{g, iface})
		}
		return nil
	})
}

// MulticastRoute is the route to group g out of the interface named
// ifname (IPV6_MULTICAST_IF), or as Route picks it for an empty name: the
// name is the zone Route takes.
func (p *Protocol) MulticastRoute(g netip.Addr, ifname string) (ip.Route, error) {
	if !g.Is6() || !g.IsMulticast() {
		return ip.Route{}, fmt.Errorf("ipv6: %v is not an IPv6 multicast group", g)
	}
	if ifname != "" {
		g = g.WithZone(ifname)
	}
	return p.Route(g)
}

// LeaveGroup leaves a group joined by JoinGroup.
func (p *Protocol) LeaveGroup(iface *Interface, g netip.Addr) {
	g = g.WithZone("")
	_ = p.tables.update(func(t *table) error {
		t.groups = slices.DeleteFunc(t.groups, func(m group) bool { return m == group{g, iface} })
		return nil
	})
}

// Groups returns the groups iface is a member of, those joined without
// asking first: what MLD reports (RFC 3810), except all-nodes, which it
// never reports (section 6).
func (p *Protocol) Groups(iface *Interface) []netip.Addr {
	t := p.tables.load()
	gs := []netip.Addr{AllNodes}
	add := func(g netip.Addr) {
		if !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	for _, ad := range t.addrs {
		if ad.Iface == iface {
			add(SolicitedNode(ad.Prefix.Addr()))
		}
	}
	for _, m := range t.groups {
		if m.iface == iface {
			add(m.addr)
		}
	}
	return gs
}

// AddRoute adds r to the routing table: an on-link prefix, or a route
// through a gateway that is link-local (as routers advertise themselves,
// RFC 4861 section 4.2) or on an on-link prefix of r's interface.
func (p *Protocol) AddRoute(r Route) error {
	if !r.Dst.IsValid() || !r.Dst.Addr().Is6() || r.Iface == nil {
		return fmt.Errorf("ipv6: route to %v: not an IPv6 prefix with an interface", r.Dst)
	}
	r.Gateway = r.Gateway.WithZone("")
	return p.tables.update(func(t *table) error {
		if g := r.Gateway; g.IsValid() && !g.IsLinkLocalUnicast() && !t.routes.OnLink(g, r.Iface) {
			return fmt.Errorf("ipv6: route %v: gateway %v is neither link-local nor on a prefix of %s", r.Dst, g, r.Iface.name)
		}
		// The same route of another preference is replaced: a router
		// may change its preference in any advertisement.
		t.routes.Add(r)
		return nil
	})
}

// RemoveRoute removes the route to r.Dst through r.Gateway on r.Iface,
// whatever its preference (a router lifetime ended, RFC 4861 section
// 6.3.5), and reports whether there was one.
func (p *Protocol) RemoveRoute(r Route) bool {
	r.Gateway = r.Gateway.WithZone("")
	removed := false
	_ = p.tables.update(func(t *table) error {
		removed = t.routes.Remove(r)
		return nil
	})
	return removed
}

// TakeRedirect puts r, the host route a Redirect that neighbour discovery
// validated names (RFC 4861 section 8.3: the table is the destination
// cache), in the table for route.RedirectLifetime after the last redirect
// for its destination, route.MaxRedirects at most, as IPv4's Redirects.
func (p *Protocol) TakeRedirect(r Route) error { return p.redirects.Take(r) }

// Routes returns a copy of the routing table, in the order it is searched.
func (p *Protocol) Routes() []Route { return p.tables.load().routes.All() }

// Errors of a route lookup, both wrapping the kernel's errno for them.
var (
	// ErrNoRoute is returned for a destination no route covers.
	ErrNoRoute = fmt.Errorf("ipv6: no route to destination: %w", syscall.ENETUNREACH)
	// ErrZoneNeeded is returned for a link-local or link-scoped
	// multicast destination without a zone, on a host with more than
	// one interface (RFC 4007 section 6: the address alone does not say
	// which link), or with a zone that names no interface.
	ErrZoneNeeded = fmt.Errorf("ipv6: link-scoped destination needs the zone of an interface: %w", syscall.EINVAL)
)

// A route lookup's result is an ip.Route, as IPv4's: Src is the source
// address to use (source.go), with the zone of the outgoing interface when
// it is link-scoped, so that a transport's 4-tuple names it as the dealer
// names the datagrams that come back (ip.Header); it is invalid when the
// host has no address to send from there, and Send then fails unless the
// sender names one, as DAD names :: (RFC 4862 section 5.4.2). NextHop is
// the router, or the destination itself on-link, without a zone; MTU is
// the interface's, or the path MTU learnt for the destination if less
// (pmtu.go), and local delivery has no link limit; Iface is the outgoing
// *Interface, nil for a local destination; Bcast and PMTULocked are never
// set: IPv6 has no broadcast, and its routers never fragment.

// localMTU is a local route's MTU: the largest datagram without a jumbo
// payload (RFC 2675), since no link limits it.
const localMTU = wire.IPv6HeaderLen + wire.IPv6MaxPayloadLen

// routeIface is the interface a route leaves through, nil for local
// delivery.
func routeIface(ri ip.Route) *Interface {
	i, _ := ri.Iface.(*Interface)
	return i
}

// route is a route out of i to nextHop from src, which has no source when
// src is nil.
func (i *Interface) route(src *Address, nextHop netip.Addr, pmtu int) ip.Route {
	mtu := i.MTU()
	if pmtu > 0 && pmtu < mtu {
		mtu = pmtu
	}
	r := ip.Route{NextHop: nextHop, MTU: mtu, Offloads: i.caps, Iface: i}
	if src != nil {
		r.Src = src.Prefix.Addr()
		if src.scope.linkScoped() {
			r.Src = r.Src.WithZone(i.name)
		}
	}
	return r
}

// Route finds how to reach dst. A link-local destination, or a multicast
// group of link or interface scope, goes out of the interface its zone
// names (dst.Zone(), RFC 4007 section 11), or the only interface when
// there is one; other multicast out of the zone's interface or the first;
// the rest by longest prefix match, among equal prefixes the router of
// highest preference (RFC 4191), restricted to the zone's interface when
// dst has one. The source is chosen by RFC 6724's rules (source.go).
func (p *Protocol) Route(dst netip.Addr) (ip.Route, error) {
	t := p.tables.load()
	a := dst.WithZone("")
	if !a.Is6() || a.Is4In6() {
		return ip.Route{}, ErrNoRoute
	}
	var zi *Interface
	if z := dst.Zone(); z != "" {
		if zi = t.iface(z); zi == nil {
			return ip.Route{}, ErrZoneNeeded
		}
	}
	if a == loopbackAddr {
		return ip.Route{Src: a, NextHop: a, Local: true, MTU: localMTU}, nil
	}
	scope := AddrScope(a)
	onLink := scope.linkScoped()
	if ad, ok := t.local(a); ok && ad.State != Tentative && (zi == nil || ad.Iface == zi || !onLink) {
		return ip.Route{Src: zoned(a, ad.Iface), NextHop: a, Local: true, MTU: localMTU}, nil
	}
	var out *Interface
	nextHop := a
	switch {
	case onLink:
		if zi == nil {
			if len(t.ifaces) != 1 {
				return ip.Route{}, ErrZoneNeeded
			}
			zi = t.ifaces[0]
		}
		out = zi
	case a.IsMulticast():
		if zi == nil && len(t.ifaces) > 0 {
			zi = t.ifaces[0]
		}
		if zi == nil {
			return ip.Route{}, ErrNoRoute
		}
		out = zi
	default:
		r, ok := t.routes.Lookup(a, zi)
		if !ok {
			return ip.Route{}, ErrNoRoute
		}
		out = r.Iface
		if !r.OnLink() {
			nextHop = r.Gateway
		}
	}
	pmtu := 0
	if e, ok := p.pmtu.lookup(a, p.env.Clock); ok {
		pmtu = e.mtu
	}
	return out.route(t.selectSource(a, scope, out), nextHop, pmtu), nil
}

// linkScoped reports whether an address of scope s means something only
// on one link: a link-local unicast address or a multicast group of
// interface- or link-local scope (RFC 4007 section 6). The loopback
// address is of link-local scope too, and callers set it apart.
func (s Scope) linkScoped() bool { return s == ScopeLinkLocal || s == ScopeInterfaceLocal }

// local returns the assigned address a, in any state.
func (t *table) local(a netip.Addr) (Address, bool) {
	for _, ad := range t.addrs {
		if ad.Prefix.Addr() == a {
			return ad, true
		}
	}
	return Address{}, false
}

// ifaceOf returns the interface a is assigned to, nil when it is not.
func (t *table) ifaceOf(a netip.Addr) *Interface {
	ad, _ := t.local(a)
	return ad.Iface
}

// acceptance is whether a host takes a datagram to an address.
type acceptance uint8

const (
	acceptOK acceptance = iota
	acceptNotOurs
	acceptNoGroup
)

// accepts says whether the host takes a datagram to dst that came in on in
// (nil: sent by the host to itself, fromWire false): one of its addresses
// that is not tentative (RFC 4862 section 5.4), a link-local one only on
// its own interface; ::1 only from the host (RFC 4291 section 2.5.3); or
// a group the interface is a member of: all-nodes, the solicited-node
// group of any of its addresses, tentative ones included (RFC 4862
// section 5.4.2, so that DAD hears the others), or one joined.
func (t *table) accepts(dst netip.Addr, in *Interface, fromWire bool) acceptance {
	if dst.IsMulticast() {
		if t.member(dst, in, fromWire) {
			return acceptOK
		}
		return acceptNoGroup
	}
	if dst == loopbackAddr {
		if fromWire {
			return acceptNotOurs
		}
		return acceptOK
	}
	ad, ok := t.local(dst)
	if !ok || ad.State == Tentative || (fromWire && dst.IsLinkLocalUnicast() && ad.Iface != in) {
		return acceptNotOurs
	}
	return acceptOK
}

// member reports whether in (any interface, for the host's own datagrams)
// is a member of group g. Interface-local groups never come from a link
// (RFC 4291 section 2.7).
func (t *table) member(g netip.Addr, in *Interface, fromWire bool) bool {
	if AddrScope(g) == ScopeInterfaceLocal && fromWire {
		return false
	}
	on := func(i *Interface) bool { return !fromWire || i == in }
	if g == AllNodes || g == interfaceLocalAllNodes {
		return true
	}
	if IsSolicitedNode(g) {
		for _, ad := range t.addrs {
			if on(ad.Iface) && SolicitedNode(ad.Prefix.Addr()) == g {
				return true
			}
		}
	}
	for _, m := range t.groups {
		if on(m.iface) && m.addr == g {
			return true
		}
	}
	return false
}

// interfaceLocalAllNodes is ff01::1 (RFC 4291 section 2.7.1).
var interfaceLocalAllNodes = netip.AddrFrom16([16]byte{0xff, 0x01, 15: 0x01})

// IsLocal reports whether a is one of the host's addresses, tentative
// ones excepted.
func (p *Protocol) IsLocal(a netip.Addr) bool {
	a = a.WithZone("")
	ad, ok := p.tables.load().local(a)
	return a == loopbackAddr || (ok && ad.State != Tentative)
}

// ErrNoSource is returned by Send when there is no source address: the
// host has none fit for the destination, or the sender named one that is
// not the host's. It wraps syscall.EADDRNOTAVAIL, as the kernel's bind does.
var ErrNoSource = fmt.Errorf("ipv6: no source address: %w", syscall.EADDRNOTAVAIL)

// IsNoRoute reports whether err says a destination has no route.
func IsNoRoute(err error) bool { return errors.Is(err, syscall.ENETUNREACH) }

// IsHostDst reports whether a datagram to a is for the host itself: one of
// its addresses or a group, rather than a foreign address a forwarding
// interface took (forward.go). Transports use it to keep sockets bound to
// the wildcard address from answering for foreign addresses.
func (p *Protocol) IsHostDst(a netip.Addr) bool { return p.IsLocal(a) || a.IsMulticast() }

// IsBroadcast is always false: IPv6 has no broadcast (RFC 4291 section
// 2), and multicast stands in for it.
func (p *Protocol) IsBroadcast(netip.Addr) bool { return false }

// HeaderLen is the length of the fixed IPv6 header (RFC 8200 section 3):
// what a route's MTU loses before a transport's segment, when no
// extension header goes in front of it.
func (p *Protocol) HeaderLen() int { return wire.IPv6HeaderLen }

var _ ip.Network = (*Protocol)(nil)
