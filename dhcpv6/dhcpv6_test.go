package dhcpv6

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	mac      = wire.MAC{0x02, 0, 0, 0, 0x66, 1}
	servers  = netip.MustParseAddrPort("[ff02::1:2%eth0]:547")
	serverID = []byte{0, 3, 0, 1, 0x02, 0, 0, 0, 0x66, 0x99}
)

// decodeRequest decodes what the client sent with gopacket, the oracle.
func decodeRequest(t testing.TB, b []byte) *layers.DHCPv6 {
	t.Helper()
	var d layers.DHCPv6
	if err := d.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil {
		t.Fatalf("gopacket cannot decode %x: %v", b, err)
	}
	return &d
}

func option(d *layers.DHCPv6, code layers.DHCPv6Opt) ([]byte, bool) {
	for _, o := range d.Options {
		if o.Code == code {
			return o.Data, true
		}
	}
	return nil, false
}

func TestInformationRequestIsWhatGopacketDecodes(t *testing.T) {
	d := decodeRequest(t, informationRequest(0xabcdef, duidLL(mac), 150))
	if d.MsgType != layers.DHCPv6MsgTypeInformationRequest || binary.BigEndian.Uint32(append([]byte{0}, d.TransactionID...)) != 0xabcdef {
		t.Fatalf("type %v transaction %x", d.MsgType, d.TransactionID)
	}
	if id, _ := option(d, layers.DHCPv6OptClientID); string(id) != string([]byte{0, 3, 0, 1, 0x02, 0, 0, 0, 0x66, 1}) {
		t.Errorf("client identifier %x, want the DUID-LL of %v", id, mac)
	}
	oro, _ := option(d, layers.DHCPv6OptOro)
	var codes []uint16
	for i := 0; i+1 < len(oro); i += 2 {
		codes = append(codes, binary.BigEndian.Uint16(oro[i:]))
	}
	if !slices.Equal(codes, []uint16{23, 24, 32, 83}) {
		t.Errorf("option request %v, want DNS servers, domain list, information refresh time, INF_MAX_RT", codes)
	}
	if e, _ := option(d, layers.DHCPv6OptElapsedTime); binary.BigEndian.Uint16(e) != 150 {
		t.Errorf("elapsed time %x, want 150", e)
	}
}

// replyFor builds, with gopacket, a Reply to the request b.
func replyFor(t testing.TB, b []byte, opts ...layers.DHCPv6Option) []byte {
	t.Helper()
	req := decodeRequest(t, b)
	id, _ := option(req, layers.DHCPv6OptClientID)
	d := &layers.DHCPv6{MsgType: layers.DHCPv6MsgTypeReply, TransactionID: req.TransactionID,
		Options: append(layers.DHCPv6Options{
			layers.NewDHCPv6Option(layers.DHCPv6OptServerID, serverID),
			layers.NewDHCPv6Option(layers.DHCPv6OptClientID, id),
		}, opts...)}
	return serialize(t, d)
}

func serialize(t testing.TB, d *layers.DHCPv6) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := d.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dnsOption(addrs ...string) layers.DHCPv6Option {
	var b []byte
	for _, a := range addrs {
		b = append(b, netip.MustParseAddr(a).AsSlice()...)
	}
	return layers.NewDHCPv6Option(layers.DHCPv6OptDNSServers, b)
}

func domainOption(names ...string) layers.DHCPv6Option {
	var b []byte
	for _, n := range names {
		for _, l := range strings.Split(n, ".") {
			b = append(append(b, byte(len(l))), l...)
		}
		b = append(b, 0)
	}
	return layers.NewDHCPv6Option(layers.DHCPv6OptDomainList, b)
}

func refreshOption(secs uint32) layers.DHCPv6Option {
	return layers.NewDHCPv6Option(32, binary.BigEndian.AppendUint32(nil, secs))
}

func TestParseReplyTakesWhatIsOursAndRefusesTheRest(t *testing.T) {
	duid := duidLL(mac)
	req := informationRequest(0x123456, duid, 0)
	good := replyFor(t, req, dnsOption("2001:db8::53", "ff02::1", "2001:db8::54"), domainOption("lab.test", "example.org"), refreshOption(1200))
	r, ok := parseReply(good, 0x123456, duid, 7)
	if !ok || !slices.Equal(r.servers, []netip.Addr{netip.MustParseAddr("2001:db8::53"), netip.MustParseAddr("2001:db8::54")}) ||
		!slices.Equal(r.search, []string{"lab.test", "example.org"}) || r.refresh != 1200 {
		t.Errorf("parseReply = %+v, %v; want two servers (the multicast one left out), two domains, refresh 1200", r, ok)
	}
	other := informationRequest(0x123456, duidLL(wire.MAC{2, 0, 0, 0, 0, 9}), 0)
	for name, b := range map[string][]byte{
		"another transaction":    replyFor(t, informationRequest(0x654321, duid, 0)),
		"another client":         replyFor(t, other),
		"no server identifier":   append([]byte{msgReply, 0x12, 0x34, 0x56}, good[4+4+len(serverID):]...),
		"a truncated option":     good[:len(good)-1],
		"a request, not a reply": req,
	} {
		if r, ok := parseReply(b, 0x123456, duid, 7); ok {
			t.Errorf("%s: parseReply = %+v, accepted", name, r)
		}
	}
	// A status is read for the caller to judge.
	if r, ok := parseReply(replyFor(t, req, layers.NewDHCPv6Option(layers.DHCPv6OptStatusCode, []byte{0, 2, 'n', 'o'})), 0x123456, duid, 7); !ok || r.status != statusNoAddrsAvail {
		t.Errorf("a Reply with NoAddrsAvail: %+v, %v", r, ok)
	}
}

