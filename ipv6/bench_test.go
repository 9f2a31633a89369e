package ipv6_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
)

// counting is a transport that only counts and releases.
type counting struct{ n int }

func (c *counting) HandleIP(pkt *buffer.Packet, _ ip.Header) {
	c.n++
	pkt.Release()
}

// BenchmarkReceive measures the dealer on batches of 64 whole datagrams
// with a Destination Options header, to a global and to a link-local
// address (zoned on delivery). One op is one datagram; the Sync per batch
// is part of the cost.
func BenchmarkReceive(b *testing.B) {
	for _, tc := range []struct {
		name     string
		src, dst netip.Addr
	}{{"global", peerAddr, ourAddr}, {"link-local", peerLL, ourLL}} {
		b.Run(tc.name, func(b *testing.B) {
			h := newHarness(b, ipv6.Config{})
			c := &counting{}
			h.p.Register(protoTest, c)
			dg := whole(b, tc.src, tc.dst, 60, append(padded(protoTest), data(64)...))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += buffer.MaxBatch {
				bt := buffer.GetBatch()
				for range min(buffer.MaxBatch, b.N-i) {
					pk := h.env.Pool.Get(len(dg))
					copy(pk.Bytes(), dg)
					bt.Pkts = append(bt.Pkts, pk)
				}
				h.eth0.Deliver(bt)
				h.sync(b)
			}
			if c.n != b.N {
				b.Fatalf("delivered %d of %d", c.n, b.N)
			}
		})
	}
}
