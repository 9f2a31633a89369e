package tcp_test

import (
	"context"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Loss recovery: the retransmission timer (RFC 6298), fast retransmit and
// NewReno fast recovery (RFC 5681 3.2, RFC 6582), limited transmit (RFC
// 3042), and giving up (RFC 9293 3.8.3, RFC 1122 4.2.3.5).

// acceptedAfter is accepted with the peer's ACK of the SYN-ACK rtt after
// it: the stack's first RTT sample.
func (r *rig) acceptedAfter(opts rawtest.TCPOpts, rtt time.Duration) (*tcp.Conn, *peer) {
	r.t.Helper()
	l := r.listen(0)
	p := r.synPeer(peerPort, peerISN, opts)
	s := p.seg(S, nil)
	s.Opts = opts
	p.inject(s)
	p.nxt++
	sa := p.nextSeg()
	p.iss, p.rcv = sa.Seq, sa.Seq+1
	p.advance(rtt)
	p.ack()
	return acceptOne(r.t, l), p
}

// expectAfter checks that nothing comes until d has passed on the virtual
// clock, and then a segment of n bytes at seq.
func (p *peer) expectAfter(d time.Duration, seq uint32, n int) rawtest.TCPSegment {
	p.t.Helper()
	p.advance(d - time.Millisecond)
	p.nothing()
	p.advance(time.Millisecond)
	s := p.nextSeg()
	if s.Flags&(S|F|R) != 0 && n > 0 || s.Seq != seq || len(s.Payload) != n {
		p.t.Fatalf("after %v: %v, want %d bytes at %d", d, s, n, seq)
	}
	return s
}

// The SYN is retransmitted after the initial RTO of 1 s, then 2 s, 4 s
// (RFC 6298 2.1 and 5.5); when SynRetries are spent, Dial fails with
// ETIMEDOUT.
func TestSynRetransmissionsThenTimeout(t *testing.T) {
	r := newRig(t, tcp.Config{SynRetries: 2})
	raddr := netip.AddrPortFrom(rawtest.PeerAddr, 80)
	ch := r.dial(context.Background(), raddr)
	syn := r.nextSeg()
	p := &peer{rig: r, addr: raddr, stack: syn.Src}
	for _, d := range []time.Duration{time.Second, 2 * time.Second} {
		s := p.expectAfter(d, syn.Seq, 0)
		if s.Flags != S {
			t.Fatalf("retransmission %v, want the SYN", s)
		}
	}
	p.advance(4*time.Second - time.Millisecond)
	select {
	case res := <-ch:
		t.Fatalf("dial returned early: %v", res.err)
	default:
	}
	p.advance(time.Millisecond)
	res := waitDial(t, ch)
	if !isErr(res.err, syscall.ETIMEDOUT) {
		t.Fatalf("dial: %v, want ETIMEDOUT", res.err)
	}
	p.waitState("")
	r.nothing() // no reset: the peer never spoke
}

// RFC 6298 section 2: the first sample sets SRTT = R, RTTVAR = R/2; the
// next SRTT = 7/8 SRTT + 1/8 R', RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R'|;
// RTO = SRTT + max(G, 4 RTTVAR), at least RTOMin. The timer then backs off
// by doubling (5.5), and an ACK of a retransmitted segment gives no sample
// (Karn's rule, 3).
func TestRetransmissionTimer(t *testing.T) {
	const mss = 1000
	r := newRig(t, tcp.Config{})
	c, p := r.acceptedAfter(rawtest.TCPOpts{MSS: mss}, 100*time.Millisecond)
	ci := p.info()
	if ci.RTT != 100*time.Millisecond || ci.RTTVar != 50*time.Millisecond || ci.RTO != 300*time.Millisecond {
		t.Fatalf("after the first sample of 100ms: srtt %v rttvar %v rto %v, want 100ms 50ms 300ms", ci.RTT, ci.RTTVar, ci.RTO)
	}
	write(t, c, pattern(mss))
	p.expectData(mss, true)
	p.advance(200 * time.Millisecond)
	p.ack()
	p.settle()
	ci = p.info()
	const srtt, rttvar = 112500 * time.Microsecond, 62500 * time.Microsecond
	rto := srtt + 4*rttvar
	if ci.RTT != srtt || ci.RTTVar != rttvar || ci.RTO != rto {
		t.Fatalf("after a sample of 200ms: srtt %v rttvar %v rto %v, want %v %v %v", ci.RTT, ci.RTTVar, ci.RTO, srtt, rttvar, rto)
	}
	// A segment the peer never acknowledges: retransmitted after RTO, then
	// 2 RTO, then 4 RTO.
	write(t, c, pattern(mss))
	first := p.expectData(mss, true)
	for _, d := range []time.Duration{rto, 2 * rto, 4 * rto} {
		p.expectAfter(d, first.Seq, mss)
	}
	if ci := p.info(); ci.RTO != 8*rto {
		t.Errorf("RTO %v after three timeouts, want %v", ci.RTO, 8*rto)
	}
	// Karn: the ACK of the retransmitted segment, however late, is no
	// sample; the backed-off RTO stays until a sample comes.
	p.advance(time.Second)
	p.ack()
	p.settle()
	if ci := p.info(); ci.RTT != srtt || ci.RTTVar != rttvar || ci.RTO != 8*rto {
		t.Errorf("after the ACK of a retransmission: srtt %v rttvar %v rto %v, want %v %v %v", ci.RTT, ci.RTTVar, ci.RTO, srtt, rttvar, 8*rto)
	}
	if n := r.counter("Timeouts"); n != 3 {
		t.Errorf("Timeouts = %d, want 3", n)
	}
}

// RTOMin bounds the timer below (RFC 6298 2.4 allows it; Linux uses
// 200 ms), and only below.
func TestRTOMin(t *testing.T) {
	tests := []struct {
		name   string
		rtoMin time.Duration
		rtt    time.Duration
		rto    time.Duration
	}{
		{"a 1ms RTT waits RTOMin", 300 * time.Millisecond, time.Millisecond, 300 * time.Millisecond},
		{"a 100ms RTT is above a 50ms RTOMin", 50 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{RTOMin: tt.rtoMin})
			c, p := r.acceptedAfter(rawtest.TCPOpts{}, tt.rtt)
			write(t, c, pattern(10))
			s := p.expectData(10, true)
			p.expectAfter(tt.rto, s.Seq, 10)
		})
	}
}

