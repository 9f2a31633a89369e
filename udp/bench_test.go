package udp_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

// BenchmarkUDPReceive measures the receive path from the wire to a reader:
// frames injected through the pipe, dealt by the NIC, validated by IPv4,
// demultiplexed by UDP, queued and read. One op is one datagram; in the
// steady state it must not allocate.
func BenchmarkUDPReceive(b *testing.B) {
	for _, batch := range []int{1, 32} {
		for _, size := range []int{64, 1472} {
			b.Run(fmt.Sprintf("batch=%d/size=%d", batch, size), func(b *testing.B) {
				h := rawtest.New(b, stack.Config{}, rawtest.Manual())
				c, err := h.S.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 7))
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				f := h.UDPFrame(b, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), make([]byte, size))
				buf := make([]byte, 2048)
				h.RoundTrips(b, f, batch, size, func(k int) {
					for range k {
						if m, _, err := c.ReadFromUDPAddrPort(buf); err != nil || m != size {
							b.Fatalf("read %d bytes: %v", m, err)
						}
					}
				})
			})
		}
	}
}
