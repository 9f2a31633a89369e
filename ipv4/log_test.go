package ipv4_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/logtest"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

// IPv4 logs what a peer can trigger at will only at debug: a path MTU
// lowered, a datagram whose fragments timed out. At info, nothing.
func TestPMTUAndReassemblyEventsAreDebugOnly(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  []string
	}{
		{slog.LevelDebug, []string{"path MTU lowered", "fragment reassembly timed out"}},
		{slog.LevelInfo, nil},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			log, events := logtest.New(tc.level)
			h := rawtest.New(t, stack.Config{Logger: log})
			h.LearnPeer(t)
			h.S.IPv4().UpdatePMTU(rawtest.PeerAddr, 1400, 1500)
			frags := h.Fragments(t, echoHeader(5), rawtest.EchoBytes(t, 8, 1, 1, data(2000)), 800)
			h.Inject(frags[1])
			h.WaitCounter(t, "IPv4.ReasmReqds", 1)
			h.Advance(t, 1, 30*time.Second)
			h.WaitCounter(t, "IPv4.ReasmTimeouts", 1)
			if tc.want != nil {
				events.Wait(t, tc.want[1], 1)
			}
			var got []string
			for _, e := range events.Events(t) {
				switch e.Str("msg") {
				case "path MTU lowered":
					if e.Str("dst") != rawtest.PeerAddr.String() || e.Num("from") != 1500 || e.Num("mtu") != 1400 {
						t.Errorf("event %v: want dst %v, from 1500, mtu 1400", e, rawtest.PeerAddr)
					}
				case "fragment reassembly timed out":
					if e.Str("src") != rawtest.PeerAddr.String() || e.Str("dst") != rawtest.StackAddr.String() || e.Num("id") != 5 {
						t.Errorf("event %v: want src %v, dst %v, id 5", e, rawtest.PeerAddr, rawtest.StackAddr)
					}
				default:
					continue // the stack's NIC and address
				}
				if e.Str("level") != "DEBUG" {
					t.Errorf("event %v above debug", e)
				}
				got = append(got, e.Str("msg"))
			}
			if len(got) != len(tc.want) || (len(got) == 2 && (got[0] != tc.want[0] || got[1] != tc.want[1])) {
				t.Errorf("logged %q, want %q:\n%s", got, tc.want, events)
			}
		})
	}
}
