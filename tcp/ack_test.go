package tcp_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Small segments and acknowledgements: Nagle's algorithm (RFC 9293
// 3.7.4), delayed ACKs (RFC 9293 3.8.6.3, RFC 5681 4.2).

// With Nagle's algorithm on, a small segment waits while data is
// unacknowledged; with it off (Go's default, TCP_NODELAY), it goes at once.
func TestNagle(t *testing.T) {
	tests := []struct {
		name    string
		noDelay bool
		second  int  // bytes of the second write
		held    bool // the second write waits for the first's ACK
	}{
		{"on: a small segment waits for the ACK", false, 100, true},
		{"on: a full segment goes at once", false, 2 * 536, false},
		{"off: a small segment goes at once", true, 100, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.accepted(rawtest.TCPOpts{})
			c.SetNoDelay(tt.noDelay)
			write(t, c, pattern(100))
			p.expectData(100, true)
			write(t, c, pattern(tt.second))
			if tt.held {
				r.nothing()
				p.ack()
			}
			if tt.second > 536 {
				p.expectData(536, false)
				p.expectData(tt.second-536, true)
			} else {
				p.expectData(tt.second, true)
			}
			r.nothing()
		})
	}
}

// One segment's ACK waits DelayedAck for company (RFC 9293 3.8.6.3).
func TestDelayedAckWaitsForTheTimer(t *testing.T) {
	const delay = 100 * time.Millisecond
	r := newRig(t, tcp.Config{DelayedAck: delay})
	_, p := r.accepted(rawtest.TCPOpts{})
	p.send(A, pattern(stackMSS))
	r.nothing()
	p.advance(delay - time.Millisecond)
	r.nothing()
	p.advance(time.Millisecond)
	p.expectACK()
	r.nothing()
	if n := r.counter("DelayedACKs"); n != 1 {
		t.Errorf("DelayedACKs = %d, want 1", n)
	}
}

// RFC 5681 4.2: "an ACK SHOULD be generated for at least every second
// full-sized segment"; out-of-order data is acknowledged at once (a
// duplicate ACK), and so is a segment that fills a hole.
func TestImmediateAcks(t *testing.T) {
	data := pattern(3 * stackMSS)
	seg := func(i int) []byte { return data[i*stackMSS : (i+1)*stackMSS] }
	tests := []struct {
		name string
		run  func(t *testing.T, p *peer)
	}{
		{"two full segments", func(t *testing.T, p *peer) {
			p.send(A, seg(0))
			p.send(A, seg(1))
			p.expectACK()
		}},
		{"out of order: a duplicate ACK", func(t *testing.T, p *peer) {
			p.inject(rawtest.TCPSegment{Seq: p.nxt + stackMSS, Ack: p.rcv, Flags: A, Window: p.wnd, Payload: seg(1)})
			p.expectACK()
			p.inject(rawtest.TCPSegment{Seq: p.nxt + 2*stackMSS, Ack: p.rcv, Flags: A, Window: p.wnd, Payload: seg(2)})
			p.expectACK()
		}},
		{"filling the hole", func(t *testing.T, p *peer) {
			p.inject(rawtest.TCPSegment{Seq: p.nxt + stackMSS, Ack: p.rcv, Flags: A, Window: p.wnd, Payload: seg(1)})
			p.expectACK()
			p.send(A, seg(0))
			p.nxt += stackMSS
			p.expectACK()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			_, p := r.accepted(rawtest.TCPOpts{})
			tt.run(t, p)
			r.nothing()
			if n := r.counter("DelayedACKs"); n != 0 {
				t.Errorf("DelayedACKs = %d, want 0", n)
			}
		})
	}
}

// Data going the other way carries the delayed ACK: no ACK of its own.
func TestReplyCarriesTheDelayedAck(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	p.send(P|A, []byte("question"))
	checkData(t, readAll(t, c, 8), []byte("question"))
	write(t, c, []byte("answer"))
	p.expectData(6, true) // acknowledging the question
	p.advance(delayedAck)
	r.nothing()
	if n := r.counter("DelayedACKs"); n != 0 {
		t.Errorf("DelayedACKs = %d, want 0", n)
	}
}

// An ACK of data not yet sent is answered with an ACK and the segment
// dropped (RFC 9293 3.10.7.4, "fifth"): its data is not taken.
func TestAckOfUnsentDataIsAnsweredAndDropped(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	p.inject(rawtest.TCPSegment{Seq: p.nxt, Ack: p.rcv + 10, Flags: P | A, Window: p.wnd, Payload: []byte("data")})
	p.expectACK()
	r.nothing()
	if q := p.info().RecvQueue; q != 0 {
		t.Errorf("%d bytes queued from a dropped segment", q)
	}
	p.send(P|A, []byte("data"))
	checkData(t, readAll(t, c, 4), []byte("data"))
}

// The send MSS is the peer's MSS option (536 without one, RFC 9293 3.7.1),
// no more than the stack's own, less 12 bytes per segment for timestamps
// (RFC 6691).
func TestSendMSS(t *testing.T) {
	tests := []struct {
		name string
		opts rawtest.TCPOpts
		mss  int
	}{
		{"no option", rawtest.TCPOpts{}, 536},
		{"1000", rawtest.TCPOpts{MSS: 1000}, 1000},
		{"larger than the link", rawtest.TCPOpts{MSS: 9000}, stackMSS},
		{"with timestamps", rawtest.TCPOpts{MSS: 1460, HasTimestamp: true, TSVal: 1}, 1448},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.accepted(tt.opts)
			write(t, c, pattern(tt.mss+1))
			p.expectData(tt.mss, false)
			p.expectData(1, true)
			if m := p.info().MSS; m != tt.mss {
				t.Errorf("MSS in the table %d, want %d", m, tt.mss)
			}
		})
	}
}

// A batch of full-sized segments taken at once is acknowledged every
// second segment, as it would be one by one (RFC 5681 4.2), not with one
// ACK at its end: a sender clocks its sending and grows its window by
// the ACKs. A batch of small segments still gets one.
func TestBatchIsAcknowledgedEverySecondFullSegment(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int // payload per segment
		segs     int
		wantAcks []int // in segments acknowledged
	}{
		{"eight full segments", stackMSS, 8, []int{2, 4, 6, 8}},
		{"five full segments: the fifth at the end", stackMSS, 5, []int{2, 4, 5}},
		{"small segments", 10, 8, []int{8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.accepted(rawtest.TCPOpts{})
			data := pattern(tc.size * tc.segs)
			start := p.nxt
			var segs []rawtest.TCPSegment
			for i := range tc.segs {
				segs = append(segs, p.seg(A, data[i*tc.size:(i+1)*tc.size]))
				p.nxt += uint32(tc.size)
			}
			release := tcp.Hold(c)
			p.inject(segs...)
			r.pending = append(r.pending, r.h.Barrier(t)...)
			release()
			var got []int
			for _, s := range r.sent() {
				got = append(got, int(s.Ack-start)/tc.size)
			}
			if !slices.Equal(got, tc.wantAcks) {
				t.Errorf("ACKs for %v segments, want %v", got, tc.wantAcks)
			}
			checkData(t, readAll(t, c, len(data)), data)
		})
	}
}
