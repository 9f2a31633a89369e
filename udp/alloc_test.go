//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts mean something only without it: `make test` runs these in a step
// of their own.

package udp_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
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
