package tcp_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// PAWS: RFC 7323 section 5.

// tsOnly offers timestamps and nothing else, so that windows are not
// scaled and segments are easy to reason about.
var tsOnly = rawtest.TCPOpts{MSS: 1460, HasTimestamp: true, TSVal: 777}

// tsSeg is the peer's segment at SND.NXT carrying a timestamp tsval.
func (p *peer) tsSeg(flags uint8, payload []byte, tsval uint32) rawtest.TCPSegment {
	s := p.seg(flags, payload)
	s.Opts = rawtest.TCPOpts{HasTimestamp: true, TSVal: tsval}
	return s
}

// sendTS sends data at SND.NXT with timestamp tsval and advances SND.NXT.
func (p *peer) sendTS(flags uint8, payload []byte, tsval uint32) {
	p.t.Helper()
	s := p.tsSeg(flags, payload, tsval)
	p.inject(s)
	p.nxt += s.Len()
}

// pawsConn is an accepted connection with timestamps whose TS.Recent is
// 1000: the peer's data "ok" carried it and was read.
func pawsConn(t *testing.T, cfg tcp.Config) (*tcp.Conn, *peer) {
	t.Helper()
	r := newRig(t, cfg)
	c, p := r.accepted(tsOnly)
	p.sendTS(P|A, []byte("ok"), 1000)
	checkData(t, readAll(t, c, 2), []byte("ok"))
	p.advance(delayedAck)
	if a := p.expectACK(); a.Opts.TSEcr != 1000 {
		t.Fatalf("ACK echoes %d, want TS.Recent 1000", a.Opts.TSEcr)
	}
	return c, p
}

// R1: a segment whose timestamp is older than TS.Recent is an old
// duplicate: it is dropped, and acknowledged so that a peer that is
// really behind learns where we are.
func TestPAWSDropsAnOldTimestamp(t *testing.T) {
	c, p := pawsConn(t, tcp.Config{})
	read := readAsync(c, 100)
	old := p.tsSeg(P|A, []byte("stale"), 999)
	p.inject(old)
	if a := p.expectACK(); a.Opts.TSEcr != 1000 {
		t.Errorf("ACK echoes %d, want TS.Recent 1000 still", a.Opts.TSEcr)
	}
	p.nothing()
	blocked(t, read)
	if n := p.counter("PAWSEstab"); n != 1 {
		t.Errorf("PAWSEstab = %d, want 1", n)
	}
	// The same bytes with a current timestamp are taken; so is one
	// equal to TS.Recent (the test is "less than").
	p.sendTS(P|A, []byte("fresh"), 1000)
	if res := wait(t, read); res.err != nil || string(res.b) != "fresh" {
		t.Fatalf("read %q, %v; want fresh", res.b, res.err)
	}
	if n := p.counter("PAWSEstab"); n != 1 {
		t.Errorf("PAWSEstab = %d, want 1", n)
	}
}

// A timestamp comparison is modulo 2^32 (RFC 7323 5.2): just past a wrap of
// the peer's clock, a small value is newer, not older.
func TestPAWSComparesAcrossTheWrap(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1460, HasTimestamp: true, TSVal: 0xffffff00})
	p.sendTS(P|A, []byte("wrapped"), 5)
	checkData(t, readAll(t, c, 7), []byte("wrapped"))
	p.inject(p.tsSeg(P|A, []byte("old"), 0xfffffff0))
	p.expectACK()
	if n := p.counter("PAWSEstab"); n != 1 {
		t.Errorf("PAWSEstab = %d, want 1", n)
	}
}

