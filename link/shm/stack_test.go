package shm

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
)

// stackPair returns two stacks joined by a ring link, as two processes
// would be: the endpoints come from Listen and Dial over a socket in a
// temporary directory. Both are closed and checked for leaks when the
// test ends.
func stackPair(t *testing.T, o Options) (a, b *stack.Stack, ea, eb *Endpoint) {
	t.Helper()
	eb, ea = pair(t, o, o)
	a, b = stack.New(stack.Config{}), stack.New(stack.Config{})
	t.Cleanup(func() {
		stacktest.LogCountersOnFailure(t, map[string]*stack.Stack{"A": a, "B": b}, map[string]any{"A": ea.Stats(), "B": eb.Stats()})
		stacktest.Closed(t, a)
		stacktest.Closed(t, b)
	})
	for _, x := range []struct {
		s    *stack.Stack
		ep   *Endpoint
		addr netip.Prefix
	}{{a, ea, stacktest.AddrA}, {b, eb, stacktest.AddrB}} {
		if err := x.s.AddNIC("eth0", x.ep); err != nil {
			t.Fatal(err)
		}
		if err := x.s.AddAddress("eth0", x.addr); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, ea, eb
}

// Two GoNet stacks ping each other over the ring link and move 16 MiB
// each way over TCP, checked by SHA-256; with offloads on both sides, TCP
// sends 64 KiB super-segments that cross whole, copied into the ring from
// its send buffer.
func TestStacksTalkTCPOverTheRing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offload bool
	}{{"offloads", true}, {"no offloads", false}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, ea, eb := stackPair(t, Options{Offload: tc.offload})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if _, err := a.Ping(ctx, stacktest.AddrB.Addr(), 1000); err != nil {
				t.Fatalf("ping: %v", err)
			}
			size := 16 << 20
			if testing.Short() || raceEnabled {
				size = 2 << 20
			}
			stacktest.EchoIntact(t, a, b, size, 60*time.Second)
			for name, e := range map[string]*Endpoint{"A": ea, "B": eb} {
				s := e.Stats()
				if s.Garbage.Load() != 0 || s.TxErrors.Load() != 0 || s.PeerGone.Load() != 0 {
					t.Errorf("%s's link: %v", name, counters(e))
				}
				if s.TxBytes.Load() < uint64(size) {
					t.Errorf("%s's link sent %d bytes, less than the transfer", name, s.TxBytes.Load())
				}
				// A super-segment is at least two segments: with
				// offloads, frames average well over the MTU.
				avg := s.TxBytes.Load() / max(s.TxFrames.Load(), 1)
				if tc.offload && avg < 3000 {
					t.Errorf("%s's link: frames of %d bytes on average: no super-segments", name, avg)
				}
				// TCP's payload is copied into the ring from its send
				// buffer (link.Capabilities.TxGather), not into a frame
				// first.
				if g := s.TxGathered.Load(); tc.offload != (g != 0) {
					t.Errorf("%s's link: %d frames gathered from loans with offloads %v", name, g, tc.offload)
				}
				t.Logf("%s's link: %v", name, counters(e))
			}
		})
	}
}
