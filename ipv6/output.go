package ipv6

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// Datagrams are described by ip.SendParams, as IPv4's are, so that a
// transport sends either family's with one value. IPv6 reads its fields
// so:
//   - Src: the zero Addr to have the route choose (source.go), or one of
//     the host's addresses; unlike IPv4, :: is sent as it stands, for the
//     messages that go before the host has an address (DAD's neighbour
//     solicitations, RFC 4862 section 5.4.2; MLD reports, RFC 3810
//     section 5.2.13).
//   - Dst: with the zone of an interface when it is link-scoped (Route).
//   - Proto: the upper-layer protocol, the last Next Header.
//   - TTL: the hop limit; zero for the default, Config.DefaultHopLimit to
//     a unicast destination, 1 to a multicast group.
//   - TOS: the traffic class.
//   - DF: fail with EMSGSIZE rather than fragment (IPV6_DONTFRAG, RFC
//     3542 section 11.2), what a transport that does path MTU discovery
//     itself asks for.
//   - FlowLabel and RouterAlert: fields IPv4 ignores (ip.SendParams).

// ErrMessageTooLong is returned for a datagram whose payload exceeds 65535
// bytes, or which exceeds the path MTU with DontFragment set. It wraps
// syscall.EMSGSIZE.
var ErrMessageTooLong = fmt.Errorf("ipv6: %w", syscall.EMSGSIZE)

// IsMessageTooLong reports whether err says a datagram was too big.
func IsMessageTooLong(err error) bool { return errors.Is(err, syscall.EMSGSIZE) }

// Send sends pkt, whose data is the upper-layer header and payload, as an
// IPv6 datagram. It takes ownership of pkt in every case. The route is
// looked up here; callers that already did so may pass it to SendRoute.
func (p *Protocol) Send(pkt *buffer.Packet, sp ip.SendParams) error {
	ri, err := p.Route(sp.Dst)
	if err != nil {
		p.Stats.OutNoRoutes.Inc()
		pkt.Release()
		return err
	}
	return p.SendRoute(pkt, sp, ri)
}

// ReachabilityConfirmer is a link output that keeps neighbour reachability
// states (package ndp), told of an upper layer's confirmation that a next
// hop is reachable (RFC 4861 section 7.3.1).
type ReachabilityConfirmer interface {
	Confirm(nextHop netip.Addr)
}

// SendRoute is Send on a route found by Route.
func (p *Protocol) SendRoute(pkt *buffer.Packet, sp ip.SendParams, ri ip.Route) error {
	p.Stats.OutRequests.Inc()
	if sp.Confirm && !ri.Local {
		if rc, ok := routeIface(ri).out.(ReachabilityConfirmer); ok {
			rc.Confirm(ri.NextHop)
		}
	}
	dst := sp.Dst.WithZone("")
	src := sp.Src.WithZone("")
	switch {
	case !src.IsValid():
		src = ri.Src.WithZone("")
	case src.IsUnspecified() || src == ri.Src.WithZone("") || p.IsLocal(src):
	case p.mayUseSource(src, ri):
	default:
		src = netip.Addr{}
	}
	if !src.IsValid() {
		p.Stats.OutNoSource.Inc()
		pkt.Release()
		return ErrNoSource
	}
	hop := sp.TTL
	if hop == 0 {
		hop = uint8(p.hopLimit.Load())
		if dst.IsMulticast() {
			hop = 1
		}
	}
	f := wire.IPv6Fields{
		TrafficClass: sp.TOS,
		FlowLabel:    sp.FlowLabel,
		NextHeader:   sp.Proto,
		HopLimit:     hop,
		Src:          src,
		Dst:          dst,
	}
	unfrag := 0 // extension headers of the unfragmentable part
	if sp.RouterAlert {
		ip.FinishChecksum(pkt) // the partial checksum's start would move
		b := pkt.Prepend(len(routerAlert))
		copy(b, routerAlert[:])
		b[0], f.NextHeader = f.NextHeader, wire.ProtoHopByHop
		unfrag = len(routerAlert)
	}
	f.PayloadLen = pkt.Len()
	if pkt.Len() > wire.IPv6MaxPayloadLen {
		pkt.Release()
		return ErrMessageTooLong
	}
	if dst.IsMulticast() {
		p.Stats.OutMcastPkts.Inc()
	}
	if wire.IPv6HeaderLen+pkt.Len() <= ri.MTU || ip.SuperSegment(pkt, &ri, &p.Stats.OutGSO, &p.Stats.OutGSOFallbacks) {
		wire.EncodeIPv6(pkt.Prepend(wire.IPv6HeaderLen), &f)
		pkt.Offload.Prepended(wire.IPv6HeaderLen)
		if sp.MulticastLoop && dst.IsMulticast() && !ri.Local {
			p.loopMulticast(ri, pkt)
		}
		p.output(ri, pkt)
		return nil
	}
	if sp.DF {
		p.Stats.FragFails.Inc()
		pkt.Release()
		return ErrMessageTooLong
	}
	p.fragment(pkt, &f, unfrag, ri, sp.MulticastLoop && dst.IsMulticast() && !ri.Local)
	return nil
}

