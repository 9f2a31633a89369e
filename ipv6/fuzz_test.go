package ipv6_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// FuzzReceive feeds the dealer's receive path: validation, acceptance, the
// chain, reassembly (fragments of earlier inputs stay in the same layer)
// and delivery. dst, when below 4, puts one of the destinations the layer
// accepts into the datagram, so that mutations get past acceptance.
func FuzzReceive(f *testing.F) {
	f.Add(whole(f, peerAddr, ourAddr, protoTest, data(16)), uint8(255))
	f.Add(whole(f, peerLL, ipv6.AllNodes, 200, data(8)), uint8(255))
	f.Add([]byte(datagram(ourAddr, wire.ProtoHopByHop, padded(wire.ProtoDestOpts), options(protoTest, 0x9e), udp8)), uint8(0))
	f.Add([]byte(datagram(ourAddr, wire.ProtoRouting, routing(protoTest, 0, 1), udp8)), uint8(0))
	for _, fr := range frags(f, peerAddr, ourAddr, wire.ProtoDestOpts, 3, padded(protoTest), data(3000), 1232) {
		f.Add(fr, uint8(0))
	}
	f.Add(frag(f, peerAddr, ourAddr, wire.ProtoDestOpts, 5, 0, true, padded(protoUDP)), uint8(0))
	f.Add(frag(f, peerAddr, ourAddr, protoTest, 6, 0, false, data(8)), uint8(1))
	dsts := []netip.Addr{ourAddr, ourLL, ipv6.AllNodes, ipv6.SolicitedNode(ourAddr)}
	h := newHarness(f, ipv6.Config{MaxReassemblies: 8})
	f.Fuzz(func(t *testing.T, b []byte, dst uint8) {
		if int(dst) < len(dsts) && len(b) >= wire.IPv6HeaderLen {
			a := dsts[dst].As16()
			copy(b[24:40], a[:])
		}
		before := h.counters()["InReceives"]
		h.inject(t, h.eth0, b)
		if got := h.counters()["InReceives"]; got != before+1 {
			t.Fatalf("InReceives went from %d to %d", before, got)
		}
		for _, e := range h.icmp.take() {
			if e.Type == wire.ICMPv6ParamProblem && int(e.Param) >= len(e.Orig) {
				t.Fatalf("pointer %d past the %d-byte datagram", e.Param, len(e.Orig))
			}
			if src := e.Orig.Src(); src.IsMulticast() || src.IsUnspecified() {
				t.Fatalf("error asked for about a datagram from %v", src)
			}
			if e.Orig.Dst().IsMulticast() && !(e.Type == wire.ICMPv6ParamProblem && e.Code == wire.ICMPv6CodeUnrecognizedOpt) {
				t.Fatalf("error type %d code %d about a datagram to %v", e.Type, e.Code, e.Orig.Dst())
			}
		}
		for _, d := range h.tr.take() {
			if d.h.Off < wire.IPv6HeaderLen || d.h.Off > len(d.b) {
				t.Fatalf("transport header at %d of a %d-byte datagram", d.h.Off, len(d.b))
			}
		}
	})
}
