package ipv4

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// Multicast, the host's part (RFC 1112 section 7, RFC 1122 section 3.3.7):
// the groups each interface is a member of, which decide the multicast
// datagrams taken; the interface a multicast datagram leaves through; and
// the IGMP messages an interface's group management (package igmp) sends
// and receives. The IPv4 layer keeps membership as a set: IGMP's reports
// and the counting of sockets that share a group are its callers'.

// AllSystems is 224.0.0.1, the group every host is a member of on every
// interface (RFC 1112 section 4).
var AllSystems = netip.AddrFrom4([4]byte{224, 0, 0, 1})

// group is a membership: a group joined on an interface.
type group struct {
	addr  netip.Addr
	iface *Interface
}

// JoinGroup makes iface a member of group g, so that datagrams to g that
// come in on it are taken (RFC 1112 section 7.2, JoinHostGroup).
// All-systems needs no join.
func (p *Protocol) JoinGroup(iface *Interface, g netip.Addr) error {
	if !g.Is4() || !g.IsMulticast() {
		return fmt.Errorf("ipv4: %v is not an IPv4 multicast group", g)
	}
	return p.tables.update(func(t *table) error {
		if !slices.Contains(t.groups, group{g, iface}) {
			t.groups = append(t.groups, group{g, iface})
		}
		return nil
	})
}

// LeaveGroup ends a membership JoinGroup began (LeaveHostGroup).
func (p *Protocol) LeaveGroup(iface *Interface, g netip.Addr) {
	_ = p.tables.update(func(t *table) error {
		t.groups = slices.DeleteFunc(t.groups, func(m group) bool { return m == group{g, iface} })
		return nil
	})
}

// member reports whether in (any interface, for nil) is a member of g.
func (t *table) member(g netip.Addr, in *Interface) bool {
	if g == AllSystems {
		return true
	}
	for _, m := range t.groups {
		if m.addr == g && (in == nil || m.iface == in) {
			return true
		}
	}
	return false
}

// SetGroupManagement gives the interface its IGMP: the IGMP messages that
// come in on it are handed to t, in the dealer's goroutine. It is called
// before the interface's link starts delivering.
func (i *Interface) SetGroupManagement(t ip.Transport) { i.igmp = t }

// handleIGMP hands an IGMP message that came in on in to in's group
// management.
func (p *Protocol) handleIGMP(pk *buffer.Packet, h wire.IPv4, in *Interface) {
	if in.igmp == nil {
		p.Stats.InUnknownProtos.Inc()
		pk.Release()
		return
	}
	p.Stats.InDelivers.Inc()
	in.igmp.HandleIP(pk, ip.Header{Src: h.Src(), Dst: h.Dst(), TOS: h.TOS(), TTL: h.TTL(), Off: h.HeaderLen()})
}

// SendIGMP sends an IGMP message to dst out of the interface, whatever the
// routes say: with TTL 1 and the Router Alert option (RFC 3376 section 4,
// RFC 2236 section 2), from the interface's address for dst, or from
// 0.0.0.0 while it has none (RFC 3376 section 4.2.13). It is package
// igmp's Output, and takes ownership of pkt.
func (i *Interface) SendIGMP(dst netip.Addr, pkt *buffer.Packet) {
	src, ok := i.SourceFor(dst)
	if !ok {
		src = netip.IPv4Unspecified()
	}
	_ = i.p.SendRoute(pkt, ip.SendParams{Src: src, Dst: dst, Proto: wire.ProtoIGMP, TTL: 1, RouterAlert: true}, i.route(src, dst, false))
}

// ErrNoMulticastInterface is returned for a multicast destination when no
// interface has an address to send from (the kernel's ENETUNREACH).
var ErrNoMulticastInterface = errors.New("ipv4: no interface with an address for multicast")

// multicastRoute is the route to group g out of via, or when via is nil
// out of the interface of the route that covers g (a route to
// 224.0.0.0/4, or the default route: as Linux picks it), else out of the
// first interface with an address. The next hop is the group itself,
// which the link maps to its own multicast address (RFC 1112 section 6.4).
func (t *table) multicastRoute(g netip.Addr, via *Interface) (ip.Route, error) {
	if via == nil {
		if r, ok := t.routes.Lookup(g, nil); ok {
			via = r.Iface
		}
	}
	if via == nil && len(t.addrs) > 0 {
		via = t.addrs[0].iface
	}
	if via == nil {
		return ip.Route{}, ErrNoMulticastInterface
	}
	src, ok := via.SourceFor(g)
	if !ok {
		return ip.Route{}, fmt.Errorf("ipv4: %s has no address to send to %v from: %w", via.name, g, ErrNoRoute)
	}
	return via.route(src, g, false), nil
}

// MulticastRoute is the route to group g out of the interface named
// ifname (IP_MULTICAST_IF), or as Route picks it for an empty name.
func (p *Protocol) MulticastRoute(g netip.Addr, ifname string) (ip.Route, error) {
	if !g.Is4() || !g.IsMulticast() {
		return ip.Route{}, fmt.Errorf("ipv4: %v is not an IPv4 multicast group", g)
	}
	t := p.tables.load()
	if ifname == "" {
		return t.multicastRoute(g, nil)
	}
	for _, i := range t.ifaces {
		if i.name == ifname {
			return t.multicastRoute(g, i)
		}
	}
	return ip.Route{}, fmt.Errorf("ipv4: no interface %s: %w", ifname, ErrNoRoute)
}

// loopMulticast hands a copy of a multicast datagram the host sends back
// to the host's own input when the interface it leaves through is a
// member of the group: what IP_MULTICAST_LOOP asks (RFC 1112 section
// 6.1: "a copy of the datagram be delivered to ... other members of the
// group on this host").
func (p *Protocol) loopMulticast(ri *ip.Route, pkt *buffer.Packet) {
	if !p.tables.load().member(ri.NextHop, routeIface(ri)) {
		return
	}
	q := p.env.Pool.Get(pkt.Len())
	copy(q.Bytes(), pkt.Bytes())
	q.Offload = pkt.Offload
	ip.FinishChecksum(q)
	p.loop.Deliver(q)
}
