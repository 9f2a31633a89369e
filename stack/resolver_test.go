package stack_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
)

// zone is what the test's DNS server, on stack B, knows: names to IPv4
// addresses. "many.test." has more addresses than a 512-byte UDP answer
// holds, so that it comes truncated and is asked again over TCP.
var zone = map[string][]netip.Addr{
	"host.test.":   {netip.MustParseAddr("10.0.0.2")},
	"printer.lan.": {netip.MustParseAddr("10.0.0.2")},
}

func init() {
	for i := range 60 {
		zone["many.test."] = append(zone["many.test."], netip.AddrFrom4([4]byte{10, 1, 0, byte(i + 1)}))
	}
}

// dnsServer answers A queries from zone on s's UDP and TCP port 53, and
// records the names asked over each.
type dnsServer struct {
	mu    sync.Mutex
	asked map[string][]string // "udp"/"tcp" → names, in order
}

func (d *dnsServer) note(network, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked[network] = append(d.asked[network], name)
}

func (d *dnsServer) names(network string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.asked[network])
}

// answer builds the reply to query, truncated to 512 bytes over UDP.
func (d *dnsServer) answer(network string, query []byte) []byte {
	var q mdns.Msg
	if err := q.Unpack(query); err != nil || len(q.Question) != 1 {
		return nil
	}
	name := q.Question[0].Name
	d.note(network, name)
	r := new(mdns.Msg)
	r.SetReply(&q)
	addrs, ok := zone[name]
	switch {
	case !ok:
		r.Rcode = mdns.RcodeNameError
	case q.Question[0].Qtype == mdns.TypeA:
		for _, a := range addrs {
			r.Answer = append(r.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60}, A: a.AsSlice()})
		}
	}
	if network == "udp" {
		r.Truncate(512)
	}
	b, err := r.Pack()
	if err != nil {
		return nil
	}
	return b
}

func serveDNS(t *testing.T, s *stack.Stack) *dnsServer {
	t.Helper()
	d := &dnsServer{asked: map[string][]string{}}
	pc, err := s.ListenPacket("udp4", ":53")
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Listen("tcp4", ":53")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		pc.Close()
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if b := d.answer("udp", buf[:n]); b != nil {
				pc.WriteTo(b, from)
			}
		}
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				for {
					var n [2]byte
					if _, err := io.ReadFull(c, n[:]); err != nil {
						return
					}
					q := make([]byte, int(n[0])<<8|int(n[1]))
					if _, err := io.ReadFull(c, q); err != nil {
						return
					}
					b := d.answer("tcp", q)
					if b == nil {
						return
					}
					c.Write(append([]byte{byte(len(b) >> 8), byte(len(b))}, b...))
				}
			})
		}
	})
	return d
}

func lookupCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The resolver's queries travel over the stack to the servers SetDNS gave,
// not to the host's: an answer that fits comes over UDP alone, a truncated
// one is asked again over TCP, as Go's resolver does.
func TestResolverAsksTheStacksServerOverUDPThenTCPWhenTruncated(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	d := serveDNS(t, b)
	if err := a.SetDNS(stack.DNSConfig{Servers: []netip.AddrPort{netip.AddrPortFrom(stacktest.AddrB.Addr(), 0)}}); err != nil {
		t.Fatal(err)
	}
	ctx := lookupCtx(t)
	for _, c := range []struct {
		name      string
		want      int
		tcpAsked  bool
		wantFirst netip.Addr
	}{
		{"host.test.", 1, false, netip.MustParseAddr("10.0.0.2")},
		{"many.test.", 60, true, netip.MustParseAddr("10.1.0.1")},
	} {
		addrs, err := a.Resolver().LookupNetIP(ctx, "ip4", c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(addrs) != c.want || !slices.Contains(addrs, c.wantFirst) {
			t.Errorf("%s: %d addresses %v, want %d with %v", c.name, len(addrs), addrs, c.want, c.wantFirst)
		}
		if got := slices.Contains(d.names("tcp"), c.name); got != c.tcpAsked {
			t.Errorf("%s: asked over TCP %v, want %v (TCP asked %v)", c.name, got, c.tcpAsked, d.names("tcp"))
		}
	}
}

// A name the server does not know is "no such host", as net says it.
func TestResolverReportsAnUnknownNameAsNotFound(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	serveDNS(t, b)
	a.SetDNS(stack.DNSConfig{Servers: []netip.AddrPort{netip.AddrPortFrom(stacktest.AddrB.Addr(), 53)}})
	_, err := a.Resolver().LookupNetIP(lookupCtx(t), "ip4", "nowhere.test.")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("lookup of an unknown name: %v, want a DNSError with IsNotFound", err)
	}
}

