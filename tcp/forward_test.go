package tcp_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/wire"
)

// The forwarder (forward.go): SYNs for a foreign address on a forwarding
// NIC go to a hook, which decides what the peer sees before anything is
// answered.

// foreignAP is a documentation address (RFC 5737) the stack terminates.
var foreignAP = netip.MustParseAddrPort("192.0.2.1:80")

// fwdRig is a rig whose NIC forwards, with a hook that hands each request
// to the test and waits for the test to say how to decide it.
type fwdRig struct {
	*rig
	reqs   chan *tcp.ForwardRequest
	decide chan func(*tcp.ForwardRequest)
}

func newFwdRig(t *testing.T, cfg tcp.Config) *fwdRig {
	t.Helper()
	r := &fwdRig{
		rig:    newRig(t, cfg),
		reqs:   make(chan *tcp.ForwardRequest, 16),
		decide: make(chan func(*tcp.ForwardRequest)),
	}
	if err := r.h.S.SetForwarding(rawtest.NIC, true); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	r.h.S.SetTCPForwarder(func(req *tcp.ForwardRequest) {
		r.reqs <- req
		select {
		case f := <-r.decide:
			f(req)
		case <-stop:
		}
	})
	// Before the harness's cleanup, which checks no goroutine is left.
	t.Cleanup(func() { close(stop) })
	return r
}

// request waits for the hook's next request.
func (r *fwdRig) request() *tcp.ForwardRequest {
	r.t.Helper()
	select {
	case req := <-r.reqs:
		return req
	case <-time.After(rawtest.Timeout):
		r.t.Fatal("the forwarder hook was not called")
		return nil
	}
}

// noRequest fails the test if the hook was called.
func (r *fwdRig) noRequest() {
	r.t.Helper()
	r.settle()
	select {
	case req := <-r.reqs:
		r.t.Errorf("unexpected hook call for %v -> %v", req.RemoteAddr(), req.LocalAddr())
	default:
	}
}

var synOpts = rawtest.TCPOpts{MSS: 1400, HasWScale: true, WScale: 7, SACKPermitted: true, HasTimestamp: true, TSVal: 5000}

func (r *fwdRig) syn(from netip.AddrPort, to netip.AddrPort) {
	r.h.Inject(r.h.TCPFrame(r.t, rawtest.TCPSegment{Src: from, Dst: to, Seq: peerISN, Flags: rawtest.SYN, Window: 64240, Opts: synOpts}))
}

