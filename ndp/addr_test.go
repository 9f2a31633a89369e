package ndp_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// withDAD is a configuration with DAD and no router solicitation.
var withDAD = ndp.Config{NoRouterSolicitation: true}

// checkDADProbe fails unless f is DAD's solicitation for target: from ::,
// to target's solicited-node group, with no link-layer address (RFC 4862
// section 5.4.2, RFC 4861 section 4.3) and a nonce (RFC 7527 section
// 4.1), which it returns.
func checkDADProbe(t *testing.T, f *frame, target netip.Addr) []byte {
	t.Helper()
	ns := f.pkt.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	group := ipv6.SolicitedNode(target)
	nonce := len(ns.Options) == 1 && ns.Options[0].Type == layers.ICMPv6Opt(wire.NDOptNonce) && len(ns.Options[0].Data) == wire.NDNonceSize
	if !f.ip6.SrcIP.Equal(ipOf(netip.IPv6Unspecified())) || !f.ip6.DstIP.Equal(ipOf(group)) || !ns.TargetAddress.Equal(ipOf(target)) || !nonce || f.ip6.HopLimit != 255 {
		t.Errorf("DAD probe %v > %v target %v options %v, want :: > %v target %v, a nonce alone", f.ip6.SrcIP, f.ip6.DstIP, ns.TargetAddress, ns.Options, group, target)
		return nil
	}
	return ns.Options[0].Data
}

func TestDADMakesTheLinkLocalAddressPreferred(t *testing.T) {
	h := newHarness(t, withDAD)
	if s, _ := h.host.addr(stackLL); s != ndp.Tentative {
		t.Fatalf("host told %v at start, want tentative", s)
	}
	h.clk.WaitPending(2) // DAD's random delay, MLD's retransmission
	h.clk.Advance(ndp.MaxRtrSolicitationDelay)
	checkDADProbe(t, h.next(layers.ICMPv6TypeNeighborSolicitation), stackLL)
	if s := h.addrState(stackLL); s != ndp.Tentative {
		t.Fatalf("%v before RetransTimer, want tentative", s)
	}
	h.clk.WaitPending(1)
	h.clk.Advance(ndp.RetransTimer)
	eventually(t, "the address to be preferred", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Preferred })
	if h.p.Stats.DADSucceeded.Load() != 1 || h.p.Stats.OutNeighborSolicits.Load() != 1 {
		t.Errorf("DADSucceeded %d OutNeighborSolicits %d, want 1 and 1", h.p.Stats.DADSucceeded.Load(), h.p.Stats.OutNeighborSolicits.Load())
	}
}

func TestDADFindsADuplicate(t *testing.T) {
	other := wire.MAC{0x02, 0, 0, 0, 0, 0x44}
	tests := []struct {
		name    string
		inject  func(h *harness)
		counter func(s *ndp.Stats) uint64
	}{
		{"a solicitation from :: for the address", func(h *harness) {
			h.injectNS(msg{src: netip.IPv6Unspecified(), dst: ipv6.SolicitedNode(stackLL)}, stackLL)
		}, func(s *ndp.Stats) uint64 { return s.InNeighborSolicits.Load() }},
		{"an advertisement of the address", func(h *harness) {
			h.injectNA(msg{src: stackLL, dst: ipv6.AllNodes}, stackLL, naOverride, llOpt(layers.ICMPv6OptTargetAddress, other))
		}, func(s *ndp.Stats) uint64 { return s.InNeighborAdvertisements.Load() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, withDAD)
			tt.inject(h)
			if tt.counter(&h.p.Stats) != 1 {
				t.Fatal("message not counted")
			}
			eventually(t, "the host to be told", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Duplicate })
			if s := h.addrState(stackLL); s != ndp.Duplicate || h.p.Stats.DADFailed.Load() != 1 {
				t.Errorf("state %v DADFailed %d, want duplicate, 1", s, h.p.Stats.DADFailed.Load())
			}
			// Not used, not defended, not probed any more.
			h.clk.Advance(2 * time.Second)
			h.none(layers.ICMPv6TypeNeighborSolicitation)
			h.injectNS(msg{src: peerLL, dst: ipv6.SolicitedNode(stackLL)}, stackLL, llOpt(layers.ICMPv6OptSourceAddress, peerMAC))
			h.none(layers.ICMPv6TypeNeighborAdvertisement)
		})
	}
}

func TestUnicastSolicitationForATentativeAddressIsIgnored(t *testing.T) {
	// RFC 4862 section 5.4.3: another node resolving the address is not
	// a duplicate, and gets no answer.
	h := newHarness(t, withDAD)
	h.injectNS(msg{src: peerLL, dst: ipv6.SolicitedNode(stackLL)}, stackLL, llOpt(layers.ICMPv6OptSourceAddress, peerMAC))
	h.none(layers.ICMPv6TypeNeighborAdvertisement)
	if s := h.addrState(stackLL); s != ndp.Tentative {
		t.Errorf("state %v, want tentative", s)
	}
}

func TestDefendsAPreferredAddressAgainstAnotherNodesDAD(t *testing.T) {
	h := newHarness(t, quiet)
	h.injectNS(msg{src: netip.IPv6Unspecified(), dst: ipv6.SolicitedNode(stackLL)}, stackLL)
	f := h.next(layers.ICMPv6TypeNeighborAdvertisement)
	na := f.pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	// RFC 4861 section 7.2.4: to all-nodes, Solicited clear.
	if !f.ip6.DstIP.Equal(ipOf(ipv6.AllNodes)) || na.Flags != naOverride {
		t.Errorf("NA to %v flags %#x, want all-nodes with O alone", f.ip6.DstIP, na.Flags)
	}
}