// PAWS never applies to a RST (RFC 7323 5.3 R1: "and the RST bit is not
// set"): a peer that rebooted has a new clock. RFC 5961 still asks for the
// exact sequence number.
func TestPAWSNeverAppliesToReset(t *testing.T) {
	t.Run("in the window: a challenge ACK, not a PAWS drop", func(t *testing.T) {
		_, p := pawsConn(t, tcp.Config{})
		s := p.tsSeg(R, nil, 1)
		s.Seq += 10
		p.inject(s)
		p.expectACK()
		p.nothing()
		if n := p.counter("PAWSEstab"); n != 0 {
			t.Errorf("PAWSEstab = %d, want 0", n)
		}
		if n := p.counter("ChallengeACKs"); n != 1 {
			t.Errorf("ChallengeACKs = %d, want 1", n)
		}
	})
	t.Run("at RCV.NXT: the reset is taken", func(t *testing.T) {
		c, p := pawsConn(t, tcp.Config{})
		read := readAsync(c, 10)
		p.inject(p.tsSeg(R, nil, 1))
		if res := wait(t, read); !isErr(res.err, syscall.ECONNRESET) {
			t.Fatalf("read: %v, want ECONNRESET", res.err)
		}
		p.waitState("")
		p.nothing()
	})
}

// A SYN with an old timestamp on a synchronized connection gets the
// challenge ACK any SYN gets there (RFC 5961 4.2), as in Linux.
func TestPAWSOldSynGetsAChallengeACK(t *testing.T) {
	_, p := pawsConn(t, tcp.Config{})
	s := p.tsSeg(S, nil, 10)
	s.Ack = 0
	p.inject(s)
	p.expectACK()
	p.nothing()
	if n, m := p.counter("PAWSEstab"), p.counter("ChallengeACKs"); n != 1 || m != 1 {
		t.Errorf("PAWSEstab = %d, ChallengeACKs = %d; want 1 and 1", n, m)
	}
}

// RFC 7323 5.5: after 24 days idle TS.Recent is no longer valid (the
// peer's clock may have gone half-way round): the next segment is taken
// whatever its timestamp, and its timestamp becomes TS.Recent.
func TestPAWSAfterTwentyFourDaysIdle(t *testing.T) {
	tests := []struct {
		name  string
		idle  time.Duration
		taken bool
	}{
		{"23 days", 23 * 24 * time.Hour, false},
		{"24 days", 24 * 24 * time.Hour, true},
		{"30 days", 30 * 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := pawsConn(t, tcp.Config{})
			p.advance(tt.idle)
			read := readAsync(c, 10)
			s := p.tsSeg(P|A, []byte("late"), 500)
			p.inject(s)
			if !tt.taken {
				p.expectACK()
				blocked(t, read)
				return
			}
			p.nxt += s.Len()
			if res := wait(t, read); res.err != nil || string(res.b) != "late" {
				t.Fatalf("read %q, %v; want late", res.b, res.err)
			}
			p.advance(delayedAck)
			if a := p.expectACK(); a.Opts.TSEcr != 500 {
				t.Errorf("ACK echoes %d, want the new TS.Recent 500", a.Opts.TSEcr)
			}
			// TS.Recent is valid again: older than 500 is dropped.
			p.inject(p.tsSeg(P|A, []byte("x"), 499))
			p.expectACK()
			if n := p.counter("PAWSEstab"); n != 1 {
				t.Errorf("PAWSEstab = %d, want 1", n)
			}
		})
	}
}

// A pure duplicate ACK overtaken on the path by a later one is not an old
// duplicate worth dropping (Linux's tcp_disordered_ack): at RCV.NXT and
// SND.WL1, changing nothing, within an RTO of TS.Recent it passes;
// further back, or carrying anything else, it does not.
func TestPAWSLetsADisorderedACKThrough(t *testing.T) {
	tests := []struct {
		name    string
		flags   uint8
		payload []byte
		tsval   uint32
		dropped bool
	}{
		{"pure ACK, just older", A, nil, 990, false},
		{"pure ACK, more than an RTO older", A, nil, 10, true},
		{"data, just older", P | A, []byte("x"), 990, true},
		{"FIN, just older", F | A, nil, 990, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, p := pawsConn(t, tcp.Config{})
			// The peer acknowledges at RCV.NXT, SND.WL1 moves there.
			p.inject(p.tsSeg(A, nil, 1000))
			p.inject(p.tsSeg(tt.flags, tt.payload, tt.tsval))
			if tt.dropped {
				p.expectACK()
			}
			p.nothing()
			if n := p.counter("PAWSEstab"); n != int64(b2i(tt.dropped)) {
				t.Errorf("PAWSEstab = %d, want %d", n, b2i(tt.dropped))
			}
			if st := p.state(); st != "ESTABLISHED" {
				t.Errorf("state %q, want ESTABLISHED", st)
			}
		})
	}
}