// A stack without DNS servers fails a lookup at once, saying why.
func TestResolverWithoutServersSaysSo(t *testing.T) {
	a, _ := stacktest.Pair(t, stacktest.Options{})
	_, err := a.Resolver().LookupNetIP(lookupCtx(t), "ip4", "host.test.")
	if err == nil || !strings.Contains(err.Error(), "no DNS servers configured") {
		t.Fatalf("lookup without servers: %v, want one naming the missing configuration", err)
	}
}

// When the current server does not answer, the next query goes to the
// next server: here the first refuses (no DNS server on its port, an ICMP
// port unreachable), and the lookup succeeds through the second.
func TestResolverFailsOverToTheNextServer(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	d := serveDNS(t, b)
	servers := []netip.AddrPort{
		netip.AddrPortFrom(stacktest.AddrB.Addr(), 5353),
		netip.AddrPortFrom(stacktest.AddrB.Addr(), 53),
	}
	a.SetDNS(stack.DNSConfig{Servers: servers})
	addrs, err := a.Resolver().LookupNetIP(lookupCtx(t), "ip4", "host.test.")
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || len(d.names("udp")) == 0 {
		t.Fatalf("addresses %v, names asked %v: want the answer from the second server", addrs, d.names("udp"))
	}
}

// The stack's own lookups complete a name with no dot in each search
// domain first, and try a name with a dot as it is first; a name ending
// in a dot is absolute.
func TestDialContextResolvesNamesWithTheSearchList(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	d := serveDNS(t, b)
	l, err := b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	a.SetDNS(stack.DNSConfig{
		Servers: []netip.AddrPort{netip.AddrPortFrom(stacktest.AddrB.Addr(), 53)},
		Search:  []string{"corp", "lan."},
	})
	ctx := lookupCtx(t)
	for _, c := range []struct {
		address string
		asked   []string
	}{
		{"printer:7", []string{"printer.corp.", "printer.lan."}},
		{"host.test:7", []string{"host.test."}},
		{"host.test.:7", []string{"host.test."}},
	} {
		before := len(d.names("udp"))
		conn, err := a.DialContext(ctx, "tcp4", c.address)
		if err != nil {
			t.Fatalf("dial %s: %v", c.address, err)
		}
		if got := conn.RemoteAddr().String(); got != "10.0.0.2:7" {
			t.Errorf("dial %s: connected to %s, want 10.0.0.2:7", c.address, got)
		}
		conn.Close()
		// Go's resolver asks for AAAA too when the family allows it;
		// tcp4 asks A alone, once per candidate.
		if got := d.names("udp")[before:]; !slices.Equal(got, c.asked) {
			t.Errorf("dial %s: asked %v, want %v", c.address, got, c.asked)
		}
	}
}

