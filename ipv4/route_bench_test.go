package ipv4_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ipv4"
)

// BenchmarkRoute is a lookup as every echo reply and unconnected UDP
// datagram makes one: through the default route, and on-link, in a table
// of two interfaces' subnets and three routes through gateways.
func BenchmarkRoute(b *testing.B) {
	p, eth0, eth1 := newRouteTest(b)
	for _, a := range []struct {
		i *ipv4.Interface
		p string
	}{{eth0, "10.0.0.2/24"}, {eth0, "10.9.0.2/24"}, {eth1, "10.1.0.2/24"}} {
		if err := p.AddAddress(a.i, netip.MustParsePrefix(a.p)); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range []ipv4.Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.0.0.1"), Iface: eth0},
		{Dst: netip.MustParsePrefix("172.16.0.0/12"), Gateway: netip.MustParseAddr("10.9.0.1"), Iface: eth0},
		{Dst: netip.MustParsePrefix("192.168.0.0/16"), Gateway: netip.MustParseAddr("10.1.0.1"), Iface: eth1},
	} {
		if err := p.AddRoute(r); err != nil {
			b.Fatal(err)
		}
	}
	for _, dst := range []string{"198.51.100.7", "10.1.0.9"} {
		a := netip.MustParseAddr(dst)
		b.Run(dst, func(b *testing.B) {
			for b.Loop() {
				if _, err := p.Route(a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
