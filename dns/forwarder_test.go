package dns_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/gonetstack/gonet/dns"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
)

// The forwarder runs on stack A of a pair, on A's address; the guest is
// stack B, asking over GoNet's own sockets. The upstreams are kernel
// sockets on 127.0.0.1, served by the fake below.

var (
	serverAddr = netip.AddrPortFrom(stacktest.AddrA.Addr(), dns.Port)
	answerAddr = netip.MustParseAddr("192.0.2.7")
)

// bigTXT is how many 100-byte TXT records big.test has: some 2.3 KB, more
// than any client takes over UDP without EDNS0.
const bigTXT = 20

// upstream is a fake resolver on 127.0.0.1, UDP and TCP on one port:
// gonet.test has an A record, big.test many TXT records, other names are
// NXDOMAIN. While hold is not nil, it waits for hold to close before
// answering.
type upstream struct {
	addr netip.AddrPort
	udp  *net.UDPConn
	tcp  *net.TCPListener

	mu   sync.Mutex
	ids  []uint16 // the IDs of the queries it got
	hold chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	u.udp = pc
	u.addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	l, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(u.addr))
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	u.tcp = l
	var wg sync.WaitGroup
	t.Cleanup(func() {
		u.release()
		pc.Close()
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			req := append([]byte(nil), buf[:n]...)
			wg.Go(func() {
				if out := u.answer(req); out != nil {
					pc.WriteToUDPAddrPort(out, from)
				}
			})
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
					req, err := readFramed(c)
					if err != nil {
						return
					}
					if out := u.answer(req); out != nil {
						writeFramed(c, out)
					}
				}
			})
		}
	})
	return u
}

// holdAnswers makes the upstream wait before answering until release.
func (u *upstream) holdAnswers() {
	u.mu.Lock()
	u.hold = make(chan struct{})
	u.mu.Unlock()
}

func (u *upstream) release() {
	u.mu.Lock()
	if u.hold != nil {
		close(u.hold)
		u.hold = nil
	}
	u.mu.Unlock()
}

func (u *upstream) queryIDs() []uint16 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]uint16(nil), u.ids...)
}

func (u *upstream) answer(b []byte) []byte {
	var req mdns.Msg
	if err := req.Unpack(b); err != nil {
		return nil
	}
	u.mu.Lock()
	u.ids = append(u.ids, req.Id)
	hold := u.hold
	u.mu.Unlock()
	if hold != nil {
		<-hold
	}
	var m mdns.Msg
	m.SetReply(&req)
	q := req.Question[0]
	switch {
	case strings.EqualFold(q.Name, "gonet.test.") && q.Qtype == mdns.TypeA:
		m.Answer = append(m.Answer, &mdns.A{
			Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60},
			A:   answerAddr.AsSlice(),
		})
	case strings.EqualFold(q.Name, "gonet.test.") && q.Qtype == mdns.TypeAAAA:
		m.Answer = append(m.Answer, &mdns.AAAA{
			Hdr:  mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeAAAA, Class: mdns.ClassINET, Ttl: 60},
			AAAA: answerAddr6.AsSlice(),
		})
	case strings.EqualFold(q.Name, "big.test.") && q.Qtype == mdns.TypeTXT:
		for i := range bigTXT {
			m.Answer = append(m.Answer, &mdns.TXT{
				Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeTXT, Class: mdns.ClassINET, Ttl: 60},
				Txt: []string{strings.Repeat(string(rune('a'+i)), 100)},
			})
		}
	default:
		m.Rcode = mdns.RcodeNameError
	}
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(opt.UDPSize(), false)
	}
	out, err := m.Pack()
	if err != nil {
		return nil
	}
	return out
}

