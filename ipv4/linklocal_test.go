package ipv4_test

import (
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/wire"
)

var (
	llAddr  = netip.MustParsePrefix("169.254.7.9/16")
	routed  = netip.MustParsePrefix("10.0.0.2/24")
	gateway = netip.MustParseAddr("10.0.0.1")
)

func mustAdd(t *testing.T, p *ipv4.Protocol, i *ipv4.Interface, prefixes ...netip.Prefix) {
	t.Helper()
	for _, a := range prefixes {
		if err := p.AddAddress(i, a); err != nil {
			t.Fatal(err)
		}
	}
}

func mustRoute(t *testing.T, p *ipv4.Protocol, r ipv4.Route) {
	t.Helper()
	if err := p.AddRoute(r); err != nil {
		t.Fatal(err)
	}
}

var defaultRoute = netip.MustParsePrefix("0.0.0.0/0")

// TestLinkLocalOnlyTakesEveryDestinationOnLink pins RFC 3927 section
// 2.6.2 for a host whose NIC has its link-local address alone: a unicast
// destination no route covers goes from that address straight to the
// destination on the link (its next hop the destination itself, which ARP
// resolves), never "no route"; and a destination no link carries
// (loopback, "this network", reserved) still has none.
func TestLinkLocalOnlyTakesEveryDestinationOnLink(t *testing.T) {
	p, eth0, _ := newRouteTest(t)
	mustAdd(t, p, eth0, llAddr)
	for _, tt := range []struct {
		dst     string
		noRoute bool
	}{
		{dst: "10.0.0.1"},
		{dst: "198.51.100.7"},
		{dst: "169.254.200.1"},
		{dst: "127.0.0.5", noRoute: true},
		{dst: "0.1.2.3", noRoute: true},
		{dst: "240.0.0.1", noRoute: true},
	} {
		dst := netip.MustParseAddr(tt.dst)
		for _, via := range []string{"", "eth0"} {
			var ri ip.Route
			var err error
			if via == "" {
				ri, err = p.Route(dst)
			} else {
				ri, err = p.RouteVia(dst, via)
			}
			if tt.noRoute {
				if !errors.Is(err, ipv4.ErrNoRoute) {
					t.Errorf("to %v (via %q): %+v, %v; want no route", dst, via, ri, err)
				}
				continue
			}
			if err != nil || ri.Src != llAddr.Addr() || ri.NextHop != dst || ri.Iface != eth0 || ri.Bcast || ri.Local || ri.MTU != 1500 {
				t.Errorf("to %v (via %q): %+v, %v; want from %v to the destination itself on eth0", dst, via, ri, err, llAddr.Addr())
			}
		}
		// eth1 has no address: nothing goes through it.
		if _, err := p.RouteVia(dst, "eth1"); !errors.Is(err, ipv4.ErrNoRoute) {
			t.Errorf("to %v via eth1, which has no address: %v, want no route", dst, err)
		}
	}
}

// TestRoutableAddressKeepsItsRoutes pins that a routable address on the
// NIC, beside the link-local one or alone, leaves routing as it was:
// without a default route a destination off the subnets has none; with
// one it goes through the router from the routable address; and a NIC
// with its link-local address alone is the last resort only where no
// route matches.
func TestRoutableAddressKeepsItsRoutes(t *testing.T) {
	off := netip.MustParseAddr("198.51.100.7")
	for _, tt := range []struct {
		name      string
		eth0      []netip.Prefix
		eth1      []netip.Prefix
		def       bool // a default route through 10.0.0.1 on eth0
		noRoute   bool
		src, next netip.Addr
		iface     string
	}{
		{name: "routable and link-local, no default route", eth0: []netip.Prefix{llAddr, routed}, noRoute: true},
		{name: "link-local then routable, no default route", eth0: []netip.Prefix{routed, llAddr}, noRoute: true},
		{name: "routable and link-local, default route", eth0: []netip.Prefix{llAddr, routed}, def: true, src: routed.Addr(), next: gateway, iface: "eth0"},
		{name: "routable alone, default route", eth0: []netip.Prefix{routed}, def: true, src: routed.Addr(), next: gateway, iface: "eth0"},
		{name: "default route beside a link-local NIC", eth0: []netip.Prefix{routed}, eth1: []netip.Prefix{llAddr}, def: true, src: routed.Addr(), next: gateway, iface: "eth0"},
		{name: "no default route beside a link-local NIC", eth0: []netip.Prefix{routed}, eth1: []netip.Prefix{llAddr}, src: llAddr.Addr(), next: off, iface: "eth1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, eth0, eth1 := newRouteTest(t)
			mustAdd(t, p, eth0, tt.eth0...)
			mustAdd(t, p, eth1, tt.eth1...)
			if tt.def {
				mustRoute(t, p, ipv4.Route{Dst: defaultRoute, Gateway: gateway, Iface: eth0})
			}
			ri, err := p.Route(off)
			if tt.noRoute {
				if !errors.Is(err, ipv4.ErrNoRoute) {
					t.Fatalf("to %v: %+v, %v; want no route", off, ri, err)
				}
				return
			}
			if err != nil || ri.Src != tt.src || ri.NextHop != tt.next || ri.Iface.(*ipv4.Interface).Name() != tt.iface {
				t.Fatalf("to %v: %+v, %v; want from %v through %v on %s", off, ri, err, tt.src, tt.next, tt.iface)
			}
			// On the routable subnet, as ever: on-link from the
			// routable address.
			on := netip.MustParseAddr("10.0.0.77")
			if ri, err := p.Route(on); err != nil || ri.Src != routed.Addr() || ri.NextHop != on || ri.Iface != eth0 {
				t.Errorf("to %v: %+v, %v; want on-link from %v", on, ri, err, routed.Addr())
			}
		})
	}
}

