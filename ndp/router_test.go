package ndp_test

import (
	"bytes"
	"encoding/binary"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/wire"
)

var prefix1 = netip.MustParsePrefix("2001:db8:1::/64")

// slaac1 is the EUI-64 address formed in prefix1.
var slaac1 = netip.MustParseAddr("2001:db8:1::ff:fe00:1")

type prefixInfo struct {
	prefix             netip.Prefix
	onLink, autonomous bool
	valid, preferred   uint32
}

func (p prefixInfo) opt() layers.ICMPv6Option {
	d := []byte{byte(p.prefix.Bits()), 0}
	if p.onLink {
		d[1] |= 0x80
	}
	if p.autonomous {
		d[1] |= 0x40
	}
	d = binary.BigEndian.AppendUint32(d, p.valid)
	d = binary.BigEndian.AppendUint32(d, p.preferred)
	d = append(d, 0, 0, 0, 0)
	d = append(d, p.prefix.Addr().AsSlice()...)
	return layers.ICMPv6Option{Type: layers.ICMPv6OptPrefixInfo, Data: d}
}

func mtuOpt(mtu uint32) layers.ICMPv6Option {
	return layers.ICMPv6Option{Type: layers.ICMPv6OptMTU, Data: binary.BigEndian.AppendUint32([]byte{0, 0}, mtu)}
}

func (h *harness) injectRA(m msg, ra *layers.ICMPv6RouterAdvertisement) {
	h.t.Helper()
	if !m.src.IsValid() {
		m.src = routerLL
	}
	if !m.dst.IsValid() {
		m.dst = ipv6.AllNodes
	}
	h.inject(m, layers.ICMPv6TypeRouterAdvertisement, ra)
}

func TestRouterAdvertisementConfiguresTheHost(t *testing.T) {
	h := newHarness(t, quiet)
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{
		HopLimit: 64, Flags: 0x08 /* preference high */, RouterLifetime: 1800, ReachableTime: 20000, RetransTimer: 2000,
		Options: layers.ICMPv6Options{
			llOpt(layers.ICMPv6OptSourceAddress, routerMAC),
			mtuOpt(1400),
			prefixInfo{prefix1, true, true, 100, 50}.opt(),
		},
	})
	eventually(t, "the address", func() bool { s, _ := h.host.addr(slaac1); return s == ndp.Preferred })
	h.host.with(func(f *fakeHost) {
		if f.hopLimit != 64 || f.mtu != 1400 {
			t.Errorf("hop limit %d MTU %d, want 64 and 1400", f.hopLimit, f.mtu)
		}
		if p, ok := f.routers[routerLL]; !ok || p != route.PreferenceHigh {
			t.Errorf("routers %v, want %v high", f.routers, routerLL)
		}
		if l, ok := f.onLink[prefix1]; !ok || l != 100*time.Second {
			t.Errorf("on-link %v, want %v for 100 s", f.onLink, prefix1)
		}
	})
	if n, ok := h.p.Neighbor(routerLL); !ok || n.State != ndp.Stale || n.MAC != routerMAC || !n.Router {
		t.Errorf("router's entry %+v, want STALE router at %v", n, routerMAC)
	}
	// The new RetransTimer paces resolution.
	h.p.Output(peerLL, h.datagram(stackLL, peerLL, "x"))
	h.next(layers.ICMPv6TypeNeighborSolicitation)
	h.clk.WaitPending(4) // lifetimes: router, prefix, address; the resolution
	h.clk.Advance(time.Second)
	h.none(layers.ICMPv6TypeNeighborSolicitation)
	h.clk.Advance(time.Second)
	h.next(layers.ICMPv6TypeNeighborSolicitation)

	// Preferred lifetime over: deprecated; valid lifetime over: removed,
	// and the prefix is no longer on-link.
	h.clk.Advance(48 * time.Second)
	eventually(t, "deprecation", func() bool { s, _ := h.host.addr(slaac1); return s == ndp.Deprecated })
	h.clk.Advance(50 * time.Second)
	eventually(t, "removal", func() bool { _, ok := h.host.addr(slaac1); return !ok })
	eventually(t, "the prefix to go", func() bool {
		var ok bool
		h.host.with(func(f *fakeHost) { _, ok = f.onLink[prefix1] })
		return !ok
	})
	if h.p.Stats.AddrsExpired.Load() != 1 {
		t.Errorf("AddrsExpired = %d", h.p.Stats.AddrsExpired.Load())
	}
}

