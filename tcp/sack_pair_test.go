package tcp_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// GoNet to GoNet through a lossy, reordering wire: with SACK and RACK-TLP
// on both sides every byte comes back, recovery runs on the scoreboard
// and RACK finds the losses; with both off the same echo is repaired by
// NewReno, and none of the SACK counters move.
func TestSACKEchoBetweenGoNets(t *testing.T) {
	cfg, err := fault.ParseSpec("loss=0.03,reorder=0.03,dup=0.01,corrupt=0.005,seed=5")
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []bool{false, true} {
		name := "SACK and RACK-TLP"
		if off {
			name = "both off"
		}
		t.Run(name, func(t *testing.T) {
			tc := tcp.Config{RTOMin: 20 * time.Millisecond, RTOInitial: 100 * time.Millisecond, DisableSACK: off, DisableRACK: off}
			a, b := pair(t, stack.Config{TCP: tc}, &cfg)
			echoServer(t, b)
			c := dial(t, a, 7)
			transfer(t, c, 4<<20, a, b)
			c.Close()
			sackCounters := []string{"SACKRecovery", "SACKRetrans", "RACKLoss"}
			for i, s := range []*stack.Stack{a, b} {
				ct := s.Counters()
				t.Logf("stack %d: Timeouts %d FastRetrans %d SACKRecovery %d SACKRetrans %d RACKLoss %d DSACKRecv %d LossProbes %d",
					i, ct["TCP.Timeouts"], ct["TCP.FastRetrans"], ct["TCP.SACKRecovery"], ct["TCP.SACKRetrans"],
					ct["TCP.RACKLoss"], ct["TCP.DSACKRecv"], ct["TCP.LossProbes"])
				for _, n := range sackCounters {
					if v := ct["TCP."+n]; off && v != 0 || !off && v == 0 {
						t.Errorf("stack %d: TCP.%s = %d with SACK off=%v", i, n, v, off)
					}
				}
			}
		})
	}
}
