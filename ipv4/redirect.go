package ipv4

import (
	"net/netip"

	"github.com/gonetstack/gonet/route"
)

// ICMP Redirects (RFC 792; RFC 1122 sections 3.2.2.2 and 3.3.1.2). A host
// "MUST update its routing information" on a Redirect, and "SHOULD
// silently discard" one whose new gateway is not on the subnet it came in
// on or whose source is not the current first hop for the destination. A
// Redirect for a network is taken as one for the host (section 3.3.1.2:
// subnets make a network redirect ambiguous), as Linux does: a host route
// to the destination through the new gateway, in the table as the
// destination cache (route.Redirects: for 300 s, 256 at most).
// A forwarding interface, a router's, takes none, as Linux's
// accept_redirects has it for a router; nor does a destination of
// 169.254/16, which RFC 3927 keeps on the link.

// newRedirects returns the IPv4 layer's redirects.
func (p *Protocol) newRedirects() *route.Redirects[*Interface] {
	return route.NewRedirects(p.env.Clock, func(r Route) bool { return p.tables.load().routes.Has(r) }, p.AddRoute, p.RemoveRoute)
}

// Redirect takes a Redirect that came in on the interface named in from
// the router from, saying that datagrams to dst go better through gw
// (the code, host or network, with or without TOS, makes no difference:
// each is taken for dst alone). It reports whether it was taken; one
// refused is counted.
func (p *Protocol) Redirect(in string, from, dst, gw netip.Addr) bool {
	if !p.redirectValid(in, from, dst, gw) {
		p.Stats.RedirectsRefused.Inc()
		return false
	}
	iface, _ := p.Interface(in)
	if err := p.redirects.Take(Route{Dst: netip.PrefixFrom(dst, 32), Gateway: gw, Iface: iface}); err != nil {
		p.Stats.RedirectsRefused.Inc()
		return false
	}
	p.Stats.RedirectsTaken.Inc()
	return true
}

// redirectValid applies RFC 1122 section 3.2.2.2's checks.
func (p *Protocol) redirectValid(in string, from, dst, gw netip.Addr) bool {
	iface, ok := p.Interface(in)
	if !ok || iface.forwarding.Load() {
		return false
	}
	t := p.tables.load()
	unicast := func(a netip.Addr) bool {
		return a.Is4() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && a != limitedBroadcast && !t.isBroadcast(a)
	}
	if !unicast(dst) || !unicast(gw) || t.isLocal(dst) || t.isLocal(gw) || gw == from {
		return false
	}
	// A link-local destination is always on the link (RFC 3927 section
	// 2.6.2): no router may take it over with a host route.
	if LinkLocalPrefix.Contains(dst) {
		return false
	}
	// The source is the current first hop for dst, out of the interface
	// the Redirect came in on.
	ri, err := p.Route(dst)
	if err != nil || ri.Local || ri.NextHop != from || routeIface(&ri) != iface {
		return false
	}
	// The new gateway is on a subnet of that interface.
	return t.routes.OnLink(gw, iface)
}
