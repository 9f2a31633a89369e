package tcp_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// RFC 5961: challenge ACKs for a RST in the window (3.2), a SYN on a
// synchronized connection (4.2) and an ACK outside the acceptable range
// (5.2), and their rate limits (7).

// inWindowRST injects a RST in the window but not at RCV.NXT.
func (p *peer) inWindowRST() {
	p.t.Helper()
	p.inject(rawtest.TCPSegment{Seq: p.nxt + 100, Flags: R, Window: p.wnd})
}

// RFC 5961 4.2 asks for a challenge ACK for a SYN "irrespective of the
// sequence number": outside the window too, counted and limited as the
// others.
func TestSynOutsideTheWindowEarnsAChallengeACK(t *testing.T) {
	for _, off := range []int32{-5000, 1 << 20} {
		r := newRig(t, tcp.Config{})
		_, p := r.accepted(rawtest.TCPOpts{})
		p.inject(rawtest.TCPSegment{Seq: p.nxt + uint32(off), Flags: S, Window: p.wnd})
		p.expectACK()
		r.nothing()
		if n := r.counter("ChallengeACKs"); n != 1 {
			t.Errorf("SYN at RCV.NXT%+d: ChallengeACKs = %d, want 1", off, n)
		}
	}
}

// RFC 5961 5.2: "The ACK value is considered acceptable only if it is in
// the range of ((SND.UNA - MAX.SND.WND) <= SEG.ACK <= SND.NXT). All
// incoming segments whose ACK value doesn't satisfy the above condition
// MUST be discarded and an ACK sent back." A blind data injection must
// carry an ACK, and one that is not acceptable brings no data in.
func TestACKOutsideTheAcceptableRange(t *testing.T) {
	// The stack has sent and had acknowledged 3000 bytes: MAX.SND.WND is
	// 65535, but no ACK further back than the ISS is believable.
	const sent = 3000
	tests := []struct {
		name   string
		ackOff int32 // SEG.ACK - SND.UNA
		ok     bool
	}{
		{"SND.UNA", 0, true},
		{"an old ACK", -1000, true},
		{"as old as the data sent", -sent, true},
		{"older than anything sent", -sent - 1, false},
		{"beyond SND.NXT", 1, false},
		{"far beyond SND.NXT", 1 << 30, false},
		{"half the space away", -1 << 31, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.accepted(rawtest.TCPOpts{MSS: 1460})
			write(t, c, pattern(sent))
			p.expectData(1460, false)
			p.expectData(1460, false)
			p.expectData(sent-2*1460, true)
			p.ack()
			p.settle()
			read := readAsync(c, 100)
			s := p.seg(P|A, []byte("injected"))
			s.Ack = p.rcv + uint32(tt.ackOff)
			p.inject(s)
			if tt.ok {
				p.nxt += s.Len()
				if res := wait(t, read); res.err != nil || string(res.b) != "injected" {
					t.Fatalf("read %q, %v", res.b, res.err)
				}
				p.advance(delayedAck)
				p.expectACK()
			} else {
				p.expectACK() // the challenge: SEQ=SND.NXT, ACK=RCV.NXT
				blocked(t, read)
			}
			r.nothing()
			bad := int64(b2i(!tt.ok))
			if n, m := r.counter("BadACKs"), r.counter("ChallengeACKs"); n != bad || m != bad {
				t.Errorf("BadACKs = %d, ChallengeACKs = %d; want %d", n, m, bad)
			}
			if st := p.state(); st != "ESTABLISHED" {
				t.Errorf("state %q, want ESTABLISHED", st)
			}
		})
	}
}

// Before any data is acknowledged, only SND.UNA itself is an acceptable
// ACK below SND.NXT: an ACK of the ISS, acknowledging nothing, is not.
func TestACKOfTheISSIsNotAcceptable(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	read := readAsync(c, 10)
	s := p.seg(P|A, []byte("x"))
	s.Ack = p.rcv - 1
	p.inject(s)
	p.expectACK()
	blocked(t, read)
	if n := r.counter("BadACKs"); n != 1 {
		t.Errorf("BadACKs = %d, want 1", n)
	}
}

