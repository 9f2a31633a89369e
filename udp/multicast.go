package udp

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/wire"
)

// Multicast on UDP endpoints, with the socket options of RFC 3493 section
// 5.2 and Linux's ip(7) under netip-based names: an endpoint joins groups
// on an interface (IP_ADD_MEMBERSHIP, IPV6_JOIN_GROUP), chooses the
// interface (IP_MULTICAST_IF), TTL or hop limit (IP_MULTICAST_TTL,
// IPV6_MULTICAST_HOPS; 1 by default, RFC 1112 section 6.1) and loopback
// (IP_MULTICAST_LOOP; on by default, as Linux has it) of what it sends to
// groups. A datagram to a group is delivered to every endpoint bound to
// its port, on the wildcard address of its family, that joined the group
// itself, on the interface the datagram came in on: Linux's behaviour
// with IP_MULTICAST_ALL off, so that an endpoint never receives groups
// another program asked for, nor a group's datagrams from an interface it
// did not join it on, nor from a source its filter leaves out (sources.go). Endpoints that mean to share a port (several mDNS
// responders on 5353) bind with ListenMulticast, GoNet's SO_REUSEADDR.

// Membership is what joins the host's interfaces to groups for the
// endpoints: the stack, which owns the interfaces and their IGMP and MLD,
// and merges the endpoints' source filters on a group into the
// interface's (RFC 3376 section 3.2).
type Membership interface {
	// JoinGroup joins group on the interface named nic (for an empty
	// name, the one the stack picks for the group) for one more
	// endpoint, whose filter is f, and returns the interface's name.
	JoinGroup(nic string, group netip.Addr, f sourcefilter.Filter) (string, error)
	// ChangeFilter changes one endpoint's filter on group from from to
	// to, both joined.
	ChangeFilter(nic string, group netip.Addr, from, to sourcefilter.Filter) error
	// LeaveGroup undoes one JoinGroup of group on nic, whose filter is
	// now f.
	LeaveGroup(nic string, group netip.Addr, f sourcefilter.Filter) error
}

// SetMembership gives the endpoints the stack's group membership; without
// it JoinGroup fails with EOPNOTSUPP.
func (p *Protocol) SetMembership(m Membership) {
	p.mu.Lock()
	p.membership = m
	p.mu.Unlock()
}

// ListenMulticast is Listen with the port shared (SO_REUSEADDR): other
// endpoints bound by ListenMulticast to the same address and port bind
// too, and each receives the datagrams to the groups it joined. Unicast
// datagrams to the port go to one of them. The IPv6 wildcard takes IPv6
// only, as Go's net.ListenMulticastUDP("udp6", ...) binds it, so that an
// IPv4 listener shares the port beside it.
func (p *Protocol) ListenMulticast(laddr netip.AddrPort) (*Conn, error) {
	return p.listenOpts(laddr, laddr.Addr() == netip.IPv6Unspecified(), true, "")
}

// membership is a group an endpoint joined, on an interface, and the
// sources it takes from it.
type membership struct {
	nic    string
	group  netip.Addr
	filter sourcefilter.Filter
}

// is reports whether m is the membership of group on nic, or on any
// interface for an empty nic.
func (m membership) is(group netip.Addr, nic string) bool {
	return m.group == group && (nic == "" || m.nic == nic)
}

// mcastOpts are an endpoint's multicast options; c.mu guards them.
type mcastOpts struct {
	groups []membership
	ttl    uint8 // IP_MULTICAST_TTL and IPV6_MULTICAST_HOPS
	noLoop bool  // IP_MULTICAST_LOOP off
	ifname string
}

// errNoMembership is JoinGroup's error on a Protocol without Membership.
var errNoMembership = fmt.Errorf("no multicast membership for UDP: %w", syscall.EOPNOTSUPP)

