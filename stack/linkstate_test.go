package stack_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
)

// A NIC's link going down and coming up reaches the stack's watchers, in
// order, and neighbour discovery, which starts over on the link; a link
// that never changes tells nothing.
func TestLinkStateReachesWatchersAndNeighbourDiscovery(t *testing.T) {
	var cable *pipe.Endpoint
	a, _ := stacktest.Pair(t, stacktest.Options{IPv6: true, WrapA: func(e link.Endpoint) link.Endpoint {
		cable = e.(*pipe.Endpoint)
		return e
	}})
	told := make(chan bool, 4)
	if err := a.WatchLink("eth0", func(up bool) { told <- up }); err != nil {
		t.Fatal(err)
	}
	if up, err := a.LinkUp("eth0"); err != nil || !up {
		t.Fatalf("LinkUp = %v, %v at start", up, err)
	}
	cable.SetUp(false)
	cable.SetUp(true)
	for _, want := range []bool{false, true} {
		select {
		case up := <-told:
			if up != want {
				t.Fatalf("told up=%v, want %v", up, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("not told up=%v", want)
		}
	}
	if n := a.Counters()["NDP.eth0.LinkUps"]; n != 1 {
		t.Errorf("NDP.eth0.LinkUps = %d, want 1", n)
	}
	// AddAddress's announcement, and the link's coming up's.
	if n := a.Counters()["ARP.eth0.OutGratuitous"]; n != 2 {
		t.Errorf("ARP.eth0.OutGratuitous = %d, want 2", n)
	}
	if err := a.WatchLink("nosuch", func(bool) {}); err == nil {
		t.Error("watching a NIC that is not there")
	}
}