func readFramed(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeFramed(w io.Writer, msg []byte) error {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
	_, err := w.Write(append(b, msg...))
	return err
}

// silentUpstream is a UDP socket on 127.0.0.1 that reads nothing and
// answers nothing: a resolver that has died without the port closing.
func silentUpstream(t *testing.T) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// closedPort is a port on 127.0.0.1 nothing listens on: the kernel answers
// ICMP port unreachable (UDP) and RST (TCP).
func closedPort(t *testing.T) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// forwarder starts a forwarder with cfg on stack A of a fresh pair, and
// returns it and the guest, stack B. It is stopped, and its Serve must
// return nil, before the pair is checked.
func forwarder(t *testing.T, cfg dns.Config) (*dns.Forwarder, *stack.Stack) {
	t.Helper()
	a, b := stacktest.Pair(t, stacktest.Options{})
	f, err := dns.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := a.ListenUDP(serverAddr)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.ListenTCP(serverAddr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.Serve(ctx, pc, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f, b
}

func newQuery(name string, qtype uint16, id uint16, ednsSize uint16) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetQuestion(mdns.Fqdn(name), qtype)
	m.Id = id
	if ednsSize != 0 {
		m.SetEdns0(ednsSize, false)
	}
	return m
}

func pack(t *testing.T, m *mdns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exchangeUDP sends raw from the guest to the forwarder and returns the
// answer's bytes, or nil if none comes within wait.
func exchangeUDP(t *testing.T, guest *stack.Stack, raw []byte, wait time.Duration) []byte {
	t.Helper()
	b, err := askUDP(guest, raw, wait)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// askUDP is exchangeUDP for goroutines other than the test's.
func askUDP(guest *stack.Stack, raw []byte, wait time.Duration) ([]byte, error) {
	c, err := guest.DialUDP(serverAddr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Write(raw); err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func unpack(t *testing.T, b []byte) *mdns.Msg {
	t.Helper()
	if b == nil {
		t.Fatal("no answer")
	}
	var m mdns.Msg
	if err := m.Unpack(b); err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	return &m
}

func dialTCP(t *testing.T, guest *stack.Stack) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := guest.DialTCP(ctx, serverAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func checkA(t *testing.T, m *mdns.Msg, id uint16) {
	t.Helper()
	if m.Id != id {
		t.Errorf("answer ID %#04x, want the query's %#04x", m.Id, id)
	}
	if !m.Response || m.Rcode != mdns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("answer is not one record with NOERROR:\n%v", m)
	}
	a, ok := m.Answer[0].(*mdns.A)
	if !ok || netip.AddrFrom4([4]byte(a.A.To4())) != answerAddr {
		t.Errorf("answer %v, want A %v", m.Answer[0], answerAddr)
	}
}

func counter(f *dns.Forwarder, name string) int64 {
	var v int64
	stats.Walk("DNS", &f.Stats, func(n string, x int64) {
		if n == "DNS."+name {
			v = x
		}
	})
	return v
}

// waitCounter waits up to 5s for the named counter to reach want: the
// forwarder counts in its own goroutines, and a datagram it drops leaves
// the counter as the only sign it was read.
func waitCounter(t *testing.T, f *dns.Forwarder, name string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for counter(f, name) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %d after 5s, want %d", name, counter(f, name), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestUDPQueryAnsweredWithUpstreamsAnswerAndID(t *testing.T) {
	up := newUpstream(t)
	f, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{up.addr}})
	for _, id := range []uint16{0, 0x1234, 0xffff} {
		checkA(t, unpack(t, exchangeUDP(t, guest, pack(t, newQuery("gonet.test", mdns.TypeA, id, 0)), 5*time.Second)), id)
	}
	m := unpack(t, exchangeUDP(t, guest, pack(t, newQuery("unknown.test", mdns.TypeA, 7, 0)), 5*time.Second))
	if m.Rcode != mdns.RcodeNameError || m.Id != 7 {
		t.Errorf("unknown name: rcode %s ID %d, want NXDOMAIN as the upstream said, ID 7", mdns.RcodeToString[m.Rcode], m.Id)
	}
	if q, a := counter(f, "Queries"), counter(f, "Answers"); q != 4 || a != 4 {
		t.Errorf("Queries %d Answers %d, want 4 and 4", q, a)
	}
	// Upstream the IDs are the forwarder's own, random (RFC 5452 4.3):
	// three guest queries with ID 0 would not all carry ID 0.
	zeros := 0
	for _, id := range up.queryIDs() {
		if id == 0 {
			zeros++
		}
	}
	if zeros > 1 {
		t.Errorf("the upstream saw the guest's IDs %v, not random ones", up.queryIDs())
	}
}

// answerAddr6 is gonet.test's AAAA record at the test's upstream.
var answerAddr6 = netip.MustParseAddr("fd00::77")

// The gateway's guest asks for AAAA records as for any (issue 12): the
// forwarder relays every type, and the answer comes back whole.
func TestAAAAQueryAnsweredWithUpstreamsAnswer(t *testing.T) {
	up := newUpstream(t)
	_, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{up.addr}})
	m := unpack(t, exchangeUDP(t, guest, pack(t, newQuery("gonet.test", mdns.TypeAAAA, 0x6666, 0)), 5*time.Second))
	if m.Id != 0x6666 || m.Rcode != mdns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("AAAA answer: ID %#x rcode %s, %d records; want ID 0x6666, NOERROR, one record", m.Id, mdns.RcodeToString[m.Rcode], len(m.Answer))
	}
	if a, ok := m.Answer[0].(*mdns.AAAA); !ok || !a.AAAA.Equal(answerAddr6.AsSlice()) {
		t.Errorf("AAAA answer %v, want %v", m.Answer[0], answerAddr6)
	}
}

func TestTCPQueriesPipelinedOnOneConnection(t *testing.T) {
	up := newUpstream(t)
	f, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{up.addr}})
	c := dialTCP(t, guest)
	// Three queries in one write, before any answer (RFC 7766 6.2.1.1).
	var out []byte
	ids := []uint16{101, 102, 103}
	for _, id := range ids {
		out = binary.BigEndian.AppendUint16(out, 0)
		msg := pack(t, newQuery("gonet.test", mdns.TypeA, id, 0))
		binary.BigEndian.PutUint16(out[len(out)-2:], uint16(len(msg)))
		out = append(out, msg...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	seen := map[uint16]bool{}
	for range ids {
		b, err := readFramed(c)
		if err != nil {
			t.Fatal(err)
		}
		m := unpack(t, b)
		checkA(t, m, m.Id)
		seen[m.Id] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("no answer with ID %d; got %v", id, seen)
		}
	}
	// The big answer comes whole over TCP.
	if err := writeFramed(c, pack(t, newQuery("big.test", mdns.TypeTXT, 9, 0))); err != nil {
		t.Fatal(err)
	}
	b, err := readFramed(c)
	if err != nil {
		t.Fatal(err)
	}
	if m := unpack(t, b); m.Truncated || len(m.Answer) != bigTXT || m.Id != 9 {
		t.Errorf("big.test over TCP: TC %v, %d records, ID %d; want all %d, ID 9", m.Truncated, len(m.Answer), m.Id, bigTXT)
	}
	if n := counter(f, "Answers"); n != 4 {
		t.Errorf("Answers %d, want 4", n)
	}
}

