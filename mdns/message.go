package mdns

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// What the responder makes of a message and says back, as functions of the
// message, the name and the addresses alone: the responder's goroutine
// calls them, and the tests and the fuzzer call them without one.

// reply is an answer to a query.
type reply struct {
	msg        []byte
	unicast    bool // to the querier alone (sections 5.4, 6.7)
	suppressed int  // records left out as known answers (section 7.1)
}

// answer returns the reply to query q from from for name, whose addresses
// are addrs, and false when there is none to give.
func answer(q *dns.Msg, from netip.AddrPort, name string, addrs []netip.Addr) (reply, bool) {
	var re reply
	// Responses are other responders' business.
	if q.Response || q.Opcode != dns.OpcodeQuery {
		return re, false
	}
	legacy := from.Port() != Port
	resp := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}}
	re.unicast = legacy
	for _, qu := range q.Question {
		if !strings.EqualFold(qu.Name, name) || qu.Qclass&^unicastResponse != dns.ClassINET {
			continue
		}
		n := len(resp.Answer)
		for _, rr := range records(name, addrs, qu.Qtype, dns.ClassINET|cacheFlush, hostTTL) {
			if known(q.Answer, rr) {
				re.suppressed++
				continue
			}
			resp.Answer = append(resp.Answer, rr)
		}
		if len(resp.Answer) > n && qu.Qclass&unicastResponse != 0 {
			re.unicast = true
		}
	}
	if len(resp.Answer) == 0 {
		return re, false
	}
	for _, rr := range resp.Answer {
		if legacy {
			// Section 6.7: no cache-flush bit and a TTL of ten
			// seconds at most, for a resolver that knows nothing of
			// mDNS.
			rr.Header().Class, rr.Header().Ttl = dns.ClassINET, legacyTTL
		}
	}
	if legacy {
		// Section 6.7: "it MUST repeat the query ID and the question
		// given in the query message".
		resp.Id, resp.Question = q.Id, q.Question
	}
	out, err := resp.Pack()
	if err != nil {
		return re, false
	}
	re.msg = out
	return re, true
}

// known reports whether a query's Known-Answer Section holds rr with at
// least half its TTL left (section 7.1), which the querier needs not be
// told again.
func known(answers []dns.RR, rr dns.RR) bool {
	for _, k := range answers {
		if sameRecord(k, rr) && k.Header().Ttl >= rr.Header().Ttl/2 {
			return true
		}
	}
	return false
}

// conflicting reports whether response m holds a record of name that is
// not one of the host's, which are addrs' address records (section 9:
// identical data is no conflict). While probing any record of the name is
// one (section 8.1); once the name is claimed only an address record is,
// the host's own unique types (section 9). A goodbye (TTL 0) is the other
// host leaving, not claiming.
func conflicting(m *dns.Msg, name string, addrs []netip.Addr, probing bool) bool {
	ours := records(name, addrs, dns.TypeANY, dns.ClassINET, hostTTL)
	for _, rr := range slices.Concat(m.Answer, m.Ns, m.Extra) {
		h := rr.Header()
		if !strings.EqualFold(h.Name, name) || h.Ttl == 0 {
			continue
		}
		if !probing && h.Rrtype != dns.TypeA && h.Rrtype != dns.TypeAAAA {
			continue
		}
		if !slices.ContainsFunc(ours, func(o dns.RR) bool { return sameRecord(o, rr) }) {
			return true
		}
	}
	return false
}

// probedRecords returns the records a probe query m proposes for name in
// its Authority Section (section 8.2), none if m is no probe for name.
func probedRecords(m *dns.Msg, name string) []dns.RR {
	asks := slices.ContainsFunc(m.Question, func(q dns.Question) bool { return strings.EqualFold(q.Name, name) })
	if !asks {
		return nil
	}
	var out []dns.RR
	for _, rr := range m.Ns {
		if strings.EqualFold(rr.Header().Name, name) {
			out = append(out, rr)
		}
	}
	return out
}

// tieBreak compares two simultaneous probes' records as section 8.2 does:
// each set sorted by class (without the cache-flush bit), type and rdata,
// the two compared record by record, the first difference deciding, a set
// that runs out first losing. It returns above 0 when ours win, below 0
// when theirs do, 0 when the two are the same (our own probe, or another
// interface of ours).
func tieBreak(ours, theirs []dns.RR) int {
	ours, theirs = slices.Clone(ours), slices.Clone(theirs)
	slices.SortFunc(ours, compareRecords)
	slices.SortFunc(theirs, compareRecords)
	for i := range min(len(ours), len(theirs)) {
		if c := compareRecords(ours[i], theirs[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ours), len(theirs))
}

// compareRecords orders records as section 8.2 does: class, type, then
// rdata as raw bytes.
func compareRecords(a, b dns.RR) int {
	ha, hb := a.Header(), b.Header()
	if c := cmp.Compare(ha.Class&^cacheFlush, hb.Class&^cacheFlush); c != 0 {
		return c
	}
	if c := cmp.Compare(ha.Rrtype, hb.Rrtype); c != 0 {
		return c
	}
	return bytes.Compare(rdata(a), rdata(b))
}

// sameRecord reports whether a and b are one record: name (any case),
// class without the cache-flush bit, type and rdata.
func sameRecord(a, b dns.RR) bool {
	return strings.EqualFold(a.Header().Name, b.Header().Name) && compareRecords(a, b) == 0
}

// rdata returns rr's rdata as the wire has it, uncompressed; nil if rr
// does not pack.
func rdata(rr dns.RR) []byte {
	buf := make([]byte, dns.Len(rr)+256)
	end, err := dns.PackRR(rr, buf, 0, nil, false)
	if err != nil {
		return nil
	}
	// The header is the uncompressed name, then type, class, TTL and
	// rdata length: 10 bytes.
	nameEnd, err := dns.PackDomainName(dns.Fqdn(rr.Header().Name), make([]byte, 256), 0, nil, false)
	if err != nil || nameEnd+10 > end {
		return nil
	}
	return slices.Clone(buf[nameEnd+10 : end])
}

// records returns the address records of name among addrs that qtype asks
// for, with class and ttl.
func records(name string, addrs []netip.Addr, qtype, class uint16, ttl uint32) []dns.RR {
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: class, Ttl: ttl}
	}
	var out []dns.RR
	for _, a := range addrs {
		switch {
		case a.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
			out = append(out, &dns.A{Hdr: hdr(dns.TypeA), A: a.AsSlice()})
		case a.Is6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
			out = append(out, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: a.WithZone("").AsSlice()})
		}
	}
	return out
}
