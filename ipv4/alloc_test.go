//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts mean something only without it: `make test` runs these in a step
// of their own.

package ipv4_test

import (
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

// An echo request in and its reply out crosses every layer both ways:
// NIC, IPv4, ICMP, routing, the ARP cache, and the NIC's transmit queue.
func TestEchoRoundTripDoesNotAllocate(t *testing.T) {
	h := rawtest.New(t, stack.Config{}, rawtest.Manual())
	pkts := h.NewFrameBuffers(1)
	defer pkts[0].Release()
	h.Inject(h.ARPFrame(t, layers.ARPRequest, rawtest.PeerMAC, rawtest.PeerAddr, nil, rawtest.StackAddr))
	if h.ReadFrames(pkts) != 1 {
		t.Fatal("no ARP reply")
	}
	f := h.EchoFrame(t, 1, 1, make([]byte, 1472))
	once := func() {
		h.Inject(f)
		if h.ReadFrames(pkts) != 1 || pkts[0].Bytes()[14+20] != 0 {
			t.Fatal("no echo reply")
		}
	}
	for range 1000 { // warm the pools
		once()
	}
	if allocs := testing.AllocsPerRun(1000, once); allocs > 0 {
		t.Errorf("%.2f allocations per echo request answered, want 0", allocs)
	}
}
