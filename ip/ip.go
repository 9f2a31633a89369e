// Package ip is what the transports (TCP, UDP, ICMP's echo) see of the
// network layer, whichever the family: the header a datagram came in with,
// the parameters of one to send, a route, and the Network interface that
// ipv4 and ipv6 each implement. A transport demultiplexes and sends for
// either family through these alone, so it is written once, not twice
// (issue 12, item 7). Both families' output shares its offload handling
// here too (offload.go).
package ip

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
)

// Header is what a transport needs of a received datagram's network
// header: the family's own header stays in the packet, and these fields
// are read from it once, by the network layer's dealer.
type Header struct {
	Src, Dst netip.Addr
	// TOS is IPv4's type of service or IPv6's traffic class: both carry
	// ECN in their two low bits (RFC 3168 section 5, RFC 8200 section 7).
	TOS uint8
	// TTL is IPv4's time to live or IPv6's hop limit.
	TTL uint8
	// Off is where the transport header starts in the packet's bytes:
	// after IPv4's header and options, or after IPv6's fixed header and
	// every extension header before the upper-layer one. The bytes
	// before it stay in the packet so that an ICMP error can quote the
	// datagram from its first byte (RFC 792, RFC 4443 section 2.4(c)).
	Off int
	// In is the name of the interface the datagram came in on (a
	// reassembled one's first fragment's), empty for the host's own.
	In string
}

// Transport is a protocol above IP (UDP, TCP, ICMP, ICMPv6).
type Transport interface {
	// HandleIP takes ownership of pkt, a validated, whole datagram
	// addressed to this host: pkt.Bytes() starts at its network header
	// and the transport's header at h.Off. It runs in the network
	// layer's dealer goroutine and must not block.
	HandleIP(pkt *buffer.Packet, h Header)
}
