//go:build !race

// The race detector makes sync.Pool drop items at random and its
// instrumentation allocates, so allocation counts mean something only
// without it: `make allocs` runs these.

package tcp_test

import "testing"

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
