package tcp_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Explicit Congestion Notification (RFC 3168): negotiation on the SYNs
// (section 6.1.1), ECT on new data only (6.1.4-6.1.6), CE echoed with ECE
// until CWR (6.1.3), and ECE answered by one window reduction per window
// and a CWR (6.1.2).

const (
	ECE, CWR = rawtest.ECE, rawtest.CWR
	ect0, ce = 2, 3 // ECN field values
)

// dialedECN is dialed with the SYN-ACK carrying synAckFlags beyond SYN and
// ACK; it returns the SYN the stack sent too.
func (r *rig) dialedECN(synAckFlags uint8) (*tcp.Conn, *peer, rawtest.TCPSegment) {
	r.t.Helper()
	raddr := netip.AddrPortFrom(rawtest.PeerAddr, 80)
	ch := r.dial(context.Background(), raddr)
	syn := r.nextSeg()
	p := &peer{rig: r, addr: raddr, stack: syn.Src, iss: syn.Seq, rcv: syn.Seq + 1, nxt: peerISN, wnd: 65535}
	sa := p.seg(S|A|synAckFlags, nil)
	sa.Opts = rawtest.TCPOpts{MSS: 1460}
	p.inject(sa)
	p.nxt++
	p.expectACK()
	res := waitDial(r.t, ch)
	if res.err != nil {
		r.t.Fatalf("dial: %v", res.err)
	}
	return res.c, p, syn
}

// acceptedECN runs a passive open whose SYN carries synFlags beyond SYN; it
// returns the SYN-ACK.
func (r *rig) acceptedECN(synFlags uint8) (*tcp.Conn, *peer, rawtest.TCPSegment) {
	r.t.Helper()
	l := r.listen(0)
	p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{MSS: 1460})
	s := p.seg(S|synFlags, nil)
	s.Opts = p.opts
	p.inject(s)
	p.nxt++
	sa := p.nextSeg()
	p.iss, p.rcv = sa.Seq, sa.Seq+1
	p.ack()
	return acceptOne(r.t, l), p, sa
}

func TestECNNegotiation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     tcp.ECNMode
		active   bool
		peer     uint8 // ECE and CWR on the peer's SYN or SYN-ACK
		wantOurs uint8 // ECE and CWR on our SYN or SYN-ACK
		want     bool
	}{
		{"passive by default: answers a setup SYN", tcp.ECNPassive, false, ECE | CWR, ECE, true},
		{"passive: a plain SYN gets a plain SYN-ACK", tcp.ECNPassive, false, 0, 0, false},
		{"passive: ECE alone is no setup SYN", tcp.ECNPassive, false, ECE, 0, false},
		{"off: the setup SYN is not answered", tcp.ECNOff, false, ECE | CWR, 0, false},
		{"passive: our SYN does not ask", tcp.ECNPassive, true, ECE, 0, false},
		{"on: our SYN asks, ECE answers", tcp.ECNOn, true, ECE, ECE | CWR, true},
		{"on: a plain SYN-ACK declines", tcp.ECNOn, true, 0, ECE | CWR, false},
		{"on: ECE with CWR is no answer", tcp.ECNOn, true, ECE | CWR, ECE | CWR, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{ECN: tc.mode})
			var p *peer
			var ours rawtest.TCPSegment
			if tc.active {
				_, p, ours = r.dialedECN(tc.peer)
			} else {
				_, p, ours = r.acceptedECN(tc.peer)
			}
			if got := ours.Flags & (ECE | CWR); got != tc.wantOurs {
				t.Errorf("our %v has [%s], want [%s]", ours, rawtest.FlagString(got), rawtest.FlagString(tc.wantOurs))
			}
			if ours.TOS&3 != 0 {
				t.Errorf("our %v is ECT: SYNs never are (section 6.1.1)", ours)
			}
			if got := p.info().ECN; got != tc.want {
				t.Errorf("ECN negotiated %v, want %v", got, tc.want)
			}
			if got, want := r.counter("ECNNegotiated"), map[bool]int64{true: 1}[tc.want]; got != want {
				t.Errorf("ECNNegotiated = %d, want %d", got, want)
			}
		})
	}
}

