package ndp_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
)

// The link coming up puts every address through DAD again, tentative
// meanwhile (RFC 4862 sections 5.3 and 5.4), and then solicits routers
// from the link-local address (RFC 4861 section 6.3.7), until an
// advertisement answers.
func TestLinkUpRunsDADAgainThenSolicitsRouters(t *testing.T) {
	h := newHarness(t, ndp.Config{})
	// Start's DAD and solicitations, answered by a router.
	checkDADProbe(t, h.stepUntil(layers.ICMPv6TypeNeighborSolicitation), stackLL)
	checkRS(t, h.stepUntil(layers.ICMPv6TypeRouterSolicitation))
	if s, _ := h.host.addr(stackLL); s != ndp.Preferred {
		t.Fatalf("soliciting routers from a %v address", s)
	}
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{})
	h.clk.Advance(10 * ndp.RtrSolicitationInterval)
	h.drain()

	h.p.LinkUp()
	eventually(t, "the host told the address is tentative again", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Tentative })
	checkDADProbe(t, h.stepUntil(layers.ICMPv6TypeNeighborSolicitation), stackLL)
	// Not from a tentative address: the solicitations wait for DAD.
	checkRS(t, h.stepUntil(layers.ICMPv6TypeRouterSolicitation))
	if s, _ := h.host.addr(stackLL); s != ndp.Preferred {
		t.Fatalf("soliciting routers from a %v address", s)
	}
	// Solicited again until a router answers.
	checkRS(t, h.stepUntil(layers.ICMPv6TypeRouterSolicitation))
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{})
	h.clk.Advance(10 * ndp.RtrSolicitationInterval)
	h.none(layers.ICMPv6TypeRouterSolicitation)
	if s := &h.p.Stats; s.LinkUps.Load() != 1 || s.DADStarted.Load() != 2 || s.DADSucceeded.Load() != 2 {
		t.Errorf("LinkUps %d DADStarted %d DADSucceeded %d; want 1, 2, 2", s.LinkUps.Load(), s.DADStarted.Load(), s.DADSucceeded.Load())
	}
}

// A node that took the address while the link was down is found by the
// DAD the link coming up runs: the address is not used again.
func TestLinkUpFindsADuplicateTakenMeanwhile(t *testing.T) {
	h := newHarness(t, withDAD)
	checkDADProbe(t, h.stepUntil(layers.ICMPv6TypeNeighborSolicitation), stackLL)
	for i := 0; !h.preferred(stackLL); i++ {
		if i == 1000 {
			t.Fatal("the address never preferred")
		}
		h.clk.Advance(10 * time.Millisecond)
	}
	h.drain()
	h.p.LinkUp()
	eventually(t, "tentative again", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Tentative })
	// The other node's own DAD for the address.
	h.injectNS(msg{src: netip.IPv6Unspecified(), dst: ipv6.SolicitedNode(stackLL)}, stackLL)
	eventually(t, "the address found duplicate", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Duplicate })
	h.clk.Advance(2 * time.Second)
	h.none(layers.ICMPv6TypeNeighborSolicitation)
}

// The link coming up during a DAD run starts it again: its solicitation
// may have gone while the link was down. The first run ends; only the new
// one makes the address preferred.
func TestLinkUpDuringDADStartsItAgain(t *testing.T) {
	h := newHarness(t, withDAD)
	checkDADProbe(t, h.stepUntil(layers.ICMPv6TypeNeighborSolicitation), stackLL)
	h.p.LinkUp()
	checkDADProbe(t, h.stepUntil(layers.ICMPv6TypeNeighborSolicitation), stackLL)
	for i := 0; !h.preferred(stackLL); i++ {
		if i == 1000 {
			t.Fatal("the address never preferred")
		}
		h.clk.Advance(10 * time.Millisecond)
	}
	if n := h.p.Stats.DADSucceeded.Load(); n != 1 {
		t.Errorf("DADSucceeded = %d: the replaced run finished too", n)
	}
}

// stepUntil moves the clock on in steps of 10 ms, letting ndp's goroutines
// run between them, until ndp sends an ICMPv6 message of type typ, and
// returns it; it fails after 10 s of the clock's. Other messages are
// skipped.
func (h *harness) stepUntil(typ uint8) *frame {
	h.t.Helper()
	for range 1000 {
		h.sync()
		select {
		case raw := <-h.frames:
			if f := decode(raw); f.typ() == typ {
				return f
			}
			continue
		case <-time.After(2 * time.Millisecond):
		}
		h.clk.Advance(10 * time.Millisecond)
	}
	h.t.Fatalf("no ICMPv6 type %d sent within 10s of the clock", typ)
	return nil
}

// preferred reports whether the host was told addr is preferred.
func (h *harness) preferred(addr netip.Addr) bool {
	time.Sleep(time.Millisecond) // the announcer's goroutine tells the host
	s, _ := h.host.addr(addr)
	return s == ndp.Preferred
}

// An advertising interface whose link comes up advertises again as one
// that has just begun to (RFC 4861 section 6.2.4): at once, then its
// initial advertisements at most MAX_INITIAL_RTR_ADVERT_INTERVAL apart,
// rather than after the rest of a MaxRtrAdvInterval.
func TestLinkUpAdvertisesAgainAtOnce(t *testing.T) {
	h := newRouter(t)
	// Past the initial advertisements: the next is minutes away.
	var last time.Time
	for range ndp.MaxInitialRtrAdvertisements {
		_, last = h.nextRA(time.Second)
	}
	h.drain()
	h.p.LinkUp()
	_, at := h.nextRA(10 * time.Millisecond)
	if d := at.Sub(last); d >= ndp.MaxInitialRtrAdvertInterval {
		t.Errorf("advertised %v after the last one, want at once when the link came up", d)
	}
	_, next := h.nextRA(time.Second)
	if d := next.Sub(at); d > ndp.MaxInitialRtrAdvertInterval {
		t.Errorf("the next advertisement %v later, want an initial one's interval (at most %v)", d, ndp.MaxInitialRtrAdvertInterval)
	}
}