// recoveryConn returns a connection with an MSS of 1000 and an initial
// window of ten segments, 14 segments written, the first 10 in flight,
// and their sequence numbers.
func recoveryConn(t *testing.T) (*rig, *tcp.Conn, *peer, uint32) {
	r := newRig(t, tcp.Config{Congestion: "newreno"})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1000})
	write(t, c, pattern(14000))
	una := p.rcv
	for range 10 {
		p.expectData(1000, false)
	}
	r.nothing()
	return r, c, p, una
}

// Three duplicate ACKs (RFC 5681 3.2, RFC 6582 3.2): on the first two
// limited transmit sends a new segment each (RFC 3042); on the third the
// first unacknowledged segment, exactly, is retransmitted, ssthresh =
// FlightSize/2 and cwnd = ssthresh + 3 MSS. A partial ACK retransmits the
// next hole at once; the full ACK ends recovery with cwnd deflated to
// min(ssthresh, FlightSize + MSS).
func TestFastRetransmitAndRecovery(t *testing.T) {
	r, _, p, una := recoveryConn(t)
	seg := func(i int) uint32 { return una + uint32(i)*1000 }
	// Segment 1 and 3 are lost. The ACK of segment 0 opens the window by
	// one MSS (slow start): two new segments.
	p.rcv = seg(1)
	p.ack()
	p.expect(A, seg(10), p.nxt, 1000)
	p.expect(A, seg(11), p.nxt, 1000)
	r.nothing()
	// Duplicates one and two: limited transmit.
	p.ack()
	p.expect(A, seg(12), p.nxt, 1000)
	r.nothing()
	p.ack()
	p.expect(A|P, seg(13), p.nxt, 1000)
	r.nothing()
	// Duplicate three: fast retransmit of segment 1 alone.
	p.ack()
	p.expect(A, seg(1), p.nxt, 1000)
	p.rcv = seg(1) // the retransmission is on its way
	r.nothing()
	const flight = 13000
	ci := p.info()
	if ci.SSThresh != flight/2 || ci.CWnd != flight/2+3*1000 {
		t.Errorf("ssthresh %d cwnd %d, want %d %d", ci.SSThresh, ci.CWnd, flight/2, flight/2+3000)
	}
	// A fourth duplicate inflates cwnd and sends nothing (all is sent).
	p.ack()
	r.nothing()
	// Partial ACK up to segment 3: retransmitted at once.
	p.rcv = seg(3)
	p.ack()
	p.expect(A, seg(3), p.nxt, 1000)
	r.nothing()
	// The full ACK ends recovery.
	p.rcv = seg(14)
	p.ack()
	r.nothing()
	ci = p.info()
	if ci.SSThresh != flight/2 || ci.CWnd != 2000 {
		t.Errorf("after recovery: ssthresh %d cwnd %d, want %d and min(ssthresh, 0+MSS+MSS) = 2000", ci.SSThresh, ci.CWnd, flight/2)
	}
	for name, want := range map[string]int64{"FastRetrans": 1, "PartialAcks": 1, "DupAcks": 4, "Timeouts": 0} {
		if n := r.counter(name); n != want {
			t.Errorf("%s = %d, want %d", name, n, want)
		}
	}
}

