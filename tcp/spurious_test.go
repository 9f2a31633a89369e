package tcp_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Retransmissions that repair nothing are counted (spurious.go): a D-SACK's
// segments, a tail loss probe whose original arrived, a timeout whose
// original's ACK comes back.

// RFC 2883 section 4, RFC 3708 section 3: each D-SACK block counts once
// as DSACKRecv and for the segments it covers as DSACKRecvSegs.
func TestDSACKCountsItsSegments(t *testing.T) {
	tests := []struct {
		name     string
		ack      int
		blocks   [][2]int
		wantSegs int64
	}{
		{"one segment below the cumulative ACK", 3, [][2]int{{1, 2}}, 1},
		{"three segments below it", 5, [][2]int{{0, 3}}, 3},
		{"one inside the second block", 0, [][2]int{{3, 4}, {2, 5}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSACKFlight(t, tcp.Config{})
			f.sack(tt.ack, tt.blocks...)
			f.settle()
			if n := f.counter("DSACKRecv"); n != 1 {
				t.Errorf("DSACKRecv = %d, want 1", n)
			}
			if n := f.counter("DSACKRecvSegs"); n != tt.wantSegs {
				t.Errorf("DSACKRecvSegs = %d, want %d", n, tt.wantSegs)
			}
		})
	}
}

// RFC 8985 section 7.4: a probe that resent the last segment, whose
// original had arrived after all, comes back D-SACKed: counted as a
// spurious probe, not as one that repaired a loss. One whose ACK goes
// beyond it without a D-SACK repaired one, and is not spurious.
func TestTailLossProbeWhoseOriginalArrivedIsSpurious(t *testing.T) {
	for _, tt := range []struct {
		name                string
		dsack               bool
		spurious, recovered int64
	}{
		{"D-SACKed: both copies arrived", true, 1, 0},
		{"acknowledged: the probe repaired the tail", false, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{Congestion: "newreno"})
			c, p := r.acceptedAfter(rawOptsSACK, 100*time.Millisecond)
			write(t, c, pattern(3000))
			una := p.rcv
			for i := range 3 {
				p.expectData(1000, i == 2)
			}
			p.expectAfter(202*time.Millisecond, una+2000, 1000) // the probe: segment 2 again
			s := p.seg(rawtest.ACK, nil)
			s.Ack = una + 3000
			if tt.dsack {
				s.Opts.SACK[0] = [2]uint32{una + 2000, una + 3000}
				s.Opts.NumSACK = 1
			}
			p.inject(s)
			if !tt.dsack {
				// The episode ends with an ACK beyond the probe.
				write(t, c, pattern(1000))
				p.expectData(1000, true)
				p.ack()
			}
			p.settle()
			if n := r.counter("LossProbes"); n != 1 {
				t.Errorf("LossProbes = %d, want 1", n)
			}
			if n := r.counter("LossProbeSpurious"); n != tt.spurious {
				t.Errorf("LossProbeSpurious = %d, want %d", n, tt.spurious)
			}
			if n := r.counter("LossProbeRecovery"); n != tt.recovered {
				t.Errorf("LossProbeRecovery = %d, want %d", n, tt.recovered)
			}
			if n, want := r.counter("DSACKRecvSegs"), tt.spurious; n != want {
				t.Errorf("DSACKRecvSegs = %d, want %d", n, want)
			}
		})
	}
}

