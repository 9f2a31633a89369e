package ndp_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// quiet is a configuration with no background traffic of its own: the
// link-local address is preferred at once and no router is solicited.
var quiet = ndp.Config{NoDAD: true, NoRouterSolicitation: true}

func optMAC(opts layers.ICMPv6Options, typ layers.ICMPv6Opt) (wire.MAC, bool) {
	for _, o := range opts {
		if o.Type == typ && len(o.Data) == 6 {
			return wire.MAC(o.Data), true
		}
	}
	return wire.MAC{}, false
}

func TestAnswersANeighborSolicitationWithASolicitedOverrideAdvertisement(t *testing.T) {
	tests := []struct {
		name string
		dst  netip.Addr
	}{
		{"multicast to our solicited-node group", ipv6.SolicitedNode(stackLL)},
		{"unicast to our address", stackLL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, quiet)
			h.injectNS(msg{src: peerLL, dst: tt.dst}, stackLL, llOpt(layers.ICMPv6OptSourceAddress, peerMAC))
			f := h.next(layers.ICMPv6TypeNeighborAdvertisement)
			na := f.pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
			if !bytes.Equal(f.eth.DstMAC, peerMAC[:]) || f.ip6.HopLimit != 255 || !f.ip6.SrcIP.Equal(ipOf(stackLL)) || !f.ip6.DstIP.Equal(ipOf(peerLL)) {
				t.Errorf("NA %v > %v at %v hop limit %d", f.ip6.SrcIP, f.ip6.DstIP, f.eth.DstMAC, f.ip6.HopLimit)
			}
			if !na.TargetAddress.Equal(ipOf(stackLL)) || na.Flags != naSolicited|naOverride {
				t.Errorf("NA target %v flags %#x, want %v S|O", na.TargetAddress, na.Flags, stackLL)
			}
			if mac, ok := optMAC(na.Options, layers.ICMPv6OptTargetAddress); !ok || mac != stackMAC {
				t.Errorf("NA target link-layer option %v %v, want %v", mac, ok, stackMAC)
			}
			if err := f.icmp.SetNetworkLayerForChecksum(f.ip6); err != nil {
				t.Fatal(err)
			}
			if err, v := f.icmp.VerifyChecksum(); err != nil || !v.Valid {
				t.Errorf("NA checksum wrong: %v", err)
			}
			// Section 7.2.3: the solicitor is learnt, STALE, and the
			// advertisement sent to it moves it to DELAY (section
			// 7.3.3), to be confirmed or probed.
			if n, ok := h.p.Neighbor(peerLL); !ok || n.State != ndp.Delay || n.MAC != peerMAC {
				t.Errorf("solicitor's entry %+v %v, want DELAY at %v", n, ok, peerMAC)
			}
		})
	}
}

func TestDropsInvalidNeighborDiscovery(t *testing.T) {
	slla := llOpt(layers.ICMPv6OptSourceAddress, peerMAC)
	tests := []struct {
		name    string
		m       msg
		target  netip.Addr
		opts    []layers.ICMPv6Option
		counter func(s *ndp.Stats) uint64
	}{
		{"hop limit 254", msg{src: peerLL, dst: stackLL, hops: 254}, stackLL, nil, func(s *ndp.Stats) uint64 { return s.InBadHopLimit.Load() }},
		{"reassembled from fragments", msg{src: peerLL, dst: stackLL, frag: true}, stackLL, nil, func(s *ndp.Stats) uint64 { return s.InFragmented.Load() }},
		{"bad checksum", msg{src: peerLL, dst: stackLL, badSum: true}, stackLL, nil, func(s *ndp.Stats) uint64 { return s.InBadChecksum.Load() }},
		{"code 1", msg{src: peerLL, dst: stackLL, code: 1}, stackLL, nil, func(s *ndp.Stats) uint64 { return s.InBadCode.Load() }},
		{"multicast target", msg{src: peerLL, dst: stackLL}, ipv6.AllNodes, nil, func(s *ndp.Stats) uint64 { return s.InBadTarget.Load() }},
		{"DAD probe with a source link-layer option", msg{src: netip.IPv6Unspecified(), dst: ipv6.SolicitedNode(stackLL)}, stackLL, []layers.ICMPv6Option{slla}, func(s *ndp.Stats) uint64 { return s.InBadDest.Load() }},
		{"DAD probe to a unicast address", msg{src: netip.IPv6Unspecified(), dst: stackLL}, stackLL, nil, func(s *ndp.Stats) uint64 { return s.InBadDest.Load() }},
		{"multicast source", msg{src: ipv6.AllNodes, dst: stackLL}, stackLL, nil, func(s *ndp.Stats) uint64 { return s.InBadSource.Load() }},
		{"zero-length option", msg{src: peerLL, dst: stackLL}, stackLL, []layers.ICMPv6Option{{Type: layers.ICMPv6OptSourceAddress, Data: nil}}, func(s *ndp.Stats) uint64 { return s.InMalformed.Load() }},
		{"target not ours", msg{src: peerLL, dst: stackLL}, netip.MustParseAddr("fe80::99"), nil, func(s *ndp.Stats) uint64 { return s.InNotOurs.Load() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, quiet)
			h.injectNS(tt.m, tt.target, tt.opts...)
			if got := tt.counter(&h.p.Stats); got != 1 {
				t.Errorf("drop counter = %d, want 1", got)
			}
			h.none(layers.ICMPv6TypeNeighborAdvertisement)
			if _, ok := h.p.Neighbor(peerLL); ok {
				t.Error("learnt the sender of an invalid solicitation")
			}
		})
	}
}