// SetDNS refuses what is not a server or a domain.
func TestSetDNSRefusesBadServersAndDomains(t *testing.T) {
	a, _ := stacktest.Pair(t, stacktest.Options{})
	for _, c := range []stack.DNSConfig{
		{Servers: []netip.AddrPort{netip.AddrPortFrom(netip.IPv4Unspecified(), 53)}},
		{Servers: []netip.AddrPort{netip.MustParseAddrPort("[ff02::1]:53")}},
		{Search: []string{"bad domain"}},
		{Search: []string{strings.Repeat("a", 64) + ".test"}},
	} {
		if err := a.SetDNS(c); err == nil {
			t.Errorf("SetDNS(%+v) accepted", c)
		}
	}
	if err := a.SetDNS(stack.DNSConfig{Servers: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.2:0")}, Search: []string{"lan."}}); err != nil {
		t.Fatal(err)
	}
	got := a.DNS()
	if got.Servers[0].Port() != 53 || got.Search[0] != "lan" {
		t.Errorf("DNS() = %+v, want port 53 and the domain without its dot", got)
	}
}

// TestLearnedDNSMergesAndHandConfigWins pins the order the resolver takes
// servers and domains in: by hand alone while set; otherwise every lease's
// and every NIC's advertisements', DHCP's first, each once.
func TestLearnedDNSMergesAndHandConfigWins(t *testing.T) {
	a, _ := stacktest.Pair(t, stacktest.Options{})
	ap := netip.MustParseAddrPort
	ra := func(nic string) stack.DNSOrigin {
		return stack.DNSOrigin{Protocol: stack.DNSFromRouterAdvertisements, NIC: nic}
	}
	dhcp := stack.DNSOrigin{Protocol: stack.DNSFromDHCP, NIC: "eth1"}
	steps := []struct {
		name    string
		set     func() error
		servers []string
		search  []string
	}{
		{"advertised on eth1", func() error {
			return a.SetLearnedDNS(ra("eth1"), stack.DNSConfig{Servers: []netip.AddrPort{ap("[2001:db8::53]:53"), ap("[fe80::1%eth1]:53")},
				Search: []string{"Example.COM", "bad domain"}})
		}, []string{"[2001:db8::53]:53", "[fe80::1%eth1]:53"}, []string{"example.com"}},
		{"a lease on eth1 comes first", func() error {
			return a.SetLearnedDNS(dhcp, stack.DNSConfig{Servers: []netip.AddrPort{ap("10.0.0.53:0"), ap("[2001:db8::53]:53")}, Search: []string{"lan", "example.com"}})
		}, []string{"10.0.0.53:53", "[2001:db8::53]:53", "[fe80::1%eth1]:53"}, []string{"lan", "example.com"}},
		{"advertised on eth0 too, before eth1's advertisements, after the lease", func() error {
			return a.SetLearnedDNS(ra("eth0"), stack.DNSConfig{Servers: []netip.AddrPort{ap("[2001:db8::99]:53")}})
		}, []string{"10.0.0.53:53", "[2001:db8::53]:53", "[2001:db8::99]:53", "[fe80::1%eth1]:53"}, []string{"lan", "example.com"}},
		{"by hand, alone", func() error {
			return a.SetDNS(stack.DNSConfig{Search: []string{"home"}})
		}, nil, []string{"home"}},
		{"by hand cleared: the learned again", func() error { return a.SetDNS(stack.DNSConfig{}) },
			[]string{"10.0.0.53:53", "[2001:db8::53]:53", "[2001:db8::99]:53", "[fe80::1%eth1]:53"}, []string{"lan", "example.com"}},
		{"the lease ends", func() error { return a.SetLearnedDNS(dhcp, stack.DNSConfig{}) },
			[]string{"[2001:db8::99]:53", "[2001:db8::53]:53", "[fe80::1%eth1]:53"}, []string{"example.com"}},
		{"a multicast server is refused, the rest kept", func() error {
			if err := a.SetLearnedDNS(ra("eth0"), stack.DNSConfig{Servers: []netip.AddrPort{ap("[ff02::1]:53")}}); err == nil {
				return errors.New("accepted")
			}
			return nil
		}, []string{"[2001:db8::99]:53", "[2001:db8::53]:53", "[fe80::1%eth1]:53"}, []string{"example.com"}},
	}
	for _, st := range steps {
		if err := st.set(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := a.DNS()
		var servers []string
		for _, s := range got.Servers {
			servers = append(servers, s.String())
		}
		if !slices.Equal(servers, st.servers) || !slices.Equal(got.Search, st.search) {
			t.Errorf("%s: DNS() = %q %q, want %q %q", st.name, servers, got.Search, st.servers, st.search)
		}
	}

	// The sources, in the order they are used, and which are.
	if err := a.SetDNS(stack.DNSConfig{Search: []string{"home"}}); err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, src := range a.DNSSources() {
		what := src.From.Protocol.String() + " on " + src.From.NIC
		if src.ByHand {
			what = "by hand"
		}
		sources = append(sources, fmt.Sprintf("%s %d/%d %v", what, len(src.Servers), len(src.Search), src.Used))
	}
	want := []string{"by hand 0/1 true", "router advertisements on eth0 1/0 false", "router advertisements on eth1 2/1 false"}
	if !slices.Equal(sources, want) {
		t.Errorf("DNSSources() = %q, want %q", sources, want)
	}
}

// serveDNSWith answers every UDP query on s's port 53 with the datagrams
// replies makes of it, in order.
func serveDNSWith(t *testing.T, s *stack.Stack, replies func(query []byte) [][]byte) {
	t.Helper()
	pc, err := s.ListenPacket("udp4", ":53")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		pc.Close()
		wg.Wait()
	})
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			for _, b := range replies(slices.Clone(buf[:n])) {
				pc.WriteTo(b, from)
			}
		}
	})
}

