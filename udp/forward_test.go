package udp_test

import (
	"errors"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/udp"
	"github.com/gonetstack/gonet/wire"
)

// The forwarder (forward.go): datagrams no endpoint takes, to a foreign
// address on a forwarding NIC, go to a hook that may open the flow's
// endpoint.

var foreign = netip.MustParseAddrPort("192.0.2.53:5000")

// forwarding returns a host whose NIC forwards, knowing the peer's MAC.
func forwarding(t *testing.T, hook func(*udp.ForwardRequest)) *rawtest.Host {
	t.Helper()
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	if err := h.S.SetForwarding(rawtest.NIC, true); err != nil {
		t.Fatal(err)
	}
	h.S.SetUDPForwarder(hook)
	return h
}

// opened is what a test's hook saw and made.
type opened struct {
	local, remote netip.AddrPort
	payload       string
	conn          *udp.Connected
	err           error
}

func TestForwarderOpensAFlowThatRepliesFromTheForeignAddress(t *testing.T) {
	flows := make(chan opened, 4)
	h := forwarding(t, func(r *udp.ForwardRequest) {
		o := opened{local: r.LocalAddr(), remote: r.RemoteAddr(), payload: string(r.Payload())}
		o.conn, o.err = r.Open()
		flows <- o
	})
	h.Inject(h.UDPFrame(t, peer, foreign, []byte("query")))
	var o opened
	select {
	case o = <-flows:
	case <-time.After(rawtest.Timeout):
		t.Fatal("the hook was not called")
	}
	if o.err != nil {
		t.Fatalf("Open: %v", o.err)
	}
	c := o.conn
	defer c.Close()
	if o.local != foreign || o.remote != peer || o.payload != "query" {
		t.Errorf("request %v -> %v %q, want %v -> %v \"query\"", o.remote, o.local, o.payload, peer, foreign)
	}
	if b, from := read(t, c.Conn); string(b) != "query" || from != peer {
		t.Errorf("the flow's first datagram: %q from %v, want \"query\" from %v", b, from, peer)
	}
	if _, err := c.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	ip, u := rawtest.UDPOf(t, h.Expect(t, rawtest.Timeout))
	if src := netip.AddrPortFrom(rawtest.Addr(ip.SrcIP), uint16(u.SrcPort)); src != foreign || string(u.Payload) != "answer" {
		t.Errorf("reply %q from %v, want \"answer\" from %v", u.Payload, src, foreign)
	}
	// The flow's next datagram goes to its endpoint, not to the hook.
	h.Inject(h.UDPFrame(t, peer, foreign, []byte("again")))
	if b, _ := read(t, c.Conn); string(b) != "again" {
		t.Errorf("second datagram %q, want \"again\"", b)
	}
	// Another source port is another flow.
	other := netip.AddrPortFrom(rawtest.PeerAddr, peer.Port()+1)
	h.Inject(h.UDPFrame(t, other, foreign, []byte("other")))
	o2 := <-flows
	if o2.err != nil || o2.remote != other {
		t.Fatalf("second flow: %v from %v, want one from %v", o2.err, o2.remote, other)
	}
	o2.conn.Close()
	if n := h.Counter(t, "UDP.ForwardOpened"); n != 2 {
		t.Errorf("UDP.ForwardOpened = %d, want 2", n)
	}
	// A closed flow's next datagram is offered anew.
	c.Close()
	h.Inject(h.UDPFrame(t, peer, foreign, []byte("later")))
	o3 := <-flows
	if o3.err != nil || o3.payload != "later" {
		t.Fatalf("after close: %v %q, want a new flow for \"later\"", o3.err, o3.payload)
	}
	o3.conn.Close()
}