// resolve has the stack send a datagram to addr, answers its solicitation
// with a solicited NA from peerMAC, and checks the datagram is released.
func (h *harness) resolve(addr netip.Addr) {
	h.t.Helper()
	h.p.Output(addr, h.datagram(stackLL, addr, "first"))
	ns := h.next(layers.ICMPv6TypeNeighborSolicitation)
	h.injectNA(msg{src: addr, dst: stackLL}, addr, naSolicited|naOverride, llOpt(layers.ICMPv6OptTargetAddress, peerMAC))
	f := h.nextData()
	if !bytes.Equal(f.eth.DstMAC, peerMAC[:]) {
		h.t.Fatalf("datagram to %v, want %v", f.eth.DstMAC, peerMAC)
	}
	_ = ns
}

func TestResolutionSolicitsTheSolicitedNodeGroupAndReleasesTheQueue(t *testing.T) {
	h := newHarness(t, quiet)
	for i := range 3 {
		h.p.Output(peerLL, h.datagram(stackLL, peerLL, string(rune('a'+i))))
	}
	ns := h.next(layers.ICMPv6TypeNeighborSolicitation)
	group := ipv6.SolicitedNode(peerLL)
	gmac, _ := ipv6.MulticastMAC(group)
	sol := ns.pkt.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	if !bytes.Equal(ns.eth.DstMAC, gmac[:]) || !ns.ip6.DstIP.Equal(ipOf(group)) || !ns.ip6.SrcIP.Equal(ipOf(stackLL)) || ns.ip6.HopLimit != 255 || !sol.TargetAddress.Equal(ipOf(peerLL)) {
		t.Errorf("NS %v > %v at %v target %v", ns.ip6.SrcIP, ns.ip6.DstIP, ns.eth.DstMAC, sol.TargetAddress)
	}
	if mac, ok := optMAC(sol.Options, layers.ICMPv6OptSourceAddress); !ok || mac != stackMAC {
		t.Errorf("NS source link-layer option %v %v", mac, ok)
	}
	if s := h.state(peerLL); s != ndp.Incomplete {
		t.Errorf("state %v, want INCOMPLETE", s)
	}
	h.injectNA(msg{src: peerLL, dst: stackLL}, peerLL, naSolicited|naOverride, llOpt(layers.ICMPv6OptTargetAddress, peerMAC))
	for i := range 3 {
		f := h.nextData()
		if !bytes.Equal(f.eth.DstMAC, peerMAC[:]) || f.eth.EthernetType != layers.EthernetTypeIPv6 || string(f.ip6.Payload) != string(rune('a'+i)) {
			t.Errorf("datagram %d: %v %q", i, f.eth.DstMAC, f.ip6.Payload)
		}
	}
	eventually(t, "REACHABLE", func() bool { return h.state(peerLL) == ndp.Reachable })
	if h.p.Stats.Resolved.Load() != 1 {
		t.Errorf("Resolved = %d", h.p.Stats.Resolved.Load())
	}
}

func TestFailedResolutionReportsEveryQueuedDatagramUnreachable(t *testing.T) {
	h := newHarness(t, quiet)
	h.p.Output(peerLL, h.datagram(stackLL, peerLL, "x"))
	h.p.Output(peerLL, h.datagram(stackLL, peerLL, "y"))
	for i := range ndp.MaxMulticastSolicit {
		h.next(layers.ICMPv6TypeNeighborSolicitation)
		// the MLD retransmission's timer and the resolution's
		h.clk.WaitPending(1)
		h.clk.Advance(ndp.RetransTimer)
		_ = i
	}
	eventually(t, "the resolution to fail", func() bool { return h.p.Stats.ResolveFailed.Load() == 1 })
	h.host.with(func(f *fakeHost) {
		if len(f.unreachable) != 2 || f.unreachable[0] != peerLL {
			t.Errorf("unreachable %v, want peer twice", f.unreachable)
		}
	})
	if _, ok := h.p.Neighbor(peerLL); ok {
		t.Error("entry kept after a failed resolution")
	}
	if got := h.p.Stats.UnresolvedDrops.Load(); got != 2 {
		t.Errorf("UnresolvedDrops = %d", got)
	}
	h.none(layers.ICMPv6TypeNeighborSolicitation)
}

