package icmpv6

import (
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// Echo (RFC 4443 section 4).

// echoReply answers an echo request (section 4.2): the reply goes to the
// request's source, carries its identifier, sequence number and data
// "entirely and unmodified", and comes from the address the request was
// sent to; a request to a multicast group is answered "from a unicast
// address belonging to the interface on which the Echo Request message
// was received". The request's datagram becomes the reply in place,
// however long (a reassembled 65535 bytes), so an echo costs no copy. It
// takes ownership of pk.
func (p *Protocol) echoReply(pk *buffer.Packet, h ip.Header) {
	multicast := h.Dst.IsMulticast()
	if multicast && p.cfg.IgnoreEchoMulticast {
		p.Stats.InEchoIgnored.Inc()
		pk.Release()
		return
	}
	dst := h.Src
	if multicast && dst.Zone() == "" {
		// A group of link scope carries the interface's name: routing
		// the reply by it keeps it, and its source, on that interface.
		dst = dst.WithZone(h.Dst.Zone())
	}
	r, err := p.net.Route(dst)
	if err != nil {
		p.Stats.OutErrors.Inc()
		pk.Release()
		return
	}
	src := h.Dst
	if multicast {
		src = r.Src
	}
	if !src.IsValid() {
		p.Stats.OutErrors.Inc()
		pk.Release()
		return
	}
	partial := pk.Offload.Flags&buffer.NeedsCsum != 0
	pk.Offload = buffer.Offload{} // the request's receive offloads are not the reply's
	pk.TrimFront(h.Off)
	m := pk.Bytes()
	m[0] = wire.ICMPv6EchoReply
	sp := ip.SendParams{Src: src, Dst: dst, Proto: wire.ProtoICMPv6, TOS: h.TOS}
	if multicast || partial {
		// The pseudo-header changed with the source, or the request's
		// checksum was left to the link: sum the message anew.
		p.send(pk, sp, r, &p.Stats.OutEchoReplies)
		return
	}
	// The addresses are swapped, which leaves the pseudo-header's sum as
	// it was: only the type byte changed, an incremental update (RFC
	// 1624 equation 3).
	sum := uint32(^(uint16(m[2])<<8 | uint16(m[3])))
	sum += uint32(^(uint16(wire.ICMPv6EchoRequest)<<8 | uint16(m[1])))
	sum += uint32(uint16(wire.ICMPv6EchoReply)<<8 | uint16(m[1]))
	c := ^wire.Fold(sum)
	m[2], m[3] = byte(c>>8), byte(c)
	p.Stats.OutMsgs.Inc()
	p.Stats.OutEchoReplies.Inc()
	if err := p.net.SendRoute(pk, sp, r); err != nil {
		p.Stats.OutErrors.Inc()
	}
}
