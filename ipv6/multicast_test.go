package ipv6_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

func TestNamedGroupsAreTheRFCAddresses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		got   netip.Addr
		want  string
		scope ipv6.Scope
	}{
		{"AllNodes", ipv6.AllNodes, "ff02::1", ipv6.ScopeLinkLocal},
		{"AllRouters", ipv6.AllRouters, "ff02::2", ipv6.ScopeLinkLocal},
		{"AllMLDv2Routers", ipv6.AllMLDv2Routers, "ff02::16", ipv6.ScopeLinkLocal},
	} {
		if tc.got != netip.MustParseAddr(tc.want) || !tc.got.IsLinkLocalMulticast() || ipv6.AddrScope(tc.got) != tc.scope {
			t.Errorf("%s = %v (scope %v), want %s, link-local multicast", tc.name, tc.got, ipv6.AddrScope(tc.got), tc.want)
		}
	}
}

func TestSolicitedNodeIsFF02Colon1ColonFFAndTheLow24Bits(t *testing.T) {
	for _, tc := range []struct {
		addr, group string
		mac         wire.MAC
	}{
		// RFC 4291 section 2.7.1's example address; RFC 2464 section 7's mapping.
		{"2001:db8::1:800:200e:8c6c", "ff02::1:ff0e:8c6c", wire.MAC{0x33, 0x33, 0xff, 0x0e, 0x8c, 0x6c}},
		{"4037::01:800:200e:8c6c", "ff02::1:ff0e:8c6c", wire.MAC{0x33, 0x33, 0xff, 0x0e, 0x8c, 0x6c}},
		{"fe80::21b:21ff:fe3c:9df8", "ff02::1:ff3c:9df8", wire.MAC{0x33, 0x33, 0xff, 0x3c, 0x9d, 0xf8}},
		{"fe80::21b:21ff:fe3c:9df8%eth0", "ff02::1:ff3c:9df8", wire.MAC{0x33, 0x33, 0xff, 0x3c, 0x9d, 0xf8}},
		{"::", "ff02::1:ff00:0", wire.MAC{0x33, 0x33, 0xff, 0, 0, 0}},
		{"2001:db8::ffff:ffff", "ff02::1:ffff:ffff", wire.MAC{0x33, 0x33, 0xff, 0xff, 0xff, 0xff}},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			g := ipv6.SolicitedNode(netip.MustParseAddr(tc.addr))
			if g != netip.MustParseAddr(tc.group) {
				t.Errorf("SolicitedNode(%s) = %v, want %s", tc.addr, g, tc.group)
			}
			if !g.IsLinkLocalMulticast() || !ipv6.IsSolicitedNode(g) {
				t.Errorf("SolicitedNode(%s) = %v: link-local multicast %v, IsSolicitedNode %v", tc.addr, g, g.IsLinkLocalMulticast(), ipv6.IsSolicitedNode(g))
			}
			if mac, ok := ipv6.MulticastMAC(g); !ok || mac != tc.mac || !mac.IsMulticast() {
				t.Errorf("MulticastMAC(%v) = %v, %v; want %v", g, mac, ok, tc.mac)
			}
		})
	}
}