func TestMTUOptionOutsideTheLinksRangeIsIgnored(t *testing.T) {
	for _, mtu := range []uint32{1279, 1501, 9000} {
		h := newHarness(t, quiet)
		h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{Options: layers.ICMPv6Options{mtuOpt(mtu)}})
		h.sync()
		h.host.with(func(f *fakeHost) {
			if f.mtu != 0 {
				t.Errorf("MTU option %d set the link MTU to %d", mtu, f.mtu)
			}
		})
	}
}

func TestPrefixOptionsSLAACIgnores(t *testing.T) {
	tests := []struct {
		name string
		pi   prefixInfo
	}{
		{"preferred lifetime over the valid", prefixInfo{prefix1, false, true, 100, 200}},
		{"link-local prefix", prefixInfo{netip.MustParsePrefix("fe80::/64"), false, true, 100, 50}},
		{"a /48", prefixInfo{netip.MustParsePrefix("2001:db8::/48"), false, true, 100, 50}},
		{"valid lifetime zero", prefixInfo{prefix1, false, true, 0, 0}},
		{"not autonomous", prefixInfo{prefix1, true, false, 100, 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, quiet)
			h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{Options: layers.ICMPv6Options{tt.pi.opt()}})
			h.sync()
			for _, a := range h.p.Addresses() {
				if a.Prefix.Addr() != stackLL {
					t.Errorf("formed %v", a.Prefix)
				}
			}
		})
	}
}

// TestValidLifetimeFollowsTheTwoHourRule pins RFC 4862 section 5.5.3 (e).
func TestValidLifetimeFollowsTheTwoHourRule(t *testing.T) {
	const hour = 3600
	tests := []struct {
		name            string
		first, second   uint32 // seconds
		wantAfterSecond time.Duration
	}{
		{"over two hours is taken", 10 * hour, 3 * hour, 3 * time.Hour},
		{"over the remaining is taken", 1 * hour, 90 * 60, 90 * time.Minute},
		{"under two hours, remaining over: two hours", 10 * hour, 1 * hour, 2 * time.Hour},
		{"under the remaining, remaining under two hours: ignored", 1 * hour, 30 * 60, time.Hour},
		{"zero, remaining under two hours: ignored", 1 * hour, 0, time.Hour},
		{"infinite", 1 * hour, wire.NDInfiniteLifetime, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, quiet)
			h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{Options: layers.ICMPv6Options{prefixInfo{prefix1, false, true, tt.first, 0}.opt()}})
			h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{Options: layers.ICMPv6Options{prefixInfo{prefix1, false, true, tt.second, 0}.opt()}})
			for _, a := range h.p.Addresses() {
				if a.Prefix.Addr() != slaac1 {
					continue
				}
				var got time.Duration
				if !a.ValidUntil.IsZero() {
					got = a.ValidUntil.Sub(start)
				}
				if got != tt.wantAfterSecond {
					t.Errorf("valid for %v, want %v", got, tt.wantAfterSecond)
				}
				return
			}
			t.Fatal("no address formed")
		})
	}
}

func TestSLAACAddressGoesThroughDAD(t *testing.T) {
	h := newHarness(t, withDAD)
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{Options: layers.ICMPv6Options{prefixInfo{prefix1, true, true, 100, 100}.opt()}})
	h.sync()
	if s, _ := h.host.addr(slaac1); s != ndp.Tentative {
		t.Fatalf("host told %v, want tentative", s)
	}
	// Two DADs' delays, the prefix's lifetime, and one MLD
	// retransmission: both addresses end in EUI-64's ff:fe00:1, so they
	// share a solicited-node group.
	h.clk.WaitPending(4)
	h.clk.Advance(ndp.MaxRtrSolicitationDelay)
	for {
		f := h.next(layers.ICMPv6TypeNeighborSolicitation)
		ns := f.pkt.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
		if ns.TargetAddress.Equal(ipOf(slaac1)) {
			checkDADProbe(t, f, slaac1)
			break
		}
	}
}

