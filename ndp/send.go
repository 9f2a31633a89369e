package ndp

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/wire"
)

// The messages ndp sends. Each is a whole IPv6 datagram built here: ND
// messages with hop limit 255, so that a receiver knows they were not
// forwarded (RFC 4861 sections 4.1-4.4), MLD reports with hop limit 1 and
// the Router Alert option (RFC 3810 section 5). They go straight to the
// NIC when the destination is multicast, through Output otherwise.

// ndHopLimit is the hop limit of every ND message sent and received.
const ndHopLimit = 255

// message is a datagram being built: the packet, and the ICMPv6 message
// within it for the encoders to fill.
type message struct {
	pkt      *buffer.Packet
	icmp     []byte
	src, dst netip.Addr
}

// newMessage returns a datagram from src to dst with room for an ICMPv6
// message of n bytes; with mld, a Hop-by-Hop header with the Router Alert
// option comes first and the hop limit is 1.
func (p *Protocol) newMessage(src, dst netip.Addr, n int, mld bool) message {
	ext := 0
	next, hops := uint8(wire.ProtoICMPv6), uint8(ndHopLimit)
	if mld {
		ext, next, hops = wire.MLDHopByHopLen, wire.ProtoHopByHop, 1
	}
	pkt := p.env.Pool.Get(wire.IPv6HeaderLen + ext + n)
	b := pkt.Bytes()
	wire.EncodeIPv6(b, &wire.IPv6Fields{PayloadLen: ext + n, NextHeader: next, HopLimit: hops, Src: src, Dst: dst})
	if mld {
		wire.EncodeMLDHopByHop(b[wire.IPv6HeaderLen:])
	}
	return message{pkt: pkt, icmp: b[wire.IPv6HeaderLen+ext:], src: src, dst: dst}
}

// send completes the checksum and sends m: to a multicast group's MAC
// without resolution, to a unicast address through Output. p.mu must not
// be held (Output takes it).
func (p *Protocol) send(m message) {
	wire.SetICMPv6Checksum(m.icmp, m.src, m.dst)
	p.Output(m.dst, m.pkt)
}

// sendLater queues m to be sent once p.mu is released; p.mu is held.
func (p *Protocol) sendLater(m message) {
	if p.closed {
		m.pkt.Release()
		return
	}
	p.later(func() { p.send(m) })
}

// neighborSolicitation builds an NS for target from src to dst, with our
// link-layer address when withMAC (sllaFromLocked says when).
func (p *Protocol) neighborSolicitation(src, dst, target netip.Addr, withMAC bool) message {
	n := wire.NeighborSolicitationLen
	if withMAC {
		n += wire.NDLinkLayerAddrLen
	}
	m := p.newMessage(src, dst, n, false)
	wire.EncodeNeighborSolicitation(m.icmp, target)
	if withMAC {
		wire.EncodeNDLinkLayerAddr(m.icmp[wire.NeighborSolicitationLen:], wire.NDOptSourceLinkAddr, p.nic.MAC())
	}
	p.Stats.OutNeighborSolicits.Inc()
	return m
}

// dadProbe builds DAD's solicitation for target (RFC 4862 section 5.4.2):
// from :: to the target's solicited-node group, without our link-layer
// address (RFC 4861 section 4.3), with nonce (RFC 7527 section 4.1), by
// which a probe of ours that the link loops back is not taken for
// another node's. Nodes that do not know the option skip it (RFC 4861
// section 4.6).
func (p *Protocol) dadProbe(target netip.Addr, nonce [wire.NDNonceSize]byte) message {
	m := p.newMessage(netip.IPv6Unspecified(), ipv6.SolicitedNode(target), wire.NeighborSolicitationLen+wire.NDNonceLen, false)
	wire.EncodeNeighborSolicitation(m.icmp, target)
	wire.EncodeNDNonce(m.icmp[wire.NeighborSolicitationLen:], nonce)
	p.Stats.OutNeighborSolicits.Inc()
	return m
}

// neighborAdvertisement builds an NA for target to dst, always with our
// link-layer address as the target's (RFC 4861 section 7.2.4: it MUST be
// there in answer to a multicast solicitation, and costs nothing
// otherwise). Override is set but for an optimistic target (RFC 4429
// section 2.2): our addresses are not anycast ones.
func (p *Protocol) neighborAdvertisement(src, dst, target netip.Addr, solicited, override bool) message {
	m := p.newMessage(src, dst, wire.NeighborAdvertisementLen+wire.NDLinkLayerAddrLen, false)
	// Router is set on an advertising interface (section 7.2.4: "the
	// Router flag ... set to one if the sender is a router"), so that
	// the guest's IsRouter flag holds (section 7.2.5).
	wire.EncodeNeighborAdvertisement(m.icmp, &wire.NeighborAdvertisementFields{Router: p.isRouter.Load(), Solicited: solicited, Override: override, Target: target})
	wire.EncodeNDLinkLayerAddr(m.icmp[wire.NeighborAdvertisementLen:], wire.NDOptTargetLinkAddr, p.nic.MAC())
	p.Stats.OutNeighborAdvertisements.Inc()
	return m
}

