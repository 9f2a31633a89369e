package ipv6_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/route"
)

var (
	routerHigh = netip.MustParseAddr("fe80::fe")
	routerLow  = netip.MustParseAddr("fe80::aa")
)

// routed is a harness whose table has, besides newHarness's:
//
//	eth1: fd00::2/64, fe80::3/64; 2001:db8:2::2/64 deprecated on eth0
//	::/0 via fe80::fe dev eth1, preference high
//	2001:db8:5::/48 via fe80::aa dev eth1, preference low
//	2001:db8:5:1::/64 via 2001:db8:1::1 dev eth0 (a gateway on-link)
func routed(t testing.TB) *harness {
	h := newHarness(t, ipv6.Config{})
	must(t, h.p.AddAddress(h.eth1, netip.MustParsePrefix("fd00::2/64"), ipv6.Preferred))
	must(t, h.p.AddAddress(h.eth1, netip.MustParsePrefix("fe80::3/64"), ipv6.Preferred))
	must(t, h.p.AddAddress(h.eth0, netip.MustParsePrefix("2001:db8:2::2/64"), ipv6.Deprecated))
	must(t, h.p.AddRoute(ipv6.Route{Dst: netip.MustParsePrefix("::/0"), Gateway: routerHigh, Iface: h.eth1, Preference: route.PreferenceHigh}))
	must(t, h.p.AddRoute(ipv6.Route{Dst: netip.MustParsePrefix("2001:db8:5::/48"), Gateway: routerLow, Iface: h.eth1, Preference: route.PreferenceLow}))
	must(t, h.p.AddRoute(ipv6.Route{Dst: netip.MustParsePrefix("2001:db8:5:1::/64"), Gateway: peerAddr, Iface: h.eth0}))
	return h
}

func TestRouteSelection(t *testing.T) {
	tests := []struct {
		dst     string
		iface   string // "" for local
		nextHop string
		err     error
	}{
		// Longest prefix match, before preference.
		{"2001:db8:1::99", "eth0", "2001:db8:1::99", nil},
		{"2001:db8:5::1", "eth1", "fe80::aa", nil},
		{"2001:db8:5:1::1", "eth0", "2001:db8:1::1", nil},
		// Among default routers, the preferred (RFC 4191).
		{"2001:db8:9::9", "eth1", "fe80::fe", nil},
		// A zone restricts the match to its interface.
		{"2001:db8:9::9%eth0", "eth0", "fe80::ff", nil},
		// Link-scoped destinations go by their zone.
		{"fe80::1%eth1", "eth1", "fe80::1", nil},
		{"fe80::1", "", "", ipv6.ErrZoneNeeded},
		{"ff02::1%eth1", "eth1", "ff02::1", nil},
		{"ff02::1", "", "", ipv6.ErrZoneNeeded},
		// Our own addresses are local, a link-local one only in its zone.
		{"2001:db8:1::2", "", "2001:db8:1::2", nil},
		{"fe80::2%eth0", "", "fe80::2", nil},
		{"fe80::2%eth1", "eth1", "fe80::2", nil},
		{"::1", "", "::1", nil},
	}
	h := routed(t)
	for _, tt := range tests {
		t.Run(tt.dst, func(t *testing.T) {
			ri, err := h.p.Route(netip.MustParseAddr(tt.dst))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("error %v, want %v", err, tt.err)
				}
				return
			}
			must(t, err)
			if tt.iface == "" {
				if !ri.Local || ri.NextHop != netip.MustParseAddr(tt.nextHop) {
					t.Errorf("route %+v, want local", ri)
				}
				return
			}
			if ri.Local || ri.Iface.(*ipv6.Interface).Name() != tt.iface || ri.NextHop != netip.MustParseAddr(tt.nextHop) {
				t.Errorf("via %v dev %v (local %v), want via %s dev %s", ri.NextHop, ri.Iface, ri.Local, tt.nextHop, tt.iface)
			}
		})
	}
}

func TestRouteWithoutAMatchIsENETUNREACH(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	h.p.RemoveRoute(ipv6.Route{Dst: netip.MustParsePrefix("::/0"), Gateway: router, Iface: h.eth0})
	_, err := h.p.Route(farAddr)
	if !ipv6.IsNoRoute(err) {
		t.Errorf("error %v, want ENETUNREACH", err)
	}
	if err := h.send(t, data(8), ip.SendParams{Dst: farAddr}); !ipv6.IsNoRoute(err) {
		t.Errorf("Send: %v", err)
	}
	if c := h.counters(); c["OutNoRoutes"] != 1 {
		t.Errorf("OutNoRoutes = %d", c["OutNoRoutes"])
	}
}