// JoinGroup joins the endpoint to group on the interface named nic (for an
// empty name, the one the stack routes the group through), so that it
// receives the datagrams sent to the group and its port from any source
// (EXCLUDE {}, any-source multicast): an IPv4 group by IGMP, an IPv6 one
// by MLD (package ndp). A group already joined on nic fails with
// EADDRINUSE, as the kernel's setsockopt does.
func (c *Conn) JoinGroup(nic string, group netip.Addr) error {
	return c.setFilter("join", nic, group, func(f sourcefilter.Filter, joined bool) (sourcefilter.Filter, error) {
		if joined {
			return f, syscall.EADDRINUSE
		}
		return sourcefilter.Any, nil
	})
}

// LeaveGroup leaves a group joined on nic (for an empty name, on
// whichever interface it was joined), whatever its sources; one not
// joined fails with EADDRNOTAVAIL.
func (c *Conn) LeaveGroup(nic string, group netip.Addr) error {
	return c.setFilter("leave", nic, group, func(f sourcefilter.Filter, joined bool) (sourcefilter.Filter, error) {
		if !joined {
			return f, syscall.EADDRNOTAVAIL
		}
		return sourcefilter.None, nil
	})
}

// setFilter changes the endpoint's filter on group, on nic (for an empty
// name, the interface it was joined on, or the one the stack picks for a
// group not joined), to what change makes of it, joining or leaving the
// group as the filter comes to take sources or no longer does. change is
// given the filter (None when not joined) and whether it is joined, and
// fails with the errno the kernel's setsockopt would.
func (c *Conn) setFilter(op, nic string, group netip.Addr, change func(f sourcefilter.Filter, joined bool) (sourcefilter.Filter, error)) error {
	group = group.WithZone("")
	fail := func(err error) error { return c.opError(op, netip.AddrPortFrom(group, 0), err) }
	if !group.IsMulticast() || !c.binding().Reaches(group) {
		return fail(syscall.EINVAL)
	}
	c.p.mu.RLock()
	m := c.p.membership
	c.p.mu.RUnlock()
	if m == nil {
		return fail(errNoMembership)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fail(net.ErrClosed)
	}
	i := slices.IndexFunc(c.mcast.groups, func(g membership) bool { return g.is(group, nic) })
	old := sourcefilter.None
	if i >= 0 {
		old = c.mcast.groups[i].filter
	}
	f, err := change(old, i >= 0)
	switch {
	case err != nil:
		return fail(err)
	case len(f.Sources) > c.maxSources(group):
		// Linux's igmp_max_msf and mld_max_msf.
		return fail(syscall.ENOBUFS)
	case f.Equal(old):
		return nil
	case i < 0:
		name, err := m.JoinGroup(nic, group, f)
		if err != nil {
			return fail(err)
		}
		c.mcast.groups = append(c.mcast.groups, membership{name, group, f})
		return nil
	case !f.Joined():
		g := c.mcast.groups[i]
		c.mcast.groups = slices.Delete(c.mcast.groups, i, i+1)
		if err := m.LeaveGroup(g.nic, group, g.filter); err != nil {
			return fail(err)
		}
		return nil
	}
	g := &c.mcast.groups[i]
	if err := m.ChangeFilter(g.nic, group, g.filter, f); err != nil {
		return fail(err)
	}
	g.filter = f
	return nil
}

// leave leaves one membership of an endpoint's.
func (p *Protocol) leave(g membership) error {
	p.mu.RLock()
	m := p.membership
	p.mu.RUnlock()
	if m == nil {
		return errNoMembership
	}
	return m.LeaveGroup(g.nic, g.group, g.filter)
}

// leaveAll leaves every group the endpoint joined, as closing a socket
// does. c.mu is not held.
func (c *Conn) leaveAll() {
	c.mu.Lock()
	gs := c.mcast.groups
	c.mcast.groups = nil
	c.mu.Unlock()
	for _, g := range gs {
		_ = c.p.leave(g)
	}
}

// Groups returns the groups the endpoint joined, each with its interface's
// name, whatever their source filters.
func (c *Conn) Groups() map[netip.Addr][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[netip.Addr][]string{}
	for _, g := range c.mcast.groups {
		out[g.group] = append(out[g.group], g.nic)
	}
	return out
}