// Sections 6.1.4 and 6.1.5: new data is ECT(0); pure ACKs and
// retransmissions are not.
func TestECTOnNewDataOnly(t *testing.T) {
	r := newRig(t, tcp.Config{ECN: tcp.ECNOn})
	c, p, _ := r.dialedECN(ECE)
	write(t, c, pattern(1000))
	if s := p.expectData(1000, true); s.TOS&3 != ect0 {
		t.Errorf("new data %v, want ECT(0)", s)
	}
	d := p.seg(A, pattern(10)) // not acknowledging the data
	d.Ack = p.rcv - 1000
	p.inject(d)
	p.nxt += 10
	p.advance(delayedAck) // our ACK of it, delayed
	if s := p.expect(A, p.rcv, p.nxt, 0); s.TOS&3 != 0 {
		t.Errorf("pure ACK %v is ECT", s)
	}
	p.advance(time.Second) // the initial RTO: the data again
	s := p.nextSeg()
	if len(s.Payload) != 1000 || s.TOS&3 != 0 {
		t.Errorf("retransmission %v, want 1000 bytes, not ECT", s)
	}
}

// Section 6.1.3: a CE mark is echoed with ECE at once, and on every ACK
// after it until a segment with CWR arrives.
func TestCEEchoedUntilCWR(t *testing.T) {
	r := newRig(t, tcp.Config{ECN: tcp.ECNOn})
	_, p, _ := r.dialedECN(ECE)
	marked := p.seg(A, pattern(100))
	marked.TOS = ce
	p.inject(marked)
	p.nxt += 100
	p.expect(A|ECE, p.rcv, p.nxt, 0) // at once, not after the delayed ACK
	p.send(A, pattern(100))
	p.send(A, pattern(100))
	p.expect(A|ECE, p.rcv, p.nxt, 0) // every second segment: still echoing
	p.send(A|CWR, pattern(100))
	p.advance(delayedAck)
	p.expect(A, p.rcv, p.nxt, 0) // CWR ended the echo
	ci := p.info()
	if !ci.ECNSeen || r.counter("ECNCEReceived") != 1 {
		t.Errorf("ECNSeen %v, ECNCEReceived %d; want true, 1", ci.ECNSeen, r.counter("ECNCEReceived"))
	}
}

// Section 6.1.2: ECE halves the window once per window of data (NewReno's
// ssthresh = FlightSize/2); the first new data segment after the reduction
// carries CWR, and only an ECE acknowledging data sent after it reduces
// again. Nothing is retransmitted.
func TestECEReducesOncePerWindowThenCWR(t *testing.T) {
	r := newRig(t, tcp.Config{ECN: tcp.ECNOn, Congestion: "newreno"})
	c, p, _ := r.dialedECN(ECE)
	const mss = 1460
	write(t, c, pattern(20*mss))
	first := p.rcv
	for range 10 { // the initial window
		if s := p.expectData(mss, false); s.Flags&CWR != 0 {
			t.Fatalf("%v has CWR before any reduction", s)
		}
	}
	ackECE := func(segs int) {
		s := p.seg(A|ECE, nil)
		s.Ack = first + uint32(segs*mss)
		p.inject(s)
	}
	ackECE(1)
	r.settle()
	if ci := p.info(); ci.CWnd != 5*mss || ci.SSThresh != 5*mss {
		t.Fatalf("after ECE: cwnd %d, ssthresh %d; want both %d (half of 10 segments in flight)", ci.CWnd, ci.SSThresh, 5*mss)
	}
	// More echoes of the same window: no further reduction. Once 4
	// segments are in flight the fifth may go, the first after the
	// reduction: with CWR.
	for k := 2; k <= 6; k++ {
		ackECE(k)
	}
	s := p.nextSeg()
	if s.Seq != first+10*mss || s.Flags&CWR == 0 || s.TOS&3 != ect0 {
		t.Fatalf("first new data after the reduction %v, want seq %d with CWR, ECT(0)", s, first+10*mss)
	}
	for _, s := range p.sent() {
		if s.Flags&CWR != 0 || s.Seq < first+10*mss {
			t.Errorf("then %v: want new data without CWR", s)
		}
	}
	if got := r.counter("ECNReductions"); got != 1 {
		t.Fatalf("ECNReductions = %d after one window of echoes, want 1", got)
	}
	// An echo acknowledging the CWR segment is news: a second reduction,
	// and a CWR on the next new data again.
	ackECE(11)
	r.settle()
	if got := r.counter("ECNReductions"); got != 2 {
		t.Errorf("ECNReductions = %d after an echo of new data, want 2", got)
	}
	if got, want := r.counter("ECNCWRSent"), int64(2); got != want {
		t.Errorf("ECNCWRSent = %d, want %d: one per reduction", got, want)
	}
	if got := r.counter("RetransSegs"); got != 0 {
		t.Errorf("RetransSegs = %d: ECE is no loss", got)
	}
}

