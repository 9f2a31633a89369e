package ipv4

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/wire"
)

// LinkOutput is how IPv4 reaches an interface's link: ARP over Ethernet.
type LinkOutput interface {
	// Output sends a datagram to a unicast next hop, or to the link's
	// address for 255.255.255.255 and multicast groups.
	Output(nextHop netip.Addr, pkt *buffer.Packet)
	// OutputBroadcast sends a datagram to the link's broadcast address.
	OutputBroadcast(pkt *buffer.Packet)
}

// Interface is an IPv4 interface: a link with addresses.
type Interface struct {
	p    *Protocol
	name string
	mtu  atomic.Int32 // the link's, or lower from the network's configuration (SetLinkMTU)
	link int          // the link's MTU, which SetLinkMTU never exceeds
	out  LinkOutput
	caps link.Capabilities // the link's offloads (offload.go)
	igmp ip.Transport      // the interface's group management (multicast.go)

	forwarding atomic.Bool // forwarding mode (forward.go)
}

// Name returns the interface's name.
func (i *Interface) Name() string { return i.name }

// MTU returns the interface's MTU.
func (i *Interface) MTU() int { return int(i.mtu.Load()) }

// SetLinkMTU sets the interface's MTU to one the network configured (a
// DHCP server's Interface MTU option, RFC 2132 section 5.1), within the
// minimum of 68 (RFC 791) and the link's own MTU, which a larger value
// could not cross; it returns the MTU in force.
func (i *Interface) SetLinkMTU(mtu int) int {
	mtu = min(max(mtu, 68), i.link)
	i.mtu.Store(int32(mtu))
	return mtu
}

// HasAddress reports whether a is assigned to the interface.
func (i *Interface) HasAddress(a netip.Addr) bool {
	for _, ad := range i.p.tables.load().addrs {
		if ad.iface == i && ad.prefix.Addr() == a {
			return true
		}
	}
	return false
}

// LinkLocalPrefix is 169.254/16, IPv4's link-local addresses (RFC 3927),
// which no router forwards.
var LinkLocalPrefix = netip.MustParsePrefix("169.254.0.0/16")

// SourceFor returns the interface's address on dst's subnet, or its first
// address when none is on it, a routable one before a link-local one: a
// router forwards nothing from 169.254/16 (RFC 3927 sections 2.6.1 and
// 2.7), and a host that has both reaches the world from the other.
func (i *Interface) SourceFor(dst netip.Addr) (netip.Addr, bool) {
	var first netip.Addr
	for _, ad := range i.p.tables.load().addrs {
		if ad.iface != i {
			continue
		}
		if ad.prefix.Contains(dst) {
			return ad.prefix.Addr(), true
		}
		if !first.IsValid() || LinkLocalPrefix.Contains(first) && !LinkLocalPrefix.Contains(ad.prefix.Addr()) {
			first = ad.prefix.Addr()
		}
	}
	return first, first.IsValid()
}

// Route is an entry of the routing table (package route, shared with
// IPv6): an on-link subnet, or a route through a gateway on one. Its
// Preference plays no part in IPv4.
type Route = route.Route[*Interface]

type address struct {
	prefix netip.Prefix
	iface  *Interface
}

// Addresses returns the addresses assigned to iface, with their prefixes,
// in the order they were added.
func (p *Protocol) Addresses(iface *Interface) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range p.tables.load().addrs {
		if a.iface == iface {
			out = append(out, a.prefix)
		}
	}
	return out
}

// table is an immutable snapshot of interfaces, addresses and routes: the
// data path reads it without locks; changes copy it.
type table struct {
	ifaces []*Interface
	addrs  []address
	routes route.Table[*Interface]
	groups []group // multicast groups joined (multicast.go)

	// linkLocalOnly are the interfaces whose every address is
	// link-local, in the order they were added: lookup's last resort
	// (RFC 3927 section 2.6.2). Derived from addrs at each update.
	linkLocalOnly []*Interface
}

