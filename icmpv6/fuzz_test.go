package icmpv6_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/wire"
)

// FuzzHandleIP feeds HandleIP ICMPv6 messages of any content: body is the
// message from its type byte on. When fix is set the checksum is made
// right, so that mutations get past it into echo, the received errors'
// walk of their quote and the handlers. dst picks the destination.
func FuzzHandleIP(f *testing.F) {
	body := func(d []byte) []byte { return d[wire.IPv6HeaderLen:] }
	f.Add(body(echo(f, peerAddr, ourAddr, wire.ICMPv6EchoRequest, 1, 2, data(56))), true, uint8(0))
	f.Add(body(echo(f, peerAddr, ourAddr, wire.ICMPv6EchoReply, 1, 2, data(56))), true, uint8(0))
	f.Add(body(errorAbout(f, peerAddr, ourAddr, wire.ICMPv6PacketTooBig, 0, 1300, udpDatagram(f, ourAddr, farAddr, 1, 2, 1400))), true, uint8(0))
	f.Add(body(errorAbout(f, peerAddr, ourAddr, wire.ICMPv6DestUnreach, 4, 0, udpDatagram(f, ourAddr, farAddr, 1, 2, 0))), true, uint8(1))
	f.Add(body(errorAbout(f, peerAddr, ourAddr, wire.ICMPv6ParamProblem, 1, 6, echo(f, ourAddr, farAddr, wire.ICMPv6EchoRequest, 3, 4, nil))), true, uint8(0))
	f.Add(body(icmpv6Datagram(f, peerLL, allNodes, wire.ICMPv6NeighborSolicitation, 0, make([]byte, 20))), true, uint8(2))
	f.Add([]byte{wire.ICMPv6EchoRequest, 0, 0}, false, uint8(0))
	dsts := []netip.Addr{ourAddr, ourLL, allNodes}
	f.Fuzz(func(t *testing.T, msg []byte, fix bool, dst uint8) {
		if len(msg) > wire.IPv6MaxPayloadLen-wire.ICMPv6HeaderLen {
			return
		}
		h := newHarness(t, icmpv6.Config{})
		src := peerAddr
		to := dsts[int(dst)%len(dsts)]
		if to != ourAddr {
			src = peerLL
		}
		d := make([]byte, wire.IPv6HeaderLen+len(msg))
		wire.EncodeIPv6(d, &wire.IPv6Fields{PayloadLen: len(msg), NextHeader: wire.ProtoICMPv6, HopLimit: 255, Src: src, Dst: to})
		copy(d[wire.IPv6HeaderLen:], msg)
		if fix && len(msg) >= wire.ICMPv6HeaderLen {
			fixChecksum(d)
		}
		h.inject(t, d)
		for _, s := range h.net.takeSent() {
			dec := decode(t, s)
			if dec.m.TypeCode.Type() != wire.ICMPv6EchoReply {
				t.Fatalf("sent type %d in answer to a message", dec.m.TypeCode.Type())
			}
		}
		for _, e := range append(h.udp.take(), h.tcp.take()...) {
			if len(e.Transport) < 8 || !e.DF || e.Kind == 0 {
				t.Fatalf("transport got %+v", e)
			}
			if e.Kind.String() == "packet too big" && e.MTU < wire.IPv6MinMTU {
				t.Fatalf("packet too big with MTU %d", e.MTU)
			}
		}
		for _, r := range h.net.takePMTU() {
			if r.mtu < wire.IPv6MinMTU {
				t.Fatalf("path MTU reported at %d, below 1280", r.mtu)
			}
		}
	})
}