// Malformed answers neither crash the resolver nor poison a lookup: a
// datagram that is no reply to the query (too short, another ID, another
// question) is dropped and the real answer taken after it, as Go's
// resolver guards against forgery; an answer whose records do not parse
// fails the lookup.
func TestResolverSurvivesMalformedAnswers(t *testing.T) {
	good := func(query []byte) []byte {
		var q mdns.Msg
		if err := q.Unpack(query); err != nil || len(q.Question) != 1 {
			return nil
		}
		r := new(mdns.Msg).SetReply(&q)
		r.Answer = append(r.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Question[0].Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60}, A: net.IPv4(10, 0, 0, 2)})
		b, _ := r.Pack()
		return b
	}
	tests := []struct {
		behaviour string
		replies   func(query []byte) [][]byte
		ok        bool
	}{
		{"junk before the answer is dropped", func(q []byte) [][]byte {
			otherID := good(q)
			otherID[0] ^= 0xff
			var other mdns.Msg
			other.SetQuestion("elsewhere.test.", mdns.TypeA)
			other.Id = uint16(q[0])<<8 | uint16(q[1])
			other.Response = true
			otherQ, _ := other.Pack()
			return [][]byte{{}, {1, 2, 3}, q[:12], otherID, otherQ, good(q)}
		}, true},
		{"an answer cut short in its records fails", func(q []byte) [][]byte {
			b := good(q)
			return [][]byte{b[:len(b)-3]}
		}, false},
		{"a name pointing at itself fails", func(q []byte) [][]byte {
			// The answer's name, after the header and the question,
			// made a pointer to itself.
			var m mdns.Msg
			if err := m.Unpack(q); err != nil {
				return nil
			}
			head, _ := new(mdns.Msg).SetReply(&m).Pack()
			b, at := good(q), len(head)
			b[at], b[at+1] = 0xc0|byte(at>>8), byte(at)
			return [][]byte{b}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.behaviour, func(t *testing.T) {
			a, b := stacktest.Pair(t, stacktest.Options{})
			serveDNSWith(t, b, tt.replies)
			a.SetDNS(stack.DNSConfig{Servers: []netip.AddrPort{netip.AddrPortFrom(stacktest.AddrB.Addr(), 53)}})
			addrs, err := a.LookupNetIP(lookupCtx(t), "ip4", "host.test.")
			if tt.ok && (err != nil || !slices.Equal(addrs, []netip.Addr{stacktest.AddrB.Addr()})) {
				t.Errorf("lookup = %v, %v; want the real answer, 10.0.0.2", addrs, err)
			}
			if !tt.ok && err == nil {
				t.Errorf("lookup = %v; want an error", addrs)
			}
			t.Logf("lookup = %v, %v", addrs, err)
		})
	}
}