// After a timeout the sender goes back to SND.UNA with a window of one
// segment (RFC 5681 3.1, RFC 6298 5.4); an ACK it sends meanwhile carries
// SND.MAX, which the peer has seen, not SND.NXT, which it has passed.
func TestTimeoutGoesBackToSndUna(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1000})
	write(t, c, pattern(3000))
	una := p.rcv
	p.expectData(1000, false)
	p.expectData(1000, false)
	p.expectData(1000, true)
	sndMax := p.rcv
	p.expectAfter(200*time.Millisecond, una, 1000)
	r.nothing() // cwnd is one segment
	// The peer, which has seen up to SND.MAX, sends something that needs
	// an ACK at once (a segment beyond its window's... an out-of-window
	// one): the ACK's sequence number is SND.MAX.
	p.inject(rawtest.TCPSegment{Seq: p.nxt - 1, Ack: una, Flags: A, Window: p.wnd})
	p.expect(A, sndMax, p.nxt, 0)
	r.nothing()
	// The ACK of the first segment lets two more go (slow start).
	p.rcv = una + 1000
	p.ack()
	p.expect(A, una+1000, p.nxt, 1000)
	p.expect(A|P, una+2000, p.nxt, 1000)
	r.nothing()
	if n := r.counter("Timeouts"); n != 1 {
		t.Errorf("Timeouts = %d, want 1", n)
	}
}

// When Retries retransmissions go unanswered the connection is aborted
// with a reset and ETIMEDOUT (RFC 9293 3.8.3 R2, Linux's tcp_retries2).
func TestRetriesExhaustedTimesOut(t *testing.T) {
	const rto = 100 * time.Millisecond
	r := newRig(t, tcp.Config{Retries: 3, RTOMin: rto})
	c, p := r.accepted(rawtest.TCPOpts{})
	read := readAsync(c, 10)
	write(t, c, pattern(10))
	s := p.expectData(10, true)
	for _, d := range []time.Duration{rto, 2 * rto, 4 * rto} {
		p.expectAfter(d, s.Seq, 10)
	}
	p.advance(8*rto - time.Millisecond)
	p.nothing()
	p.advance(time.Millisecond)
	p.expect(R|A, s.Seq+10, p.nxt, 0)
	if res := wait(t, read); !isErr(res.err, syscall.ETIMEDOUT) {
		t.Errorf("read: %v, want ETIMEDOUT", res.err)
	}
	if res := wait(t, writeAsync(c, []byte("x"))); !isErr(res.err, syscall.ETIMEDOUT) {
		t.Errorf("write: %v, want ETIMEDOUT", res.err)
	}
	p.waitState("")
	if n := r.counter("TimeoutAborts"); n != 1 {
		t.Errorf("TimeoutAborts = %d, want 1", n)
	}
}