func TestRouterLifetimeZeroRemovesTheRouterAndReservedPreferenceIsMedium(t *testing.T) {
	h := newHarness(t, quiet)
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 600, Flags: 0x10 /* reserved */})
	h.sync()
	h.host.with(func(f *fakeHost) {
		if p, ok := f.routers[routerLL]; !ok || p != route.PreferenceMedium {
			t.Errorf("routers %v, want %v medium", f.routers, routerLL)
		}
	})
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 0})
	h.sync()
	h.host.with(func(f *fakeHost) {
		if len(f.routers) != 0 {
			t.Errorf("routers %v after lifetime 0", f.routers)
		}
	})
}

func TestRouterAdvertisementFromAGlobalSourceIsDropped(t *testing.T) {
	h := newHarness(t, quiet)
	h.injectRA(msg{src: netip.MustParseAddr("2001:db8::1")}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 600})
	if h.p.Stats.InBadSource.Load() != 1 || len(h.p.Routers()) != 0 {
		t.Errorf("InBadSource %d routers %v", h.p.Stats.InBadSource.Load(), h.p.Routers())
	}
}

func checkRS(t *testing.T, f *frame) {
	t.Helper()
	rs := f.pkt.Layer(layers.LayerTypeICMPv6RouterSolicitation).(*layers.ICMPv6RouterSolicitation)
	mac, _ := ipv6.MulticastMAC(ipv6.AllRouters)
	if !f.ip6.DstIP.Equal(ipOf(ipv6.AllRouters)) || !bytes.Equal(f.eth.DstMAC, mac[:]) || !f.ip6.SrcIP.Equal(ipOf(stackLL)) || f.ip6.HopLimit != 255 {
		t.Errorf("RS %v > %v at %v hop limit %d", f.ip6.SrcIP, f.ip6.DstIP, f.eth.DstMAC, f.ip6.HopLimit)
	}
	if m, ok := optMAC(rs.Options, layers.ICMPv6OptSourceAddress); !ok || m != stackMAC {
		t.Errorf("RS source link-layer option %v %v", m, ok)
	}
}

func TestRouterSolicitationsStopAfterThreeOrAtAnAdvertisement(t *testing.T) {
	for _, answered := range []bool{false, true} {
		h := newHarness(t, ndp.Config{NoDAD: true})
		h.clk.WaitPending(2) // the first solicitation's delay, MLD's retransmission
		h.clk.Advance(ndp.MaxRtrSolicitationDelay)
		checkRS(t, h.next(layers.ICMPv6TypeRouterSolicitation))
		if answered {
			h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{})
			h.clk.Advance(ndp.RtrSolicitationInterval)
			h.none(layers.ICMPv6TypeRouterSolicitation)
			continue
		}
		for range ndp.MaxRtrSolicitations - 1 {
			h.clk.WaitPending(1)
			h.clk.Advance(ndp.RtrSolicitationInterval)
			checkRS(t, h.next(layers.ICMPv6TypeRouterSolicitation))
		}
		h.clk.Advance(ndp.RtrSolicitationInterval)
		h.none(layers.ICMPv6TypeRouterSolicitation)
		if n := h.p.Stats.OutRouterSolicits.Load(); n != ndp.MaxRtrSolicitations {
			t.Errorf("OutRouterSolicits = %d", n)
		}
	}
}