// RFC 3522: after a timeout, the first ACK of new data that echoes the
// original's timestamp shows the original arrived: the timeout was
// spurious. One that echoes the retransmission's is a timeout that
// repaired a loss.
func TestSpuriousRTOFoundByTheEchoedTimestamp(t *testing.T) {
	for _, tt := range []struct {
		name     string
		echoOrig bool
		want     int64
	}{
		{"the original's echoed: spurious", true, 1},
		{"the retransmission's echoed: a loss repaired", false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{DisableRACK: true})
			opts := rawtest.TCPOpts{MSS: 1000, SACKPermitted: true, HasTimestamp: true, TSVal: 100}
			c, p := r.acceptedAfter(opts, 100*time.Millisecond)
			const n = 1000 - 12 // the MSS less the timestamps
			write(t, c, pattern(n))
			una := p.rcv
			orig := p.expectData(n, true)
			rto := p.info().RTO
			re := p.expectAfter(rto, una, n)
			if n := r.counter("Timeouts"); n != 1 {
				t.Fatalf("Timeouts = %d, want 1", n)
			}
			if re.Opts.TSVal == orig.Opts.TSVal {
				t.Fatalf("the retransmission carries the original's timestamp %d", orig.Opts.TSVal)
			}
			s := p.seg(rawtest.ACK, nil)
			s.Ack = una + n
			s.Opts.TSEcr = re.Opts.TSVal
			if tt.echoOrig {
				s.Opts.TSEcr = orig.Opts.TSVal
			}
			p.inject(s)
			p.settle()
			if n := r.counter("SpuriousRTOs"); n != tt.want {
				t.Errorf("SpuriousRTOs = %d, want %d", n, tt.want)
			}
		})
	}
}

// The receiver's side: a duplicate below RCV.NXT is reported in a D-SACK
// counted as DSACKOldSent, one of data held out of order as DSACKOfoSent.
func TestDSACKSentCounted(t *testing.T) {
	r := newRig(t, tcp.Config{})
	_, p := r.accepted(rawtest.TCPOpts{MSS: 1460, SACKPermitted: true})
	base := p.nxt
	seg := func(off, n uint32) rawtest.TCPSegment {
		s := p.seg(rawtest.ACK, pattern(int(n)))
		s.Seq = base + off
		return s
	}
	p.inject(seg(100, 100)) // held beyond the hole at [0,100)
	p.nextSeg()
	p.inject(seg(100, 100)) // its duplicate
	p.nextSeg()
	p.inject(seg(0, 100)) // the hole filled
	p.nextSeg()
	p.inject(seg(0, 100)) // an old duplicate
	p.nextSeg()
	if n := r.counter("DSACKOfoSent"); n != 1 {
		t.Errorf("DSACKOfoSent = %d, want 1", n)
	}
	if n := r.counter("DSACKOldSent"); n != 1 {
		t.Errorf("DSACKOldSent = %d, want 1", n)
	}
}

// In SACK recovery the retransmission of the hole at SND.UNA restarts the
// retransmission timer, as Linux's does: its ACK is a round trip away, and
// a timer left running from the original's send would fire while that ACK
// travels whenever the RTO is near two round trips, a spurious timeout.
func TestHoleRetransmissionRestartsTheRetransmissionTimer(t *testing.T) {
	f := newSACKFlight(t, tcp.Config{})
	rto := f.info().RTO
	f.sack(0, [2]int{1, 4}) // at 100 ms: segment 0 lost, resent now
	if got := f.sentSeqs(); len(got) == 0 || got[0] != 0 {
		t.Fatalf("on entering recovery the stack sent %v, want segment 0 first", got)
	}
	f.advance(rto - 100*time.Millisecond) // the original's timer would fire here
	f.settle()
	if n := f.counter("Timeouts"); n != 0 {
		t.Fatalf("Timeouts = %d an RTO after the original, %v after its retransmission", n, rto-100*time.Millisecond)
	}
	f.advance(100*time.Millisecond - time.Millisecond)
	f.settle()
	if n := f.counter("Timeouts"); n != 0 {
		t.Fatalf("Timeouts = %d before an RTO had passed since the retransmission", n)
	}
	f.advance(time.Millisecond)
	f.settle()
	if n := f.counter("Timeouts"); n != 1 {
		t.Errorf("Timeouts = %d an RTO after the retransmission, want 1", n)
	}
}
