package ipv6

import (
	"net/netip"

	"github.com/gonetstack/gonet/ip"
)

// Forwarding interfaces: the stack as the router of terminated flows, as
// IPv4's (ipv4/forward.go), for a user-mode gateway whose guest routes its
// IPv6 through it.
//
// A host takes only datagrams addressed to it (RFC 8200 section 4's
// "destination node", RFC 4291's addresses of its interfaces). An
// interface in forwarding mode also takes unicast datagrams to any other
// address a router would forward, and lets the stack answer from that
// address; the transports hand what it takes to their forwarder hooks
// (tcp, udp and icmpv6 each have one), which decide per flow. Nothing is
// forwarded at the IPv6 layer: the hop limit is not decremented, since
// every flow ends in the stack.

// SetForwarding turns the interface's forwarding mode on or off: while on,
// it takes unicast datagrams to any forwardable address (foreignUnicast)
// and the stack may send from any source address out of it. Datagrams
// already queued to the dealer are judged by the mode in force when the
// dealer reads them.
func (i *Interface) SetForwarding(on bool) { i.forwarding.Store(on) }

// Forwarding reports whether the interface is in forwarding mode.
func (i *Interface) Forwarding() bool { return i.forwarding.Load() }

// foreignUnicast reports whether a forwarding interface may take a datagram
// to dst, an address not the host's: a unicast address of more than link
// scope. Excluded are the unspecified and loopback addresses, which RFC
// 4291 section 2.5.2 and 2.5.3 forbid routers to forward, multicast, and
// link-local addresses, which "routers must not forward" (section 2.5.6).
func foreignUnicast(dst netip.Addr) bool {
	return !dst.IsUnspecified() && !dst.IsLoopback() && !dst.IsMulticast() &&
		!dst.IsLinkLocalUnicast() && !dst.Is4In6()
}

// takesForeign reports whether in, the interface a datagram came in on,
// takes it for dst, which is not the host's, counting it. An address of
// the host's that is still tentative is not foreign: it is nobody's yet
// (RFC 4862 section 5.4).
func (p *Protocol) takesForeign(t *table, dst netip.Addr, in *Interface) bool {
	if in == nil || !in.forwarding.Load() || !foreignUnicast(dst) {
		return false
	}
	if _, ours := t.local(dst); ours {
		return false
	}
	p.Stats.InForeign.Inc()
	return true
}

// mayUseSource reports whether a datagram may leave on ri with source src,
// which is not one of the host's addresses: only out of a forwarding
// interface, so that a stack with none keeps a host's rule that it sends
// from its own addresses. It counts the outcome.
func (p *Protocol) mayUseSource(src netip.Addr, ri ip.Route) bool {
	if i := routeIface(ri); i == nil || !i.forwarding.Load() {
		return false
	}
	p.Stats.OutForeign.Inc()
	return true
}
