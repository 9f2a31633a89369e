package ipv6_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

var (
	sinkAddr  netip.Addr
	sinkMAC   wire.MAC
	sinkBool  bool
	sinkScope ipv6.Scope
	sinkErr   ipv6.SourceError
)

// These run for every neighbour solicitation and every multicast frame
// sent or received, so they must not allocate.
func TestMulticastMappingsDoNotAllocate(t *testing.T) {
	a := netip.MustParseAddr("2001:db8::1:800:200e:8c6c")
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"SolicitedNode", func() { sinkAddr = ipv6.SolicitedNode(a) }},
		{"MulticastMAC", func() { sinkMAC, sinkBool = ipv6.MulticastMAC(ipv6.AllNodes) }},
		{"IsSolicitedNode", func() { sinkBool = ipv6.IsSolicitedNode(a) }},
		{"AddrScope", func() { sinkScope = ipv6.AddrScope(a) }},
		{"CheckSource", func() { sinkErr = ipv6.CheckSource(a) }},
		{"LinkLocal", func() { sinkAddr = ipv6.LinkLocal(ipv6.IID{1}) }},
	} {
		if allocs := testing.AllocsPerRun(1000, tc.f); allocs > 0 {
			t.Errorf("%s: %.2f allocations per call, want 0", tc.name, allocs)
		}
	}
}
