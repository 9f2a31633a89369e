package ip

import (
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Offloads on the way out, both families' alike. A transport may leave its
// checksum to the link (buffer.NeedsCsum) and TCP may hand over a
// super-segment longer than the MTU (buffer.GSOTCPv4, GSOTCPv6) when the
// route's interface does that (Route.Offloads; none for local delivery).
// The network layer then sends the super-segment whole: the link cuts it
// into datagrams that fit, each with its own header, as Linux's
// inet_gso_segment and ipv6_gso_segment do; fragmenting it instead would
// defeat the offload. A datagram that must be fragmented or looped back
// gets its checksum finished first, since only a link finishes it.

// SuperSegment reports whether pkt, too long for r's MTU, is a TCP
// super-segment r's link will cut up, counting it in gso. One that r's
// link cannot take is a bug upstream, since the transport checked the
// route: it loses its offload, is counted in fallbacks and handled as any
// long datagram.
func SuperSegment(pkt *buffer.Packet, r *Route, gso, fallbacks *stats.Counter) bool {
	if pkt.Offload.GSOType == buffer.GSONone {
		return false
	}
	if !r.Offloads.TSO {
		fallbacks.Inc()
		pkt.Offload.GSOType, pkt.Offload.GSOSize, pkt.Offload.HdrLen = buffer.GSONone, 0, 0
		return false
	}
	gso.Inc()
	return true
}

// FinishChecksum completes pkt's partial checksum in software, where no
// link will: pkt's data starts at the transport header.
func FinishChecksum(pkt *buffer.Packet) {
	if pkt.Offload.Flags&buffer.NeedsCsum == 0 {
		return
	}
	wire.FinishChecksum(pkt.Bytes(), int(pkt.Offload.CsumStart), int(pkt.Offload.CsumOffset))
	pkt.Offload = buffer.Offload{}
}
