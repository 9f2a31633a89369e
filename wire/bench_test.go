package wire_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/wire"
)

// sink keeps the compiler from discarding benchmarked results.
var sink uint16

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{64, 1500, 65535} {
		buf := make([]byte, n)
		r := rand.New(rand.NewPCG(1, uint64(n)))
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				sink ^= wire.Checksum(buf, 0)
			}
		})
	}
}

func BenchmarkParseIPv4(b *testing.B) {
	buf := make([]byte, 1500)
	wire.EncodeIPv4(buf, &wire.IPv4Fields{
		TotalLen: 1500,
		TTL:      64,
		Protocol: wire.ProtoUDP,
		Src:      netip.MustParseAddr("192.0.2.1"),
		Dst:      netip.MustParseAddr("198.51.100.7"),
	})
	b.SetBytes(wire.IPv4MinHeaderLen)
	b.ReportAllocs()
	for b.Loop() {
		h, e := wire.ParseIPv4(buf)
		if e != wire.IPv4OK {
			b.Fatal(e)
		}
		sink ^= uint16(h.TotalLen())
	}
}