// TestAppendixCTransitions walks the entry of a resolved neighbour through
// the states of RFC 4861 appendix C.
func TestAppendixCTransitions(t *testing.T) {
	h := newHarness(t, quiet)
	h.clk.Advance(time.Second) // the MLD retransmission
	h.resolve(peerLL)
	if s := h.state(peerLL); s != ndp.Reachable {
		t.Fatalf("after a solicited NA: %v, want REACHABLE", s)
	}
	// REACHABLE, timeout (at most 1.5 × 30 s) → STALE.
	h.clk.Advance(46 * time.Second)
	if s := h.state(peerLL); s != ndp.Stale {
		t.Fatalf("after ReachableTime: %v, want STALE", s)
	}
	// STALE, upper-layer confirmation → REACHABLE.
	h.p.Confirm(peerLL)
	if s := h.state(peerLL); s != ndp.Reachable {
		t.Fatalf("after Confirm: %v, want REACHABLE", s)
	}
	h.clk.Advance(46 * time.Second)
	// STALE, sending a packet → DELAY.
	h.p.Output(peerLL, h.datagram(stackLL, peerLL, "d"))
	h.nextData()
	if s := h.state(peerLL); s != ndp.Delay {
		t.Fatalf("after sending on STALE: %v, want DELAY", s)
	}
	// DELAY, delay timeout → PROBE, unicast NS to the cached address.
	h.clk.Advance(ndp.DelayFirstProbeTime)
	for i := range ndp.MaxUnicastSolicit {
		ns := h.next(layers.ICMPv6TypeNeighborSolicitation)
		if !bytes.Equal(ns.eth.DstMAC, peerMAC[:]) || !ns.ip6.DstIP.Equal(ipOf(peerLL)) {
			t.Errorf("probe %d to %v at %v, want unicast to %v", i, ns.ip6.DstIP, ns.eth.DstMAC, peerLL)
		}
		if s := h.state(peerLL); s != ndp.Probe {
			t.Fatalf("probe %d: %v, want PROBE", i, s)
		}
		h.clk.Advance(ndp.RetransTimer)
	}
	// PROBE, retransmit timeout after MAX_UNICAST_SOLICIT → deleted.
	eventually(t, "the entry to go", func() bool { _, ok := h.p.Neighbor(peerLL); return !ok })
	if h.p.Stats.ProbesFailed.Load() != 1 {
		t.Errorf("ProbesFailed = %d", h.p.Stats.ProbesFailed.Load())
	}
}

func TestProbeAnsweredGoesReachable(t *testing.T) {
	h := newHarness(t, quiet)
	h.clk.Advance(time.Second)
	h.resolve(peerLL)
	h.clk.Advance(46 * time.Second)
	h.p.Output(peerLL, h.datagram(stackLL, peerLL, "d"))
	h.nextData()
	// DELAY, upper-layer confirmation → REACHABLE, no probe.
	h.p.Confirm(peerLL)
	h.clk.Advance(ndp.DelayFirstProbeTime)
	h.none(layers.ICMPv6TypeNeighborSolicitation)
	h.clk.Advance(46 * time.Second)
	h.p.Output(peerLL, h.datagram(stackLL, peerLL, "d"))
	h.nextData()
	h.clk.Advance(ndp.DelayFirstProbeTime)
	h.next(layers.ICMPv6TypeNeighborSolicitation)
	// PROBE, solicited NA → REACHABLE.
	h.injectNA(msg{src: peerLL, dst: stackLL}, peerLL, naSolicited, llOpt(layers.ICMPv6OptTargetAddress, peerMAC))
	if s := h.state(peerLL); s != ndp.Reachable {
		t.Fatalf("after the probe's answer: %v, want REACHABLE", s)
	}
}

