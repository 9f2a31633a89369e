// Package mdns is a multicast DNS responder (RFC 6762) for a GoNet host:
// it answers the queries of the link for the A and AAAA records of its
// name, <name>.local, with the addresses its NIC has at the time of each
// query, over IPv4 (224.0.0.251) and IPv6 (ff02::fb) alike.
//
// It answers to the group, as section 6 has it; to the querier alone when
// the question asks for a unicast response (section 5.4, the QU bit); and
// to a legacy resolver that asked from a port other than 5353 as a unicast
// DNS server would, with its query's ID and question (section 6.7). It
// holds only its host's address records: no probing or announcing
// (section 8), no known-answer suppression (section 7.1), no service
// discovery.
package mdns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/udp"
)

// Port is mDNS's UDP port (section 3).
const Port = 5353

// The mDNS groups (section 3).
var (
	Group4 = netip.MustParseAddr("224.0.0.251")
	Group6 = netip.MustParseAddr("ff02::fb")
)

// The TTL of a host name's records (section 10: 120 s), and the bound on
// those of legacy unicast answers (section 6.7: "no greater than ten
// seconds").
const (
	hostTTL   = 120
	legacyTTL = 10
	// cacheFlush is the top bit of a record's class in a response: the
	// record replaces what caches hold (section 10.2); unicastResponse
	// is the same bit in a question's class, the QU bit (section 5.4).
	cacheFlush      = 1 << 15
	unicastResponse = 1 << 15
)

// Stats counts the responder's work.
type Stats struct {
	Queries  stats.Counter // queries received
	Answered stats.Counter // queries answered
	Ignored  stats.Counter // not for our name or types, responses, malformed
	Errors   stats.Counter // answers not sent
}

// Responder answers for one name on one NIC of a stack.
type Responder struct {
	Stats Stats

	s     *stack.Stack
	nic   string
	name  string // fully qualified: "gonet.local."
	conns []*udp.Conn
	wg    sync.WaitGroup
}

// Start joins the mDNS groups on the named NIC of s (each family the stack
// runs) and answers for host.local until Close. host is a single label, as
// "gonet-cd38c7".
func Start(s *stack.Stack, nic, host string) (*Responder, error) {
	if host == "" || strings.ContainsAny(host, ". ") || len(host) > 63 {
		return nil, fmt.Errorf("mdns: host name %q: want one label of at most 63 bytes", host)
	}
	r := &Responder{s: s, nic: nic, name: dns.Fqdn(host + ".local")}
	groups := []netip.Addr{Group4}
	if s.IPv6() != nil {
		if _, err := s.Addresses6(nic); err == nil {
			groups = append(groups, Group6)
		}
	}
	for _, g := range groups {
		c, err := r.listen(g)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("mdns: %s on %s: %w", g, nic, err)
		}
		r.conns = append(r.conns, c)
		r.wg.Go(func() { r.serve(c, g) })
	}
	s.AddStats("MDNS."+nic, &r.Stats)
	return r, nil
}

// listen opens the socket of one group: port 5353 shared with the stack's
// other responders, the group joined on the NIC, answers sent with TTL
// (hop limit) 255, which receivers check to know them from the link
// (section 11), and not looped back to the stack's own listeners.
func (r *Responder) listen(group netip.Addr) (*udp.Conn, error) {
	wild := netip.IPv4Unspecified()
	if group.Is6() {
		wild = netip.IPv6Unspecified()
	}
	c, err := r.s.ListenMulticastUDP(netip.AddrPortFrom(wild, Port))
	if err != nil {
		return nil, err
	}
	if err := c.JoinGroup(r.nic, group); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.SetMulticastInterface(r.nic); err != nil {
		c.Close()
		return nil, err
	}
	if group.Is4() {
		err = c.SetMulticastTTL(255)
	} else {
		err = c.SetMulticastHopLimit(255)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetMulticastLoopback(false)
	return c, nil
}

// Name is the name the responder answers for, fully qualified.
func (r *Responder) Name() string { return r.name }

// Close stops answering and leaves the groups.
func (r *Responder) Close() error {
	for _, c := range r.conns {
		c.Close()
	}
	r.wg.Wait()
	return nil
}

// serve answers the queries that come to group until the socket closes.
func (r *Responder) serve(c *udp.Conn, group netip.Addr) {
	buf := make([]byte, 9000) // section 17: a message up to the link's MTU
	dest := netip.AddrPortFrom(group, Port)
	if group.Is6() {
		dest = netip.AddrPortFrom(group.WithZone(r.nic), Port)
	}
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // an ICMP error or a deadline: the socket lives on
		}
		r.Stats.Queries.Inc()
		addrs, err := r.s.Addresses(r.nic)
		if err != nil {
			return // the NIC is gone
		}
		out, unicast, ok := answer(buf[:n], from, r.name, addrs)
		if !ok {
			r.Stats.Ignored.Inc()
			continue
		}
		to := dest
		if unicast {
			to = from
		}
		if _, err := c.WriteToUDPAddrPort(out, to); err != nil {
			r.Stats.Errors.Inc()
			continue
		}
		r.Stats.Answered.Inc()
	}
}

// answer returns the response to the message b from from for name, whose
// addresses are addrs, whether it goes to the querier alone, and false
// when there is none to give.
func answer(b []byte, from netip.AddrPort, name string, addrs []netip.Prefix) ([]byte, bool, bool) {
	var q dns.Msg
	// Section 18.3: a message with a non-zero opcode is ignored; so are
	// responses, which are other responders' business.
	if err := q.Unpack(b); err != nil || q.Response || q.Opcode != dns.OpcodeQuery {
		return nil, false, false
	}
	legacy := from.Port() != Port
	resp := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}}
	unicast := legacy
	for _, qu := range q.Question {
		if !strings.EqualFold(qu.Name, name) || qu.Qclass&^unicastResponse != dns.ClassINET {
			continue
		}
		n := len(resp.Answer)
		for _, p := range addrs {
			resp.Answer = append(resp.Answer, record(name, p.Addr(), qu.Qtype)...)
		}
		if len(resp.Answer) > n && qu.Qclass&unicastResponse != 0 {
			unicast = true
		}
	}
	if len(resp.Answer) == 0 {
		return nil, false, false
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
		return nil, false, false
	}
	return out, unicast, true
}

// record is a's address record for name if qtype asks for it.
func record(name string, a netip.Addr, qtype uint16) []dns.RR {
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET | cacheFlush, Ttl: hostTTL}
	}
	switch {
	case a.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
		return []dns.RR{&dns.A{Hdr: hdr(dns.TypeA), A: a.AsSlice()}}
	case a.Is6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
		return []dns.RR{&dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: a.WithZone("").AsSlice()}}
	}
	return nil
}
