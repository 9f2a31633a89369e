package stack

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/route"
)

// linkHost is what a NIC's neighbour discovery tells the IPv6 layer
// (ndp.Host): the addresses it forms and their states, the on-link
// prefixes and default routers it learns, and what routers advertise of
// the link. It is the glue, and only the glue: ndp keeps every timer, and
// ipv6 the tables.
type linkHost struct {
	s     *Stack
	iface *ipv6.Interface
}

var _ ndp.Host = linkHost{}

// addrState maps ndp's address states onto the IPv6 layer's. A Duplicate
// address is removed rather than kept in a state of its own: the layer
// neither receives for it nor sends from it (RFC 4862 section 5.4.5).
func addrState(st ndp.AddrState) (ipv6.AddrState, bool) {
	switch st {
	case ndp.Tentative:
		return ipv6.Tentative, true
	case ndp.Preferred:
		return ipv6.Preferred, true
	case ndp.Deprecated:
		return ipv6.Deprecated, true
	case ndp.Optimistic:
		return ipv6.Optimistic, true
	}
	return 0, false
}

func (h linkHost) AddAddress(addr netip.Prefix, st ndp.AddrState, temporary bool) {
	state, ok := addrState(st)
	if !ok {
		return
	}
	add := h.s.ip6.AddAddress
	if temporary {
		add = h.s.ip6.AddTemporary
	}
	if err := add(h.iface, addr, state); err != nil {
		h.s.env.Log.Warn("IPv6 address not added", "nic", h.iface.Name(), "addr", addr.String(), "err", err)
		return
	}
	h.logState(addr, ipv6.Tentative, state)
}

func (h linkHost) SetAddressState(addr netip.Addr, st ndp.AddrState) {
	state, ok := addrState(st)
	if !ok {
		h.RemoveAddress(addr)
		if st == ndp.Duplicate {
			h.s.declineLeased(h.iface.Name(), addr)
		}
		return
	}
	was, _ := h.s.ip6.AddressState(addr)
	if err := h.s.ip6.SetAddressState(addr.WithZone(""), state); err == nil && was != state {
		h.logState(h.prefixOf(addr), was, state)
	}
}

// prefixOf is addr with the prefix length it was assigned with.
func (h linkHost) prefixOf(addr netip.Addr) netip.Prefix {
	for _, a := range h.s.ip6.Addresses() {
		if a.Prefix.Addr() == addr.WithZone("") {
			return a.Prefix
		}
	}
	return netip.PrefixFrom(addr, 128)
}

// logState logs an address entering state from was: at info once it is
// usable, as IPv4's are when added (an optimistic one is already); the
// steps before and after at debug.
func (h linkHost) logState(addr netip.Prefix, was, state ipv6.AddrState) {
	switch {
	case state == ipv6.Optimistic:
		h.s.env.Log.Info("address added", "nic", h.iface.Name(), "addr", addr.String(), "dad", "optimistic")
		return
	case state == ipv6.Preferred && was != ipv6.Optimistic:
		h.s.env.Log.Info("address added", "nic", h.iface.Name(), "addr", addr.String())
		return
	}
	h.s.env.Log.Debug("address "+state.String(), "nic", h.iface.Name(), "addr", addr.String())
}

func (h linkHost) RemoveAddress(addr netip.Addr) {
	if err := h.s.ip6.RemoveAddress(addr); err == nil {
		h.s.env.Log.Info("address removed", "nic", h.iface.Name(), "addr", addr.String())
	}
}

func (h linkHost) SetOnLink(prefix netip.Prefix, lifetime time.Duration) {
	r := ipv6.Route{Dst: prefix, Iface: h.iface}
	if lifetime == 0 {
		h.s.ip6.RemoveRoute(r)
		return
	}
	if err := h.s.ip6.AddRoute(r); err != nil { // already there: a lifetime renewed, no error
		h.s.env.Log.Warn("on-link prefix not added", "nic", h.iface.Name(), "prefix", prefix.String(), "err", err)
	}
}

