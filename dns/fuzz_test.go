package dns

import (
	"testing"

	mdns "github.com/miekg/dns"
)

// seedQueries are well-formed queries: a plain one, one with EDNS0.
func seedQueries(f *testing.F) {
	for _, edns := range []uint16{0, 1232} {
		m := new(mdns.Msg)
		m.SetQuestion("gonet.test.", mdns.TypeA)
		m.Id = 0x1234
		if edns != 0 {
			m.SetEdns0(edns, true)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzQuery feeds the guest's side of the forwarder arbitrary bytes:
// whatever they are, parsing and the error reply never panic, a query
// that parses gets a reply that parses, with its ID, and the reply is never
// made for a response.
func FuzzQuery(f *testing.F) {
	seedQueries(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := parseQuery(b)
		reply := errorReply(b, mdns.RcodeFormatError)
		if len(b) >= headerLen && b[2]&0x80 != 0 && reply != nil {
			t.Fatalf("replied to a response")
		}
		if err != nil {
			return
		}
		if q.udpSize < minUDPSize {
			t.Fatalf("client size %d below %d", q.udpSize, minUDPSize)
		}
		var m mdns.Msg
		if reply == nil || m.Unpack(reply) != nil || m.Id != q.id || !m.Response {
			t.Fatalf("no well-formed reply to a query that parses: %x", reply)
		}
	})
}

// FuzzAnswer feeds the upstream's side arbitrary bytes as the answer to a
// fixed query: checking never panics, and an accepted answer, truncated,
// fits 512 bytes with TC set.
func FuzzAnswer(f *testing.F) {
	qm := new(mdns.Msg)
	qm.SetQuestion("gonet.test.", mdns.TypeA)
	qm.Id = 0x1234
	raw, err := qm.Pack()
	if err != nil {
		f.Fatal(err)
	}
	q, err := parseQuery(raw)
	if err != nil {
		f.Fatal(err)
	}
	am := new(mdns.Msg)
	am.SetReply(qm)
	am.Answer = append(am.Answer, &mdns.A{
		Hdr: mdns.RR_Header{Name: "gonet.test.", Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60},
		A:   []byte{192, 0, 2, 7},
	})
	ans, err := am.Pack()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ans)
	f.Add(raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := checkAnswer(b, q, 0x1234)
		if err != nil {
			return
		}
		tr, err := truncated(m)
		if err != nil {
			return // a record miekg parses but cannot pack again: SERVFAIL
		}
		var tm mdns.Msg
		if tm.Unpack(tr) != nil || !tm.Truncated || len(tm.Answer) != 0 {
			t.Fatalf("truncated answer does not parse or lacks TC: %x", tr)
		}
	})
}