func TestRedirect(t *testing.T) {
	dst := netip.MustParseAddr("2001:db8:9::99")
	better := netip.MustParseAddr("fe80::5")
	betterMAC := wire.MAC{0x02, 0, 0, 0, 0, 5}
	tests := []struct {
		name           string
		m              msg
		target, dst    netip.Addr
		accepted       bool
		targetIsRouter bool
		advertising    bool // the interface is a router's
	}{
		{"to a better router, from the first hop", msg{src: routerLL, dst: stackLL}, better, dst, true, true, false},
		{"to the destination itself, on-link", msg{src: routerLL, dst: stackLL}, dst, dst, true, false, false},
		{"from another node than the first hop", msg{src: peerLL, dst: stackLL}, better, dst, false, false, false},
		{"hop limit 254", msg{src: routerLL, dst: stackLL, hops: 254}, better, dst, false, false, false},
		{"from a global address", msg{src: netip.MustParseAddr("2001:db8::fe"), dst: stackLL}, better, dst, false, false, false},
		{"to a global target that is not the destination", msg{src: routerLL, dst: stackLL}, netip.MustParseAddr("2001:db8::5"), dst, false, false, false},
		{"for a multicast destination", msg{src: routerLL, dst: stackLL}, better, netip.MustParseAddr("ff0e::1"), false, false, false},
		{"on an advertising interface", msg{src: routerLL, dst: stackLL}, better, dst, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, quiet)
			h.host.with(func(f *fakeHost) {
				f.nextHop[dst] = routerLL
				f.nextHop[tt.dst] = routerLL
			})
			if tt.advertising {
				if err := h.p.Advertise(ndp.RouterConfig{}); err != nil {
					t.Fatal(err)
				}
			}
			h.inject(tt.m, layers.ICMPv6TypeRedirect, &layers.ICMPv6Redirect{
				TargetAddress: ipOf(tt.target), DestinationAddress: ipOf(tt.dst),
				Options: layers.ICMPv6Options{llOpt(layers.ICMPv6OptTargetAddress, betterMAC)},
			})
			h.sync()
			var got netip.Addr
			h.host.with(func(f *fakeHost) { got = f.redirects[tt.dst] })
			if !tt.accepted {
				if got.IsValid() {
					t.Errorf("refused redirect reached the destination cache: %v", got)
				}
				return
			}
			if got != tt.target {
				t.Errorf("destination cache told %v, want %v", got, tt.target)
			}
			if n, ok := h.p.Neighbor(tt.target); !ok || n.State != ndp.Stale || n.MAC != betterMAC || n.Router != tt.targetIsRouter {
				t.Errorf("target's entry %+v %v, want STALE at %v, router %v", n, ok, betterMAC, tt.targetIsRouter)
			}
		})
	}
}

func TestAdvertisementsCannotGrowTheListsWithoutBound(t *testing.T) {
	h := newHarness(t, quiet)
	var opts layers.ICMPv6Options
	for i := range 20 {
		p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i)}), 64)
		opts = append(opts, prefixInfo{p, true, true, 100, 100}.opt())
	}
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{Options: opts})
	h.sync()
	formed := 0
	for _, a := range h.p.Addresses() {
		if !a.Prefix.Addr().IsLinkLocalUnicast() {
			formed++
		}
	}
	if formed != 16 {
		t.Errorf("%d addresses formed, want MaxAddresses = 16", formed)
	}
	if n := h.p.Stats.ListsFull.Load(); n != 4 {
		t.Errorf("ListsFull = %d, want 4", n)
	}
}

func TestAdvertisedReachableTimeIsRandomisedBetweenHalfAndOneAndAHalfTimes(t *testing.T) {
	h := newHarness(t, quiet)
	h.clk.Advance(time.Second)
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{ReachableTime: 10000})
	h.resolve(peerLL)
	// RFC 4861 section 6.3.2: ReachableTime is BaseReachableTime times
	// a factor drawn from [0.5, 1.5).
	h.clk.Advance(5*time.Second - time.Millisecond)
	if s := h.state(peerLL); s != ndp.Reachable {
		t.Errorf("at 0.5 × BaseReachableTime: %v, want REACHABLE", s)
	}
	h.clk.Advance(10*time.Second + 2*time.Millisecond)
	if s := h.state(peerLL); s != ndp.Stale {
		t.Errorf("at 1.5 × BaseReachableTime: %v, want STALE", s)
	}
}

func TestAdvertisementWithTheRouterFlagClearedRemovesTheDefaultRouter(t *testing.T) {
	// RFC 4861 section 7.2.5: "In those cases where the IsRouter flag
	// changes from TRUE to FALSE as a result of this update, the node
	// MUST remove that router from the Default Router List".
	h := newHarness(t, quiet)
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 600, Options: layers.ICMPv6Options{llOpt(layers.ICMPv6OptSourceAddress, routerMAC)}})
	h.injectNA(msg{src: routerLL, dst: ipv6.AllNodes}, routerLL, naOverride, llOpt(layers.ICMPv6OptTargetAddress, routerMAC))
	h.sync()
	if r := h.p.Routers(); len(r) != 0 {
		t.Errorf("default routers %v, want none", r)
	}
	h.host.with(func(f *fakeHost) {
		if len(f.routers) != 0 {
			t.Errorf("host's routers %v, want none", f.routers)
		}
	})
	if n, _ := h.p.Neighbor(routerLL); n.Router {
		t.Error("IsRouter still set")
	}
}