// findLinkLocalOnly returns the interfaces of t with addresses, all of them
// on 169.254/16.
func (t *table) findLinkLocalOnly() []*Interface {
	var out []*Interface
	for _, i := range t.ifaces {
		has, routable := false, false
		for _, ad := range t.addrs {
			if ad.iface == i {
				has = true
				routable = routable || !LinkLocalPrefix.Contains(ad.prefix.Addr())
			}
		}
		if has && !routable {
			out = append(out, i)
		}
	}
	return out
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
		routes: old.routes.Clone(),
		groups: slices.Clone(old.groups),
	}
	if err := f(n); err != nil {
		return err
	}
	n.linkLocalOnly = n.findLinkLocalOnly()
	t.cur.Store(n)
	return nil
}

// AddOffloadInterface adds an interface of the given MTU whose datagrams
// leave through out, on a link that performs the offloads in caps (none
// for the zero Capabilities): transports may then leave checksums to it and
// send TCP super-segments through it (offload.go).
func (p *Protocol) AddOffloadInterface(name string, mtu int, caps link.Capabilities, out LinkOutput) (*Interface, error) {
	if mtu < 68 {
		return nil, fmt.Errorf("ipv4: interface %s: MTU %d below the minimum of 68 (RFC 791)", name, mtu)
	}
	i := &Interface{p: p, name: name, link: mtu, out: out, caps: caps}
	i.mtu.Store(int32(mtu))
	err := p.tables.update(func(t *table) error {
		for _, o := range t.ifaces {
			if o.name == name {
				return fmt.Errorf("ipv4: interface %s already exists", name)
			}
		}
		t.ifaces = append(t.ifaces, i)
		return nil
	})
	return i, err
}

// Interface returns the named interface.
func (p *Protocol) Interface(name string) (*Interface, bool) {
	for _, i := range p.tables.load().ifaces {
		if i.name == name {
			return i, true
		}
	}
	return nil, false
}

// AddAddress assigns prefix's address to iface and adds the on-link route
// for its subnet.
func (p *Protocol) AddAddress(iface *Interface, prefix netip.Prefix) error {
	a := prefix.Addr()
	if !a.Is4() || !prefix.IsValid() || a.IsUnspecified() || a.IsMulticast() || prefix.Bits() > 32 {
		return fmt.Errorf("ipv4: %v is not a unicast IPv4 address with a prefix", prefix)
	}
	return p.tables.update(func(t *table) error {
		for _, ad := range t.addrs {
			if ad.prefix.Addr() == a {
				return fmt.Errorf("ipv4: address %v already assigned to %s", a, ad.iface.name)
			}
		}
		t.addrs = append(t.addrs, address{prefix, iface})
		t.routes.Add(Route{Dst: prefix, Iface: iface})
		return nil
	})
}

// AddRoute adds r to the routing table. A gateway must be reachable on-link
// through r's interface.
func (p *Protocol) AddRoute(r Route) error {
	if !r.Dst.IsValid() || !r.Dst.Addr().Is4() {
		return fmt.Errorf("ipv4: route destination %v is not an IPv4 prefix", r.Dst)
	}
	return p.tables.update(func(t *table) error {
		if !r.OnLink() && !t.routes.OnLink(r.Gateway, r.Iface) {
			return fmt.Errorf("ipv4: route %v: gateway %v is not on a subnet of %s", r.Dst, r.Gateway, r.Iface.name)
		}
		t.routes.Add(r)
		return nil
	})
}

// RemoveRoute removes the route r names by destination, gateway and
// interface; it reports whether there was one.
func (p *Protocol) RemoveRoute(r Route) bool {
	removed := false
	_ = p.tables.update(func(t *table) error {
		removed = t.routes.Remove(r)
		return nil
	})
	return removed
}

// Routes returns a copy of the routing table, longest prefix first.
func (p *Protocol) Routes() []Route { return p.tables.load().routes.All() }

// ErrNoRoute is returned for a destination no route covers (the kernel's
// ENETUNREACH).
var ErrNoRoute = errors.New("no route to destination")