func TestUDPAnswerTruncatedToClientsSize(t *testing.T) {
	up := newUpstream(t)
	f, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{up.addr}})
	for _, tc := range []struct {
		name      string
		edns      uint16
		limit     int
		truncated bool
	}{
		{"no EDNS0: 512 bytes", 0, 512, true},
		{"EDNS0 1232", 1232, 1232, true},
		{"EDNS0 below 512 counts as 512", 100, 512, true},
		{"EDNS0 4096 takes it whole", 4096, 4096, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := exchangeUDP(t, guest, pack(t, newQuery("big.test", mdns.TypeTXT, 77, tc.edns)), 5*time.Second)
			m := unpack(t, b)
			if len(b) > tc.limit {
				t.Errorf("answer of %d bytes, over the client's %d", len(b), tc.limit)
			}
			if m.Truncated != tc.truncated || m.Id != 77 {
				t.Errorf("TC %v ID %d, want TC %v ID 77", m.Truncated, m.Id, tc.truncated)
			}
			if tc.truncated && (len(m.Answer) != 0 || len(m.Question) != 1) {
				t.Errorf("truncated answer has %d records and %d questions, want the question alone", len(m.Answer), len(m.Question))
			}
			if !tc.truncated && len(m.Answer) != bigTXT {
				t.Errorf("%d records, want %d", len(m.Answer), bigTXT)
			}
			if (m.IsEdns0() != nil) != (tc.edns != 0) {
				t.Errorf("OPT record %v, the query had one: %v", m.IsEdns0() != nil, tc.edns != 0)
			}
		})
	}
	if n := counter(f, "Truncated"); n != 3 {
		t.Errorf("Truncated %d, want 3", n)
	}
}

