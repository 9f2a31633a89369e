// Command mdns is an example of multicast on GoNet: a stack on a TAP
// device that answers multicast DNS (RFC 6762) queries for the A record of
// its name, <name>.local, as a host's mDNS responder does.
//
//	sudo go run ./examples/mdns -tap gonet0 -addr 10.0.0.2/24 -name gonet
//
// It joins 224.0.0.251 on the TAP (so the stack sends an IGMP report and
// its NIC takes the group's frames), listens on port 5353 shared with any
// other responder of the stack, and answers: to the group, as RFC 6762
// section 6 has it; to the querier alone when the question asks for a
// unicast response (section 5.4, the QU bit); and to a legacy resolver
// that asked from a port other than 5353 as a unicast DNS server would,
// with its query's ID and question (section 6.7). Only A records are
// answered: no probing or announcing (section 8), no known-answer
// suppression (section 7.1), no other record types.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/miekg/dns"

	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/udp"
)

// The mDNS group and port (RFC 6762 section 3).
var (
	mdnsGroup = netip.MustParseAddr("224.0.0.251")
	mdnsAddr  = netip.AddrPortFrom(mdnsGroup, 5353)
)

// The TTLs of RFC 6762 section 10 (a host name's records: 120 s), and the
// bound on those of legacy unicast answers (section 6.7: "no greater than
// ten seconds").
const (
	hostTTL   = 120
	legacyTTL = 10
	// cacheFlush is the top bit of a resource record's class in a
	// response: the record replaces what caches hold (section 10.2);
	// unicastResponse is the same bit in a question's class: the QU bit
	// (section 5.4).
	cacheFlush      = 1 << 15
	unicastResponse = 1 << 15
)

func main() {
	tapName := flag.String("tap", "gonet0", "TAP device to create")
	addr := flag.String("addr", "10.0.0.2/24", "GoNet's IPv4 address and prefix")
	name := flag.String("name", "gonet", "host name, answered as <name>.local")
	flag.Parse()
	prefix, err := netip.ParsePrefix(*addr)
	if err != nil {
		log.Fatalf("mdns: -addr: %v", err)
	}
	ep, err := tap.Open(*tapName, tap.Options{})
	if err != nil {
		log.Fatalf("mdns: %v", err)
	}
	s := stack.New(stack.Config{})
	defer s.Close()
	if err := s.AddNIC(*tapName, ep); err != nil {
		log.Fatalf("mdns: %v", err)
	}
	if err := s.AddAddress(*tapName, prefix); err != nil {
		log.Fatalf("mdns: %v", err)
	}
	r, err := newResponder(s, *tapName, *name, prefix.Addr())
	if err != nil {
		log.Fatalf("mdns: %v", err)
	}
	fmt.Printf("mdns: answering %s with %v on %s\n", r.name, r.addr, *tapName)
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		r.Close()
	}()
	if err := r.Serve(); err != nil {
		log.Fatalf("mdns: %v", err)
	}
}

// responder answers A queries for one name.
type responder struct {
	conn *udp.Conn
	name string // fully qualified: "gonet.local."
	addr netip.Addr
}

// newResponder joins the mDNS group on the NIC named nic of s and answers
// for host.local with addr.
func newResponder(s *stack.Stack, nic, host string, addr netip.Addr) (*responder, error) {
	c, err := s.ListenMulticastUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), mdnsAddr.Port()))
	if err != nil {
		return nil, err
	}
	if err := c.JoinGroup(nic, mdnsGroup); err != nil {
		c.Close()
		return nil, err
	}
	// Section 11: responses go with TTL 255, which receivers check to
	// know them from the link.
	if err := c.SetMulticastTTL(255); err != nil {
		c.Close()
		return nil, err
	}
	// The stack's own listeners need not hear its answers.
	c.SetMulticastLoopback(false)
	return &responder{conn: c, name: dns.Fqdn(host + ".local"), addr: addr}, nil
}

// Serve answers queries until Close.
func (r *responder) Serve() error {
	buf := make([]byte, 9000) // section 17: a message up to the link's MTU
	for {
		n, from, err := r.conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		if out, to, ok := r.answer(buf[:n], from); ok {
			if _, err := r.conn.WriteToUDPAddrPort(out, to); err != nil {
				log.Printf("mdns: answer to %v: %v", to, err)
			}
		}
	}
}

// Close stops Serve and leaves the group.
func (r *responder) Close() error { return r.conn.Close() }

// answer returns the response to the message b from from, where it goes,
// and false when there is none to give.
func (r *responder) answer(b []byte, from netip.AddrPort) ([]byte, netip.AddrPort, bool) {
	var q dns.Msg
	// Section 18.3: a message with a non-zero opcode is ignored; so are
	// responses, which are other responders' business.
	if err := q.Unpack(b); err != nil || q.Response || q.Opcode != dns.OpcodeQuery {
		return nil, netip.AddrPort{}, false
	}
	legacy := from.Port() != mdnsAddr.Port()
	resp := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}}
	unicast := legacy
	for _, qu := range q.Question {
		if !strings.EqualFold(qu.Name, r.name) || qu.Qclass&^unicastResponse != dns.ClassINET || (qu.Qtype != dns.TypeA && qu.Qtype != dns.TypeANY) {
			continue
		}
		rr := &dns.A{Hdr: dns.RR_Header{Name: r.name, Rrtype: dns.TypeA, Class: dns.ClassINET | cacheFlush, Ttl: hostTTL}, A: r.addr.AsSlice()}
		if legacy {
			// Section 6.7: the cache-flush bit is not set, and the
			// TTL is at most ten seconds, for a resolver that knows
			// nothing of mDNS.
			rr.Hdr.Class, rr.Hdr.Ttl = dns.ClassINET, legacyTTL
		}
		resp.Answer = append(resp.Answer, rr)
		if qu.Qclass&unicastResponse != 0 {
			unicast = true
		}
	}
	if len(resp.Answer) == 0 {
		return nil, netip.AddrPort{}, false
	}
	if legacy {
		// Section 6.7: "it MUST repeat the query ID and the question
		// given in the query message".
		resp.Id, resp.Question = q.Id, q.Question
	}
	out, err := resp.Pack()
	if err != nil {
		return nil, netip.AddrPort{}, false
	}
	if unicast {
		return out, from, true
	}
	return out, mdnsAddr, true
}