// Route finds how to reach dst: by longest prefix match, with the source
// address taken from the outgoing interface (RFC 1122 section 3.3.4.3).
// The route's MTU is the interface's, or the path MTU learnt for dst if
// less (pmtu.go); local delivery has no link limit. Its Iface is the
// outgoing *Interface.
func (p *Protocol) Route(dst netip.Addr) (ip.Route, error) {
	t := p.tables.load()
	if t.isLocal(dst) {
		return ip.Route{Src: dst, NextHop: dst, Local: true, MTU: wire.IPv4MaxTotalLen}, nil
	}
	if dst.IsMulticast() {
		return t.multicastRoute(dst, nil)
	}
	if dst == limitedBroadcast {
		// RFC 1122 section 3.3.6: out the first interface with an address.
		for _, ad := range t.addrs {
			return ad.iface.route(ad.prefix.Addr(), dst, true), nil
		}
		return ip.Route{}, ErrNoRoute
	}
	return p.lookup(t, dst, nil)
}

// lookup is Route's longest prefix match, over only's routes when only is
// not nil, passing over a route out of an interface with no address to
// send from. A route through a router gives way to the destination itself
// as the next hop where RFC 3927 section 2.6.2 has it (skipsRouter). When
// no route matches, an interface whose only addresses are link-local takes
// the destination on-link (linkLocal).
func (p *Protocol) lookup(t *table, dst netip.Addr, only *Interface) (ip.Route, error) {
	routes := t.routes.Searched()
	for i := range routes {
		r := &routes[i]
		if !r.Dst.Contains(dst) || only != nil && r.Iface != only {
			continue
		}
		src, ok := r.Iface.SourceFor(dst)
		if !ok {
			continue
		}
		ri := r.Iface.route(src, dst, false)
		if !r.OnLink() {
			ri.NextHop = r.Gateway
			if t.skipsRouter(r, src, dst) {
				ri.NextHop = dst
			}
		} else if t.isSubnetBroadcast(dst, r.Iface) {
			ri.Bcast = true
		}
		p.withPathMTU(&ri, dst)
		return ri, nil
	}
	if ri, ok := t.linkLocal(dst, only); ok {
		p.withPathMTU(&ri, dst)
		return ri, nil
	}
	return ip.Route{}, ErrNoRoute
}

// skipsRouter reports whether a datagram from src to dst, whose route r
// goes through a router, goes to dst directly on r's link instead: RFC
// 3927 section 2.6.2's forwarding rules. From a link-local source, "The
// host MUST NOT send the packet to any router for forwarding" (only an
// interface without a routable address gives one here: SourceFor). To a
// destination on 169.254/16 but its broadcast, from any source, "the
// sender MUST ARP for the destination address and then send its packet
// directly to the destination on the same physical link", "whether the
// interface is configured with a Link-Local or a routable IPv4 address":
// on the link of the route the lookup chose, with several interfaces the
// default route's (section 3 leaves the choice to the host), unless that
// route is more specific than 169.254/16, which an administrator added on
// purpose. A host with no route for the destination has none still.
func (t *table) skipsRouter(r *Route, src, dst netip.Addr) bool {
	if LinkLocalPrefix.Contains(dst) && dst != linkLocalBroadcast && r.Dst.Bits() <= LinkLocalPrefix.Bits() {
		return true
	}
	return len(t.linkLocalOnly) > 0 && LinkLocalPrefix.Contains(src)
}

// linkLocal is the route of last resort of a host with an interface whose
// only addresses are link-local (the first such, or only when it is one):
// every destination a router would forward is taken on-link through it,
// from its link-local address. RFC 3927 section 2.6.2 has a host sending
// from a link-local address "ARP for the destination address and then send
// its packet ... directly to its destination on the same physical link", so
// that a host with no routable address still reaches a neighbour that has
// one, as Apple's stack and avahi-autoipd's default route through the device
// do. A host with a default route never comes here.
func (t *table) linkLocal(dst netip.Addr, only *Interface) (ip.Route, bool) {
	if !foreignUnicast(dst) {
		return ip.Route{}, false
	}
	for _, i := range t.linkLocalOnly {
		if only != nil && i != only {
			continue
		}
		src, _ := i.SourceFor(dst) // it has an address: findLinkLocalOnly
		return i.route(src, dst, false), true
	}
	return ip.Route{}, false
}

// withPathMTU lowers ri's MTU to the path MTU learnt for dst (pmtu.go).
func (p *Protocol) withPathMTU(ri *ip.Route, dst netip.Addr) {
	if e, ok := p.pmtu.lookup(dst, p.env.Clock); ok {
		ri.MTU, ri.PMTULocked = min(e.mtu, ri.MTU), e.locked
	}
}

