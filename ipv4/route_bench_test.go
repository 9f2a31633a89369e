package ipv4_test

import (
	"net/netip"
	"testing"
)

// BenchmarkRoute is a lookup as every echo reply and unconnected UDP
// datagram makes one, in newRoutedTest's table: through the default
// route, and on-link.
func BenchmarkRoute(b *testing.B) {
	p, _, _ := newRoutedTest(b)
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
