package ipv4_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/link"
)

// BenchmarkRoute is a lookup as every echo reply and unconnected UDP
// datagram makes one: through the default route, and on-link, in a table
// of two interfaces' subnets and three routes through gateways.
func BenchmarkRoute(b *testing.B) {
	p := ipv4.New(ipv4.Config{}, &env.Env{Clock: clock.Real{}, Rand: env.NewRand(nil), Pool: buffer.NewPool()})
	var ifaces [2]*ipv4.Interface
	for i, name := range []string{"eth0", "eth1"} {
		iface, err := p.AddOffloadInterface(name, 1500, link.Capabilities{}, discard{})
		if err != nil {
			b.Fatal(err)
		}
		ifaces[i] = iface
	}
	for _, a := range []struct {
		i int
		p string
	}{{0, "10.0.0.2/24"}, {0, "10.9.0.2/24"}, {1, "10.1.0.2/24"}} {
		if err := p.AddAddress(ifaces[a.i], netip.MustParsePrefix(a.p)); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range []ipv4.Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.0.0.1"), Iface: ifaces[0]},
		{Dst: netip.MustParsePrefix("172.16.0.0/12"), Gateway: netip.MustParseAddr("10.9.0.1"), Iface: ifaces[0]},
		{Dst: netip.MustParsePrefix("192.168.0.0/16"), Gateway: netip.MustParseAddr("10.1.0.1"), Iface: ifaces[1]},
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