// fakeConn is the client's socket: what it writes goes to sent, and what
// the test puts on recv it reads.
type fakeConn struct {
	sent   chan []byte
	recv   chan []byte
	closed chan struct{}
	once   sync.Once
}

func newFakeConn() *fakeConn {
	return &fakeConn{sent: make(chan []byte, 16), recv: make(chan []byte, 16), closed: make(chan struct{})}
}

func (c *fakeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case m := <-c.recv:
		return copy(b, m), &net.UDPAddr{IP: net.ParseIP("fe80::99"), Port: ServerPort}, nil
	case <-c.closed:
		return 0, nil, net.ErrClosed
	}
}

func (c *fakeConn) WriteTo(b []byte, a net.Addr) (int, error) {
	if u, ok := a.(*net.UDPAddr); !ok || u.AddrPort() != servers {
		return 0, &net.AddrError{Err: "not the servers' group", Addr: a.String()}
	}
	c.sent <- slices.Clone(b)
	return len(b), nil
}

func (c *fakeConn) Close() error                       { c.once.Do(func() { close(c.closed) }); return nil }
func (c *fakeConn) LocalAddr() net.Addr                { return &net.UDPAddr{Port: ClientPort} }
func (c *fakeConn) SetDeadline(t time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(t time.Time) error { return nil }

type learned struct {
	servers []netip.Addr
	search  []string
}

func startClient(t *testing.T) (*Client, *fakeConn, *clock.Virtual, chan learned) {
	t.Helper()
	conn, clk := newFakeConn(), clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	got := make(chan learned, 4)
	c := Start(Config{Conn: conn, Servers: servers, MAC: mac,
		Env:     &env.Env{Clock: clk, Rand: env.NewRand(rand.NewPCG(3, 4))},
		Learned: func(s []netip.Addr, d []string) { got <- learned{s, d} }})
	t.Cleanup(c.Close)
	return c, conn, clk, got
}

func (c *fakeConn) next(t *testing.T) []byte {
	t.Helper()
	select {
	case b := <-c.sent:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("no request sent")
		return nil
	}
}

func (c *fakeConn) none(t *testing.T) {
	t.Helper()
	select {
	case b := <-c.sent:
		t.Fatalf("a request sent: %x", b)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestClientRetransmitsUntilAReplyThenRefreshes pins RFC 8415 sections
// 15 and 18.2.6: the first request within INF_MAX_DELAY, retransmissions
// of the same transaction doubling from INF_TIMEOUT with the time elapsed,
// the Reply's information reported, and a new exchange once the refresh
// time is over.
func TestClientRetransmitsUntilAReplyThenRefreshes(t *testing.T) {
	c, conn, clk, got := startClient(t)
	clk.WaitPending(1)
	clk.Advance(InfMaxDelay)
	first := decodeRequest(t, conn.next(t))
	clk.WaitPending(1)
	clk.Advance(InfTimeout * 11 / 10)
	second := decodeRequest(t, conn.next(t))
	if string(second.TransactionID) != string(first.TransactionID) {
		t.Errorf("a retransmission with transaction %x, want %x", second.TransactionID, first.TransactionID)
	}
	if e, _ := option(second, layers.DHCPv6OptElapsedTime); binary.BigEndian.Uint16(e) < 90 {
		t.Errorf("elapsed time %d hundredths at the retransmission, want about 100", binary.BigEndian.Uint16(e))
	}
	// The second timeout is about twice the first: nothing at 1.5 s.
	clk.WaitPending(1)
	clk.Advance(1500 * time.Millisecond)
	conn.none(t)

	b := informationRequest(binary.BigEndian.Uint32(append([]byte{0}, first.TransactionID...)), duidLL(mac), 0)
	conn.recv <- replyFor(t, informationRequest(0x1, duidLL(mac), 0)) // another transaction: discarded
	conn.recv <- replyFor(t, b, dnsOption("2001:db8::53"), domainOption("lab.test"), refreshOption(1200))
	select {
	case l := <-got:
		if !slices.Equal(l.servers, []netip.Addr{netip.MustParseAddr("2001:db8::53")}) || !slices.Equal(l.search, []string{"lab.test"}) {
			t.Errorf("learned %+v", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Reply was not taken")
	}
	if n := c.Stats.InDiscarded.Load(); n != 1 {
		t.Errorf("InDiscarded = %d, want 1", n)
	}
	clk.WaitPending(1)
	clk.Advance(1199 * time.Second)
	conn.none(t)
	clk.Advance(time.Second)
	third := decodeRequest(t, conn.next(t))
	if string(third.TransactionID) == string(first.TransactionID) {
		t.Error("the refresh reused the transaction ID")
	}
}