// routerAlert is a Hop-by-Hop Options header holding the Router Alert
// option with value 0, "the datagram contains a Multicast Listener
// Discovery message" (RFC 2711 section 2.1), and a PadN of two bytes to
// the 8-byte boundary; the next header goes in its first byte.
var routerAlert = [8]byte{0, 0, 5, 2, 0, 0, wire.IPv6OptPadN, 0}

// output passes a whole datagram to the interface, or loops it back.
func (p *Protocol) output(ri ip.Route, pkt *buffer.Packet) {
	if ri.Local {
		ip.FinishChecksum(pkt) // our own input checks it
		p.loop.Deliver(pkt)
		return
	}
	routeIface(ri).out.Output(ri.NextHop, pkt)
}

// fragment splits the datagram f describes, with pkt as its payload, into
// fragments that fit ri's MTU (RFC 8200 section 4.5) and sends them in
// order. The unfragmentable part is the fixed header and the first unfrag
// bytes of pkt (a Hop-by-Hop header, the only extension header the layer
// adds); every fragment but the last carries a multiple of 8 bytes. The
// identification is random per datagram (RFC 7739 section 5: a
// predictable one lets an off-path attacker forge fragments that poison
// reassembly). The route's MTU is at least 1280 (the least link MTU, and
// the floor of the path MTU cache), so no datagram that fits unfragmented
// is ever sent as an atomic fragment (RFC 8021).
func (p *Protocol) fragment(pkt *buffer.Packet, f *wire.IPv6Fields, unfrag int, ri ip.Route, loop bool) {
	defer pkt.Release()
	ip.FinishChecksum(pkt) // fragments cannot carry a partial checksum
	head, payload := pkt.Bytes()[:unfrag], pkt.Bytes()[unfrag:]
	hl := wire.IPv6HeaderLen + unfrag + wire.IPv6FragmentLen
	chunk := (ri.MTU - hl) &^ 7
	ff := *f
	fh := wire.IPv6FragmentFields{NextHeader: f.NextHeader, ID: p.env.Rand.Uint32()}
	if unfrag > 0 {
		// The Hop-by-Hop header names the Fragment header.
		fh.NextHeader = head[0]
	} else {
		ff.NextHeader = wire.ProtoFragment
	}
	for off := 0; off < len(payload); off += chunk {
		n := min(chunk, len(payload)-off)
		frag := p.env.Pool.Get(hl + n)
		b := frag.Bytes()
		ff.PayloadLen = hl - wire.IPv6HeaderLen + n
		wire.EncodeIPv6(b, &ff)
		copy(b[wire.IPv6HeaderLen:], head)
		if unfrag > 0 {
			b[wire.IPv6HeaderLen] = wire.ProtoFragment
		}
		fh.Offset, fh.MoreFragments = off, off+n < len(payload)
		wire.EncodeIPv6Fragment(b[wire.IPv6HeaderLen+unfrag:], &fh)
		copy(b[hl:], payload[off:off+n])
		p.Stats.FragCreates.Inc()
		if loop {
			p.loopMulticast(ri, frag)
		}
		p.output(ri, frag)
	}
	p.Stats.FragOKs.Inc()
}

// loopMulticast hands a copy of a multicast datagram the host sends back
// to the host's own input when the interface it leaves through is a
// member of the group (IPV6_MULTICAST_LOOP, RFC 3493 section 5.2).
func (p *Protocol) loopMulticast(ri ip.Route, pkt *buffer.Packet) {
	if !p.tables.load().member(ri.NextHop.WithZone(""), routeIface(ri), true) {
		return
	}
	q := p.env.Pool.Get(pkt.Len())
	copy(q.Bytes(), pkt.Bytes())
	q.Offload = pkt.Offload
	ip.FinishChecksum(q)
	p.loop.Deliver(q)
}