// SetMulticastTTL sets the TTL of the IPv4 datagrams the endpoint sends to
// groups (IP_MULTICAST_TTL; 1 by default, RFC 1112 section 6.1), and the
// hop limit of the IPv6 ones (SetMulticastHopLimit), from 1 to 255. The
// kernel's 0, which keeps datagrams on the host, is refused (EINVAL):
// loopback does that for a sender that wants it.
func (c *Conn) SetMulticastTTL(ttl int) error {
	if ttl < 1 || ttl > 255 {
		return c.opError("set", netip.AddrPort{}, syscall.EINVAL)
	}
	c.mu.Lock()
	c.mcast.ttl = uint8(ttl)
	c.mu.Unlock()
	return nil
}

// SetMulticastHopLimit is SetMulticastTTL under IPv6's name
// (IPV6_MULTICAST_HOPS, RFC 3493 section 5.2).
func (c *Conn) SetMulticastHopLimit(hops int) error { return c.SetMulticastTTL(hops) }

// SetMulticastLoopback sets whether the datagrams the endpoint sends to a
// group are also delivered to the host's own members of it
// (IP_MULTICAST_LOOP, IPV6_MULTICAST_LOOP): on by default, as Linux has
// it.
func (c *Conn) SetMulticastLoopback(on bool) error {
	c.mu.Lock()
	c.mcast.noLoop = !on
	c.mu.Unlock()
	return nil
}

// SetMulticastInterface names the interface the endpoint's datagrams to
// groups leave through (IP_MULTICAST_IF, IPV6_MULTICAST_IF); an empty
// name lets the routes choose, as by default.
func (c *Conn) SetMulticastInterface(nic string) error {
	c.mu.Lock()
	c.mcast.ifname = nic
	c.mu.Unlock()
	return nil
}

// sendOpts returns what the endpoint's options make of a datagram to a
// group.
func (c *Conn) sendOpts() mcastOpts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return mcastOpts{ttl: c.mcast.ttl, noLoop: c.mcast.noLoop, ifname: c.mcast.ifname}
}

// multicastRoute is the route to group as the endpoint's options ask.
func multicastRoute(nw ip.Network, group netip.Addr, o *mcastOpts) (ip.Route, error) {
	if mr, ok := nw.(ip.MulticastRouter); ok {
		return mr.MulticastRoute(group, o.ifname)
	}
	return nw.Route(group)
}

// deliverMulticast delivers a datagram to a group to every endpoint bound
// to its port, on the wildcard address of its family, that joined the
// group; those beyond the first get a copy. With none, the datagram is
// dropped without an ICMP error (RFC 1122 section 3.2.2) and counted in
// IgnoredMulti, as Linux does.
func (p *Protocol) deliverMulticast(pk *buffer.Packet, h ip.Header, u wire.UDP) {
	var to []*Conn
	group := h.Dst.WithZone("") // a link-scoped group comes with its interface's zone
	p.mu.RLock()
	for _, c := range p.ports[u.DstPort()] {
		if b := c.binding(); b.Wildcard() && b.Takes(group) && c.takesFrom(h.In) && c.joined(group, h.Src, h.In) {
			to = append(to, c)
		}
	}
	p.mu.RUnlock()
	if len(to) == 0 {
		p.Stats.IgnoredMulti.Inc()
		pk.Release()
		return
	}
	pk.SetLen(h.Off + len(u))
	queueable(pk, h)
	for i, c := range to {
		q := pk
		if i < len(to)-1 {
			q = p.env.Pool.Get(pk.Len())
			copy(q.Bytes(), pk.Bytes())
		}
		if !c.enqueue(q, h.Src.Zone(), h.In) {
			p.Stats.RcvbufErrors.Inc()
			q.Release()
			continue
		}
		p.Stats.InDatagrams.Inc()
	}
}

// joined reports whether the endpoint joined group, taking src, on the
// interface named nic, the one a datagram came in on: a join on one
// interface takes the group's datagrams from that interface alone, as
// Linux's sockets do. An empty nic (the host's own datagram) takes a join
// on any.
func (c *Conn) joined(group, src netip.Addr, nic string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.mcast.groups, func(g membership) bool { return g.is(group, nic) && g.filter.Allows(src) })
}
