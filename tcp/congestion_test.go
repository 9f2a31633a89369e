package tcp_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// Congestion control seen from outside: the algorithm in the connection
// table, its reductions in the sender's recovery, the per-connection
// switch, and transfers through a faulty link with each algorithm.

// The default is CUBIC: a fast retransmit sets ssthresh = 0.7 cwnd and
// cwnd = ssthresh (RFC 9438 section 4.6), not NewReno's FlightSize/2 +
// 3 MSS. The connection's congestion control can be switched in the middle
// of recovery: the new one takes the window in force and finishes the
// recovery with its own rules (here NewReno's deflation, RFC 6582 3.2
// step 6).
func TestCubicFastRetransmitAndSwitchMidRecovery(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1000})
	if ci := p.info(); ci.Congestion != "cubic" || ci.CWnd != 10000 {
		t.Fatalf("new connection: congestion %q cwnd %d, want cubic and 10 segments", ci.Congestion, ci.CWnd)
	}
	write(t, c, pattern(14000))
	una := p.rcv
	for range 10 {
		p.expectData(1000, false)
	}
	seg := func(i int) uint32 { return una + uint32(i)*1000 }
	// Segments 1 and 3 are lost; the ACK of segment 0 grows the window to
	// 11 segments (slow start), two duplicates bring limited transmit, the
	// third a fast retransmit.
	p.rcv = seg(1)
	p.ack()
	p.expect(A, seg(10), p.nxt, 1000)
	p.expect(A, seg(11), p.nxt, 1000)
	p.ack()
	p.expect(A, seg(12), p.nxt, 1000)
	p.ack()
	p.expect(A|P, seg(13), p.nxt, 1000)
	p.ack()
	p.expect(A, seg(1), p.nxt, 1000)
	p.rcv = seg(1)
	r.nothing()
	if ci := p.info(); ci.SSThresh != 7700 || ci.CWnd != 7700 {
		t.Errorf("fast retransmit at cwnd 11000: ssthresh %d cwnd %d, want 7700 7700", ci.SSThresh, ci.CWnd)
	}
	// A partial ACK of two segments deflates the window by one (RFC 6582
	// 3.2 step 5) and retransmits the next hole; then the switch.
	p.rcv = seg(3)
	p.ack()
	p.expect(A, seg(3), p.nxt, 1000)
	r.nothing()
	if err := c.SetCongestion("newreno"); err != nil {
		t.Fatal(err)
	}
	if ci := p.info(); ci.Congestion != "newreno" || ci.SSThresh != 7700 || ci.CWnd != 6700 {
		t.Errorf("after the switch: %q ssthresh %d cwnd %d, want newreno 7700 6700", ci.Congestion, ci.SSThresh, ci.CWnd)
	}
	p.rcv = seg(14)
	p.ack()
	r.nothing()
	if ci := p.info(); ci.SSThresh != 7700 || ci.CWnd != 2000 {
		t.Errorf("after recovery: ssthresh %d cwnd %d, want 7700 and min(ssthresh, 0+MSS+MSS) = 2000", ci.SSThresh, ci.CWnd)
	}
	// NewReno's slow start from there: two segments, then four.
	write(t, c, pattern(6000))
	p.expectData(1000, false)
	p.expectData(1000, false)
	r.nothing()
	p.ack()
	for range 3 {
		p.expectData(1000, false)
	}
	p.expectData(1000, true)
	r.nothing()
}

// A timeout under CUBIC: ssthresh = 0.7 cwnd, one segment in flight
// (RFC 9438 section 4.8).
func TestCubicTimeoutWindow(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1000})
	write(t, c, pattern(3000))
	una := p.rcv
	for range 2 {
		p.expectData(1000, false)
	}
	p.expectData(1000, true)
	p.expectAfter(rtoMin, una, 1000)
	r.nothing()
	if ci := p.info(); ci.SSThresh != 7000 || ci.CWnd != 1000 {
		t.Errorf("after a timeout at cwnd 10000: ssthresh %d cwnd %d, want 7000 1000", ci.SSThresh, ci.CWnd)
	}
}

// SetCongestion chooses per connection, before data flows; an unknown
// name is refused with ENOENT, as Linux's TCP_CONGESTION, and changes
// nothing.
func TestSetCongestion(t *testing.T) {
	a, b := pair(t, stack.Config{TCP: tcp.Config{Congestion: "newreno"}}, nil)
	echoServer(t, b)
	c := dial(t, a, 7)
	defer c.Close()
	if got := c.Info().Congestion; got != "newreno" {
		t.Fatalf("stack configured for newreno: connection uses %q", got)
	}
	if err := c.SetCongestion("cubic"); err != nil {
		t.Fatal(err)
	}
	err := c.SetCongestion("bbr")
	var oe *net.OpError
	if !errors.As(err, &oe) || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("SetCongestion(bbr) = %v, want a *net.OpError wrapping ENOENT", err)
	}
	if got := c.Info().Congestion; got != "cubic" {
		t.Errorf("after SetCongestion(cubic) and a refused name: %q", got)
	}
	transfer(t, c, 1<<20, a, b)
	for _, ci := range b.Connections() {
		if ci.State != "LISTEN" && ci.Congestion != "newreno" {
			t.Errorf("the server's connection %v-%v uses %q, want the stack's newreno", ci.Local, ci.Remote, ci.Congestion)
		}
	}
}