func (h linkHost) SetDefaultRouter(router netip.Addr, pref route.Preference, lifetime time.Duration) {
	// The route's preference is the router's: AddRoute replaces the
	// router's route with one of the new preference.
	r := ipv6.Route{Dst: netip.PrefixFrom(netip.IPv6Unspecified(), 0), Gateway: router, Iface: h.iface, Preference: pref}
	if lifetime == 0 {
		h.s.ip6.RemoveRoute(r)
		h.s.env.Log.Info("default router gone", "nic", h.iface.Name(), "router", router.String())
		return
	}
	// Every advertisement renews the router's lifetime: only a new
	// router, or a new preference, is news.
	known := slices.Contains(h.s.ip6.Routes(), ipv6.Route{Dst: r.Dst, Gateway: router.WithZone(""), Iface: h.iface, Preference: r.Preference})
	if err := h.s.ip6.AddRoute(r); err != nil {
		h.s.env.Log.Warn("default router not added", "nic", h.iface.Name(), "router", router.String(), "err", err)
		return
	}
	if !known {
		h.s.env.Log.Info("default router", "nic", h.iface.Name(), "router", router.String(), "pref", pref.String())
	}
}

// SetRoute takes a route a router advertised (RFC 4191's Route
// Information option).
func (h linkHost) SetRoute(prefix netip.Prefix, router netip.Addr, pref route.Preference, lifetime time.Duration) {
	r := ipv6.Route{Dst: prefix, Gateway: router, Iface: h.iface, Preference: pref}
	if lifetime == 0 {
		h.s.ip6.RemoveRoute(r)
		return
	}
	known := slices.Contains(h.s.ip6.Routes(), ipv6.Route{Dst: prefix, Gateway: router.WithZone(""), Iface: h.iface, Preference: pref})
	if err := h.s.ip6.AddRoute(r); err != nil {
		h.s.env.Log.Warn("advertised route not added", "nic", h.iface.Name(), "prefix", prefix.String(), "router", router.String(), "err", err)
		return
	}
	if !known {
		h.s.env.Log.Info("advertised route", "nic", h.iface.Name(), "prefix", prefix.String(), "router", router.String(), "pref", pref.String())
	}
}

func (h linkHost) SetLinkMTU(mtu int) { h.iface.SetLinkMTU(mtu) }

func (h linkHost) SetHopLimit(n uint8) { h.s.ip6.SetHopLimit(n) }

func (h linkHost) NextHop(dst netip.Addr) (netip.Addr, bool) {
	ri, err := h.s.ip6.Route(dst)
	if err != nil || ri.Local || ri.Iface != h.iface {
		return netip.Addr{}, false
	}
	return ri.NextHop, true
}

// Redirect records a first hop for dst as a host route, for a while: the
// routing table is the destination cache (RFC 4861 section 8.3).
func (h linkHost) Redirect(dst, target netip.Addr) {
	r := ipv6.Route{Dst: netip.PrefixFrom(dst.WithZone(""), 128), Iface: h.iface}
	if target != dst {
		r.Gateway = target
	}
	if err := h.s.ip6.TakeRedirect(r); err != nil {
		h.s.env.Log.Warn("redirect not taken", "nic", h.iface.Name(), "dst", dst.String(), "target", target.String(), "err", err)
	}
}

// SetDNS gives the resolver the servers and search domains the NIC's
// routers advertise (RFC 8106), beside what a DHCP lease gave.
func (h linkHost) SetDNS(d ndp.DNS) {
	cfg := DNSConfig{Search: d.Search}
	for _, a := range d.Servers {
		cfg.Servers = append(cfg.Servers, netip.AddrPortFrom(a, 53))
	}
	if err := h.s.SetLearnedDNS(DNSOrigin{DNSFromRouterAdvertisements, h.iface.Name()}, cfg); err != nil {
		h.s.env.Log.Warn("advertised DNS servers not taken", "nic", h.iface.Name(), "err", err)
	}
}

// Unreachable takes a datagram whose next hop did not answer neighbour
// solicitation, and answers it as RFC 4861 section 7.2.2 says: ICMPv6
// destination unreachable, code 3 (address unreachable), to its source
// (Stack.unreachable, which ARP's failures take too).
func (h linkHost) Unreachable(nextHop netip.Addr, pkt *buffer.Packet) { h.s.unreachable(pkt) }

// IPv6 returns the IPv6 layer: its addresses and their states, its routes
// (those routers advertised among them) and its counters, as IPv4 returns
// IPv4's.
func (s *Stack) IPv6() *ipv6.Protocol { return s.ip6 }

// NeighborDiscovery returns the named NIC's neighbour discovery: its
// neighbour cache, the addresses it formed or checked with their DAD
// states, and its default routers. It fails for a NIC of a stack with
// Config.NoIPv6.
func (s *Stack) NeighborDiscovery(nicName string) (*ndp.Protocol, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return nil, err
	}
	if n.nd == nil {
		return nil, fmt.Errorf("stack: neighbour discovery on %s: %w", nicName, errNoIPv6)
	}
	return n.nd, nil
}