// Without negotiated timestamps there is no PAWS: a timestamp option on a
// later segment is ignored.
func TestPAWSNeedsNegotiatedTimestamps(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1460})
	p.sendTS(P|A, []byte("a"), 1000)
	p.sendTS(P|A, []byte("b"), 1)
	checkData(t, readAll(t, c, 2), []byte("ab"))
	if n := p.counter("PAWSEstab"); n != 0 {
		t.Errorf("PAWSEstab = %d, want 0", n)
	}
}

// RFC 7323 3.2: once timestamps are negotiated, a non-RST segment without
// one is silently dropped (no ACK: it could be a blind injection) and
// counted. A RST is exempt (RFC 5961 still wants it at RCV.NXT), and so is
// a SYN, which gets the challenge ACK every SYN gets on a synchronized
// connection.
func TestTimestampsNegotiatedASegmentWithoutOneIsDropped(t *testing.T) {
	tests := []struct {
		name      string
		flags     uint8
		payload   []byte
		dropped   bool
		challenge bool
	}{
		{"data", P | A, []byte("naked"), true, false},
		{"pure ACK", A, nil, true, false},
		{"FIN", F | A, nil, true, false},
		{"SYN: a challenge ACK", S, nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := pawsConn(t, tcp.Config{})
			read := readAsync(c, 100)
			s := p.seg(tt.flags, tt.payload)
			s.Opts = rawtest.TCPOpts{}
			if tt.flags == S {
				s.Ack = 0
			}
			p.inject(s)
			if tt.challenge {
				p.expectACK()
			}
			p.nothing()
			blocked(t, read)
			if n := p.counter("TSOptMissing"); n != int64(b2i(tt.dropped)) {
				t.Errorf("TSOptMissing = %d, want %d", n, b2i(tt.dropped))
			}
			if st := p.state(); st != "ESTABLISHED" {
				t.Errorf("state %q, want ESTABLISHED", st)
			}
			// The same bytes with a timestamp are taken.
			if tt.payload != nil {
				p.sendTS(tt.flags, tt.payload, 1001)
				if res := wait(t, read); res.err != nil || string(res.b) != string(tt.payload) {
					t.Fatalf("read %q, %v; want %q", res.b, res.err, tt.payload)
				}
			}
		})
	}
	t.Run("RST at RCV.NXT: taken", func(t *testing.T) {
		c, p := pawsConn(t, tcp.Config{})
		read := readAsync(c, 10)
		s := p.seg(R, nil)
		s.Opts = rawtest.TCPOpts{}
		p.inject(s)
		if res := wait(t, read); !isErr(res.err, syscall.ECONNRESET) {
			t.Fatalf("read: %v, want ECONNRESET", res.err)
		}
		if n := p.counter("TSOptMissing"); n != 0 {
			t.Errorf("TSOptMissing = %d, want 0", n)
		}
	})
	t.Run("the handshake's ACK without a timestamp: still SYN-RECEIVED", func(t *testing.T) {
		r := newRig(t, tcp.Config{})
		r.listen(0)
		p := r.synPeer(peerPort, peerISN, tsOnly)
		syn := p.seg(S, nil)
		syn.Ack, syn.Opts = 0, tsOnly
		p.inject(syn)
		p.nxt++
		sa := p.nextSeg()
		p.iss, p.rcv = sa.Seq, sa.Seq+1
		ack := p.seg(A, nil)
		ack.Opts = rawtest.TCPOpts{}
		p.inject(ack)
		p.nothing()
		if st := p.state(); st != "SYN-RECEIVED" {
			t.Errorf("state %q, want SYN-RECEIVED", st)
		}
		if n := r.counter("TSOptMissing"); n != 1 {
			t.Errorf("TSOptMissing = %d, want 1", n)
		}
	})
}