// RTOMax bounds the backoff (RFC 6298 2.5 allows a maximum; Linux's is
// 120 s).
func TestRTOMax(t *testing.T) {
	r := newRig(t, tcp.Config{RTOMax: 500 * time.Millisecond})
	c, p := r.accepted(rawtest.TCPOpts{})
	write(t, c, pattern(10))
	s := p.expectData(10, true)
	for _, d := range []time.Duration{rtoMin, 2 * rtoMin, 500 * time.Millisecond, 500 * time.Millisecond} {
		p.expectAfter(d, s.Seq, 10)
	}
}

// RFC 6298 5.7: when the SYN had to be retransmitted and no RTT sample
// exists, the RTO for data is 3 s.
func TestRTOIsThreeSecondsAfterARetransmittedSYN(t *testing.T) {
	r := newRig(t, tcp.Config{})
	raddr := netip.AddrPortFrom(rawtest.PeerAddr, 80)
	ch := r.dial(context.Background(), raddr)
	syn := r.nextSeg()
	p := &peer{rig: r, addr: raddr, stack: syn.Src, iss: syn.Seq, rcv: syn.Seq + 1, nxt: peerISN, wnd: 65535}
	p.expectAfter(time.Second, syn.Seq, 0)
	p.send(S|A, nil)
	p.expectACK()
	res := waitDial(t, ch)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if ci := p.info(); ci.RTO != 3*time.Second || ci.RTT != 0 {
		t.Errorf("RTO %v, RTT %v after a retransmitted SYN, want 3s and no sample", ci.RTO, ci.RTT)
	}
	write(t, res.c, pattern(10))
	s := p.expectData(10, true)
	p.expectAfter(3*time.Second, s.Seq, 10)
}

// Outside recovery, "recover" (RFC 6582) stays just behind SND.UNA: left
// where the handshake or the last recovery put it, 2 GiB sent without a
// loss would put it 2^31 behind, where sequence arithmetic reads it as
// ahead and no duplicate ACK would ever start a fast retransmit again.
// After a timeout it holds at SND.MAX until the ACKs pass it (step 1 of
// RFC 6582 3.2 after an RTO).
func TestRecoverFollowsSndUnaOutsideRecovery(t *testing.T) {
	r, c, p, una := recoveryConn(t)
	seg := func(i int) uint32 { return una + uint32(i)*1000 }
	for i := 1; i <= 3; i++ {
		p.rcv = seg(i)
		p.ack()
		r.sent() // slow start's new segments
		if got := tcp.RecoverPoint(c); got != seg(i)-1 {
			t.Fatalf("after the ACK of %d: recover = %d, want SND.UNA-1 = %d", seg(i), got, seg(i)-1)
		}
	}
	// A timeout: recover = SND.MAX, and an ACK below it leaves it there.
	p.advance(p.info().RTO)
	r.sent()
	sndMax := tcp.RecoverPoint(c)
	if sndMax == seg(3)-1 {
		t.Fatalf("after a timeout: recover = %d, still SND.UNA-1", sndMax)
	}
	p.rcv = seg(4)
	p.ack()
	r.sent()
	if got := tcp.RecoverPoint(c); got != sndMax {
		t.Fatalf("after a timeout and an ACK below SND.MAX: recover = %d, want %d", got, sndMax)
	}
}