func TestAddRouteChecksTheGateway(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	if err := h.p.AddRoute(ipv6.Route{Dst: netip.MustParsePrefix("2001:db8:7::/48"), Gateway: netip.MustParseAddr("2001:db8:3::1"), Iface: h.eth0}); err == nil {
		t.Error("a gateway off every on-link prefix was accepted")
	}
	// The same route again with another preference replaces it.
	r := ipv6.Route{Dst: netip.MustParsePrefix("::/0"), Gateway: router, Iface: h.eth0, Preference: route.PreferenceLow}
	must(t, h.p.AddRoute(r))
	n := 0
	for _, o := range h.p.Routes() {
		if o.Gateway == router {
			n++
			if o.Preference != route.PreferenceLow {
				t.Errorf("preference %d, want low", o.Preference)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d routes through the router, want 1", n)
	}
}

// RFC 6724 section 5's rules, each pinned by a destination it decides.
func TestSourceSelection(t *testing.T) {
	tests := []struct {
		name string
		dst  string
		src  string
	}{
		{"rule 2: link-local destination, link-local source of its interface, zoned", "fe80::1%eth0", "fe80::2%eth0"},
		{"rule 2: on the other interface", "fe80::1%eth1", "fe80::3%eth1"},
		{"rule 2: link-scoped multicast", "ff02::1%eth0", "fe80::2%eth0"},
		{"rule 2: a global destination never gets a link-local source", "2001:db8:9::9%eth0", "2001:db8:1::2"},
		{"rule 3: avoid the deprecated address on its own prefix", "2001:db8:2::9", "2001:db8:1::2"},
		{"rule 5: the outgoing interface's address", "2001:db8:9::9", "fd00::2"},
		{"rule 5: eth0's for a route out of eth0", "2001:db8:5:1::1", "2001:db8:1::2"},
		{"rule 8: longest matching prefix", "fd00::9", "fd00::2"},
		{"rule 2: global multicast", "ff0e::1%eth0", "2001:db8:1::2"},
	}
	h := routed(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ri, err := h.p.Route(netip.MustParseAddr(tt.dst))
			must(t, err)
			if want := netip.MustParseAddr(tt.src); ri.Src != want {
				t.Errorf("source %v, want %v", ri.Src, want)
			}
		})
	}
}

// TestRemoveAddressKeepsRoutesThroughGateways pins what goes with an
// address, as on Linux's IPv6: the on-link route of its prefix, and no
// route through a gateway, even one on that prefix, which neighbour
// discovery still reaches on the link (IPv4 takes those, as Linux's IPv4).
func TestRemoveAddressKeepsRoutesThroughGateways(t *testing.T) {
	h := routed(t)
	onLink := ipv6.Route{Dst: netip.MustParsePrefix("2001:db8:1::/64"), Iface: h.eth0}
	viaPeer := ipv6.Route{Dst: netip.MustParsePrefix("2001:db8:5:1::/64"), Gateway: peerAddr, Iface: h.eth0}
	if routes := h.p.Routes(); !slices.Contains(routes, onLink) || !slices.Contains(routes, viaPeer) {
		t.Fatalf("routes before %v: %v, want %v and %v", ourAddr, routes, onLink, viaPeer)
	}
	must(t, h.p.RemoveAddress(ourAddr))
	routes := h.p.Routes()
	if slices.Contains(routes, onLink) {
		t.Errorf("the on-link route of the removed address stayed: %v", routes)
	}
	if !slices.Contains(routes, viaPeer) {
		t.Errorf("the route through %v went with the address: %v", peerAddr, routes)
	}
	ri, err := h.p.Route(netip.MustParseAddr("2001:db8:5:1::1"))
	must(t, err)
	if dev := ri.Iface.(*ipv6.Interface).Name(); dev != "eth0" || ri.NextHop != peerAddr {
		t.Errorf("via %v dev %s, want via %v dev eth0", ri.NextHop, dev, peerAddr)
	}
	if _, ok := h.p.AddressState(ourAddr); ok {
		t.Error("the removed address is still assigned")
	}
	if err := h.p.RemoveAddress(ourAddr); err == nil {
		t.Error("removing it twice succeeded")
	}
}

