package tcp_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/tcp"
)

// RACK-TLP (RFC 8985) on the connection of the SACK tests (sack_sender_test.go):
// MSS 1000, SRTT 100 ms, RTO 300 ms, segments 0-9 sent at time 0 and the
// clock at 100 ms.

// RFC 8985 section 6.2: with one segment SACKed above it, segment 0 is
// not lost yet: the reordering window (a quarter of the minimum RTT, 25
// ms) gives a reordered segment time to arrive. The reordering timer
// (section 6.3) then marks it lost by time, and recovery resends it.
func TestRACKMarksLostByTimeAndTimerFires(t *testing.T) {
	f := newSACKFlight(t, tcp.Config{})
	f.sack(0, [2]int{1, 2})
	if got := f.sentSeqs(); !equalInts(got, []int{10}) {
		t.Fatalf("sent %v, want new segment 10 only", got)
	}
	f.advance(24 * time.Millisecond)
	f.nothing()
	f.advance(time.Millisecond)
	if got := f.sentSeqs(); !equalInts(got, []int{0}) {
		t.Fatalf("at the reordering timeout the stack sent %v, want segment 0", got)
	}
	if n := f.counter("RACKLoss"); n != 1 {
		t.Errorf("RACKLoss = %d, want 1", n)
	}
	if n := f.counter("RACKReorderTimeouts"); n != 1 {
		t.Errorf("RACKReorderTimeouts = %d, want 1", n)
	}
	if _, _, rec := f.state(); !rec {
		t.Error("not in recovery after RACK found a loss")
	}
}

// Section 6.2 step 4: a D-SACK shows a retransmission was not needed; the
// reordering window then opens (to twice a quarter of the minimum RTT)
// even with three segments SACKed above a hole, where it would otherwise
// be zero.
func TestRACKReorderingWindowGrowsOnDSACK(t *testing.T) {
	f := newSACKFlight(t, tcp.Config{})
	f.sack(1, [2]int{0, 1}) // segment 0 arrived twice
	f.sentSeqs()
	f.sack(1, [2]int{2, 5})
	f.sentSeqs()
	f.advance(49 * time.Millisecond)
	if got := f.sentSeqs(); len(got) != 0 {
		t.Fatalf("within the widened reordering window the stack sent %v", got)
	}
	f.advance(time.Millisecond)
	if got := f.sentSeqs(); !equalInts(got, []int{1}) {
		t.Fatalf("after 50 ms the stack sent %v, want segment 1", got)
	}
	if n := f.counter("DSACKRecv"); n != 1 {
		t.Errorf("DSACKRecv = %d, want 1", n)
	}
}

// Section 7: when no ACK comes for a flight, a probe goes after PTO = 2
// SRTT (and 2 ms, as Linux), before the RTO: new data if there is some,
// else the last segment again. With one segment in flight PTO allows for
// a delayed ACK (200 ms more), and is capped by the RTO, which it then
// replaces. No timeout is
// counted: the probe restarts the retransmission timer.
func TestTailLossProbe(t *testing.T) {
	tests := []struct {
		name  string
		write int
		after time.Duration
		seg   int // the probe's segment
	}{
		{"new data", 14, 202 * time.Millisecond, 10},
		{"the last segment", 3, 202 * time.Millisecond, 2},
		{"one segment: PTO capped by the RTO", 1, 300 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{Congestion: "newreno"})
			c, p := r.acceptedAfter(rawOptsSACK, 100*time.Millisecond)
			write(t, c, pattern(tt.write*1000))
			una := p.rcv
			for i := range min(tt.write, 10) {
				p.expectData(1000, i == tt.write-1)
			}
			r.nothing()
			p.expectAfter(tt.after, una+uint32(tt.seg)*1000, 1000)
			r.settle() // the probe is counted after it is sent
			if n := r.counter("LossProbes"); n != 1 {
				t.Errorf("LossProbes = %d, want 1", n)
			}
			if n := r.counter("Timeouts"); n != 0 {
				t.Errorf("Timeouts = %d, want 0", n)
			}
			// One probe per episode: the next expiry is the RTO's.
			ci := p.info()
			p.advance(ci.RTO - time.Millisecond)
			p.nothing()
			p.advance(time.Millisecond)
			if s := p.nextSeg(); s.Seq != una {
				t.Errorf("after the probe's RTO: %v, want the first segment again", s)
			}
			if n := r.counter("Timeouts"); n != 1 {
				t.Errorf("Timeouts = %d, want 1", n)
			}
		})
	}
}

// Section 7.4: a retransmitted probe whose ACK goes beyond it without a
// D-SACK repaired a loss of the tail; the congestion control reduces the
// window as for any loss.
func TestTailLossProbeRepairsLoss(t *testing.T) {
	r := newRig(t, tcp.Config{Congestion: "newreno"})
	c, p := r.acceptedAfter(rawOptsSACK, 100*time.Millisecond)
	write(t, c, pattern(3000))
	una := p.rcv
	for i := range 3 {
		p.expectData(1000, i == 2)
	}
	p.expectAfter(202*time.Millisecond, una+2000, 1000)
	// Segments 0 and 1 had arrived, 2 came with the probe.
	p.rcv = una + 3000
	p.ack()
	write(t, c, pattern(1000))
	p.expectData(1000, true)
	cwnd := p.info().CWnd
	p.ack()
	p.settle()
	if n := r.counter("LossProbeRecovery"); n != 1 {
		t.Errorf("LossProbeRecovery = %d, want 1", n)
	}
	if ci := p.info(); ci.CWnd >= cwnd {
		t.Errorf("cwnd %d after the probe's repair, was %d: no reduction", ci.CWnd, cwnd)
	}
}

// RFC 8985 section 2.2: a retransmission that is lost too is found by
// time like any segment, once a segment sent after it is delivered; a
// duplicate-ACK count never could, and RFC 6675 alone would wait for the
// RTO.
func TestRACKFindsLostRetransmission(t *testing.T) {
	f := newSACKFlight(t, tcp.Config{})
	f.sack(0, [2]int{1, 10})
	if got := f.sentSeqs(); !equalInts(got, []int{0, 10, 11, 12, 13}) {
		t.Fatalf("on entering recovery the stack sent %v, want 0 again and new 10-13", got)
	}
	// 100 ms later, segment 10, sent with the retransmission of 0 but
	// after it, arrives; 0 does not.
	f.advance(100 * time.Millisecond)
	f.sack(0, [2]int{10, 11}, [2]int{1, 10})
	if got := f.sentSeqs(); len(got) == 0 || got[0] != 0 {
		t.Fatalf("after the SACK of segment 10 the stack sent %v, want segment 0 again first", got)
	}
	if n := f.counter("RACKLoss"); n != 2 {
		t.Errorf("RACKLoss = %d, want 2 (segment 0 twice)", n)
	}
	if n := f.counter("Timeouts"); n != 0 {
		t.Errorf("Timeouts = %d, want 0", n)
	}
}