// RouteVia finds how to reach dst out the named interface only, as a
// socket bound to a device (Linux's SO_BINDTODEVICE) sends: by the
// interface's routes, or straight onto its link for the limited broadcast.
// An interface with no address yet sends a limited broadcast from
// 0.0.0.0, the source RFC 1122 section 3.2.1.3 (a) allows a host that is
// still learning its address (a DHCP client, RFC 2131 section 4.1).
func (p *Protocol) RouteVia(dst netip.Addr, ifaceName string) (ip.Route, error) {
	i, ok := p.Interface(ifaceName)
	if !ok {
		return ip.Route{}, fmt.Errorf("ipv4: no interface %s: %w", ifaceName, ErrNoRoute)
	}
	if dst == limitedBroadcast {
		src, ok := i.SourceFor(dst)
		if !ok {
			src = netip.IPv4Unspecified()
		}
		return i.route(src, dst, true), nil
	}
	ri, err := p.lookup(p.tables.load(), dst, i)
	if err != nil {
		return ip.Route{}, fmt.Errorf("ipv4: %v via %s: %w", dst, ifaceName, err)
	}
	return ri, nil
}

// route is a route out of i from src to nextHop.
func (i *Interface) route(src, nextHop netip.Addr, bcast bool) ip.Route {
	return ip.Route{Src: src, NextHop: nextHop, Bcast: bcast, MTU: i.MTU(), Offloads: i.caps, Iface: i}
}

// routeIface is the interface a route leaves through, nil for local
// delivery.
func routeIface(ri *ip.Route) *Interface {
	i, _ := ri.Iface.(*Interface)
	return i
}

var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// linkLocalBroadcast is 169.254/16's broadcast address, which RFC 3927
// section 2.6.2 leaves out of the rule that sends the prefix on-link.
var linkLocalBroadcast = netip.AddrFrom4([4]byte{169, 254, 255, 255})

// isLocal reports whether a is one of our addresses.
func (t *table) isLocal(a netip.Addr) bool {
	for _, ad := range t.addrs {
		if ad.prefix.Addr() == a {
			return true
		}
	}
	return false
}

// isBroadcast reports whether a is the limited broadcast or the directed
// broadcast of one of our subnets.
func (t *table) isBroadcast(a netip.Addr) bool {
	if a == limitedBroadcast {
		return true
	}
	for _, ad := range t.addrs {
		if isDirectedBroadcast(a, ad.prefix) {
			return true
		}
	}
	return false
}

func (t *table) isSubnetBroadcast(a netip.Addr, i *Interface) bool {
	for _, ad := range t.addrs {
		if ad.iface == i && isDirectedBroadcast(a, ad.prefix) {
			return true
		}
	}
	return false
}

// isDirectedBroadcast reports whether a is the all-ones host of prefix
// (subnets of /31 and /32 have none: RFC 3021).
func isDirectedBroadcast(a netip.Addr, prefix netip.Prefix) bool {
	if prefix.Bits() >= 31 || !prefix.Contains(a) {
		return false
	}
	hostMask := uint32(1)<<(32-prefix.Bits()) - 1
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	return v&hostMask == hostMask
}

// acceptsDst reports whether a host should take a datagram sent to dst: one
// of our addresses, a broadcast (RFC 1122 section 3.3.6), or a multicast
// group the interface it came in on, in, is a member of (RFC 1112 section
// 7.2; any interface for in nil: the host's own datagrams, and sockets
// asking whether an address is the host's).
func (t *table) acceptsDst(dst netip.Addr, in *Interface) bool {
	if dst.IsMulticast() {
		return t.member(dst, in)
	}
	return t.isLocal(dst) || t.isBroadcast(dst)
}

// IsLocal reports whether a is one of the host's addresses.
func (p *Protocol) IsLocal(a netip.Addr) bool { return p.tables.load().isLocal(a) }

// IsBroadcast reports whether a is a broadcast address for this host.
func (p *Protocol) IsBroadcast(a netip.Addr) bool { return p.tables.load().isBroadcast(a) }
