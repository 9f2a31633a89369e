package mdns

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// What the responder makes of a message and says back, as functions of the
// message and the zone alone: the responder's goroutine calls them, and
// the tests and the fuzzer call them without one.

// reply is an answer to a query.
type reply struct {
	msg        []byte
	unicast    bool // to the querier alone (sections 5.4, 6.7)
	suppressed int  // records left out as known answers (section 7.1)
}

// answer returns the reply to query q from from out of zone z, and false
// when there is none to give. The records a question asks for go in the
// Answer Section; those a browser will want next in the Additional
// Section (RFC 6763 section 12): an instance's SRV and TXT records and the
// host's addresses for a PTR record, the host's addresses for an SRV
// record.
func answer(q *dns.Msg, from netip.AddrPort, z zone) (reply, bool) {
	var re reply
	// Responses are other responders' business.
	if q.Response || q.Opcode != dns.OpcodeQuery {
		return re, false
	}
	legacy := from.Port() != Port
	resp := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}}
	re.unicast = legacy
	all := z.records(true)
	for _, qu := range q.Question {
		if qu.Qclass&^unicastResponse != dns.ClassINET {
			continue
		}
		n := len(resp.Answer)
		for _, rr := range named(all, qu.Name) {
			if qu.Qtype != dns.TypeANY && rr.Header().Rrtype != qu.Qtype || slices.Contains(resp.Answer, rr) {
				continue
			}
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
	resp.Extra = additional(all, resp.Answer, z.host)
	for _, rr := range slices.Concat(resp.Answer, resp.Extra) {
		if legacy {
			// Section 6.7: no cache-flush bit and a TTL of ten
			// seconds at most, for a resolver that knows nothing of
			// mDNS.
			rr.Header().Class, rr.Header().Ttl = dns.ClassINET, min(rr.Header().Ttl, legacyTTL)
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

// additional returns the records of all that RFC 6763 section 12 has a
// responder add to answers: for a PTR to an instance, its SRV and TXT
// records and the host's addresses; for an SRV record, the host's
// addresses; none already among answers.
func additional(all, answers []dns.RR, host string) []dns.RR {
	var extra []dns.RR
	add := func(rrs []dns.RR) {
		for _, rr := range rrs {
			if !slices.Contains(answers, rr) && !slices.Contains(extra, rr) {
				extra = append(extra, rr)
			}
		}
	}
	for _, rr := range answers {
		switch v := rr.(type) {
		case *dns.PTR:
			if inst := named(all, v.Ptr); slices.ContainsFunc(inst, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeSRV }) {
				add(inst)
				add(addresses(named(all, host)))
			}
		case *dns.SRV:
			add(addresses(named(all, v.Target)))
		}
	}
	return extra
}

// addresses returns the address records of rrs.
func addresses(rrs []dns.RR) []dns.RR {
	return slices.DeleteFunc(slices.Clone(rrs), func(rr dns.RR) bool {
		t := rr.Header().Rrtype
		return t != dns.TypeA && t != dns.TypeAAAA
	})
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

// conflicts returns the names of z the response m shows another host
// holding: a record of one of them that is none of the zone's (section 9:
// identical data is no conflict). While probing any record of the name is
// one (section 8.1); once the name is claimed only a record of a type the
// zone holds for it is (section 9: the host's unique records). A goodbye
// (TTL 0) is the other host leaving, not claiming.
func conflicts(m *dns.Msg, z zone, probing bool) []string {
	ours := z.unique()
	var out []string
	for _, name := range z.owned() {
		mine := named(ours, name)
		for _, rr := range named(slices.Concat(m.Answer, m.Ns, m.Extra), name) {
			h := rr.Header()
			if h.Ttl == 0 {
				continue
			}
			if !probing && !slices.ContainsFunc(mine, func(o dns.RR) bool { return o.Header().Rrtype == h.Rrtype }) {
				continue
			}
			if !slices.ContainsFunc(mine, func(o dns.RR) bool { return sameRecord(o, rr) }) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// losesTie reports whether probe query m, another host's, proposes records
// for one of z's names that sort after the zone's for it (section 8.2):
// the other host then keeps the name, and this one probes again later.
func losesTie(m *dns.Msg, z zone) bool {
	ours := z.unique()
	for _, name := range z.owned() {
		if theirs := probedRecords(m, name); len(theirs) > 0 && tieBreak(named(ours, name), theirs) < 0 {
			return true
		}
	}
	return false
}

// probedRecords returns the records a probe query m proposes for name in
// its Authority Section (section 8.2), none if m is no probe for name.
func probedRecords(m *dns.Msg, name string) []dns.RR {
	asks := slices.ContainsFunc(m.Question, func(q dns.Question) bool { return sameName(q.Name, name) })
	if !asks {
		return nil
	}
	return named(m.Ns, name)
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
	return sameName(a.Header().Name, b.Header().Name) && compareRecords(a, b) == 0
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