func TestForwarderDecisionsOtherThanOpen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decide func(*udp.ForwardRequest)
		code   int // -1: nothing sent
	}{
		{"none: port unreachable as before", func(*udp.ForwardRequest) {}, wire.ICMPCodePortUnrch},
		{"unreachable host", func(r *udp.ForwardRequest) { r.Unreachable(ip.HostUnreachable) }, wire.ICMPCodeHostUnrch},
		{"administratively prohibited", func(r *udp.ForwardRequest) { r.Unreachable(ip.AdminProhibited) }, wire.ICMPCodeAdminProhibited},
		{"drop", (*udp.ForwardRequest).Drop, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := forwarding(t, tc.decide)
			h.Inject(h.UDPFrame(t, peer, foreign, []byte("query")))
			sent := h.Barrier(t)
			if tc.code < 0 {
				for _, f := range sent {
					t.Errorf("unexpected frame: %s", rawtest.Describe(f))
				}
				return
			}
			if len(sent) != 1 {
				t.Fatalf("sent %d frames, want the ICMP error", len(sent))
			}
			ip, m := rawtest.ICMPOf(t, sent[0])
			if m.TypeCode != layers.CreateICMPv4TypeCode(3, uint8(tc.code)) || rawtest.Addr(ip.SrcIP) != rawtest.StackAddr {
				t.Errorf("got %v from %v, want destination unreachable code %d from the host's address", m.TypeCode, ip.SrcIP, tc.code)
			}
		})
	}
}

func TestWildcardEndpointDoesNotTakeForeignDatagrams(t *testing.T) {
	offered := make(chan netip.AddrPort, 1)
	h := forwarding(t, func(r *udp.ForwardRequest) { offered <- r.LocalAddr(); r.Drop() })
	c := listen(t, h, anyAddr, foreign.Port())
	h.Inject(h.UDPFrame(t, peer, foreign, []byte("foreign")))
	h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, foreign.Port()), []byte("ours")))
	if b, _ := read(t, c); string(b) != "ours" {
		t.Errorf("the wildcard endpoint read %q, want only \"ours\"", b)
	}
	if got := <-offered; got != foreign {
		t.Errorf("hook offered %v, want %v", got, foreign)
	}
}

func TestNonForwardingNICTakesNoForeignDatagram(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	var called atomic.Bool
	h.S.SetUDPForwarder(func(r *udp.ForwardRequest) { called.Store(true) })
	h.Inject(h.UDPFrame(t, peer, foreign, []byte("query")))
	h.ExpectNothing(t)
	if called.Load() {
		t.Error("the hook was called for a foreign address on a NIC that does not forward")
	}
	if n := h.Counter(t, "IPv4.InAddrErrors"); n != 1 {
		t.Errorf("IPv4.InAddrErrors = %d, want 1", n)
	}
}

func TestForwarderIsOfferedTheHostsOwnUnboundPorts(t *testing.T) {
	offered := make(chan netip.AddrPort, 1)
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	// No forwarding: the hook is for every datagram no endpoint takes.
	h.S.SetUDPForwarder(func(r *udp.ForwardRequest) { offered <- r.LocalAddr(); r.Drop() })
	own := netip.AddrPortFrom(rawtest.StackAddr, 5000)
	h.Inject(h.UDPFrame(t, peer, own, []byte("x")))
	h.ExpectNothing(t) // dropped, not port unreachable
	if got := <-offered; got != own {
		t.Errorf("hook offered %v, want %v", got, own)
	}
	// Broadcasts are the host's services', never offered.
	h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.SubnetBroadcast, 5000), []byte("x")))
	h.ExpectNothing(t)
	select {
	case a := <-offered:
		t.Errorf("hook offered the broadcast %v", a)
	default:
	}
}

// ReadDatagram hands over the flow's datagram where it lies, with no
// buffer of the caller's; its bytes go back to the budget once handled,
// and the read deadline holds as for Read.
func TestConnectedReadDatagramHandsOverThePeersDatagramInPlace(t *testing.T) {
	flows := make(chan *udp.Connected, 1)
	h := forwarding(t, func(r *udp.ForwardRequest) {
		c, err := r.Open()
		if err != nil {
			t.Error(err)
			return
		}
		flows <- c
	})
	big := make([]byte, 1400)
	for i := range big {
		big[i] = byte(i)
	}
	h.Inject(h.UDPFrame(t, peer, foreign, big))
	var c *udp.Connected
	select {
	case c = <-flows:
	case <-time.After(rawtest.Timeout):
		t.Fatal("the hook was not called")
	}
	defer c.Close()
	var got []byte
	if err := c.ReadDatagram(func(p []byte) { got = append(got, p...) }); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(big) {
		t.Fatalf("ReadDatagram handed %d bytes, want the %d of the datagram", len(got), len(big))
	}
	if u := h.S.Budget().Used(); u != 0 {
		t.Errorf("%d bytes of the budget still reserved after the datagram was handled", u)
	}
	c.SetReadDeadline(rawtest.Start) // already passed
	if err := c.ReadDatagram(func([]byte) { t.Error("handed a datagram that was never sent") }); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadDatagram past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
}