func TestForwarderAcceptAnswersTheSYNOnlyOnceTheHookAccepts(t *testing.T) {
	r := newFwdRig(t, tcp.Config{})
	r.syn(peerAP, foreignAP)
	req := r.request()
	if req.LocalAddr() != foreignAP || req.RemoteAddr() != peerAP {
		t.Fatalf("request %v -> %v, want %v -> %v", req.RemoteAddr(), req.LocalAddr(), peerAP, foreignAP)
	}
	r.nothing() // no SYN-ACK while the hook decides
	conns := make(chan *tcp.Conn, 1)
	r.decide <- func(req *tcp.ForwardRequest) {
		c, err := req.Accept(context.Background())
		if err != nil {
			t.Errorf("Accept: %v", err)
		}
		conns <- c
	}
	sa := r.nextSeg()
	if sa.Flags != rawtest.SYN|rawtest.ACK || sa.Src != foreignAP || sa.Dst != peerAP || sa.Ack != peerISN+1 {
		t.Fatalf("got %v, want a SYN-ACK from %v acknowledging %d", sa, foreignAP, peerISN+1)
	}
	o := sa.Opts
	if o.MSS == 0 || !o.HasWScale || !o.SACKPermitted || !o.HasTimestamp || o.TSEcr != synOpts.TSVal {
		t.Errorf("SYN-ACK options %v: want MSS, window scale, SACK-permitted and a timestamp echoing %d", o, synOpts.TSVal)
	}
	r.h.Inject(r.h.TCPFrame(t, rawtest.TCPSegment{Src: peerAP, Dst: foreignAP, Seq: peerISN + 1, Ack: sa.Seq + 1,
		Flags: rawtest.ACK, Window: 502, Opts: rawtest.TCPOpts{HasTimestamp: true, TSVal: 5001, TSEcr: o.TSVal}}))
	c := <-conns
	if c == nil {
		t.FailNow()
	}
	if got := c.LocalAddr().String(); got != foreignAP.String() {
		t.Errorf("conn's local address %s, want %v", got, foreignAP)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	d := r.nextSeg()
	if d.Src != foreignAP || string(d.Payload) != "hello" || d.Seq != sa.Seq+1 {
		t.Errorf("got %v, want \"hello\" from %v at %d", d, foreignAP, sa.Seq+1)
	}
	if n := r.counter("ForwardAccepted"); n != 1 {
		t.Errorf("ForwardAccepted = %d, want 1", n)
	}
	if n := r.h.Counter(t, "IPv4.InForeign"); n < 2 {
		t.Errorf("IPv4.InForeign = %d, want the SYN and the ACK", n)
	}
	if n := r.h.Counter(t, "IPv4.OutForeign"); n < 2 {
		t.Errorf("IPv4.OutForeign = %d, want the SYN-ACK and the data", n)
	}
}

func TestForwarderRefuseResets(t *testing.T) {
	r := newFwdRig(t, tcp.Config{})
	r.syn(peerAP, foreignAP)
	r.request()
	r.decide <- (*tcp.ForwardRequest).Refuse
	rst := r.nextSeg()
	if rst.Flags != rawtest.RST|rawtest.ACK || rst.Src != foreignAP || rst.Dst != peerAP || rst.Seq != 0 || rst.Ack != peerISN+1 {
		t.Errorf("got %v, want <SEQ=0><ACK=%d><CTL=RST,ACK> from %v", rst, peerISN+1, foreignAP)
	}
	r.h.WaitCounter(t, "TCP.ForwardRefused", 1)
	r.h.WaitCounter(t, "TCP.ForwardPending", 0)
}

func TestForwarderUnreachableSendsICMPQuotingTheSYN(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind ip.ErrorKind
		code uint8
	}{
		{"net", ip.NetUnreachable, wire.ICMPCodeNetUnrch},
		{"host", ip.HostUnreachable, wire.ICMPCodeHostUnrch},
		{"administratively prohibited", ip.AdminProhibited, wire.ICMPCodeAdminProhibited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFwdRig(t, tcp.Config{})
			r.syn(peerAP, foreignAP)
			r.request()
			r.decide <- func(req *tcp.ForwardRequest) { req.Unreachable(tc.kind) }
			ip, m := rawtest.ICMPOf(t, r.next())
			if m.TypeCode != layers.CreateICMPv4TypeCode(3, tc.code) || rawtest.Addr(ip.DstIP) != rawtest.PeerAddr {
				t.Fatalf("got %v to %v, want destination unreachable code %d to the peer", m.TypeCode, ip.DstIP, tc.code)
			}
			q := gopacket.NewPacket(m.Payload, layers.LayerTypeIPv4, gopacket.Default)
			qip, _ := q.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			qtcp, _ := q.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if qip == nil || qtcp == nil || rawtest.Addr(qip.DstIP) != foreignAP.Addr() || uint16(qtcp.SrcPort) != peerPort ||
				uint16(qtcp.DstPort) != foreignAP.Port() || !qtcp.SYN || qtcp.Seq != peerISN {
				t.Errorf("the error does not quote the SYN: %v", q)
			}
		})
	}
}

func TestForwarderDropAnswersNothing(t *testing.T) {
	r := newFwdRig(t, tcp.Config{})
	r.syn(peerAP, foreignAP)
	r.request()
	r.decide <- (*tcp.ForwardRequest).Drop
	r.h.WaitCounter(t, "TCP.ForwardDropped", 1)
	r.nothing()
	// The next retransmission is a new request.
	r.syn(peerAP, foreignAP)
	r.request()
	r.decide <- (*tcp.ForwardRequest).Drop
	r.h.WaitCounter(t, "TCP.ForwardDropped", 2)
}

func TestForwarderHookReturningUndecidedDrops(t *testing.T) {
	r := newRig(t, tcp.Config{})
	if err := r.h.S.SetForwarding(rawtest.NIC, true); err != nil {
		t.Fatal(err)
	}
	r.h.S.SetTCPForwarder(func(*tcp.ForwardRequest) {})
	r.h.Inject(r.h.TCPFrame(t, rawtest.TCPSegment{Src: peerAP, Dst: foreignAP, Seq: peerISN, Flags: rawtest.SYN, Window: 64240}))
	r.h.WaitCounter(t, "TCP.ForwardDropped", 1)
	r.nothing()
}

