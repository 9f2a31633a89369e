package ipv4

import (
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// Offloads on the way out. A transport may leave its checksum to the link
// (buffer.NeedsCsum) and TCP may hand over a super-segment longer than the
// MTU (buffer.GSOTCPv4) when the route's interface does that (the
// link.Capabilities given to AddOffloadInterface, which routes out of it
// carry in ip.Route.Offloads; none for local delivery). IPv4 then sends the
// super-segment whole: the link cuts it into datagrams that fit, each with
// its own header, as Linux's inet_gso_segment does; fragmenting it instead
// would defeat the offload. A datagram that must be fragmented or looped
// back gets its checksum finished first, since only a link finishes it.

// superSegment reports whether pkt, too long for ri's MTU, is a TCP
// super-segment the link will cut up.
func (p *Protocol) superSegment(pkt *buffer.Packet, ri *ip.Route) bool {
	if pkt.Offload.GSOType == buffer.GSONone {
		return false
	}
	if !ri.Offloads.TSO {
		// The transport checked the route; a super-segment here is a bug
		// upstream, handled as any long datagram (and counted).
		p.Stats.OutGSOFallbacks.Inc()
		pkt.Offload.GSOType, pkt.Offload.GSOSize, pkt.Offload.HdrLen = buffer.GSONone, 0, 0
		return false
	}
	p.Stats.OutGSO.Inc()
	return true
}

// finishChecksum completes a partial checksum in software, where no link
// will: pkt's data starts at the transport header.
func finishChecksum(pkt *buffer.Packet) {
	if pkt.Offload.Flags&buffer.NeedsCsum == 0 {
		return
	}
	wire.FinishChecksum(pkt.Bytes(), int(pkt.Offload.CsumStart), int(pkt.Offload.CsumOffset))
	pkt.Offload = buffer.Offload{}
}
