package ipv4_test

import (
	"fmt"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

// BenchmarkEchoReply measures a round trip through the stack: an echo
// request injected through the pipe, dealt by the NIC, validated by IPv4,
// turned into its reply in place by ICMP, routed, resolved from the ARP
// cache and written back by the NIC. One op is one request and its reply;
// in the steady state it must not allocate.
func BenchmarkEchoReply(b *testing.B) {
	for _, batch := range []int{1, 32} {
		for _, size := range []int{56, 1472} {
			b.Run(fmt.Sprintf("batch=%d/size=%d", batch, size), func(b *testing.B) {
				h := rawtest.New(b, stack.Config{}, rawtest.Manual())
				pkts := h.NewFrameBuffers(64)
				defer func() {
					for _, p := range pkts {
						p.Release()
					}
				}()
				// Teach the stack the peer, and read its ARP reply.
				h.Inject(h.ARPFrame(b, layers.ARPRequest, rawtest.PeerMAC, rawtest.PeerAddr, nil, rawtest.StackAddr))
				if h.ReadFrames(pkts[:1]) != 1 {
					b.Fatal("no ARP reply")
				}
				f := h.EchoFrame(b, 1, 1, make([]byte, size))
				want := 14 + 20 + 8 + size
				h.RoundTrips(b, f, batch, size, func(k int) {
					h.TakeAnswers(pkts, k, func(p []byte) bool {
						if len(p) != want || p[14+20] != 0 {
							b.Fatalf("got a frame of %d bytes, type %d; want an echo reply of %d", len(p), p[14+20], want)
						}
						return true
					})
				})
			})
		}
	}
}

// BenchmarkReassembly measures an echo request of 3000 bytes arriving in
// three fragments and answered in three: the reassembly path, which by
// design starts an assembler goroutine per datagram. One op is one datagram.
func BenchmarkReassembly(b *testing.B) {
	h := rawtest.New(b, stack.Config{}, rawtest.Manual())
	pkts := h.NewFrameBuffers(64)
	defer func() {
		for _, p := range pkts {
			p.Release()
		}
	}()
	h.Inject(h.ARPFrame(b, layers.ARPRequest, rawtest.PeerMAC, rawtest.PeerAddr, nil, rawtest.StackAddr))
	if h.ReadFrames(pkts[:1]) != 1 {
		b.Fatal("no ARP reply")
	}
	hdr := rawtest.IPv4Header(rawtest.PeerAddr, rawtest.StackAddr, layers.IPProtocolICMPv4)
	frags := h.Fragments(b, hdr, rawtest.EchoBytes(b, 8, 1, 1, make([]byte, 3000)), 1480)
	run := func(n int) {
		for range n {
			h.Inject(frags...)
			for got := 0; got < 3; {
				got += h.ReadFrames(pkts[:3-got])
			}
		}
	}
	run(100)
	b.SetBytes(3000)
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
}