func TestForwarderTakesRetransmittedSYNsAsTheSameRequest(t *testing.T) {
	r := newFwdRig(t, tcp.Config{})
	r.syn(peerAP, foreignAP)
	req := r.request()
	r.syn(peerAP, foreignAP)
	r.syn(peerAP, foreignAP)
	r.noRequest()
	if n := r.counter("ForwardSYNDuplicates"); n != 2 {
		t.Errorf("ForwardSYNDuplicates = %d, want 2", n)
	}
	conns := make(chan *tcp.Conn, 1)
	r.decide <- func(req *tcp.ForwardRequest) {
		c, _ := req.Accept(context.Background())
		conns <- c
	}
	sa := r.nextSeg()
	// Retransmitted once accepted, the SYN finds the connection, which
	// answers it with its SYN-ACK again, and makes no request.
	r.syn(peerAP, foreignAP)
	if again := r.nextSeg(); again.Flags != rawtest.SYN|rawtest.ACK || again.Seq != sa.Seq {
		t.Errorf("got %v, want the SYN-ACK again", again)
	}
	r.noRequest()
	r.h.Inject(r.h.TCPFrame(t, rawtest.TCPSegment{Src: peerAP, Dst: foreignAP, Seq: peerISN + 1, Ack: sa.Seq + 1,
		Flags: rawtest.ACK, Window: 502, Opts: rawtest.TCPOpts{HasTimestamp: true, TSVal: 5001, TSEcr: sa.Opts.TSVal}}))
	if c := <-conns; c == nil {
		t.Fatal("Accept failed")
	}
	if n := r.counter("ForwardRequests"); n != 1 {
		t.Errorf("ForwardRequests = %d for %v, want 1", n, req.LocalAddr())
	}
}

func TestForwarderBoundsTheRequestsPending(t *testing.T) {
	r := newFwdRig(t, tcp.Config{ForwardMaxPending: 2})
	from := func(i int) netip.AddrPort { return netip.AddrPortFrom(rawtest.PeerAddr, uint16(peerPort+i)) }
	for i := range 3 {
		r.syn(from(i), foreignAP)
	}
	r.request()
	r.request()
	r.noRequest()
	if n := r.counter("ForwardPendingDrops"); n != 1 {
		t.Errorf("ForwardPendingDrops = %d, want 1", n)
	}
	if n := r.counter("ForwardPending"); n != 2 {
		t.Errorf("ForwardPending = %d, want 2", n)
	}
	// A decision makes room.
	r.decide <- (*tcp.ForwardRequest).Drop
	r.h.WaitCounter(t, "TCP.ForwardPending", 1)
	r.syn(from(2), foreignAP)
	r.request()
	r.decide <- (*tcp.ForwardRequest).Drop
	r.decide <- (*tcp.ForwardRequest).Drop
	r.h.WaitCounter(t, "TCP.ForwardPending", 0)
}

