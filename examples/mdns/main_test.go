package main

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

var gonetAddr = netip.MustParsePrefix("10.98.0.2/24")

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

func TestAnswerFollowsRFC6762(t *testing.T) {
	r := &responder{name: "gonet.local.", addr: netip.MustParseAddr("10.0.0.2")}
	querier := netip.MustParseAddrPort("10.0.0.1:5353")
	legacy := netip.MustParseAddrPort("10.0.0.1:40000")
	resp := new(dns.Msg)
	resp.SetReply(new(dns.Msg).SetQuestion("gonet.local.", dns.TypeA))
	respBytes, _ := resp.Pack()
	tests := []struct {
		name   string
		msg    []byte
		from   netip.AddrPort
		to     netip.AddrPort // invalid: no answer
		legacy bool
	}{
		{"multicast query answered to the group", query(t, "gonet.local.", dns.TypeA, false), querier, mdnsAddr, false},
		{"names are case-insensitive", query(t, "GoNet.Local.", dns.TypeA, false), querier, mdnsAddr, false},
		{"ANY answered too", query(t, "gonet.local.", dns.TypeANY, false), querier, mdnsAddr, false},
		{"QU bit: unicast to the querier", query(t, "gonet.local.", dns.TypeA, true), querier, querier, false},
		{"legacy resolver: unicast, its ID and question", query(t, "gonet.local.", dns.TypeA, false), legacy, legacy, true},
		{"another name", query(t, "other.local.", dns.TypeA, false), querier, netip.AddrPort{}, false},
		{"AAAA not held", query(t, "gonet.local.", dns.TypeAAAA, false), querier, netip.AddrPort{}, false},
		{"a response is ignored", respBytes, querier, netip.AddrPort{}, false},
		{"garbage", []byte{1, 2, 3}, querier, netip.AddrPort{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, to, ok := r.answer(tt.msg, tt.from)
			if ok != tt.to.IsValid() || to != tt.to {
				t.Fatalf("answer to %v (%v), want to %v", to, ok, tt.to)
			}
			if !ok {
				return
			}
			var m dns.Msg
			if err := m.Unpack(out); err != nil {
				t.Fatal(err)
			}
			if !m.Response || !m.Authoritative || len(m.Answer) != 1 {
				t.Fatalf("response %v", &m)
			}
			a := m.Answer[0].(*dns.A)
			if !a.A.Equal(net.IPv4(10, 0, 0, 2)) || a.Hdr.Name != "gonet.local." {
				t.Errorf("answer %v", a)
			}
			wantClass, wantTTL := uint16(dns.ClassINET|cacheFlush), uint32(hostTTL)
			if tt.legacy {
				wantClass, wantTTL = dns.ClassINET, legacyTTL
				if m.Id != 0x4242 || len(m.Question) != 1 {
					t.Errorf("legacy answer: ID %#x, %d questions", m.Id, len(m.Question))
				}
			} else if m.Id != 0 || len(m.Question) != 0 {
				t.Errorf("mDNS answer: ID %#x, %d questions, want none (section 18.1, 6)", m.Id, len(m.Question))
			}
			if a.Hdr.Class != wantClass || a.Hdr.Ttl != wantTTL {
				t.Errorf("class %#x TTL %d, want %#x %d", a.Hdr.Class, a.Hdr.Ttl, wantClass, wantTTL)
			}
		})
	}
}

// The kernel in a namespace asks for gonet.local over the TAP: as a
// legacy resolver from an ephemeral port, answered unicast; and as an
// mDNS querier from port 5353, joined to 224.0.0.251, answered to the
// group.
func TestKernelResolvesGoNetByMDNS(t *testing.T) {
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	var ep *tap.Endpoint
	if err := ns.Do(func() error {
		var err error
		ep, err = tap.Open(dev, tap.Options{})
		return err
	}); err != nil {
		t.Fatalf("open TAP: %v", err)
	}
	if err := ns.ConfigureLink(dev, netip.MustParsePrefix("10.98.0.1/24"), 1500); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	if out, err := ns.IP(t.Context(), "route", "add", "224.0.0.0/4", "dev", dev); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	s := stack.New(stack.Config{})
	t.Cleanup(func() { stacktest.Closed(t, s) })
	if err := s.AddNIC(dev, ep); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAddress(dev, gonetAddr); err != nil {
		t.Fatal(err)
	}
	r, err := newResponder(s, dev, "gonet", gonetAddr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Serve() }()
	t.Cleanup(func() {
		r.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	// A legacy resolver's query, from an ephemeral port.
	c, err := ns.ListenUDP("10.98.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteTo(query(t, "gonet.local.", dns.TypeA, false), net.UDPAddrFromAddrPort(mdnsAddr)); err != nil {
		t.Fatal(err)
	}
	if a := readAnswer(t, c); a == nil || !a.A.Equal(net.IPv4(10, 98, 0, 2)) {
		t.Fatalf("legacy query answered with %v", a)
	}

	// An mDNS querier joined to the group, asking from port 5353.
	var mc *net.UDPConn
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		mc, err = net.ListenMulticastUDP("udp4", ifi, net.UDPAddrFromAddrPort(mdnsAddr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if _, err := mc.WriteTo(query(t, "gonet.local.", dns.TypeA, false), net.UDPAddrFromAddrPort(mdnsAddr)); err != nil {
		t.Fatal(err)
	}
	if a := readAnswer(t, mc); a == nil || !a.A.Equal(net.IPv4(10, 98, 0, 2)) || a.Hdr.Class != dns.ClassINET|cacheFlush {
		t.Fatalf("mDNS query answered with %v", a)
	}
}

// readAnswer reads c until a response with an A record comes (the
// kernel loops its own queries back to a member), or fails the test.
func readAnswer(t *testing.T, c *net.UDPConn) *dns.A {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	for {
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		var m dns.Msg
		if m.Unpack(buf[:n]) != nil || !m.Response || len(m.Answer) == 0 {
			continue
		}
		a, _ := m.Answer[0].(*dns.A)
		return a
	}
}