func TestIsSolicitedNodeOnlyForFF02Colon1ColonFFSlash104(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"ff02::1:ff00:0", true},
		{"ff02::1:ffab:cdef", true},
		{"ff02::1:fe00:1", false}, // byte 12 not ff
		{"ff02::2:ff00:1", false},
		{"ff05::1:ff00:1", false}, // site scope
		{"ff02::1", false},
		{"fe80::1:ff00:1", false},
		{"::ffff:255.0.0.1", false},
		{"255.2.0.1", false},
	} {
		if got := ipv6.IsSolicitedNode(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("IsSolicitedNode(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if ipv6.IsSolicitedNode(netip.Addr{}) {
		t.Error("IsSolicitedNode(zero Addr) = true")
	}
}

func TestMulticastMACIs3333AndTheLow32Bits(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want wire.MAC
		ok   bool
	}{
		{"ff02::1", wire.MAC{0x33, 0x33, 0, 0, 0, 1}, true},
		{"ff02::2", wire.MAC{0x33, 0x33, 0, 0, 0, 2}, true},
		{"ff02::16", wire.MAC{0x33, 0x33, 0, 0, 0, 0x16}, true},
		{"ff0e::1234:5678:9abc", wire.MAC{0x33, 0x33, 0x56, 0x78, 0x9a, 0xbc}, true},
		{"fe80::1", wire.MAC{}, false},
		{"::", wire.MAC{}, false},
		{"224.0.0.1", wire.MAC{}, false},
		{"::ffff:224.0.0.1", wire.MAC{}, false}, // IPv4-mapped: not ff00::/8
	} {
		got, ok := ipv6.MulticastMAC(netip.MustParseAddr(tc.addr))
		if got != tc.want || ok != tc.ok {
			t.Errorf("MulticastMAC(%s) = %v, %v; want %v, %v", tc.addr, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := ipv6.MulticastMAC(netip.Addr{}); ok {
		t.Error("MulticastMAC(zero Addr) reported a MAC")
	}
}

func TestAddrScopeFollowsRFC4291(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want ipv6.Scope
	}{
		{"ff01::1", ipv6.ScopeInterfaceLocal},
		{"ff02::1", ipv6.ScopeLinkLocal},
		{"ff03::1", ipv6.ScopeRealmLocal},
		{"ff04::1", ipv6.ScopeAdminLocal},
		{"ff05::2", ipv6.ScopeSiteLocal},
		{"ff08::1", ipv6.ScopeOrganizationLocal},
		{"ff0e::1", ipv6.ScopeGlobal},
		{"ff12::1", ipv6.ScopeLinkLocal}, // transient flag set, scope still 2
		{"ff00::1", ipv6.ScopeNone},      // reserved scope 0
		{"ff0f::1", ipv6.Scope(0xf)},     // reserved scope f, as it stands
		{"fe80::1", ipv6.ScopeLinkLocal}, // section 2.5.6
		{"febf::1", ipv6.ScopeLinkLocal}, // still fe80::/10
		{"fe80::1%eth0", ipv6.ScopeLinkLocal},
		{"::1", ipv6.ScopeLinkLocal},  // section 2.5.3, RFC 4007 section 4
		{"fec0::1", ipv6.ScopeGlobal}, // section 2.5.7: deprecated site-local
		{"fd00::1", ipv6.ScopeGlobal}, // RFC 4193 section 3.3
		{"2001:db8::1", ipv6.ScopeGlobal},
		{"::", ipv6.ScopeNone},
		{"192.0.2.1", ipv6.ScopeNone},
	} {
		a := netip.MustParseAddr(tc.addr)
		got := ipv6.AddrScope(a)
		if got != tc.want {
			t.Errorf("AddrScope(%s) = %v, want %v", tc.addr, got, tc.want)
		}
		// Go's predicates as an independent oracle where they apply.
		if oracle := a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast(); a.Is6() && oracle != (got == ipv6.ScopeLinkLocal) && !a.IsLoopback() {
			t.Errorf("AddrScope(%s) = %v, but netip's link-local predicates say %v", tc.addr, got, oracle)
		}
		if a.IsInterfaceLocalMulticast() != (got == ipv6.ScopeInterfaceLocal) {
			t.Errorf("AddrScope(%s) = %v, but netip's IsInterfaceLocalMulticast says %v", tc.addr, got, a.IsInterfaceLocalMulticast())
		}
	}
	if got := ipv6.AddrScope(netip.Addr{}); got != ipv6.ScopeNone {
		t.Errorf("AddrScope(zero Addr) = %v, want none", got)
	}
}

func TestScopesOrderFromNarrowToWide(t *testing.T) {
	order := []ipv6.Scope{ipv6.ScopeInterfaceLocal, ipv6.ScopeLinkLocal, ipv6.ScopeRealmLocal, ipv6.ScopeAdminLocal, ipv6.ScopeSiteLocal, ipv6.ScopeOrganizationLocal, ipv6.ScopeGlobal}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Errorf("%v >= %v: RFC 4007 section 5 orders scopes by value", order[i-1], order[i])
		}
	}
	if got := ipv6.Scope(0xf).String(); got != "scope(0xf)" {
		t.Errorf("Scope(0xf).String() = %q", got)
	}
}

func TestCheckSourceRejectsMulticastAndLoopbackAndSetsUnspecifiedApart(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want ipv6.SourceError
	}{
		{"fe80::1", ipv6.SourceOK},
		{"2001:db8::1", ipv6.SourceOK},
		{"fe80::1%eth0", ipv6.SourceOK},
		{"ff02::1", ipv6.SourceMulticast},
		{"ff02::1:ff00:1", ipv6.SourceMulticast},
		{"ff0e::1", ipv6.SourceMulticast},
		{"::1", ipv6.SourceLoopback},
		{"::", ipv6.SourceUnspecified},
		{"192.0.2.1", ipv6.SourceNotIPv6},
	} {
		a := netip.MustParseAddr(tc.addr)
		got := ipv6.CheckSource(a)
		if got != tc.want {
			t.Errorf("CheckSource(%s) = %v, want %v", tc.addr, got, tc.want)
		}
		if a.Is6() && a.IsMulticast() != (got == ipv6.SourceMulticast) {
			t.Errorf("CheckSource(%s) = %v, but netip's IsMulticast says %v", tc.addr, got, a.IsMulticast())
		}
	}
	if got := ipv6.CheckSource(netip.Addr{}); got != ipv6.SourceNotIPv6 {
		t.Errorf("CheckSource(zero Addr) = %v, want %v", got, ipv6.SourceNotIPv6)
	}
	if got := ipv6.SourceError(99).String(); got != "SourceError(99)" {
		t.Errorf("SourceError(99).String() = %q", got)
	}
}