func TestDeadUpstreamAnswersServFail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		up      func(*testing.T) netip.AddrPort
		counter string
	}{
		{"silent", silentUpstream, "Timeouts"},
		{"port closed", closedPort, "UpstreamErrors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{tc.up(t)}, Timeout: 200 * time.Millisecond})
			m := unpack(t, exchangeUDP(t, guest, pack(t, newQuery("gonet.test", mdns.TypeA, 5, 0)), 5*time.Second))
			if m.Rcode != mdns.RcodeServerFailure || m.Id != 5 || len(m.Question) != 1 {
				t.Errorf("rcode %s ID %d, %d questions; want SERVFAIL, ID 5, the question", mdns.RcodeToString[m.Rcode], m.Id, len(m.Question))
			}
			if n := counter(f, tc.counter); n != 1 {
				t.Errorf("%s %d, want 1", tc.counter, n)
			}
			if n := counter(f, "ServFails"); n != 1 {
				t.Errorf("ServFails %d, want 1", n)
			}
		})
	}
}

func TestFailoverToSecondUpstream(t *testing.T) {
	for _, proto := range []string{"udp", "tcp"} {
		t.Run(proto, func(t *testing.T) {
			up := newUpstream(t)
			f, guest := forwarder(t, dns.Config{
				Upstreams: []netip.AddrPort{silentUpstream(t), up.addr},
				Timeout:   200 * time.Millisecond,
			})
			ask := func(id uint16) *mdns.Msg {
				raw := pack(t, newQuery("gonet.test", mdns.TypeA, id, 0))
				if proto == "udp" {
					return unpack(t, exchangeUDP(t, guest, raw, 5*time.Second))
				}
				c := dialTCP(t, guest)
				if err := writeFramed(c, raw); err != nil {
					t.Fatal(err)
				}
				b, err := readFramed(c)
				if err != nil {
					t.Fatal(err)
				}
				return unpack(t, b)
			}
			checkA(t, ask(1), 1)
			// The one that answered is asked first from then on.
			checkA(t, ask(2), 2)
			if n := counter(f, "Timeouts") + counter(f, "UpstreamErrors"); n != 1 {
				t.Errorf("failed attempts %d, want 1: the dead upstream tried once", n)
			}
		})
	}
}

func TestMalformedQueriesCountedAndAnswered(t *testing.T) {
	up := newUpstream(t)
	f, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{up.addr}})
	good := pack(t, newQuery("gonet.test", mdns.TypeA, 0x4242, 0))
	two := newQuery("gonet.test", mdns.TypeA, 0x4343, 0)
	two.Question = append(two.Question, two.Question[0])
	response := append([]byte(nil), good...)
	response[2] |= 0x80
	for _, tc := range []struct {
		name    string
		raw     []byte
		formerr bool // else no answer at all
	}{
		{"empty", []byte{}, false},
		{"shorter than a header", good[:5], false},
		{"a response", response, false},
		{"cut in the question", good[:len(good)-3], true},
		{"two questions", pack(t, two), true},
		{"garbage after the header", append(append([]byte(nil), good[:12]...), 0xff, 0xff, 0xff), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counter(f, "Malformed")
			wait := 300 * time.Millisecond // for silence
			if tc.formerr {
				wait = 5 * time.Second
			}
			b := exchangeUDP(t, guest, tc.raw, wait)
			switch {
			case tc.formerr && b == nil:
				t.Error("no answer, want FORMERR")
			case tc.formerr:
				m := unpack(t, b)
				if m.Rcode != mdns.RcodeFormatError || m.Id != binary.BigEndian.Uint16(tc.raw) {
					t.Errorf("rcode %s ID %d, want FORMERR with the query's ID", mdns.RcodeToString[m.Rcode], m.Id)
				}
			case b != nil:
				t.Errorf("answered %x, want silence", b)
			}
			waitCounter(t, f, "Malformed", before+1)
		})
	}
	checkA(t, unpack(t, exchangeUDP(t, guest, good, 5*time.Second)), 0x4242)
	// Over TCP the forwarder answers FORMERR and closes.
	c := dialTCP(t, guest)
	if err := writeFramed(c, good[:len(good)-3]); err != nil {
		t.Fatal(err)
	}
	b, err := readFramed(c)
	if err != nil {
		t.Fatal(err)
	}
	if m := unpack(t, b); m.Rcode != mdns.RcodeFormatError {
		t.Errorf("TCP: rcode %s, want FORMERR", mdns.RcodeToString[m.Rcode])
	}
	if _, err := readFramed(c); err != io.EOF {
		t.Errorf("TCP after FORMERR: %v, want EOF", err)
	}
}

