package tcp_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// The sender's side of SACK: the scoreboard (RFC 2018), D-SACK (RFC 2883)
// and SACK loss recovery (RFC 6675). Each test has a connection with an
// MSS of 1000, an SRTT of 100 ms (RTO 300 ms), NewReno, and ten segments
// in flight out of the 14 written; the peer's ACKs come 100 ms after.

// sackFlight is such a connection; seg(i) is the i-th segment's sequence
// number.
type sackFlight struct {
	*peer
	c   *tcp.Conn
	una uint32
}

// rawOptsSACK are the peer's options: an MSS of 1000 and SACK.
var rawOptsSACK = rawtest.TCPOpts{MSS: 1000, SACKPermitted: true}

func newSACKFlight(t *testing.T, cfg tcp.Config) *sackFlight {
	t.Helper()
	cfg.Congestion = "newreno"
	r := newRig(t, cfg)
	c, p := r.acceptedAfter(rawOptsSACK, 100*time.Millisecond)
	write(t, c, pattern(14000))
	f := &sackFlight{peer: p, c: c, una: p.rcv}
	for range 10 {
		p.expectData(1000, false)
	}
	r.nothing()
	p.rcv = f.una // the peer has none of it yet
	p.advance(100 * time.Millisecond)
	return f
}

func (f *sackFlight) seg(i int) uint32 { return f.una + uint32(i)*1000 }

// sack sends an ACK of everything below segment ack with SACK blocks
// covering segments [from, to) each.
func (f *sackFlight) sack(ack int, blocks ...[2]int) {
	f.t.Helper()
	s := f.peer.seg(A, nil)
	s.Ack = f.seg(ack)
	for i, b := range blocks {
		s.Opts.SACK[i] = [2]uint32{f.seg(b[0]), f.seg(b[1])}
	}
	s.Opts.NumSACK = len(blocks)
	f.inject(s)
}

// sentSeqs returns the data segments the stack sent since the last look,
// as segment indexes.
func (f *sackFlight) sentSeqs() []int {
	f.t.Helper()
	var out []int
	for _, s := range f.sent() {
		if len(s.Payload) > 0 {
			out = append(out, int(s.Seq-f.una)/1000)
		}
	}
	return out
}

func (f *sackFlight) state() (sacked, lost int, inRecovery bool) {
	f.settle()
	return tcp.SACKState(f.c)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// RFC 2018 section 3: a SACK block marks the segments it covers; they
// leave pipe (RFC 6675 section 4), so the window lets as many new
// segments go, and nothing is retransmitted yet.
func TestSACKBlockMarksSegments(t *testing.T) {
	f := newSACKFlight(t, tcp.Config{})
	f.sack(0, [2]int{2, 4})
	if got := f.sentSeqs(); !equalInts(got, []int{10, 11}) {
		t.Errorf("after SACK of segments 2-3 the stack sent segments %v, want new 10 and 11", got)
	}
	if sacked, lost, rec := f.state(); sacked != 2000 || lost != 0 || rec {
		t.Errorf("scoreboard: %d bytes SACKed, %d lost, in recovery %v; want 2000, 0, false", sacked, lost, rec)
	}
}

// A block covering part of a segment marks just that part: the entry is
// split, and the rest stays in flight.
func TestSACKBlockSplitsPartlyCoveredSegment(t *testing.T) {
	f := newSACKFlight(t, tcp.Config{})
	s := f.peer.seg(A, nil)
	s.Ack = f.seg(0)
	s.Opts.SACK[0] = [2]uint32{f.seg(3) + 500, f.seg(5)}
	s.Opts.NumSACK = 1
	f.inject(s)
	if sacked, _, _ := f.state(); sacked != 1500 {
		t.Errorf("SACKed %d bytes, want 1500 (half of segment 3 and segment 4)", sacked)
	}
}

// RFC 6675 section 5: once a segment is deemed lost, by DupThresh SACKed
// segments above it (RACK off) or by RACK with three segments SACKed and
// no reordering seen (reordering window zero), recovery starts and the
// hole is retransmitted exactly once, however many more ACKs report it;
// the window reduces once (NewReno: ssthresh = FlightSize/2).
func TestSACKHoleRetransmittedOncePerRecovery(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cfg     tcp.Config
		retrans int64
	}{
		// With nothing new left to send, RFC 6675's NextSeg rule (4)
		// resends the flight's last segment not SACKed (11) once, as a
		// rescue; RACK has none.
		{"RFC 6675 DupThresh", tcp.Config{DisableRACK: true}, 2},
		{"RACK", tcp.Config{}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newSACKFlight(t, tt.cfg)
			var sent []int
			for i := 2; i <= 10; i++ {
				f.sack(0, [2]int{1, i})
				sent = append(sent, f.sentSeqs()...)
			}
			holes := 0
			for _, s := range sent {
				if s == 0 {
					holes++
				}
			}
			if holes != 1 {
				t.Errorf("segment 0 sent %d times in recovery (sent %v), want once", holes, sent)
			}
			if n := f.counter("SACKRecovery"); n != 1 {
				t.Errorf("SACKRecovery = %d, want 1", n)
			}
			if n := f.counter("SACKRetrans"); n != tt.retrans {
				t.Errorf("SACKRetrans = %d, want %d", n, tt.retrans)
			}
			if _, _, rec := f.state(); !rec {
				t.Errorf("not in recovery")
			}
			if ci := f.info(); ci.SSThresh != 6000 {
				t.Errorf("ssthresh %d, want 6000: half of the 12 segments in flight at the loss", ci.SSThresh)
			}
			if n := f.counter("Timeouts"); n != 0 {
				t.Errorf("Timeouts = %d, want 0", n)
			}
		})
	}
}

