package ip_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ip"
)

// The port rules of Linux's sockets with bindv6only=0, which Go's net
// relies on.

var (
	any4   = ip.Binding{Addr: netip.IPv4Unspecified()}
	dual   = ip.Binding{Addr: netip.IPv6Unspecified()}
	only6  = ip.Binding{Addr: netip.IPv6Unspecified(), V6Only: true}
	host4  = ip.Binding{Addr: netip.MustParseAddr("10.0.0.1")}
	host6  = ip.Binding{Addr: netip.MustParseAddr("2001:db8::1")}
	other6 = ip.Binding{Addr: netip.MustParseAddr("2001:db8::2")}
)

func TestBindingConflicts(t *testing.T) {
	tests := []struct {
		name string
		a, b ip.Binding
		want bool
	}{
		{"dual-stack wildcard against IPv4's", dual, any4, true},
		{"dual-stack wildcard against IPv6-only", dual, only6, true},
		{"dual-stack wildcard against a specific IPv4 address", dual, host4, true},
		{"dual-stack wildcard against a specific IPv6 address", dual, host6, true},
		{"IPv4 wildcard beside IPv6-only (tcp4 and tcp6 on one port)", any4, only6, false},
		{"IPv4 wildcard against an IPv4 address", any4, host4, true},
		{"IPv4 wildcard beside an IPv6 address", any4, host6, false},
		{"IPv6-only against an IPv6 address", only6, host6, true},
		{"IPv6-only beside an IPv4 address", only6, host4, false},
		{"two IPv6 addresses", host6, other6, false},
		{"the same address", host6, host6, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Conflicts(tt.b); got != tt.want {
				t.Errorf("Conflicts = %v, want %v", got, tt.want)
			}
			if got := tt.b.Conflicts(tt.a); got != tt.want {
				t.Errorf("reversed: Conflicts = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBindingTakesAndReaches(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("2001:db8::1")
	tests := []struct {
		name                   string
		b                      ip.Binding
		takes4, takes6, reach4 bool
	}{
		{"dual-stack wildcard", dual, true, true, true},
		{"IPv6-only wildcard", only6, false, true, false},
		{"IPv4 wildcard", any4, true, false, true},
		{"an IPv6 address", host6, false, true, false},
		{"an IPv4 address", host4, true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.b.Takes(v4) != tt.takes4 || tt.b.Takes(v6) != tt.takes6 {
				t.Errorf("takes IPv4 %v, IPv6 %v; want %v, %v", tt.b.Takes(v4), tt.b.Takes(v6), tt.takes4, tt.takes6)
			}
			if tt.b.Reaches(v4) != tt.reach4 || tt.b.Reaches(v6) != !tt.b.Addr.Is4() {
				t.Errorf("reaches IPv4 %v, IPv6 %v", tt.b.Reaches(v4), tt.b.Reaches(v6))
			}
		})
	}
}

func TestScopedAddsTheRouteZone(t *testing.T) {
	r := ip.Route{Src: netip.MustParseAddr("fe80::2%eth0")}
	for in, want := range map[string]string{
		"fe80::1":      "fe80::1%eth0",
		"fe80::1%eth1": "fe80::1%eth1",
		"2001:db8::1":  "2001:db8::1",
	} {
		if got := ip.Scoped(netip.MustParseAddr(in), r); got.String() != want {
			t.Errorf("Scoped(%s) = %v, want %s", in, got, want)
		}
	}
}
