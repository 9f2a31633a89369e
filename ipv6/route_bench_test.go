package ipv6_test

import (
	"net/netip"
	"testing"
)

// BenchmarkRoute is a lookup as every echo reply and unconnected UDP
// datagram makes one, in routed's table: through the preferred default
// router (the source chosen by RFC 6724), and on-link.
func BenchmarkRoute(b *testing.B) {
	h := routed(b)
	for _, dst := range []string{"2001:db8:9::9", "2001:db8:1::99"} {
		a := netip.MustParseAddr(dst)
		b.Run(dst, func(b *testing.B) {
			for b.Loop() {
				if _, err := h.p.Route(a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