// Both algorithms carry a transfer through loss, reordering, duplication
// and corruption, each of them in both directions of the echo.
func TestEchoThroughFaultsByCongestion(t *testing.T) {
	for _, cc := range []string{"cubic", "newreno"} {
		for _, spec := range []string{"loss=0.01,reorder=0.01,dup=0.01,seed=3", "loss=0.05,reorder=0.02,dup=0.02,corrupt=0.01,seed=4"} {
			t.Run(cc+"/"+spec, func(t *testing.T) {
				cfg, err := fault.ParseSpec(spec)
				if err != nil {
					t.Fatal(err)
				}
				a, b := pair(t, stack.Config{TCP: tcp.Config{Congestion: cc, RTOMin: 20 * time.Millisecond, RTOInitial: 100 * time.Millisecond}}, &cfg)
				echoServer(t, b)
				c := dial(t, a, 7)
				if got := c.Info().Congestion; got != cc {
					t.Errorf("connection uses %q, want %q", got, cc)
				}
				start := time.Now()
				transfer(t, c, 4<<20, a, b)
				ci := c.Info()
				c.Close()
				ca := a.Counters()
				t.Logf("%v; a: cwnd %d ssthresh %d, retrans %d fast %d timeouts %d, HyStart++ delay %d CSS exits %d",
					time.Since(start).Round(time.Millisecond), ci.CWnd, ci.SSThresh, ca["TCP.RetransSegs"], ca["TCP.FastRetrans"],
					ca["TCP.Timeouts"], ca["TCP.HyStartDelayDetect"], ca["TCP.HyStartCSSExits"])
			})
		}
	}
}

// Found by the echo over the in-memory pipe, where CUBIC's larger windows
// overflow the pipe's queue: the peer's window closed with part of what
// the stack sent lost, so the peer's RCV.NXT lies below the stack's
// SND.MAX. With a zero window the peer accepts only a segment at its
// RCV.NXT (RFC 9293 3.10.7.4); the stack's ACKs of the peer's data must
// carry that, SND.UNA + SND.WND, not SND.MAX, or the peer drops them and
// both sides wait on backed-off timers (Linux's tcp_acceptable_seq).
func TestACKSequenceWithinAClosedWindow(t *testing.T) {
	r, _, p, edge := closedBelowSndMax(t)
	p.send(A, pattern(100))
	p.send(A|P, pattern(100))
	p.expect(A, edge, p.nxt, 0)
	r.nothing()
}

// closedBelowSndMax sends three segments of 1000 bytes to a peer that
// then holds the first alone, its window full: the window's right edge,
// which it returns, lies 2000 bytes below SND.MAX. The peer has not said
// so yet.
func closedBelowSndMax(t *testing.T) (*rig, *tcp.Conn, *peer, uint32) {
	t.Helper()
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1000})
	write(t, c, pattern(3000))
	una := p.rcv
	p.expectData(1000, false)
	p.expectData(1000, false)
	p.expectData(1000, true)
	p.rcv, p.wnd = una+1000, 0
	return r, c, p, p.rcv
}

// The same holds for a reset: an abort while the peer's window is closed
// below SND.MAX resets at SND.UNA + SND.WND, as Linux's
// tcp_send_active_reset does, where a reset at SND.MAX falls outside the
// window and is dropped, leaving the peer to wait for data that never
// comes (a gateway closing a relay blocked on a guest that reads nothing
// left the kernel guest without its reset).
func TestResetSequenceWithinAClosedWindow(t *testing.T) {
	r, c, p, edge := closedBelowSndMax(t)
	p.ack()
	p.settle()
	c.SetLinger(0)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	p.expect(R|A, edge, p.nxt, 0)
	p.waitState("")
	r.nothing()
}

// Slow start doubles the window each round also when the round's ACKs
// arrive together and are taken as one batch, nothing sent between them:
// the window counts as used while half of it was in flight at some point
// of the window of data, not by the flight before each ACK, which the
// batch lowers ACK by ACK (a 100 ms path whose ACKs came in bursts grew
// 1.4 times a round).
func TestSlowStartGrowsOnABatchOfACKs(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1000})
	write(t, c, pattern(40000))
	for range 10 {
		p.expectData(1000, false)
	}
	// Five ACKs of two segments each, in one batch.
	end := p.rcv
	var acks []rawtest.TCPSegment
	for p.rcv = end - 10000; p.rcv != end; {
		p.rcv += 2000
		acks = append(acks, p.seg(rawtest.ACK, nil))
	}
	p.inject(acks...)
	r.settle()
	if ci := p.info(); ci.CWnd != 20000 {
		t.Errorf("after a batch of ACKs for a whole initial window: cwnd %d, want 20000 (doubled)", ci.CWnd)
	}
}