// TestLinkLocalSourceNeverGoesToARouter pins RFC 3927 section 2.6.2's
// "MUST NOT send the packet to any router": a route through a gateway out
// of a NIC whose only address is link-local yields the destination as the
// next hop, and so does a datagram a socket sends from the link-local
// address of a NIC that also has a routable one, whose route has a router.
func TestLinkLocalSourceNeverGoesToARouter(t *testing.T) {
	off := netip.MustParseAddr("198.51.100.7")
	t.Run("route through a gateway from a link-local NIC", func(t *testing.T) {
		p, eth0, _ := newRouteTest(t)
		mustAdd(t, p, eth0, llAddr)
		mustRoute(t, p, ipv4.Route{Dst: defaultRoute, Gateway: netip.MustParseAddr("169.254.1.1"), Iface: eth0})
		if ri, err := p.Route(off); err != nil || ri.Src != llAddr.Addr() || ri.NextHop != off {
			t.Errorf("to %v: %+v, %v; want from %v to the destination itself", off, ri, err, llAddr.Addr())
		}
	})
	t.Run("socket bound to the link-local address", func(t *testing.T) {
		out := &nextHops{}
		p := ipv4.New(ipv4.Config{}, &env.Env{Clock: clock.Real{}, Rand: env.NewRand(nil), Pool: buffer.NewPool()})
		eth0, err := p.AddOffloadInterface("eth0", 1500, link.Capabilities{}, out)
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, p, eth0, routed, llAddr)
		mustRoute(t, p, ipv4.Route{Dst: defaultRoute, Gateway: gateway, Iface: eth0})
		for _, tt := range []struct {
			src, want netip.Addr
		}{
			{netip.Addr{}, gateway},  // the route's source, routable: through the router
			{routed.Addr(), gateway}, // bound to it: the same
			{llAddr.Addr(), off},     // bound to the link-local address: on the link
			{netip.IPv4Unspecified(), gateway},
		} {
			pk := buffer.NewPool().Get(wire.UDPHeaderLen)
			wire.EncodeUDP(pk.Bytes(), &wire.UDPFields{SrcPort: 9, DstPort: 9})
			if err := p.Send(pk, ip.SendParams{Src: tt.src, Dst: off, Proto: wire.ProtoUDP}); err != nil {
				t.Fatalf("from %v: %v", tt.src, err)
			}
			if got := out.last(); got != tt.want {
				t.Errorf("from %v to %v: next hop %v, want %v", tt.src, off, got, tt.want)
			}
		}
	})
}

