package igmp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/wire"
)

// FuzzHandleIP gives a host that joined a group, and another with a
// source list, any message, to all-systems and to the group, and runs its
// timers: nothing it receives may crash it, leak a buffer, or make it
// send an invalid message (the harness checks every one it sends).
func FuzzHandleIP(f *testing.F) {
	f.Add(v3Query(100, netip.IPv4Unspecified(), 2))
	f.Add(v3Query(0xff, g1, 7))
	f.Add(v2Message(wire.IGMPQuery, 0, netip.IPv4Unspecified()))
	f.Add(v2Message(wire.IGMPv2Report, 0, g1))
	f.Add(v2MessageV3Report(g1))
	f.Add(v3QueryAbout(100, g1, s1, s2))
	f.Add(v3QueryAbout(10, g2, s1))
	f.Fuzz(func(t *testing.T, msg []byte) {
		h := newHarness(t, Config{})
		join(g1)(h)
		set(g2, include(s1, s2))(h)
		h.receive(AllSystems, msg)
		h.receive(g1, msg)
		h.advance(time.Hour)
		h.p.Leave(g1)
		h.p.Leave(g2)
		h.advance(time.Hour)
		if n := groupRecords(h.p); n != 0 {
			t.Fatalf("%d group records an hour after the leaves", n)
		}
		if n := h.p.Stats.InMessages.Load(); n != 2 {
			t.Fatalf("InMessages = %d, want 2", n)
		}
	})
}
