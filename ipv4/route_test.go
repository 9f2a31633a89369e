package ipv4_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/link"
)

// discard is a link that takes nothing.
type discard struct{}

func (discard) Output(netip.Addr, *buffer.Packet)  {}
func (discard) OutputBroadcast(pkt *buffer.Packet) { pkt.Release() }

func newRouteTest(t testing.TB) (*ipv4.Protocol, *ipv4.Interface, *ipv4.Interface) {
	t.Helper()
	p := ipv4.New(ipv4.Config{}, &env.Env{Clock: clock.Real{}, Rand: env.NewRand(nil), Pool: buffer.NewPool()})
	eth0, err := p.AddOffloadInterface("eth0", 1500, link.Capabilities{}, discard{})
	if err != nil {
		t.Fatal(err)
	}
	eth1, err := p.AddOffloadInterface("eth1", 1500, link.Capabilities{}, discard{})
	if err != nil {
		t.Fatal(err)
	}
	return p, eth0, eth1
}

// newRoutedTest is newRouteTest with a table to search:
//
//	eth0: 10.0.0.2/24, 10.9.0.2/24; eth1: 10.1.0.2/24
//	0.0.0.0/0 via 10.0.0.1 dev eth0
//	172.16.0.0/12 via 10.9.0.1 dev eth0
//	192.168.0.0/16 via 10.1.0.1 dev eth1
func newRoutedTest(t testing.TB) (*ipv4.Protocol, *ipv4.Interface, *ipv4.Interface) {
	t.Helper()
	p, eth0, eth1 := newRouteTest(t)
	for _, a := range []struct {
		i *ipv4.Interface
		p string
	}{{eth0, "10.0.0.2/24"}, {eth0, "10.9.0.2/24"}, {eth1, "10.1.0.2/24"}} {
		if err := p.AddAddress(a.i, netip.MustParsePrefix(a.p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []ipv4.Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.0.0.1"), Iface: eth0},
		{Dst: netip.MustParsePrefix("172.16.0.0/12"), Gateway: netip.MustParseAddr("10.9.0.1"), Iface: eth0},
		{Dst: netip.MustParsePrefix("192.168.0.0/16"), Gateway: netip.MustParseAddr("10.1.0.1"), Iface: eth1},
	} {
		if err := p.AddRoute(r); err != nil {
			t.Fatal(err)
		}
	}
	return p, eth0, eth1
}

// TestRemoveAddressTakesItsRoutes pins what goes with an address, as on
// Linux: its subnet's on-link route and the routes through gateways only
// that subnet reached; routes of other interfaces and subnets stay.
func TestRemoveAddressTakesItsRoutes(t *testing.T) {
	p, eth0, _ := newRoutedTest(t)
	if err := p.RemoveAddress(netip.MustParseAddr("10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Routes() {
		got = append(got, r.String())
	}
	want := []string{"10.9.0.0/24 dev eth0", "10.1.0.0/24 dev eth1", "172.16.0.0/12 via 10.9.0.1 dev eth0", "192.168.0.0/16 via 10.1.0.1 dev eth1"}
	if len(got) != len(want) {
		t.Fatalf("routes %v, want %v", got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("route %q gone; routes %v", w, got)
		}
	}
	if p.IsLocal(netip.MustParseAddr("10.0.0.2")) {
		t.Error("removed address still local")
	}
	if err := p.RemoveAddress(netip.MustParseAddr("10.0.0.2")); err == nil {
		t.Error("removing it twice succeeded")
	}
	if !p.RemoveRoute(ipv4.Route{Dst: netip.MustParsePrefix("172.16.0.0/12"), Gateway: netip.MustParseAddr("10.9.0.1"), Iface: eth0}) {
		t.Error("RemoveRoute found no route")
	}
	if p.RemoveRoute(ipv4.Route{Dst: netip.MustParsePrefix("172.16.0.0/12"), Gateway: netip.MustParseAddr("10.9.0.1"), Iface: eth0}) {
		t.Error("RemoveRoute removed a route twice")
	}
}

func TestSetLinkMTUStaysWithinTheLink(t *testing.T) {
	_, eth0, _ := newRouteTest(t)
	for _, tt := range []struct{ set, want int }{{1400, 1400}, {9000, 1500}, {20, 68}, {1500, 1500}} {
		if got := eth0.SetLinkMTU(tt.set); got != tt.want || eth0.MTU() != tt.want {
			t.Errorf("SetLinkMTU(%d) = %d, MTU %d; want %d", tt.set, got, eth0.MTU(), tt.want)
		}
	}
}

// TestRouteViaBroadcastsBeforeAnAddress: a limited broadcast out an
// interface without an address leaves from 0.0.0.0 (RFC 1122 section
// 3.2.1.3), as a DHCP client's DISCOVER must; Route, which picks no
// interface, has none to offer.
func TestRouteViaBroadcastsBeforeAnAddress(t *testing.T) {
	p, _, eth1 := newRouteTest(t)
	bc := netip.MustParseAddr("255.255.255.255")
	if _, err := p.Route(bc); !errors.Is(err, ipv4.ErrNoRoute) {
		t.Errorf("Route(%v) without addresses: %v", bc, err)
	}
	r, err := p.RouteVia(bc, "eth1")
	if err != nil || r.Src != netip.IPv4Unspecified() || !r.Bcast || r.Iface != eth1 {
		t.Errorf("RouteVia = %+v, %v; want from 0.0.0.0, broadcast, on eth1", r, err)
	}
	if err := p.AddAddress(eth1, netip.MustParsePrefix("10.1.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if r, _ := p.RouteVia(bc, "eth1"); r.Src != netip.MustParseAddr("10.1.0.2") {
		t.Errorf("with an address, the broadcast leaves from %v", r.Src)
	}
	if _, err := p.RouteVia(netip.MustParseAddr("10.1.0.9"), "eth0"); !errors.Is(err, ipv4.ErrNoRoute) {
		t.Errorf("RouteVia through an interface without the route: %v", err)
	}
	if _, err := p.RouteVia(bc, "eth9"); err == nil {
		t.Error("RouteVia through no interface succeeded")
	}
}

// TestSourceOffEverySubnetIsRoutable pins RFC 3927 section 2.6.1's rule
// for a host with both kinds of address: a destination off its subnets
// goes from the routable address, even one assigned after the link-local
// address (a DHCP lease that came late), and one on 169.254/16 from the
// link-local address.
func TestSourceOffEverySubnetIsRoutable(t *testing.T) {
	p, eth0, _ := newRouteTest(t)
	for _, a := range []string{"169.254.7.9/16", "10.0.0.2/24"} {
		if err := p.AddAddress(eth0, netip.MustParsePrefix(a)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.AddRoute(ipv4.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.0.0.1"), Iface: eth0}); err != nil {
		t.Fatal(err)
	}
	for dst, want := range map[string]string{"198.51.100.7": "10.0.0.2", "169.254.200.1": "169.254.7.9", "10.0.0.77": "10.0.0.2"} {
		ri, err := p.Route(netip.MustParseAddr(dst))
		if err != nil {
			t.Fatal(err)
		}
		if ri.Src != netip.MustParseAddr(want) {
			t.Errorf("to %s: source %v, want %s", dst, ri.Src, want)
		}
	}
}
