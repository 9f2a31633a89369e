package ndp_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
)

// Optimistic DAD (RFC 4429): Config.OptimisticDAD.

// optimistic is withDAD with optimistic DAD.
var optimistic = ndp.Config{NoRouterSolicitation: true, OptimisticDAD: true}

// passDAD lets the link-local address's DAD run out: its random delay,
// its one solicitation, RetransTimer.
func (h *harness) passDAD() {
	h.t.Helper()
	h.clk.WaitPending(2) // DAD's delay, MLD's retransmission
	h.clk.Advance(ndp.MaxRtrSolicitationDelay)
	h.next(layers.ICMPv6TypeNeighborSolicitation)
	h.clk.WaitPending(1)
	h.clk.Advance(ndp.RetransTimer)
}

// TestOptimisticAddressesAreUsedWhileDADRuns pins RFC 4429 sections 3.1
// and 3.2: an address whose identifier is most likely unique is
// optimistic, so in use, from the start of its DAD and preferred at its
// end; a static one stays tentative, as section 3.1 asks of "manually
// entered addresses".
func TestOptimisticAddressesAreUsedWhileDADRuns(t *testing.T) {
	h := newHarness(t, optimistic)
	if s, _ := h.host.addr(stackLL); s != ndp.Optimistic || !s.Usable() {
		t.Fatalf("link-local address told the host %v at start, want optimistic", s)
	}
	h.passDAD()
	eventually(t, "the link-local address to be preferred", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Preferred })
	static := netip.MustParsePrefix("2001:db8::7/64")
	if err := h.p.AddStatic(static); err != nil {
		t.Fatal(err)
	}
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{Options: layers.ICMPv6Options{prefixInfo{prefix1, true, true, 100, 100}.opt()}})
	h.sync()
	for addr, want := range map[netip.Addr]ndp.AddrState{slaac1: ndp.Optimistic, static.Addr(): ndp.Tentative} {
		if s, _ := h.host.addr(addr); s != want {
			t.Errorf("%v told the host %v, want %v", addr, s, want)
		}
	}
}

// TestOptimisticAddressIsGivenUpOnADuplicate pins RFC 4429 section 3.3:
// DAD's evidence of a duplicate, another node's probe or its
// advertisement, ends an optimistic address as it does a tentative one.
func TestOptimisticAddressIsGivenUpOnADuplicate(t *testing.T) {
	tests := []struct {
		name   string
		inject func(h *harness)
	}{
		{"a solicitation from ::", func(h *harness) {
			h.injectNS(msg{src: netip.IPv6Unspecified(), dst: ipv6.SolicitedNode(stackLL)}, stackLL)
		}},
		{"an advertisement", func(h *harness) {
			h.injectNA(msg{src: stackLL, dst: ipv6.AllNodes}, stackLL, naOverride, llOpt(layers.ICMPv6OptTargetAddress, peerMAC))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, optimistic)
			tt.inject(h)
			eventually(t, "the host to be told", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Duplicate })
			if h.p.Stats.DADFailed.Load() != 1 {
				t.Errorf("DADFailed = %d, want 1", h.p.Stats.DADFailed.Load())
			}
			h.none(layers.ICMPv6TypeNeighborAdvertisement) // not defended
		})
	}
}

// TestOptimisticAddressAnswersResolutionWithoutOverride pins RFC 4429
// section 2.2: a solicitation for an optimistic address from a unicast
// source is answered (a tentative one's is not), with Override clear,
// so that the asker's entry for the address's owner, should DAD find
// one, stands.
func TestOptimisticAddressAnswersResolutionWithoutOverride(t *testing.T) {
	h := newHarness(t, optimistic)
	h.injectNS(msg{src: peerLL, dst: ipv6.SolicitedNode(stackLL)}, stackLL, llOpt(layers.ICMPv6OptSourceAddress, peerMAC))
	f := h.next(layers.ICMPv6TypeNeighborAdvertisement)
	na := f.pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if !na.TargetAddress.Equal(ipOf(stackLL)) || na.Flags != naSolicited {
		t.Errorf("NA target %v flags %#x, want %v S alone", na.TargetAddress, na.Flags, stackLL)
	}
	h.passDAD()
	eventually(t, "the address to be preferred", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Preferred })
	h.injectNS(msg{src: peerLL, dst: stackLL}, stackLL, llOpt(layers.ICMPv6OptSourceAddress, peerMAC))
	f = h.next(layers.ICMPv6TypeNeighborAdvertisement)
	if na := f.pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement); na.Flags != naSolicited|naOverride {
		t.Errorf("NA once preferred: flags %#x, want S|O", na.Flags)
	}
}

// TestSolicitationsFromAnOptimisticAddressCarryNoLinkLayerAddress pins
// RFC 4429 section 2.2 ("MUST NOT use an Optimistic Address as the source
// address of a Neighbor Solicitation with a Source Link-Layer Address
// Option") for address resolution: from another address of ours that
// may carry it, when there is one, else from the optimistic one without.
func TestSolicitationsFromAnOptimisticAddressCarryNoLinkLayerAddress(t *testing.T) {
	leased := netip.MustParseAddr("2001:db8::99")
	peer := netip.MustParseAddr("2001:db8::2")
	tests := []struct {
		name    string
		passDAD bool // the link-local address's
		from    netip.Addr
		wantSrc netip.Addr
		wantMAC bool
	}{
		{"the only address optimistic", false, stackLL, stackLL, false},
		{"a preferred link-local address beside", true, leased, stackLL, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, optimistic)
			if tt.passDAD {
				h.passDAD()
				eventually(t, "the link-local address to be preferred", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Preferred })
			}
			if err := h.p.Lease(leased, 3600e9, 3600e9); err != nil {
				t.Fatal(err)
			}
			h.sync()
			if s, _ := h.host.addr(leased); s != ndp.Optimistic {
				t.Fatalf("a DHCPv6 lease told the host %v, want optimistic", s)
			}
			h.p.Output(peer, h.datagram(tt.from, peer, "x"))
			var sol *layers.ICMPv6NeighborSolicitation
			var f *frame
			for sol == nil || !sol.TargetAddress.Equal(ipOf(peer)) {
				f = h.next(layers.ICMPv6TypeNeighborSolicitation)
				sol = f.pkt.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
			}
			_, hasMAC := optMAC(sol.Options, layers.ICMPv6OptSourceAddress)
			if !f.ip6.SrcIP.Equal(ipOf(tt.wantSrc)) || hasMAC != tt.wantMAC {
				t.Errorf("NS from %v with our link-layer address %v, want from %v, %v", f.ip6.SrcIP, hasMAC, tt.wantSrc, tt.wantMAC)
			}
		})
	}
}

