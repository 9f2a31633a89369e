//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts mean something only without it: `make test` runs these in a step
// of their own.

package udp_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/internal/testkit/v6test"
	"github.com/gonetstack/gonet/stack"
)

func TestUDPReceivePathDoesNotAllocate(t *testing.T) {
	h := rawtest.New(t, stack.Config{}, rawtest.Manual())
	c, err := h.S.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 7))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), make([]byte, 1472))
	buf := make([]byte, 2048)
	once := func() {
		h.Inject(f)
		if n, _, err := c.ReadFromUDPAddrPort(buf); err != nil || n != 1472 {
			t.Fatalf("read %d bytes: %v", n, err)
		}
	}
	for range 1000 { // warm the pools
		once()
	}
	if allocs := testing.AllocsPerRun(1000, once); allocs > 0 {
		t.Errorf("%.2f allocations per datagram received, want 0", allocs)
	}
}

// Over IPv6 too: a datagram sent, carried by v6test's link, and read costs
// no allocation, global or link-local (whose zone rides beside the queue).
func TestUDPOverIPv6DoesNotAllocate(t *testing.T) {
	for _, tt := range []struct{ name, srv, to string }{
		{"global", "[::]:7", "[2001:db8:1::2]:7"},
		{"link-local", "[::]:7", "[fe80::2%eth0]:7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := v6test.Pair(t, v6test.Options{})
			srv := listenOn(t, b.UDP, tt.srv)
			cli := listenOn(t, a.UDP, "[::]:0")
			to := netip.MustParseAddrPort(tt.to)
			data := make([]byte, 1400)
			buf := make([]byte, 2048)
			once := func() {
				if _, err := cli.WriteToUDPAddrPort(data, to); err != nil {
					t.Fatal(err)
				}
				if n, _, err := srv.ReadFromUDPAddrPort(buf); err != nil || n != len(data) {
					t.Fatalf("read %d bytes: %v", n, err)
				}
			}
			for range 1000 {
				once()
			}
			if allocs := testing.AllocsPerRun(1000, once); allocs > 0 {
				t.Errorf("%.2f allocations per datagram, want 0", allocs)
			}
		})
	}
}
