package tcp_test

import (
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Sequence numbers: the acceptability test of RFC 9293 3.10.7.4 and the
// trimming of segments to the window.

const smallBuffer = 4096 // a receive buffer the peer can fill: window scale 0

// fill sends the peer's data until the stack's window closes, in segments of
// 1024 bytes, and checks that the stack's last ACK says window 0.
func (p *peer) fill(window int) []byte {
	p.t.Helper()
	data := pattern(window)
	for off := 0; off < window; off += 1024 {
		p.send(A, data[off:min(off+1024, window)])
	}
	// Segments the stack takes in one batch share one ACK, so whether the
	// last one's is delayed depends on the batches: let it go.
	p.advance(delayedAck)
	acks := p.sent()
	if len(acks) == 0 {
		p.t.Fatal("no ACK for the data filling the window")
	}
	last := acks[len(acks)-1]
	if last.Flags != A || last.Ack != p.nxt || last.Window != 0 {
		p.t.Fatalf("last ACK %v, want ack %d window 0", last, p.nxt)
	}
	return data
}

// zeroWindow returns a connection whose receive window the peer has filled.
func zeroWindow(t *testing.T) (*rig, *tcp.Conn, *peer) {
	r := newRig(t, tcp.Config{ReceiveBuffer: smallBuffer})
	c, p := r.accepted(rawtest.TCPOpts{})
	p.fill(smallBuffer)
	return r, c, p
}

// The acceptability table of RFC 9293 3.10.7.4: a segment that fails it is
// answered with an ACK (and its data dropped); one that passes is
// processed, and a pure ACK is not answered.
func TestSequenceAcceptability(t *testing.T) {
	tests := []struct {
		name       string
		zeroWindow bool
		seqOff     int32 // SEG.SEQ - RCV.NXT
		len        int
		acceptable bool
		// A segment at RCV.NXT with data for a zero window is not
		// acceptable, "but special allowance should be made to accept
		// valid ACKs, URGs, and RSTs": the stack processes it, drops
		// the data and answers, without counting it out of window.
		allowance bool
	}{
		{"zero length, zero window, at RCV.NXT", true, 0, 0, true, false},
		{"zero length, zero window, after RCV.NXT", true, 1, 0, false, false},
		{"zero length, zero window, before RCV.NXT", true, -1, 0, false, false},
		{"data, zero window, at RCV.NXT (a window probe)", true, 0, 1, false, true},
		{"data, zero window, after RCV.NXT", true, 1, 1, false, false},
		{"zero length, window, at RCV.NXT", false, 0, 0, true, false},
		{"zero length, window, inside", false, smallBuffer - 1, 0, true, false},
		{"zero length, window, at its right edge", false, smallBuffer, 0, false, false},
		{"zero length, window, before RCV.NXT", false, -1, 0, false, false},
		{"data, window, ending at RCV.NXT", false, -10, 10, false, false},
		{"data, window, ending past RCV.NXT", false, -10, 11, true, false},
		{"data, window, starting at its last byte", false, smallBuffer - 1, 10, true, false},
		{"data, window, starting at its right edge", false, smallBuffer, 10, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r *rig
			var p *peer
			if tt.zeroWindow {
				r, _, p = zeroWindow(t)
			} else {
				r = newRig(t, tcp.Config{ReceiveBuffer: smallBuffer})
				_, p = r.accepted(rawtest.TCPOpts{})
			}
			before := r.counter("OutOfWindow")
			p.inject(rawtest.TCPSegment{Seq: p.nxt + uint32(tt.seqOff), Ack: p.rcv, Flags: A, Window: p.wnd, Payload: pattern(tt.len)})
			if tt.acceptable {
				if tt.len == 0 {
					r.nothing()
				}
				if n := r.counter("OutOfWindow") - before; n != 0 {
					t.Errorf("OutOfWindow counted %d", n)
				}
				return
			}
			// An ACK of what the stack has, at once, and nothing else.
			p.expectACK()
			r.nothing()
			if n := r.counter("OutOfWindow") - before; n != int64(b2i(!tt.allowance)) {
				t.Errorf("OutOfWindow counted %d, want 1", n)
			}
		})
	}
}

// Data is trimmed to what is new and fits the window (RFC 9293 3.10.7.4:
// "segments with higher beginning sequence numbers ... the portion that
// lies in the window"), and the application reads each byte once.
func TestReceivedDataIsTrimmedToTheWindow(t *testing.T) {
	const buf = 1000 // below the MSS: one segment can overfill the window
	tests := []struct {
		name      string
		first     int   // bytes the peer sends first, in order
		seqOff    int32 // the test segment's start - RCV.NXT
		len       int
		ack       int  // the stack's ACK, in bytes of the stream
		ackAtOnce bool // else delayed
	}{
		{"old duplicate", 100, -100, 100, 100, true},
		{"partly before RCV.NXT", 100, -50, 150, 200, false},
		{"partly beyond the window", 0, 0, buf + 100, buf, true},
		{"partly beyond the window, after data", 300, 0, buf, buf, true},
		// Both ends outside the window: RFC 9293's test as written would
		// refuse it; its middle is what the window asks for, and it is
		// taken as Linux takes it (window_span.go).
		{"straddling the whole window", 300, -50, buf + 100, buf, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{ReceiveBuffer: buf})
			c, p := r.accepted(rawtest.TCPOpts{})
			stream := pattern(2 * buf)
			if tt.first > 0 {
				p.send(P|A, stream[:tt.first])
				// The first segment's ACK is delayed; let it go.
				p.advance(delayedAck)
				p.expectACK()
			}
			start := int(p.nxt-peerISN-1) + int(tt.seqOff)
			p.inject(rawtest.TCPSegment{Seq: p.nxt + uint32(tt.seqOff), Ack: p.rcv, Flags: P | A, Window: p.wnd, Payload: stream[start : start+tt.len]})
			if !tt.ackAtOnce {
				r.nothing()
				p.advance(delayedAck)
			}
			p.expect(A, p.rcv, peerISN+1+uint32(tt.ack), 0)
			r.nothing()
			checkData(t, readAll(t, c, tt.ack), stream[:tt.ack])
			if q := p.info().RecvQueue; q != 0 {
				t.Errorf("%d more bytes queued, want none", q)
			}
		})
	}
}

// A segment covering the whole window from before RCV.NXT to beyond the
// right edge passes the acceptability test (window_span.go): it is not
// counted out of window, its FIN beyond the edge is not taken, and the ACK
// at once says the window is full.
func TestSegmentSpanningTheWholeWindowIsAcceptable(t *testing.T) {
	const buf = 1000
	r := newRig(t, tcp.Config{ReceiveBuffer: buf})
	c, p := r.accepted(rawtest.TCPOpts{})
	stream := pattern(2 * buf)
	p.send(P|A, stream[:300])
	p.advance(delayedAck)
	p.expectACK()
	p.inject(rawtest.TCPSegment{Seq: p.nxt - 50, Ack: p.rcv, Flags: F | A, Window: p.wnd, Payload: stream[250 : buf+50]})
	s := p.expect(A, p.rcv, peerISN+1+buf, 0)
	if s.Window != 0 {
		t.Errorf("window %d, want 0: the segment filled it", s.Window)
	}
	r.nothing()
	if n := r.counter("OutOfWindow"); n != 0 {
		t.Errorf("OutOfWindow = %d, want 0", n)
	}
	checkData(t, readAll(t, c, buf), stream[:buf])
	if st := p.state(); st != "ESTABLISHED" {
		t.Errorf("state %q, want ESTABLISHED: the FIN lay beyond the window", st)
	}
}
