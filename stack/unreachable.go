package stack

import (
	"net/netip"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
)

// A datagram whose next hop never answered is answered, in both families,
// by one path: ARP (RFC 1122 section 2.3.2.2) and neighbour discovery (RFC
// 4861 section 7.2.2) hand it back, and the network layer of its family
// sends its source the host unreachable error (ICMP type 3 code 1, ICMPv6
// type 1 code 3). When the datagram is the host's own, the error comes
// back through the layer's loopback like any other and reaches the socket
// that sent it, as Linux's sockets get EHOSTUNREACH: a ping fails at once,
// a connection attempt ends ("connect: no route to host"). When it is one
// the host sent for another (a gateway's), the error goes to that source.

// unreachable reports pkt, a datagram from its network header on, as
// undeliverable to its next hop, and releases it.
func (s *Stack) unreachable(pkt *buffer.Packet) {
	if b := pkt.Bytes(); len(b) > 0 {
		switch b[0] >> 4 {
		case 4:
			s.ip.ReportError(b, ip.HostUnreachable)
		case 6:
			s.ip6.ReportError(b, ip.HostUnreachable)
		}
	}
	pkt.Release()
}

// arpHost is what a NIC's ARP tells the stack (arp.Host).
type arpHost struct{ s *Stack }

var _ arp.Host = arpHost{}

func (h arpHost) Unreachable(nextHop netip.Addr, pkt *buffer.Packet) { h.s.unreachable(pkt) }