func TestFirstRouterSolicitationWaitsForTheLinkLocalAddress(t *testing.T) {
	h := newHarness(t, ndp.Config{})
	h.clk.WaitPending(2) // DAD's delay, MLD's retransmission
	h.clk.Advance(ndp.MaxRtrSolicitationDelay)
	h.next(layers.ICMPv6TypeNeighborSolicitation)
	h.none(layers.ICMPv6TypeRouterSolicitation)
	h.clk.WaitPending(1) // DAD's RetransTimer
	h.clk.Advance(ndp.RetransTimer)
	h.clk.WaitPending(1) // the solicitation's delay
	h.clk.Advance(ndp.MaxRtrSolicitationDelay)
	checkRS(t, h.next(layers.ICMPv6TypeRouterSolicitation))
}

// rio is a Route Information option (RFC 4191 section 2.3), as wire
// encodes it.
func rio(prefix string, pref wire.RouterPreference, life uint32) layers.ICMPv6Option {
	r := wire.NDRouteInfo{Prefix: netip.MustParsePrefix(prefix), Preference: pref, Lifetime: life}
	b := make([]byte, wire.NDRouteInfoLen(r.Prefix.Bits()))
	wire.EncodeNDRouteInfo(b, &r)
	return layers.ICMPv6Option{Type: wire.NDOptRouteInfo, Data: b[2:]}
}

func (h *harness) hostRoutes() map[string]route.Preference {
	var out map[string]route.Preference
	h.host.with(func(f *fakeHost) { out = maps.Clone(f.routes) })
	return out
}

// TestRouteInformationOptionsAddRoutesThroughTheRouter pins RFC 4191
// section 3.1 for a type C host.
func TestRouteInformationOptionsAddRoutesThroughTheRouter(t *testing.T) {
	h := newHarness(t, quiet)
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 1800, Options: layers.ICMPv6Options{
		rio("2001:db8:77::/48", wire.RouterPrefHigh, 60),
		rio("2001:db8:78::/64", wire.RouterPrefLow, wire.NDInfiniteLifetime),
		rio("::/0", wire.RouterPrefHigh, 60),        // the default router list's
		rio("fe80::/64", wire.RouterPrefMedium, 60), // never through a router
	}})
	h.sync()
	via := " via " + routerLL.String()
	want := map[string]route.Preference{"2001:db8:77::/48" + via: route.PreferenceHigh, "2001:db8:78::/64" + via: route.PreferenceLow}
	if got := h.hostRoutes(); !maps.Equal(got, want) {
		t.Errorf("routes %v, want %v", got, want)
	}
	if n := h.p.Stats.RouteInfoIgnored.Load(); n != 2 {
		t.Errorf("RouteInfoIgnored = %d, want 2 (::/0 and fe80::/64)", n)
	}
	// A new preference replaces the route; lifetime zero removes one; a
	// lifetime's end another.
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 1800, Options: layers.ICMPv6Options{
		rio("2001:db8:78::/64", wire.RouterPrefMedium, 0),
		rio("2001:db8:77::/48", wire.RouterPrefMedium, 60),
	}})
	h.sync()
	if got, want := h.hostRoutes(), map[string]route.Preference{"2001:db8:77::/48" + via: route.PreferenceMedium}; !maps.Equal(got, want) {
		t.Errorf("routes %v, want %v", got, want)
	}
	h.clk.Advance(60 * time.Second)
	eventually(t, "the route's lifetime to end", func() bool { return len(h.hostRoutes()) == 0 })
}

func TestManagedAndOtherFlagsReachTheHostOnce(t *testing.T) {
	h := newHarness(t, quiet)
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 1800})
	h.sync()
	h.host.with(func(f *fakeHost) {
		if f.configFlags != [2]bool{} {
			t.Errorf("flags %v from an advertisement without M or O", f.configFlags)
		}
	})
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 1800, Flags: 0x40 /* O */})
	h.sync()
	h.host.with(func(f *fakeHost) {
		if f.configFlags != [2]bool{false, true} {
			t.Errorf("flags %v, want Other", f.configFlags)
		}
	})
}
