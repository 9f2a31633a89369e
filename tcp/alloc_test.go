//go:build !race

// The race detector makes sync.Pool drop items at random and its
// instrumentation allocates, so allocation counts mean something only
// without it: `make allocs` runs these.

package tcp_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/v6test"
	"github.com/gonetstack/gonet/tcp"
)

// Each case runs the steady-state data path of two stacks joined by the
// in-memory wire, both stacks' goroutines counted: the application's Write
// and Read, the connection's run loop and mailbox, segment building and
// parsing, the retransmission queue, the timers, and the layers below; with
// loss, SACK parsing, the scoreboard and the out-of-order queue too.
func TestTCPDataPathDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(testing.TB) func()
	}{
		{"1-byte request-response", func(tb testing.TB) func() {
			return transaction(tb, echoPair(tb, echoSetup{}), false)
		}},
		{"1-byte request-response with deadlines set per transaction", func(tb testing.TB) func() {
			return transaction(tb, echoPair(tb, echoSetup{deadlines: true}), true)
		}},
		{"64 KiB write echoed back", func(tb testing.TB) func() {
			return bulkEcho(tb, echoPair(tb, echoSetup{}), 64<<10)
		}},
		{"64 KiB write echoed back with 1% loss: SACK, out-of-order queue, retransmissions", func(tb testing.TB) func() {
			return bulkEcho(tb, echoPair(tb, echoSetup{loss: 0.01}), 64<<10)
		}},
		{"over IPv6: 1-byte request-response", func(tb testing.TB) func() {
			return transaction(tb, echoPair6(tb, 0), false)
		}},
		{"over IPv6: 64 KiB write echoed back", func(tb testing.TB) func() {
			return bulkEcho(tb, echoPair6(tb, 0), 64<<10)
		}},
		{"over IPv6: 64 KiB write echoed back, every 50th datagram lost", func(tb testing.TB) func() {
			return bulkEcho(tb, echoPair6(tb, 50), 64<<10)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			once := tc.op(t)
			for range 200 { // warm the pools and grow the queues
				once()
			}
			if allocs := testing.AllocsPerRun(200, once); allocs > 0 {
				t.Errorf("%.2f allocations per op, want 0", allocs)
			}
		})
	}
}

// echoPair6 is echoPair over v6test's IPv6 link, dropping every dropEvery'th
// datagram from A (none when zero).
func echoPair6(tb testing.TB, dropEvery int) *tcp.Conn {
	tb.Helper()
	o := v6test.Options{}
	if dropEvery > 0 {
		o.Drop = func(n int, _ []byte) bool { return n > 3 && n%dropEvery == 0 }
	}
	a, b := v6test.Pair(tb, o)
	l, err := b.TCP.Listen(netip.MustParseAddrPort("[::]:7"), 0)
	if err != nil {
		tb.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	tb.Cleanup(func() { l.Close() })
	c, err := a.TCP.Dial(context.Background(), netip.AddrPort{}, netip.MustParseAddrPort("[2001:db8:1::2]:7"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
