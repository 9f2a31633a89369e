package icmpv6

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
)

// NetworkOf adapts the IPv6 layer to Network: its routes and parameters
// are its own types, the ip package's neutral ones are what ICMPv6 uses,
// so that once ipv6.Protocol implements ip.Network it is a Network
// without this adapter.
func NetworkOf(p *ipv6.Protocol) Network { return ipv6Network{p} }

type ipv6Network struct{ *ipv6.Protocol }

func (n ipv6Network) Route(dst netip.Addr) (ip.Route, error) {
	ri, err := n.Protocol.Route(dst)
	if err != nil {
		return ip.Route{}, err
	}
	r := ip.Route{Src: ri.Src, NextHop: ri.NextHop, Local: ri.Local, MTU: ri.MTU(), Offloads: ri.Offloads()}
	if ri.Iface != nil {
		r.Iface = ri.Iface
	}
	return r, nil
}

func (n ipv6Network) SendRoute(pkt *buffer.Packet, sp ip.SendParams, r ip.Route) error {
	ri := ipv6.RouteInfo{Src: r.Src, NextHop: r.NextHop, Local: r.Local}
	if i, ok := r.Iface.(*ipv6.Interface); ok {
		ri.Iface = i
		if r.MTU < i.MTU() {
			ri.PMTU = r.MTU
		}
	}
	return n.Protocol.SendRoute(pkt, ipv6.SendParams{
		Src: sp.Src, Dst: sp.Dst, NextHeader: sp.Proto,
		HopLimit: sp.TTL, TrafficClass: sp.TOS, DontFragment: sp.DF,
	}, ri)
}

func (n ipv6Network) UpdatePMTU(dst netip.Addr, mtu, _ int) int {
	return n.Protocol.UpdatePMTU(dst, mtu)
}