// Recovery ends when the cumulative ACK reaches the recovery point (RFC
// 6675 section 5, step (B)): not on an ACK below it, then on the one that
// covers it.
func TestSACKRecoveryExitsAtRecoveryPoint(t *testing.T) {
	f := newSACKFlight(t, tcp.Config{})
	f.sack(0, [2]int{1, 4})
	f.sentSeqs()
	_, _, rec := f.state()
	if !rec {
		t.Fatal("three segments SACKed above a hole: not in recovery")
	}
	// The recovery point is SND.MAX at the loss, segment 10.
	f.sack(9)
	if _, _, rec := f.state(); !rec {
		t.Error("out of recovery with the ACK below the recovery point")
	}
	f.sack(10)
	if _, _, rec := f.state(); rec {
		t.Error("still in recovery after the ACK of the recovery point")
	}
	if sacked, lost, _ := f.state(); sacked != 0 || lost != 0 {
		t.Errorf("scoreboard after the full ACK: %d SACKed, %d lost, want none", sacked, lost)
	}
}

// RFC 2883 section 4: a first block below the cumulative ACK, or inside
// the second block, reports a duplicate; it marks nothing and is counted.
func TestDSACKRecognised(t *testing.T) {
	tests := []struct {
		name   string
		ack    int
		blocks [][2]int
	}{
		{"below the cumulative ACK", 3, [][2]int{{1, 2}}},
		{"inside the second block", 0, [][2]int{{3, 4}, {2, 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSACKFlight(t, tcp.Config{})
			f.sack(tt.ack, tt.blocks...)
			f.settle()
			if n := f.counter("DSACKRecv"); n != 1 {
				t.Errorf("DSACKRecv = %d, want 1", n)
			}
			want := 0
			if len(tt.blocks) > 1 {
				want = 3000 // the second block
			}
			if sacked, _, _ := f.state(); sacked != want {
				t.Errorf("%d bytes SACKed, want %d", sacked, want)
			}
		})
	}
}

// A block outside SND.UNA..SND.MAX is ignored and counted (as Linux's
// tcp_is_sackblock_valid): it would mark what was never sent.
func TestInvalidSACKBlockIgnored(t *testing.T) {
	tests := []struct {
		name  string
		block [2]int
	}{
		{"beyond SND.MAX", [2]int{8, 12}},
		{"ends before it starts", [2]int{5, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSACKFlight(t, tcp.Config{})
			// A valid block first, so that the second is not taken for a
			// D-SACK.
			f.sack(0, [2]int{1, 2}, tt.block)
			if got := f.sentSeqs(); !equalInts(got, []int{10}) {
				t.Errorf("sent %v, want only new segment 10 for the valid block", got)
			}
			if n := f.counter("SACKDiscard"); n != 1 {
				t.Errorf("SACKDiscard = %d, want 1", n)
			}
			if sacked, _, _ := f.state(); sacked != 1000 {
				t.Errorf("%d bytes SACKed, want 1000", sacked)
			}
		})
	}
}

// RFC 2018 section 8, RFC 6675 section 5.1: a retransmission timeout
// drops the SACKed marks (the receiver may have reneged), so go-back-N
// resends a segment that had been SACKed.
func TestSACKStateDroppedOnRTO(t *testing.T) {
	f := newSACKFlight(t, tcp.Config{DisableRACK: true})
	f.sack(0, [2]int{5, 6})
	if got := f.sentSeqs(); !equalInts(got, []int{10}) {
		t.Fatalf("sent %v, want new segment 10", got)
	}
	if sacked, _, _ := f.state(); sacked != 1000 {
		t.Fatalf("%d bytes SACKed, want 1000", sacked)
	}
	// The timer started with the first segment, 100 ms ago.
	f.expectAfter(200*time.Millisecond, f.seg(0), 1000)
	if sacked, _, _ := f.state(); sacked != 0 {
		t.Errorf("after the timeout %d bytes still SACKed, want none", sacked)
	}
	// Everything below segment 5 arrives: go-back-N goes on from 5, which
	// the peer had SACKed before the timeout.
	f.sack(5)
	if got := f.sentSeqs(); len(got) == 0 || got[0] != 5 {
		t.Errorf("after the ACK of 0-4 the stack sent %v, want segment 5 first", got)
	}
	if n := f.counter("Timeouts"); n != 1 {
		t.Errorf("Timeouts = %d, want 1", n)
	}
}

// Config.DisableSACK: SACK-permitted is neither offered nor accepted.
func TestDisableSACK(t *testing.T) {
	r := newRig(t, tcp.Config{DisableSACK: true})
	l := r.listen(0)
	p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{MSS: 1460, SACKPermitted: true})
	sa := p.handshake()
	acceptOne(t, l)
	if sa.Opts.SACKPermitted {
		t.Errorf("SYN-ACK options %v with SACK disabled", sa.Opts)
	}
}