func TestForwarderIsOfferedSYNsTheWildcardListenerMustNotTake(t *testing.T) {
	r := newFwdRig(t, tcp.Config{})
	l, err := r.proto().Listen(netip.AddrPortFrom(netip.IPv4Unspecified(), foreignAP.Port()), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r.syn(peerAP, foreignAP)
	r.request()
	r.decide <- (*tcp.ForwardRequest).Drop
	r.h.WaitCounter(t, "TCP.ForwardDropped", 1)
	r.nothing()
	// The host's own address is still the listener's.
	r.syn(peerAP, netip.AddrPortFrom(rawtest.StackAddr, foreignAP.Port()))
	if sa := r.nextSeg(); sa.Flags != rawtest.SYN|rawtest.ACK || sa.Src.Addr() != rawtest.StackAddr {
		t.Errorf("got %v, want the listener's SYN-ACK", sa)
	}
}

func TestNonForwardingNICIgnoresForeignSYNs(t *testing.T) {
	r := newRig(t, tcp.Config{})
	called := make(chan struct{}, 1)
	r.h.S.SetTCPForwarder(func(req *tcp.ForwardRequest) { called <- struct{}{}; req.Drop() })
	before := r.h.Counter(t, "IPv4.InAddrErrors")
	r.h.Inject(r.h.TCPFrame(t, rawtest.TCPSegment{Src: peerAP, Dst: foreignAP, Seq: peerISN, Flags: rawtest.SYN, Window: 64240}))
	r.nothing()
	if n := r.h.Counter(t, "IPv4.InAddrErrors") - before; n != 1 {
		t.Errorf("IPv4.InAddrErrors grew by %d, want 1", n)
	}
	select {
	case <-called:
		t.Error("the hook was called for a foreign address on a NIC that does not forward")
	default:
	}
	// Without a hook, a closed port of the host's is reset as before.
	r.h.S.SetTCPForwarder(nil)
	r.h.Inject(r.h.TCPFrame(t, rawtest.TCPSegment{Src: peerAP, Dst: stackAP, Seq: peerISN, Flags: rawtest.SYN, Window: 64240}))
	if rst := r.nextSeg(); rst.Flags != rawtest.RST|rawtest.ACK || rst.Ack != peerISN+1 {
		t.Errorf("got %v, want the RST of a closed port", rst)
	}
}

func TestForwarderAcceptAfterCloseFails(t *testing.T) {
	r := newFwdRig(t, tcp.Config{})
	r.syn(peerAP, foreignAP)
	r.request()
	if err := r.h.S.Close(); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	r.decide <- func(req *tcp.ForwardRequest) {
		_, err := req.Accept(context.Background())
		errs <- err
	}
	if err := <-errs; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
}

// forwardedPeer opens a connection through the forwarder from a peer with
// timestamps, and returns the peer and the accepted connection.
func (r *fwdRig) forwardedPeer(isn uint32) (*peer, *tcp.Conn) {
	r.t.Helper()
	p := &peer{rig: r.rig, addr: peerAP, stack: foreignAP, nxt: isn, wnd: 65535, opts: tsOnly}
	s := p.seg(rawtest.SYN, nil)
	s.Ack, s.Opts = 0, rawtest.TCPOpts{HasTimestamp: true, TSVal: 1000}
	p.inject(s)
	p.nxt++
	r.request()
	conns := make(chan *tcp.Conn, 1)
	r.decide <- func(req *tcp.ForwardRequest) {
		c, _ := req.Accept(context.Background())
		conns <- c
	}
	sa := p.nextSeg()
	p.iss, p.rcv = sa.Seq, sa.Seq+1
	p.ack()
	c := <-conns
	if c == nil {
		r.t.Fatal("Accept failed")
	}
	return p, c
}

// RFC 6191 through the forwarder: a newer SYN for a forwarded connection in
// TIME-WAIT ends it and goes to the hook, and the new incarnation starts
// beyond the old one's sequence space.
func TestForwarderReopensFromTimeWait(t *testing.T) {
	r := newFwdRig(t, tcp.Config{})
	p, c := r.forwardedPeer(peerISN)
	p.sendTS(rawtest.ACK, nil, 1001)
	c.Close()
	p.expect(rawtest.FIN|rawtest.ACK, p.rcv, p.nxt, 0)
	p.send(rawtest.FIN|rawtest.ACK, nil)
	p.expectACK()
	p.waitState("TIME-WAIT")
	oldNxt := p.rcv
	p.inject(rawtest.TCPSegment{Seq: p.nxt + 100000, Flags: rawtest.SYN, Window: 65535, Opts: rawtest.TCPOpts{HasTimestamp: true, TSVal: 2000}})
	r.request()
	r.decide <- func(req *tcp.ForwardRequest) { req.Accept(context.Background()) }
	sa := p.nextSeg()
	if sa.Flags != rawtest.SYN|rawtest.ACK || sa.Seq != oldNxt+65535+2 {
		t.Errorf("got %v, want a SYN-ACK at ISS %d (the old SND.NXT + 65537)", sa, oldNxt+65535+2)
	}
	if n := r.counter("TWReopened"); n != 1 {
		t.Errorf("TWReopened = %d, want 1", n)
	}
}

// An ECN-setup SYN (RFC 3168 6.1.1) is answered as a listener answers it:
// the forwarded connection is a passive open, not a simultaneous one.
func TestForwarderAcceptAnswersAnECNSetupSYN(t *testing.T) {
	r := newFwdRig(t, tcp.Config{})
	r.h.Inject(r.h.TCPFrame(t, rawtest.TCPSegment{Src: peerAP, Dst: foreignAP, Seq: peerISN,
		Flags: rawtest.SYN | rawtest.ECE | rawtest.CWR, Window: 64240, Opts: synOpts}))
	r.request()
	r.decide <- func(req *tcp.ForwardRequest) { req.Accept(context.Background()) }
	if sa := r.nextSeg(); sa.Flags != rawtest.SYN|rawtest.ACK|rawtest.ECE {
		t.Errorf("got %v, want an ECN-setup SYN-ACK (SYN, ACK, ECE)", sa)
	}
}