func TestStableAddressesRetryWithTheNextDADCounter(t *testing.T) {
	key := []byte("0123456789abcdef")
	cfg := withDAD
	cfg.SecretKey = key
	h := newHarness(t, cfg)
	in := &ipv6.StableIIDInputs{Prefix: ipv6.LinkLocalPrefix(), NetIface: stackMAC[:], SecretKey: key}
	var counter uint8
	for try := 0; try <= ndp.IDGenRetries; try++ {
		iid, c, err := ipv6.StableIID(in, counter)
		if err != nil {
			t.Fatal(err)
		}
		addr := ipv6.LinkLocal(iid)
		eventually(t, "the address to be tentative", func() bool { s, _ := h.host.addr(addr); return s == ndp.Tentative })
		h.injectNS(msg{src: netip.IPv6Unspecified(), dst: ipv6.SolicitedNode(addr)}, addr)
		if s := h.addrState(addr); s != ndp.Duplicate {
			t.Fatalf("try %d: %v is %v, want duplicate", try, addr, s)
		}
		counter = c + 1
	}
	if got := h.p.Stats.DADRetries.Load(); got != ndp.IDGenRetries {
		t.Errorf("DADRetries = %d, want IDGEN_RETRIES = %d", got, ndp.IDGenRetries)
	}
	for _, a := range h.p.Addresses() {
		if a.State != ndp.Duplicate {
			t.Errorf("%v is %v after the last retry, want no address but duplicates", a.Prefix, a.State)
		}
	}
}

func TestStaticAddressGoesThroughDAD(t *testing.T) {
	h := newHarness(t, withDAD)
	addr := netip.MustParsePrefix("2001:db8::7/64")
	if err := h.p.AddStatic(addr); err != nil {
		t.Fatal(err)
	}
	if err := h.p.AddStatic(addr); err == nil {
		t.Error("the same address added twice")
	}
	h.sync()
	if s, _ := h.host.addr(addr.Addr()); s != ndp.Tentative {
		t.Fatalf("host told %v, want tentative", s)
	}
	h.injectNA(msg{src: addr.Addr(), dst: ipv6.AllNodes}, addr.Addr(), naOverride, llOpt(layers.ICMPv6OptTargetAddress, peerMAC))
	if s := h.addrState(addr.Addr()); s != ndp.Duplicate {
		t.Errorf("state %v, want duplicate", s)
	}
	if n := h.p.Stats.DADRetries.Load(); n != 0 {
		t.Errorf("a static address retried (%d): RFC 7217 forms only its own", n)
	}
}

// TestLeasedAddressLifetimesAreTheServers pins Lease: a /128 through DAD,
// its lifetimes as the server gives them (no two-hour rule), taken away
// with a zero valid lifetime, and refused over an address of another
// origin.
func TestLeasedAddressLifetimesAreTheServers(t *testing.T) {
	h := newHarness(t, quiet)
	leased := netip.MustParseAddr("2001:db8::100")
	if err := h.p.Lease(leased, 2*time.Hour, time.Hour); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leased address", func() bool { s, _ := h.host.addr(leased); return s == ndp.Preferred })
	// Shortened to ten minutes: the server's word holds.
	if err := h.p.Lease(leased, 10*time.Minute, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, a := range h.p.Addresses() {
		if a.Prefix.Addr() == leased && (a.Prefix.Bits() != 128 || a.ValidUntil.Sub(start) != 10*time.Minute) {
			t.Errorf("leased %v valid until %v, want a /128 for 10 minutes", a.Prefix, a.ValidUntil.Sub(start))
		}
	}
	if err := h.p.Lease(leased, 0, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the address taken away", func() bool { _, ok := h.host.addr(leased); return !ok })
	if err := h.p.Lease(slaacOrStatic(t, h), time.Hour, time.Hour); err == nil {
		t.Error("Lease took over a static address")
	}
}

func slaacOrStatic(t *testing.T, h *harness) netip.Addr {
	t.Helper()
	static := netip.MustParsePrefix("2001:db8::5/64")
	if err := h.p.AddStatic(static); err != nil {
		t.Fatal(err)
	}
	return static.Addr()
}

// TestOwnProbeLoopedBackIsNoDuplicate pins RFC 7527 section 4.2: a DAD
// probe carrying our own nonce is ours come back over a looped link, not
// another node's, and leaves the address's DAD to go on; one with another
// nonce is another node's.
func TestOwnProbeLoopedBackIsNoDuplicate(t *testing.T) {
	for _, own := range []bool{true, false} {
		h := newHarness(t, withDAD)
		h.clk.WaitPending(2) // DAD's delay, MLD's retransmission
		h.clk.Advance(ndp.MaxRtrSolicitationDelay)
		nonce := checkDADProbe(t, h.next(layers.ICMPv6TypeNeighborSolicitation), stackLL)
		if !own {
			nonce = []byte{9, 9, 9, 9, 9, 9}
		}
		h.injectNS(msg{src: netip.IPv6Unspecified(), dst: ipv6.SolicitedNode(stackLL)}, stackLL, layers.ICMPv6Option{Type: layers.ICMPv6Opt(wire.NDOptNonce), Data: nonce})
		want, looped := ndp.Duplicate, uint64(0)
		if own {
			h.clk.WaitPending(1)
			h.clk.Advance(ndp.RetransTimer)
			want, looped = ndp.Preferred, 1
		}
		eventually(t, want.String(), func() bool { s, _ := h.host.addr(stackLL); return s == want })
		if n := h.p.Stats.DADLoopedBack.Load(); n != looped {
			t.Errorf("own nonce %v: DADLoopedBack = %d, want %d", own, n, looped)
		}
	}
}
