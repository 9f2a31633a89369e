package mdns

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzAnswer gives the responder any message, from a querier on the mDNS
// port and from a legacy resolver's. Nothing may crash it, whether it
// reads the message as a conflict or as a probe; a tie between two probes
// is decided the same from either side (section 8.2); and what it answers
// must be a well-formed authoritative response holding only the name's own
// address records (section 6), with the query's ID and question for a
// legacy resolver (section 6.7).
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
	// Another host's probe (section 8.2), a claiming response (section
	// 9), and a query with a known answer (section 7.1).
	other := []netip.Addr{netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("fd00::9")}
	probe := &dns.Msg{Question: []dns.Question{{Name: "gonet.local.", Qtype: dns.TypeANY, Qclass: dns.ClassINET | unicastResponse}}, Ns: records("gonet.local.", other, dns.TypeANY, dns.ClassINET, hostTTL)}
	claim := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true}, Answer: records("gonet.local.", other, dns.TypeANY, dns.ClassINET|cacheFlush, hostTTL)}
	knowing := new(dns.Msg).SetQuestion("gonet.local.", dns.TypeA)
	knowing.Answer = records("gonet.local.", []netip.Addr{netip.MustParseAddr("10.0.0.2")}, dns.TypeA, dns.ClassINET, hostTTL)
	browse := new(dns.Msg).SetQuestion("_http._tcp.local.", dns.TypePTR)
	enumerate := new(dns.Msg).SetQuestion(servicesName, dns.TypePTR)
	for _, m := range []*dns.Msg{probe, claim, knowing, browse, enumerate} {
		if b, err := m.Pack(); err == nil {
			f.Add(b, uint16(Port))
		}
	}
	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fe80::2")}
	f.Fuzz(func(t *testing.T, msg []byte, port uint16) {
		from := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port)
		var q dns.Msg
		if q.Unpack(msg) != nil {
			return // the responder drops it unread
		}
		// A probe or a response, whatever it holds, is decided without
		// a crash, and a tie is decided the same from either side.
		z := zone{host: "gonet.local.", addrs: addrs, services: []instance{{Service: Service{Type: "_http._tcp", Port: 80}, name: "gonet._http._tcp.local."}}}
		conflicts(&q, z, true)
		conflicts(&q, z, false)
		losesTie(&q, z)
		if theirs := probedRecords(&q, "gonet.local."); len(theirs) > 0 {
			ours := records("gonet.local.", addrs, dns.TypeANY, dns.ClassINET, hostTTL)
			if a, b := tieBreak(ours, theirs), tieBreak(theirs, ours); cmp.Compare(a, 0) != -cmp.Compare(b, 0) {
				t.Fatalf("tieBreak(ours, theirs) = %d but tieBreak(theirs, ours) = %d", a, b)
			}
		}
		// With services, whatever is answered is the zone's own.
		if re, ok := answer(&q, from, z); ok {
			var m dns.Msg
			if err := m.Unpack(re.msg); err != nil {
				t.Fatalf("the answer with services does not unpack: %v", err)
			}
			for _, rr := range slices.Concat(m.Answer, m.Extra) {
				if len(named(z.records(false), rr.Header().Name)) == 0 {
					t.Fatalf("a record of %s, no name of the zone's", rr.Header().Name)
				}
			}
		}
		re, ok := answer(&q, from, zone{host: "gonet.local.", addrs: addrs})
		if !ok {
			return
		}
		out, unicast := re.msg, re.unicast
		var m dns.Msg
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
