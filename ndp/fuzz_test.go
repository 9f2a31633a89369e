package ndp_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// FuzzHandle hands ndp arbitrary ICMPv6 messages, their checksum made
// right so that the parsers behind it are reached, from a choice of
// sources and destinations and hop limits, to a host whose addresses are
// preferred or, with optimistic DAD whose clock never moves, optimistic
// (the bit 0x40 of who chooses): Handle must never panic, and must release
// every packet.
func FuzzHandle(f *testing.F) {
	seed := func(typ uint8, body []byte) []byte { return append([]byte{typ, 0, 0, 0}, body...) }
	target := stackLL.AsSlice()
	f.Add(seed(wire.ICMPv6NeighborSolicitation, append(make([]byte, 4), target...)), uint8(0), uint8(255))
	f.Add(seed(wire.ICMPv6NeighborAdvertisement, append([]byte{0x60, 0, 0, 0}, target...)), uint8(1), uint8(255))
	f.Add(seed(wire.ICMPv6RouterAdvertisement, []byte{64, 0, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0, 3, 4, 64, 0xc0, 0, 0, 0, 100, 0, 0, 0, 50, 0, 0, 0, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), uint8(2), uint8(255))
	// An RA with an RDNSS option naming 2001:db8::53 and a DNSSL option
	// naming lab.test.
	f.Add(seed(wire.ICMPv6RouterAdvertisement, []byte{64, 0, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0,
		25, 3, 0, 0, 0, 0, 0, 60, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x53,
		31, 3, 0, 0, 0, 0, 0, 60, 3, 'l', 'a', 'b', 4, 't', 'e', 's', 't', 0, 0, 0, 0, 0, 0, 0}), uint8(2), uint8(255))
	// An RA with a Route Information option for 2001:db8:77::/48, high.
	f.Add(seed(wire.ICMPv6RouterAdvertisement, []byte{64, 0, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0,
		24, 2, 48, 1 << 3, 0, 0, 7, 8, 0x20, 0x01, 0x0d, 0xb8, 0, 0x77, 0, 0}), uint8(2), uint8(255))
	f.Add(seed(wire.ICMPv6Redirect, make([]byte, 36)), uint8(2), uint8(255))
	f.Add(seed(wire.ICMPv6MLDQuery, make([]byte, 24)), uint8(2), uint8(1))
	f.Add(seed(wire.ICMPv6MLDQuery, make([]byte, 20)), uint8(2), uint8(1)) // MLDv1's
	f.Add(seed(wire.ICMPv6MLDv1Report, append(make([]byte, 4), ipv6.SolicitedNode(stackLL).AsSlice()...)), uint8(8), uint8(1))
	f.Add(seed(wire.ICMPv6RouterSolicitation, []byte{0, 0, 0, 0, 1, 0}), uint8(3), uint8(255))
	srcs := []netip.Addr{peerLL, netip.IPv6Unspecified(), routerLL, netip.MustParseAddr("2001:db8::1"), ipv6.AllNodes}
	dsts := []netip.Addr{stackLL, ipv6.SolicitedNode(stackLL), ipv6.AllNodes}
	h := newHarness(f, ndp.Config{NoRouterSolicitation: true, NoDAD: true})
	opt := newHarness(f, ndp.Config{NoRouterSolicitation: true, OptimisticDAD: true})
	f.Add(seed(wire.ICMPv6NeighborSolicitation, append(make([]byte, 4), target...)), uint8(0x40), uint8(255))
	f.Fuzz(func(t *testing.T, msg []byte, who uint8, hops uint8) {
		h := h
		if who&0x40 != 0 {
			h = opt
		}
		if len(msg) > 1400 {
			return
		}
		src, dst := srcs[int(who)%len(srcs)], dsts[int(who/8)%len(dsts)]
		pkt := h.pool.Get(wire.IPv6HeaderLen + len(msg))
		b := pkt.Bytes()
		wire.EncodeIPv6(b, &wire.IPv6Fields{PayloadLen: len(msg), NextHeader: wire.ProtoICMPv6, HopLimit: hops, Src: src, Dst: dst})
		copy(b[wire.IPv6HeaderLen:], msg)
		if len(msg) >= 4 {
			wire.SetICMPv6Checksum(b[wire.IPv6HeaderLen:], src, dst)
		}
		h.p.Handle(pkt, ip.Header{Src: src, Dst: dst, TTL: hops, Off: wire.IPv6HeaderLen}, who&0x80 != 0)
	})
}