// TestLinkLocalFallbackFollowsTheAddresses pins that the last resort
// comes and goes with the routable address: a DHCP lease arriving on the
// NIC ends it (no route off the subnets until the lease's router is
// added), and its address removed brings it back.
func TestLinkLocalFallbackFollowsTheAddresses(t *testing.T) {
	p, eth0, _ := newRouteTest(t)
	off := netip.MustParseAddr("198.51.100.7")
	mustAdd(t, p, eth0, llAddr)
	steps := []struct {
		name    string
		change  func()
		noRoute bool
	}{
		{"link-local alone", func() {}, false},
		{"a lease arrives", func() { mustAdd(t, p, eth0, routed) }, true},
		{"the lease ends", func() {
			if err := p.RemoveAddress(routed.Addr()); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"the link-local address lost too", func() {
			if err := p.RemoveAddress(llAddr.Addr()); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, s := range steps {
		s.change()
		ri, err := p.Route(off)
		if s.noRoute != errors.Is(err, ipv4.ErrNoRoute) || !s.noRoute && ri.NextHop != off {
			t.Errorf("%s: %+v, %v; want no route %v", s.name, ri, err, s.noRoute)
		}
	}
}

// nextHops is a link that records the next hop of each datagram.
type nextHops struct {
	mu   sync.Mutex
	hops []netip.Addr
}

func (n *nextHops) Output(hop netip.Addr, pkt *buffer.Packet) {
	n.mu.Lock()
	n.hops = append(n.hops, hop)
	n.mu.Unlock()
	pkt.Release()
}

func (n *nextHops) OutputBroadcast(pkt *buffer.Packet) { pkt.Release() }

func (n *nextHops) last() netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.hops) == 0 {
		return netip.Addr{}
	}
	return n.hops[len(n.hops)-1]
}

// TestLinkLocalDestinationGoesOnLink pins RFC 3927 section 2.6.2's rule
// for a destination on 169.254/16, "whether the interface is configured
// with a Link-Local or a routable IPv4 address": a host with a routable
// address alone sends it from that address (section 2.6.1 allows it) to
// the destination itself on the link of the route the lookup picks, the
// default route's among several interfaces, rather than to the router.
// The prefix's broadcast, a routable destination and a route more
// specific than 169.254/16 keep their router; without a route there is
// none still.
func TestLinkLocalDestinationGoesOnLink(t *testing.T) {
	ll := netip.MustParseAddr("169.254.3.4")
	other := netip.MustParsePrefix("10.1.0.2/24")
	via := func(dst, gw string) ipv4.Route {
		return ipv4.Route{Dst: netip.MustParsePrefix(dst), Gateway: netip.MustParseAddr(gw)}
	}
	for _, tt := range []struct {
		name      string
		eth0      []netip.Prefix
		eth1      []netip.Prefix
		routes    []ipv4.Route // on eth0 when the gateway is on 10.0.0.0/24, else on eth1
		dst       netip.Addr
		noRoute   bool
		src, next netip.Addr
		iface     string
	}{
		{
			name: "link-local destination on-link via the default route's interface",
			eth0: []netip.Prefix{routed}, routes: []ipv4.Route{via("0.0.0.0/0", "10.0.0.1")},
			dst: ll, src: routed.Addr(), next: ll, iface: "eth0",
		},
		{
			name: "the default route's interface among two",
			eth0: []netip.Prefix{routed}, eth1: []netip.Prefix{other}, routes: []ipv4.Route{via("0.0.0.0/0", "10.1.0.1")},
			dst: ll, src: other.Addr(), next: ll, iface: "eth1",
		},
		{
			name: "a route for the whole prefix through a router is taken on-link too",
			eth0: []netip.Prefix{routed}, routes: []ipv4.Route{via("169.254.0.0/16", "10.0.0.1")},
			dst: ll, src: routed.Addr(), next: ll, iface: "eth0",
		},
		{
			name: "169.254.255.255 goes to the router",
			eth0: []netip.Prefix{routed}, routes: []ipv4.Route{via("0.0.0.0/0", "10.0.0.1")},
			dst: netip.MustParseAddr("169.254.255.255"), src: routed.Addr(), next: gateway, iface: "eth0",
		},
		{
			name: "a more specific route wins",
			eth0: []netip.Prefix{routed}, routes: []ipv4.Route{via("0.0.0.0/0", "10.0.0.1"), via("169.254.3.0/24", "10.0.0.9")},
			dst: ll, src: routed.Addr(), next: netip.MustParseAddr("10.0.0.9"), iface: "eth0",
		},
		{
			name: "a more specific route on another interface wins",
			eth0: []netip.Prefix{routed}, eth1: []netip.Prefix{other}, routes: []ipv4.Route{via("0.0.0.0/0", "10.0.0.1"), via("169.254.0.0/17", "10.1.0.1")},
			dst: ll, src: other.Addr(), next: netip.MustParseAddr("10.1.0.1"), iface: "eth1",
		},
		{
			name: "a routable destination still goes to the router",
			eth0: []netip.Prefix{routed}, routes: []ipv4.Route{via("0.0.0.0/0", "10.0.0.1")},
			dst: netip.MustParseAddr("198.51.100.7"), src: routed.Addr(), next: gateway, iface: "eth0",
		},
		{
			name: "a connected link-local subnet beside the default route",
			eth0: []netip.Prefix{routed}, eth1: []netip.Prefix{llAddr}, routes: []ipv4.Route{via("0.0.0.0/0", "10.0.0.1")},
			dst: ll, src: llAddr.Addr(), next: ll, iface: "eth1",
		},
		{
			name: "no route, no default route",
			eth0: []netip.Prefix{routed},
			dst:  ll, noRoute: true,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, eth0, eth1 := newRouteTest(t)
			mustAdd(t, p, eth0, tt.eth0...)
			mustAdd(t, p, eth1, tt.eth1...)
			for _, r := range tt.routes {
				r.Iface = eth1
				if routed.Contains(r.Gateway) {
					r.Iface = eth0
				}
				mustRoute(t, p, r)
			}
			ri, err := p.Route(tt.dst)
			if tt.noRoute {
				if !errors.Is(err, ipv4.ErrNoRoute) {
					t.Fatalf("to %v: %+v, %v; want no route", tt.dst, ri, err)
				}
				return
			}
			if err != nil || ri.Src != tt.src || ri.NextHop != tt.next || ri.Iface.(*ipv4.Interface).Name() != tt.iface || ri.Bcast || ri.Local {
				t.Fatalf("to %v: %+v, %v; want from %v through %v on %s", tt.dst, ri, err, tt.src, tt.next, tt.iface)
			}
			// A socket bound to the interface finds the same way.
			if rv, err := p.RouteVia(tt.dst, tt.iface); err != nil || rv.NextHop != tt.next || rv.Src != tt.src {
				t.Errorf("via %s to %v: %+v, %v; want from %v through %v", tt.iface, tt.dst, rv, err, tt.src, tt.next)
			}
		})
	}
}
