package mdns

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/udp"
)

// query packs a question for name of type qtype, with the QU bit when qu.
func query(t *testing.T, name string, qtype uint16, qu bool) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0x4242
	m.RecursionDesired = false
	if qu {
		m.Question[0].Qclass |= unicastResponse
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// knowing adds to query q a known answer (section 7.1): gonet.local.'s
// record of addr with ttl.
func knowing(t *testing.T, q []byte, addr string, ttl uint32) []byte {
	t.Helper()
	var m dns.Msg
	if err := m.Unpack(q); err != nil {
		t.Fatal(err)
	}
	m.Answer = records("gonet.local.", []netip.Addr{netip.MustParseAddr(addr)}, dns.TypeANY, dns.ClassINET, ttl)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAnswerFollowsRFC6762(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fe80::2")}
	querier := netip.MustParseAddrPort("10.0.0.1:5353")
	legacy := netip.MustParseAddrPort("10.0.0.1:40000")
	resp := new(dns.Msg)
	resp.SetReply(new(dns.Msg).SetQuestion("gonet.local.", dns.TypeA))
	respBytes, _ := resp.Pack()
	tests := []struct {
		name    string
		msg     []byte
		from    netip.AddrPort
		answers []string // the records' addresses; none: no answer
		unicast bool
		legacy  bool
	}{
		{"A to the group", query(t, "gonet.local.", dns.TypeA, false), querier, []string{"10.0.0.2"}, false, false},
		{"AAAA: every IPv6 address", query(t, "gonet.local.", dns.TypeAAAA, false), querier, []string{"fd00::2", "fe80::2"}, false, false},
		{"ANY: both families", query(t, "gonet.local.", dns.TypeANY, false), querier, []string{"10.0.0.2", "fd00::2", "fe80::2"}, false, false},
		{"names are case-insensitive", query(t, "GoNet.Local.", dns.TypeA, false), querier, []string{"10.0.0.2"}, false, false},
		{"QU bit: unicast to the querier", query(t, "gonet.local.", dns.TypeA, true), querier, []string{"10.0.0.2"}, true, false},
		{"legacy resolver: unicast, its ID and question", query(t, "gonet.local.", dns.TypeA, false), legacy, []string{"10.0.0.2"}, true, true},
		{"a known answer with half its TTL left is left out", knowing(t, query(t, "gonet.local.", dns.TypeA, false), "10.0.0.2", hostTTL/2), querier, nil, false, false},
		{"a known answer nearer its end is given again", knowing(t, query(t, "gonet.local.", dns.TypeA, false), "10.0.0.2", hostTTL/2-1), querier, []string{"10.0.0.2"}, false, false},
		{"the known answer alone is left out", knowing(t, query(t, "gonet.local.", dns.TypeAAAA, false), "fd00::2", hostTTL), querier, []string{"fe80::2"}, false, false},
		{"another name", query(t, "other.local.", dns.TypeA, false), querier, nil, false, false},
		{"a type not held", query(t, "gonet.local.", dns.TypeMX, false), querier, nil, false, false},
		{"a response is ignored", respBytes, querier, nil, false, false},
		{"garbage", []byte{1, 2, 3}, querier, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q dns.Msg
			ok := q.Unpack(tt.msg) == nil
			var re reply
			if ok {
				re, ok = answer(&q, tt.from, zone{host: "gonet.local.", addrs: addrs})
			}
			out, unicast := re.msg, re.unicast
			if ok != (tt.answers != nil) {
				t.Fatalf("answered %v, want %v", ok, tt.answers != nil)
			}
			if !ok {
				return
			}
			if unicast != tt.unicast {
				t.Errorf("unicast %v, want %v", unicast, tt.unicast)
			}
			var m dns.Msg
			if err := m.Unpack(out); err != nil {
				t.Fatal(err)
			}
			if !m.Response || !m.Authoritative {
				t.Errorf("header %+v: want an authoritative response", m.MsgHdr)
			}
			var got []string
			for _, rr := range m.Answer {
				h := rr.Header()
				switch v := rr.(type) {
				case *dns.A:
					got = append(got, v.A.String())
				case *dns.AAAA:
					got = append(got, v.AAAA.String())
				}
				wantClass, wantTTL := uint16(dns.ClassINET|cacheFlush), uint32(hostTTL)
				if tt.legacy {
					wantClass, wantTTL = dns.ClassINET, legacyTTL
				}
				if h.Class != wantClass || h.Ttl != wantTTL {
					t.Errorf("record %v: class %#x TTL %d, want %#x %d", rr, h.Class, h.Ttl, wantClass, wantTTL)
				}
			}
			if !slices.Equal(got, tt.answers) {
				t.Errorf("answers %v, want %v", got, tt.answers)
			}
			if tt.legacy && (m.Id != 0x4242 || len(m.Question) != 1) {
				t.Errorf("legacy answer: ID %#x, %d questions; want the query's", m.Id, len(m.Question))
			}
		})
	}
}

// A stack's responder answers another stack's queries for its name over
// both families: to the group, and to a legacy resolver's port.
func TestResponderAnswersOverBothFamilies(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{IPv6: true})
	r := startClaimed(t, b, "gonet-b")
	for _, tt := range []struct {
		name   string
		group  netip.AddrPort
		qtype  uint16
		want   netip.Addr
		legacy bool
	}{
		{"IPv4, to the group", netip.AddrPortFrom(Group4, Port), dns.TypeA, stacktest.AddrB.Addr(), false},
		{"IPv4, legacy", netip.AddrPortFrom(Group4, Port), dns.TypeA, stacktest.AddrB.Addr(), true},
		{"IPv6, to the group", netip.AddrPortFrom(Group6.WithZone("eth0"), Port), dns.TypeAAAA, stacktest.AddrB6.Addr(), false},
		{"IPv6, legacy", netip.AddrPortFrom(Group6.WithZone("eth0"), Port), dns.TypeAAAA, stacktest.AddrB6.Addr(), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wild := netip.IPv4Unspecified()
			if tt.group.Addr().Is6() {
				wild = netip.IPv6Unspecified()
			}
			port := uint16(Port)
			if tt.legacy {
				port = 0
			}
			c, err := a.ListenMulticastUDP(netip.AddrPortFrom(wild, port))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !tt.legacy {
				if err := c.JoinGroup("eth0", tt.group.Addr()); err != nil {
					t.Fatal(err)
				}
			}
			c.SetMulticastInterface("eth0")
			// The querier's own query is not looped back to it.
			c.SetMulticastLoopback(false)
			answered := r.Stats.Answered.Load()
			if _, err := c.WriteToUDPAddrPort(query(t, "gonet-b.local.", tt.qtype, false), tt.group); err != nil {
				t.Fatal(err)
			}
			// Every response names the addresses, announcements too: the
			// counter tells that this one answered the query. The
			// responder counts an answer once its write has returned,
			// which may be after the querier has read it: a response is
			// taken once the counter moves soon after it.
			var m *dns.Msg
			for deadline := time.Now().Add(5 * time.Second); ; {
				if m, err = nextResponse(c, time.Until(deadline)); err != nil {
					t.Fatalf("no answer: %v (responder: %d queries, %d answered, %d ignored)", err, r.Stats.Queries.Load(), r.Stats.Answered.Load(), r.Stats.Ignored.Load())
				}
				if counted(&r.Stats.Answered, answered, time.Second) {
					break
				}
			}
			var got []netip.Addr
			for _, rr := range m.Answer {
				switch v := rr.(type) {
				case *dns.A:
					a, _ := netip.AddrFromSlice(v.A)
					got = append(got, a.Unmap())
				case *dns.AAAA:
					a, _ := netip.AddrFromSlice(v.AAAA)
					got = append(got, a)
				}
			}
			if !slices.Contains(got, tt.want) {
				t.Errorf("answers %v, want %v among them", got, tt.want)
			}
		})
	}
}

// start starts a responder for host on s's eth0, closed as the test ends.
func start(t *testing.T, s *stack.Stack, host string) *Responder {
	t.Helper()
	r, err := Start(s, "eth0", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// startClaimed starts a responder for host on s's eth0 and waits for it to
// claim a name.
func startClaimed(t *testing.T, s *stack.Stack, host string) *Responder {
	t.Helper()
	r := start(t, s, host)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := r.WaitClaimed(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// counted reports whether c moves past was within d.
func counted(c *stats.Counter, was uint64, d time.Duration) bool {
	for deadline := time.Now().Add(d); c.Load() == was; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// nextResponse returns the next response c receives within d, skipping
// queries (other hosts' probes among them).
func nextResponse(c *udp.Conn, d time.Duration) (*dns.Msg, error) {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 9000)
	for {
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return nil, err
		}
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) == nil && m.Response {
			return m, nil
		}
	}
}