// TestSourceSelectionPrefersMatchingLabel pins rule 6 with RFC 6724's
// default policy table, before rule 8: a global destination gets the
// global source even where the unique local one shares more bits with it.
func TestSourceSelectionPrefersMatchingLabel(t *testing.T) {
	h := routed(t)
	global := netip.MustParsePrefix("2001:db8:e1::2/64")
	must(t, h.p.AddAddress(h.eth1, global, ipv6.Preferred))
	for _, tt := range []struct{ dst, src string }{
		{"8000::1", global.Addr().String()}, // shares a bit with fd00::2, none with 2001:db8:e1::2
		{"fd99::1", "fd00::2"},
	} {
		ri, err := h.p.Route(netip.MustParseAddr(tt.dst))
		must(t, err)
		if want := netip.MustParseAddr(tt.src); ri.Src != want {
			t.Errorf("to %s: source %v, want %v", tt.dst, ri.Src, want)
		}
	}
}

// TestSourceSelectionPrefersTemporary pins rule 7 (RFC 8981 addresses),
// after rule 3: a deprecated temporary address loses to a preferred
// public one.
func TestSourceSelectionPrefersTemporary(t *testing.T) {
	h := routed(t)
	public, temp := netip.MustParsePrefix("2001:db8:e1::2/64"), netip.MustParsePrefix("2001:db8:e1:0:8a3c:11f2:94d7:5e01/64")
	must(t, h.p.AddAddress(h.eth1, public, ipv6.Preferred))
	must(t, h.p.AddTemporary(h.eth1, temp, ipv6.Preferred))
	dst := netip.MustParseAddr("2001:db8:77::1")
	src := func() netip.Addr {
		ri, err := h.p.Route(dst)
		must(t, err)
		return ri.Src
	}
	if got := src(); got != temp.Addr() {
		t.Errorf("source %v, want the temporary %v", got, temp.Addr())
	}
	must(t, h.p.SetAddressState(temp.Addr(), ipv6.Deprecated))
	if got := src(); got != public.Addr() {
		t.Errorf("source %v once the temporary is deprecated, want %v", got, public.Addr())
	}
}

func TestPolicyTable(t *testing.T) {
	for _, tt := range []struct {
		addr              string
		precedence, label int
		scope             ipv6.Scope
	}{
		{"::1", 50, 0, ipv6.ScopeLinkLocal},
		{"2001:db8::1", 40, 1, ipv6.ScopeGlobal},
		{"fe80::1", 40, 1, ipv6.ScopeLinkLocal},
		{"192.0.2.1", 35, 4, ipv6.ScopeGlobal},
		{"::ffff:192.0.2.1", 35, 4, ipv6.ScopeGlobal},
		{"169.254.1.1", 35, 4, ipv6.ScopeLinkLocal},
		{"127.0.0.1", 35, 4, ipv6.ScopeLinkLocal},
		{"2002:c000:201::1", 30, 2, ipv6.ScopeGlobal},
		{"2001:0:4136:e378::1", 5, 5, ipv6.ScopeGlobal},
		{"fd00::1", 3, 13, ipv6.ScopeGlobal},
		{"fec0::1", 1, 11, ipv6.ScopeGlobal},
		{"3ffe::1", 1, 12, ipv6.ScopeGlobal},
		{"::c000:201", 1, 3, ipv6.ScopeGlobal},
	} {
		a := netip.MustParseAddr(tt.addr)
		if p, l, sc := ipv6.Precedence(a), ipv6.Label(a), ipv6.SelectionScope(a); p != tt.precedence || l != tt.label || sc != tt.scope {
			t.Errorf("%s: precedence %d label %d scope %v, want %d %d %v", tt.addr, p, l, sc, tt.precedence, tt.label, tt.scope)
		}
	}
}