func TestQueriesBeyondBoundRefused(t *testing.T) {
	up := newUpstream(t)
	f, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{up.addr}, MaxInFlight: 1})
	up.holdAnswers()
	first := make(chan []byte, 1)
	raw := pack(t, newQuery("gonet.test", mdns.TypeA, 1, 0))
	go func() {
		b, _ := askUDP(guest, raw, 5*time.Second)
		first <- b
	}()
	waitCounter(t, f, "InFlight", 1)
	m := unpack(t, exchangeUDP(t, guest, pack(t, newQuery("gonet.test", mdns.TypeA, 2, 0)), 5*time.Second))
	if m.Rcode != mdns.RcodeRefused || m.Id != 2 {
		t.Errorf("second query: rcode %s ID %d, want REFUSED, ID 2", mdns.RcodeToString[m.Rcode], m.Id)
	}
	up.release()
	checkA(t, unpack(t, <-first), 1)
	if n := counter(f, "Refused"); n != 1 {
		t.Errorf("Refused %d, want 1", n)
	}
}

func TestTCPConnectionsBeyondBoundClosed(t *testing.T) {
	up := newUpstream(t)
	f, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{up.addr}, MaxTCPConns: 1})
	c1 := dialTCP(t, guest)
	if err := writeFramed(c1, pack(t, newQuery("gonet.test", mdns.TypeA, 1, 0))); err != nil {
		t.Fatal(err)
	}
	if _, err := readFramed(c1); err != nil {
		t.Fatal(err)
	}
	c2 := dialTCP(t, guest)
	writeFramed(c2, pack(t, newQuery("gonet.test", mdns.TypeA, 2, 0)))
	if _, err := readFramed(c2); err == nil {
		t.Error("a second connection over MaxTCPConns was answered")
	}
	if n := counter(f, "TCPRefused"); n != 1 {
		t.Errorf("TCPRefused %d, want 1", n)
	}
}

func TestTCPIdleConnectionClosedButNotWhileQueriesInFlight(t *testing.T) {
	up := newUpstream(t)
	_, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{up.addr}, TCPIdle: 200 * time.Millisecond})
	idle := dialTCP(t, guest)
	start := time.Now()
	if _, err := readFramed(idle); err != io.EOF {
		t.Errorf("idle connection: %v, want EOF", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 5*time.Second {
		t.Errorf("idle connection closed after %v, want about 200ms", d)
	}
	// A query held upstream for longer than the idle time still gets
	// its answer: the connection is not idle while one is in flight.
	up.holdAnswers()
	busy := dialTCP(t, guest)
	if err := writeFramed(busy, pack(t, newQuery("gonet.test", mdns.TypeA, 3, 0))); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(600*time.Millisecond, up.release)
	b, err := readFramed(busy)
	if err != nil {
		t.Fatalf("query in flight past the idle time: %v", err)
	}
	checkA(t, unpack(t, b), 3)
}