// TestRouterSolicitationGoesFromAnOptimisticLinkLocalAddress pins RFC 4429
// section 2.4: routers are solicited at once, not after the link-local
// address's DAD, from that address without our link-layer address.
func TestRouterSolicitationGoesFromAnOptimisticLinkLocalAddress(t *testing.T) {
	h := newHarness(t, ndp.Config{OptimisticDAD: true})
	h.clk.WaitPending(3) // DAD's delay, the solicitation's, MLD's retransmission
	h.clk.Advance(ndp.MaxRtrSolicitationDelay)
	f := h.next(layers.ICMPv6TypeRouterSolicitation)
	rs := f.pkt.Layer(layers.LayerTypeICMPv6RouterSolicitation).(*layers.ICMPv6RouterSolicitation)
	if _, hasMAC := optMAC(rs.Options, layers.ICMPv6OptSourceAddress); !f.ip6.SrcIP.Equal(ipOf(stackLL)) || hasMAC {
		t.Errorf("RS from %v with our link-layer address %v, want from %v without", f.ip6.SrcIP, hasMAC, stackLL)
	}
	if s := h.addrState(stackLL); s != ndp.Optimistic {
		t.Errorf("link-local address %v when the RS went, want optimistic", s)
	}
}

// TestLinkUpKeepsOptimisticAddressesInUse pins what optimistic DAD buys a
// link that flaps: the addresses go through DAD again optimistic, not
// tentative, so connections over them go on meanwhile.
func TestLinkUpKeepsOptimisticAddressesInUse(t *testing.T) {
	h := newHarness(t, optimistic)
	h.passDAD()
	eventually(t, "the address to be preferred", func() bool { s, _ := h.host.addr(stackLL); return s == ndp.Preferred })
	h.p.LinkUp()
	h.sync()
	if s, _ := h.host.addr(stackLL); s != ndp.Optimistic {
		t.Errorf("after the link came up the host was told %v, want optimistic", s)
	}
}

func TestARouterRefusesOptimisticDAD(t *testing.T) {
	h := newHarness(t, optimistic)
	if err := h.p.Advertise(ndp.RouterConfig{}); err == nil {
		t.Error("Advertise took an interface with optimistic DAD")
	}
}

// TestDatagramFromAnOptimisticAddressGoesThroughARouter pins RFC 4429
// section 2.3: with no address of ours a solicitation could carry our
// link-layer address from, a datagram to a neighbour not in the cache
// goes to a default router already in it, rather than to a solicitation
// a neighbour that does not know us would ignore.
func TestDatagramFromAnOptimisticAddressGoesThroughARouter(t *testing.T) {
	h := newHarness(t, optimistic)
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 1800, Options: layers.ICMPv6Options{
		llOpt(layers.ICMPv6OptSourceAddress, routerMAC), prefixInfo{prefix1, true, true, 100, 100}.opt(),
	}})
	h.sync()
	if s, _ := h.host.addr(slaac1); s != ndp.Optimistic {
		t.Fatalf("SLAAC address told the host %v, want optimistic", s)
	}
	peer := netip.MustParseAddr("2001:db8:1::2")
	h.p.Output(peer, h.datagram(slaac1, peer, "via the router"))
	f := h.nextData()
	if !bytes.Equal(f.eth.DstMAC, routerMAC[:]) || string(f.ip6.Payload) != "via the router" {
		t.Errorf("datagram sent to %v (%q), want the router's %v", f.eth.DstMAC, f.ip6.Payload, routerMAC)
	}
	if n := h.p.Stats.OptimisticDetours.Load(); n != 1 {
		t.Errorf("OptimisticDetours = %d, want 1", n)
	}
	if _, ok := h.p.Neighbor(peer); ok {
		t.Error("the neighbour was solicited as well")
	}
	// Once the addresses have passed DAD, the neighbour is solicited,
	// with our link-layer address.
	eventually(t, "the addresses to be preferred", func() bool {
		h.clk.Advance(100 * time.Millisecond)
		ll, _ := h.host.addr(stackLL)
		global, _ := h.host.addr(slaac1)
		return ll == ndp.Preferred && global == ndp.Preferred
	})
	h.p.Output(peer, h.datagram(slaac1, peer, "direct"))
	for {
		f := h.next(layers.ICMPv6TypeNeighborSolicitation)
		ns := f.pkt.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
		if !ns.TargetAddress.Equal(ipOf(peer)) {
			continue
		}
		if _, hasMAC := optMAC(ns.Options, layers.ICMPv6OptSourceAddress); !f.ip6.SrcIP.Equal(ipOf(slaac1)) || !hasMAC {
			t.Errorf("NS from %v with our link-layer address %v, want from %v with", f.ip6.SrcIP, hasMAC, slaac1)
		}
		break
	}
}