func TestSourceSelectionLongestPrefixAndStates(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	// Two addresses on eth0 of which the second shares more with the
	// destination, beyond the first's prefix but not beyond its own.
	must(t, h.p.AddAddress(h.eth0, netip.MustParsePrefix("2001:db8:1:8000::2/52"), ipv6.Preferred))
	dst := netip.MustParseAddr("2001:db8:1:8001::9")
	h.p.AddRoute(ipv6.Route{Dst: netip.MustParsePrefix("2001:db8:1:8001::/64"), Iface: h.eth0})
	src := func() netip.Addr {
		ri, err := h.p.Route(dst)
		must(t, err)
		return ri.Src
	}
	if got := src(); got != netip.MustParseAddr("2001:db8:1:8000::2") {
		t.Errorf("rule 8: source %v, want 2001:db8:1:8000::2", got)
	}
	must(t, h.p.SetAddressState(netip.MustParseAddr("2001:db8:1:8000::2"), ipv6.Tentative))
	if got := src(); got != ourAddr {
		t.Errorf("a tentative address chosen: %v", got)
	}
	// RFC 4429 section 2.1: an optimistic address is used, and avoided
	// as a deprecated one is.
	for _, st := range []ipv6.AddrState{ipv6.Deprecated, ipv6.Optimistic} {
		must(t, h.p.SetAddressState(netip.MustParseAddr("2001:db8:1:8000::2"), st))
		if got := src(); got != ourAddr {
			t.Errorf("rule 3 before rule 8, %v: source %v, want %v", st, got, ourAddr)
		}
	}
	must(t, h.p.SetAddressState(ourAddr, ipv6.Tentative))
	if got := src(); got != netip.MustParseAddr("2001:db8:1:8000::2") {
		t.Errorf("an optimistic address is not used when it is the only one: %v", got)
	}
	must(t, h.p.SetAddressState(ourAddr, ipv6.Preferred))
	must(t, h.p.SetAddressState(netip.MustParseAddr("2001:db8:1:8000::2"), ipv6.Deprecated))
	must(t, h.p.RemoveAddress(ourAddr))
	if got := src(); got != netip.MustParseAddr("2001:db8:1:8000::2") {
		t.Errorf("a deprecated address is used when it is the only one: %v", got)
	}
}

func TestPathMTU(t *testing.T) {
	h := newHarness(t, ipv6.Config{PMTUExpiry: time.Minute})
	mtuOf := func() int {
		ri, err := h.p.Route(farAddr)
		must(t, err)
		return ri.MTU
	}
	steps := []struct {
		report, want int
		counter      string
	}{
		{1400, 1400, "PMTUUpdates"},
		{1450, 1400, "PMTUIgnored"}, // never raised by a report (RFC 8201 section 4)
		{1000, 1280, "PMTUClamped"}, // never below 1280
		{1200, 1280, "PMTUIgnored"},
	}
	for _, s := range steps {
		before := h.counters()[s.counter]
		if got := h.p.UpdatePMTU(farAddr, s.report, 0); got != s.want || mtuOf() != s.want {
			t.Errorf("report %d: path MTU %d (route %d), want %d", s.report, got, mtuOf(), s.want)
		}
		if h.counters()[s.counter] != before+1 {
			t.Errorf("report %d did not count %s", s.report, s.counter)
		}
	}
	h.clk.Advance(time.Minute)
	if got := mtuOf(); got != mtu {
		t.Errorf("after expiry the path MTU is %d, want the link's %d", got, mtu)
	}
}

// Addresses drive acceptance as DAD moves them: a tentative address takes
// nothing but its solicited-node group; preferred, it takes datagrams.
func TestAddressStatesDriveAcceptance(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	a := netip.MustParseAddr("2001:db8:1::5")
	must(t, h.p.AddAddress(h.eth0, netip.PrefixFrom(a, 64), ipv6.Tentative))
	if h.p.IsLocal(a) {
		t.Error("a tentative address is local")
	}
	h.inject(t, h.eth0, whole(t, peerAddr, a, protoTest, data(8)))
	must(t, h.p.SetAddressState(a, ipv6.Preferred))
	h.inject(t, h.eth0, whole(t, peerAddr, a, protoTest, data(8)))
	if got := len(h.tr.take()); got != 1 {
		t.Errorf("delivered %d datagrams, want the one after DAD", got)
	}
	if st, ok := h.p.AddressState(a); !ok || st != ipv6.Preferred {
		t.Errorf("state %v, %v", st, ok)
	}
	groups := h.p.Groups(h.eth0)
	want := []netip.Addr{ipv6.AllNodes, ipv6.SolicitedNode(ourAddr), ipv6.SolicitedNode(a)} // ourLL shares ourAddr's
	if len(groups) != len(want) {
		t.Errorf("groups %v, want %v", groups, want)
	}
}
