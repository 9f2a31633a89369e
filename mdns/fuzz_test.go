package mdns

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzAnswer gives the responder any message, from a querier on the mDNS
// port and from a legacy resolver's: nothing may crash it, and what it
// answers must be a well-formed authoritative response holding only the
// name's own address records (section 6), with the query's ID and
// question for a legacy resolver (section 6.7).
func FuzzAnswer(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"gonet.local.", dns.TypeA}, {"gonet.local.", dns.TypeANY}, {"GONET.local.", dns.TypeAAAA}, {"other.local.", dns.TypeA}} {
		m := new(dns.Msg).SetQuestion(q.name, q.qtype)
		if b, err := m.Pack(); err == nil {
			f.Add(b, uint16(Port))
			f.Add(b, uint16(40000))
		}
	}
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, uint16(Port)) // a name pointing at itself
	addrs := []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24"), netip.MustParsePrefix("fe80::2/64")}
	f.Fuzz(func(t *testing.T, msg []byte, port uint16) {
		from := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port)
		out, unicast, ok := answer(msg, from, "gonet.local.", addrs)
		if !ok {
			return
		}
		var q, m dns.Msg
		if err := q.Unpack(msg); err != nil {
			t.Fatalf("answered a message that does not unpack: %v", err)
		}
		if err := m.Unpack(out); err != nil {
			t.Fatalf("the answer does not unpack: %v", err)
		}
		if !m.Response || !m.Authoritative || len(m.Answer) == 0 {
			t.Fatalf("answer header %+v with %d records: want an authoritative response with some", m.MsgHdr, len(m.Answer))
		}
		legacy := port != Port
		if legacy && (!unicast || m.Id != q.Id || len(m.Question) != len(q.Question)) {
			t.Fatalf("legacy answer: unicast %v, ID %#x for %#x, %d questions for %d", unicast, m.Id, q.Id, len(m.Question), len(q.Question))
		}
		for _, rr := range m.Answer {
			if !strings.EqualFold(rr.Header().Name, "gonet.local.") {
				t.Fatalf("a record for %s", rr.Header().Name)
			}
			switch v := rr.(type) {
			case *dns.A:
				if v.A.String() != "10.0.0.2" {
					t.Fatalf("an A record of %v", v.A)
				}
			case *dns.AAAA:
				if v.AAAA.String() != "fe80::2" {
					t.Fatalf("an AAAA record of %v", v.AAAA)
				}
			default:
				t.Fatalf("a record of type %d", rr.Header().Rrtype)
			}
		}
	})
}
