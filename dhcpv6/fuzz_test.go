package dhcpv6

import (
	"testing"

	"github.com/gopacket/gopacket/layers"
)

// FuzzParseReply hands parseReply arbitrary datagrams: it must never
// panic, and what it takes must hold only what it may (unicast servers).
func FuzzParseReply(f *testing.F) {
	duid := duidLL(mac)
	req := informationRequest(0x123456, duid, 0)
	f.Add(replyFor(f, req, dnsOption("2001:db8::53"), domainOption("lab.test"), refreshOption(1200)))
	f.Add(replyFor(f, req, layers.NewDHCPv6Option(layers.DHCPv6OptStatusCode, []byte{0, 2})))
	f.Add(req)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := parseReply(b, 0x123456, duid, 7)
		if !ok {
			return
		}
		for _, a := range r.servers {
			if !a.Is6() || a.IsMulticast() || a.IsUnspecified() || a.IsLoopback() || a.Is4In6() {
				t.Fatalf("server %v taken", a)
			}
		}
		if r.ia != nil {
			for _, a := range r.ia.addrs {
				if a.preferred > a.valid || a.addr.IsMulticast() || a.addr.IsLinkLocalUnicast() || a.addr.IsUnspecified() {
					t.Fatalf("leased address %+v taken", a)
				}
			}
		}
	})
}