// A loss found in the window an ECE already reduced is the same congestion
// event (RFC 3168 6.1.2, "at most once per window of data"): the hole is
// retransmitted, but ssthresh stays where the ECE put it.
func TestLossAfterECEDoesNotReduceAgain(t *testing.T) {
	t.Run("NewReno fast retransmit", func(t *testing.T) { lossAfterECE(t, false) })
	t.Run("SACK recovery", func(t *testing.T) { lossAfterECE(t, true) })
}

func lossAfterECE(t *testing.T, sack bool) {
	r := newRig(t, tcp.Config{ECN: tcp.ECNOn, Congestion: "newreno"})
	var c *tcp.Conn
	var p *peer
	if sack {
		c, p = r.dialedECNSACK()
	} else {
		c, p, _ = r.dialedECN(ECE)
	}
	const mss = 1460
	write(t, c, pattern(20*mss))
	first := p.rcv
	for range 10 {
		p.expectData(mss, false)
	}
	ece := p.seg(A|ECE, nil)
	ece.Ack = first + mss
	p.inject(ece)
	r.settle()
	if ci := p.info(); ci.SSThresh != 5*mss {
		t.Fatalf("after ECE: ssthresh %d, want %d", ci.SSThresh, 5*mss)
	}
	// The second segment was lost: three duplicate ACKs of the first,
	// SACKing the third to fifth with SACK.
	for i := range 3 {
		d := p.seg(A, nil)
		d.Ack = first + mss
		if sack {
			d.Opts.SACK[0] = [2]uint32{first + 2*mss, first + uint32(3+i)*mss}
			d.Opts.NumSACK = 1
		}
		p.inject(d)
	}
	rexmit := false
	for _, s := range p.sent() {
		if s.Seq == first+mss && len(s.Payload) == mss {
			rexmit = true
		}
	}
	if !rexmit {
		t.Fatal("the hole was not retransmitted")
	}
	if ci := p.info(); ci.SSThresh != 5*mss {
		t.Errorf("after the loss: ssthresh %d, want %d still", ci.SSThresh, 5*mss)
	}
	r.wantCounters(map[string]int64{"FastRetrans": 1, "ECNReductions": 1, "ECNLossNoReduce": 1})
}

// dialedECNSACK is dialedECN with ECE and SACK-permitted on the SYN-ACK.
func (r *rig) dialedECNSACK() (*tcp.Conn, *peer) {
	r.t.Helper()
	raddr := netip.AddrPortFrom(rawtest.PeerAddr, 80)
	ch := r.dial(context.Background(), raddr)
	syn := r.nextSeg()
	p := &peer{rig: r, addr: raddr, stack: syn.Src, iss: syn.Seq, rcv: syn.Seq + 1, nxt: peerISN, wnd: 65535}
	sa := p.seg(S|A|ECE, nil)
	sa.Opts = rawtest.TCPOpts{MSS: 1460, SACKPermitted: true}
	p.inject(sa)
	p.nxt++
	p.expectACK()
	res := waitDial(r.t, ch)
	if res.err != nil {
		r.t.Fatalf("dial: %v", res.err)
	}
	return res.c, p
}