// routerSolicitation builds an RS from src to all-routers, with our
// link-layer address when withMAC (sllaFromLocked says when).
func (p *Protocol) routerSolicitation(src netip.Addr, withMAC bool) message {
	n := wire.RouterSolicitationLen
	if withMAC {
		n += wire.NDLinkLayerAddrLen
	}
	m := p.newMessage(src, ipv6.AllRouters, n, false)
	wire.EncodeRouterSolicitation(m.icmp)
	if withMAC {
		wire.EncodeNDLinkLayerAddr(m.icmp[wire.RouterSolicitationLen:], wire.NDOptSourceLinkAddr, p.nic.MAC())
	}
	p.Stats.OutRouterSolicits.Inc()
	return m
}

// mldSourceLen is the size of each source address in a report's record.
const mldSourceLen = 16

// mldReportRoomLocked is the room a report's records have (RFC 3810
// section 5.2.15: "as determined by the MTU of the link on which it will
// be sent", as Linux's mld_newpack): what a datagram of the link MTU (the
// NIC's, or an advertisement's lower one) leaves after the IPv6 header,
// the Hop-by-Hop header of the Router Alert option and the report's own
// header, so that a report is never fragmented. p.mu is held.
func (p *Protocol) mldReportRoomLocked() int {
	mtu := p.nic.MTU()
	if p.params.linkMTU != 0 {
		mtu = min(mtu, p.params.linkMTU)
	}
	return max(mtu, wire.IPv6MinMTU) - wire.IPv6HeaderLen - wire.MLDHopByHopLen - wire.MLDv2ReportLen
}

// mldReport builds an MLDv2 report of recs from src to all MLDv2-capable
// routers (RFC 3810 section 5.2.14). The records are sourcefilter's,
// whose types have the wire's numbers; they fit mldReportRoomLocked
// (sourcefilter.Split).
func (p *Protocol) mldReport(src netip.Addr, recs []sourcefilter.Record) message {
	w := make([]wire.MLDv2Record, len(recs))
	for i, r := range recs {
		w[i] = wire.MLDv2Record{Type: wire.MLDv2RecordType(r.Type), Group: r.Group, Sources: r.Sources}
	}
	m := p.newMessage(src, ipv6.AllMLDv2Routers, wire.MLDv2ReportLenOf(w), true)
	wire.EncodeMLDv2Report(m.icmp, w)
	p.Stats.OutMLDv2Reports.Inc()
	return m
}

// mldV1 builds an MLDv1 Report (to the group) or Done (to all-routers)
// of group, typ saying which (RFC 2710 section 3).
func (p *Protocol) mldV1(src, dst netip.Addr, typ uint8, group netip.Addr) message {
	m := p.newMessage(src, dst, wire.MLDv1Len, true)
	wire.EncodeMLDv1(m.icmp, typ, group)
	if typ == wire.ICMPv6MLDv1Report {
		p.Stats.OutGroupMembResponses.Inc()
	} else {
		p.Stats.OutGroupMembReductions.Inc()
	}
	return m
}

// linkLocalLocked returns a link-local address of ours, preferred or else
// optimistic, the source of router solicitations and MLD reports, or ::
// when there is none yet (RFC 4861 section 6.3.7, RFC 3810 section
// 5.2.13, RFC 4429 section 2.4); p.mu is held.
func (p *Protocol) linkLocalLocked() netip.Addr {
	ll := netip.IPv6Unspecified()
	for a, st := range p.addrs {
		switch {
		case !a.IsLinkLocalUnicast():
		case st.state == Preferred:
			return a
		case st.state == Optimistic:
			ll = a
		}
	}
	return ll
}

// sllaFromLocked reports whether a solicitation from src carries our
// link-layer address: not from :: (RFC 4861 sections 4.1 and 4.3), nor
// from an optimistic address, whose neighbours would take it over the
// address's owner's should DAD find one (RFC 4429 section 2.2: "MUST NOT
// use an Optimistic Address as the source address of a Neighbor
// Solicitation with a Source Link-Layer Address Option", and section 2.4
// likewise for a Router Solicitation). p.mu is held.
func (p *Protocol) sllaFromLocked(src netip.Addr) bool {
	a, ok := p.addrs[src]
	return ok && a.state != Optimistic
}

// sourceForLocked picks the source of a solicitation for a datagram from
// src: src itself if it is ours, else any usable address of ours (RFC 4861
// section 7.2.2), link-local first. An optimistic address comes after
// every other, since a solicitation from it cannot carry our link-layer
// address and so costs the neighbour a solicitation of its own before it
// can answer. p.mu is held.
func (p *Protocol) sourceForLocked(src netip.Addr) (netip.Addr, bool) {
	mine := func(a netip.Addr, optimistic bool) bool {
		st, ok := p.addrs[a]
		return ok && st.usable() && (st.state == Optimistic) == optimistic
	}
	for _, optimistic := range []bool{false, true} {
		if mine(src, optimistic) {
			return src, true
		}
		if ll := p.linkLocalLocked(); mine(ll, optimistic) {
			return ll, true
		}
		for a := range p.addrs {
			if mine(a, optimistic) {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}