// Each connection sends at most one challenge ACK per ChallengeACKInterval
// (500 ms, Linux's tcp_invalid_ratelimit); the rest are counted.
func TestChallengeACKsAreLimitedPerConnection(t *testing.T) {
	r := newRig(t, tcp.Config{})
	_, p := r.accepted(rawtest.TCPOpts{})
	p.inWindowRST()
	p.expectACK()
	p.inWindowRST()
	p.inject(rawtest.TCPSegment{Seq: p.nxt, Flags: S, Window: p.wnd})
	s := p.seg(A, nil)
	s.Ack += 1 << 20
	p.inject(s)
	r.nothing()
	if n, m := r.counter("ChallengeACKs"), r.counter("ChallengeACKsLimited"); n != 1 || m != 3 {
		t.Errorf("ChallengeACKs = %d, ChallengeACKsLimited = %d; want 1 and 3", n, m)
	}
	p.advance(499 * time.Millisecond)
	p.inWindowRST()
	r.nothing()
	p.advance(time.Millisecond)
	p.inWindowRST()
	p.expectACK()
	r.nothing()
	if n, m := r.counter("ChallengeACKs"), r.counter("ChallengeACKsLimited"); n != 2 || m != 4 {
		t.Errorf("ChallengeACKs = %d, ChallengeACKsLimited = %d; want 2 and 4", n, m)
	}
	if st := p.state(); st != "ESTABLISHED" {
		t.Errorf("state %q, want ESTABLISHED", st)
	}
}

// The stack sends at most ChallengeACKLimit challenge ACKs a second over
// all its connections (RFC 5961 section 7, Linux's
// tcp_challenge_ack_limit): the N+1th within the second is not sent, and
// the next second brings a fresh allowance.
func TestChallengeACKsAreLimitedStackWide(t *testing.T) {
	const limit = 3
	r := newRig(t, tcp.Config{ChallengeACKLimit: limit, ChallengeACKInterval: -1})
	r.listen(0)
	a := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{})
	a.handshake()
	b := r.synPeer(peerPort+1, peerISN, rawtest.TCPOpts{})
	b.handshake()
	r.settle()

	a.inWindowRST()
	a.expectACK()
	a.inWindowRST()
	a.expectACK()
	b.inWindowRST()
	b.expectACK()
	b.inWindowRST() // the 4th this second
	a.inWindowRST()
	r.nothing()
	if n, m := r.counter("ChallengeACKs"), r.counter("ChallengeACKsLimited"); n != limit || m != 2 {
		t.Errorf("ChallengeACKs = %d, ChallengeACKsLimited = %d; want %d and 2", n, m, limit)
	}
	r.advance(time.Second)
	b.inWindowRST()
	b.expectACK()
	r.nothing()
	if n := r.counter("ChallengeACKs"); n != limit+1 {
		t.Errorf("ChallengeACKs = %d after a second, want %d", n, limit+1)
	}
	for _, p := range []*peer{a, b} {
		if st := p.state(); st != "ESTABLISHED" {
			t.Errorf("%v: state %q, want ESTABLISHED", p.addr, st)
		}
	}
}

// Negative limits turn the rate limits off.
func TestChallengeACKsUnlimited(t *testing.T) {
	r := newRig(t, tcp.Config{ChallengeACKLimit: -1, ChallengeACKInterval: -1})
	_, p := r.accepted(rawtest.TCPOpts{})
	for range 20 {
		p.inWindowRST()
		p.expectACK()
	}
	if n, m := r.counter("ChallengeACKs"), r.counter("ChallengeACKsLimited"); n != 20 || m != 0 {
		t.Errorf("ChallengeACKs = %d, ChallengeACKsLimited = %d; want 20 and 0", n, m)
	}
}