// TestAdvertisementUpdatesTheCacheAsSection725Says pins the rules of RFC
// 4861 section 7.2.5 for an entry that is REACHABLE at peerMAC.
func TestAdvertisementUpdatesTheCacheAsSection725Says(t *testing.T) {
	other := wire.MAC{0x02, 0, 0, 0, 0, 0x33}
	tests := []struct {
		name    string
		flags   uint8
		mac     *wire.MAC
		state   ndp.State
		wantMAC wire.MAC
	}{
		{"unsolicited, no override, new address: STALE, address kept", 0, &other, ndp.Stale, peerMAC},
		{"solicited, no override, new address: STALE, address kept", naSolicited, &other, ndp.Stale, peerMAC},
		{"unsolicited, override, new address: STALE, address taken", naOverride, &other, ndp.Stale, other},
		{"solicited, override, new address: REACHABLE, address taken", naSolicited | naOverride, &other, ndp.Reachable, other},
		{"unsolicited, same address: unchanged", 0, &peerMAC, ndp.Reachable, peerMAC},
		{"unsolicited, no option: unchanged", naOverride, nil, ndp.Reachable, peerMAC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, quiet)
			h.clk.Advance(time.Second)
			h.resolve(peerLL)
			var opts []layers.ICMPv6Option
			if tt.mac != nil {
				opts = append(opts, llOpt(layers.ICMPv6OptTargetAddress, *tt.mac))
			}
			dst := stackLL
			if tt.flags&naSolicited == 0 {
				dst = ipv6.AllNodes
			}
			h.injectNA(msg{src: peerLL, dst: dst}, peerLL, tt.flags, opts...)
			n, _ := h.p.Neighbor(peerLL)
			if n.State != tt.state || n.MAC != tt.wantMAC {
				t.Errorf("entry %v at %v, want %v at %v", n.State, n.MAC, tt.state, tt.wantMAC)
			}
		})
	}
}

func TestUnsolicitedAdvertisementCreatesNoEntry(t *testing.T) {
	h := newHarness(t, quiet)
	h.injectNA(msg{src: peerLL, dst: ipv6.AllNodes}, peerLL, naOverride, llOpt(layers.ICMPv6OptTargetAddress, peerMAC))
	if _, ok := h.p.Neighbor(peerLL); ok {
		t.Error("an unsolicited NA created an entry (section 7.2.5: silently discarded)")
	}
}

func TestMulticastDestinationsNeedNoResolution(t *testing.T) {
	h := newHarness(t, quiet)
	group := netip.MustParseAddr("ff02::1:3")
	h.p.Output(group, h.datagram(stackLL, group, "m"))
	f := h.nextData()
	if want := []byte{0x33, 0x33, 0, 1, 0, 3}; !bytes.Equal(f.eth.DstMAC, want) {
		t.Errorf("to %v, want %x", f.eth.DstMAC, want)
	}
	h.none(layers.ICMPv6TypeNeighborSolicitation)
}

func TestCacheEvictsStaleEntriesWhenFull(t *testing.T) {
	cfg := quiet
	cfg.MaxEntries = 2
	h := newHarness(t, cfg)
	for i := range 3 {
		src := netip.AddrFrom16([16]byte{0xfe, 0x80, 15: byte(10 + i)})
		if i == 2 {
			// The first two, confirmed then left alone, are STALE.
			h.clk.Advance(46 * time.Second)
		}
		h.injectNS(msg{src: src, dst: stackLL}, stackLL, llOpt(layers.ICMPv6OptSourceAddress, peerMAC))
		h.p.Confirm(src)
		h.clk.Advance(time.Second)
	}
	if n := len(h.p.Neighbors()); n != 2 {
		t.Errorf("%d entries, want 2", n)
	}
	if _, ok := h.p.Neighbor(netip.MustParseAddr("fe80::a")); ok {
		t.Error("the least recently used entry was kept")
	}
	if h.p.Stats.CacheEvictions.Load() != 1 {
		t.Errorf("CacheEvictions = %d", h.p.Stats.CacheEvictions.Load())
	}
}

// The IPv6 layer names a link-local next hop with its zone, and messages
// carry addresses without one: both are the same neighbour, one entry,
// resolved by an advertisement of the bare target and confirmed by either
// name.
func TestZonedNextHopIsTheNeighborItsAdvertisementNames(t *testing.T) {
	h := newHarness(t, quiet)
	zoned := peerLL.WithZone("eth0")
	h.p.Output(zoned, h.datagram(stackLL, peerLL, "z"))
	h.next(layers.ICMPv6TypeNeighborSolicitation)
	h.injectNA(msg{src: peerLL, dst: stackLL}, peerLL, naSolicited|naOverride, llOpt(layers.ICMPv6OptTargetAddress, peerMAC))
	if f := h.nextData(); !bytes.Equal(f.eth.DstMAC, peerMAC[:]) {
		t.Errorf("datagram sent to %v, want %v", f.eth.DstMAC, peerMAC)
	}
	if ns := h.p.Neighbors(); len(ns) != 1 || ns[0].Addr != peerLL || ns[0].State != ndp.Reachable {
		t.Errorf("cache %+v, want one REACHABLE entry for %v", ns, peerLL)
	}
	h.p.Output(zoned, h.datagram(stackLL, peerLL, "y"))
	h.nextData()
	h.none(layers.ICMPv6TypeNeighborSolicitation)
	if n, ok := h.p.Neighbor(zoned); !ok || n.MAC != peerMAC {
		t.Errorf("Neighbor(%v) = %+v, %v", zoned, n, ok)
	}
}
