package ipv6_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
)

// BenchmarkEchoReply is ipv4's benchmark of the same name over IPv6: an
// echo request injected through the pipe, dealt by the NIC, validated by
// IPv6, turned into its reply in place by ICMPv6, routed, sent on the
// neighbour cache's entry and written back by the NIC. One op is one
// request and its reply; the two benchmarks side by side are what IPv6
// costs the stack's own path per datagram, without a kernel around it.
func BenchmarkEchoReply(b *testing.B) {
	stackAddr := netip.MustParseAddr("2001:db8:1::2")
	peerAddr := netip.MustParseAddr("2001:db8:1::1")
	for _, batch := range []int{1, 32} {
		for _, size := range []int{56, 1452} {
			b.Run(fmt.Sprintf("batch=%d/size=%d", batch, size), func(b *testing.B) {
				h := rawtest.New(b, stack.Config{NDP: ndp.Config{NoDAD: true, NoRouterSolicitation: true, NoSLAAC: true}}, rawtest.IPv6(), rawtest.Manual())
				if err := h.S.AddAddress(rawtest.NIC, netip.PrefixFrom(stackAddr, 64)); err != nil {
					b.Fatal(err)
				}
				pkts := h.NewFrameBuffers(64)
				defer func() {
					for _, p := range pkts {
						p.Release()
					}
				}()
				// Teach the stack the peer with a solicitation, as the
				// kernel's first echo does; its entry is STALE, then
				// DELAY on the virtual clock that never moves on.
				h.Inject(frame6(b, peerAddr, ipv6.SolicitedNode(stackAddr), 255,
					&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)},
					&layers.ICMPv6NeighborSolicitation{TargetAddress: stackAddr.AsSlice(), Options: layers.ICMPv6Options{
						{Type: layers.ICMPv6OptSourceAddress, Data: rawtest.PeerMAC}}}))
				f := frame6(b, peerAddr, stackAddr, 64,
					&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)},
					&layers.ICMPv6Echo{Identifier: 1, SeqNumber: 1}, gopacket.Payload(make([]byte, size)))
				// The stack's other frames (its advertisement, MLD
				// reports) are passed over.
				want := 14 + 40 + 8 + size
				h.RoundTrips(b, f, batch, size, func(k int) {
					h.TakeAnswers(pkts, k, func(p []byte) bool {
						return len(p) == want && p[14+40] == byte(layers.ICMPv6TypeEchoReply)
					})
				})
			})
		}
	}
}

// frame6 is an Ethernet frame from the peer carrying an IPv6 datagram
// from src to dst with this hop limit and ICMPv6 message.
func frame6(tb testing.TB, src, dst netip.Addr, hops uint8, msg *layers.ICMPv6, rest ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	dstMAC := rawtest.StackMAC
	if m, ok := ipv6.MulticastMAC(dst); ok {
		dstMAC = m[:]
	}
	ip := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: hops, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	if err := msg.SetNetworkLayerForChecksum(ip); err != nil {
		tb.Fatal(err)
	}
	return rawtest.Serialize(tb, append([]gopacket.SerializableLayer{rawtest.Ethernet(rawtest.PeerMAC, dstMAC, layers.EthernetTypeIPv6), ip, msg}, rest...)...)
}
