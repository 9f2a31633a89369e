package tcp_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Windows: RFC 7323 section 2 (scaling), RFC 9293 3.8.6 (window management,
// silly window syndrome, zero-window probes).

// expectSegments reads segments of the given data lengths, in order, from
// RCV.NXT on.
func (p *peer) expectSegments(lens ...int) {
	p.t.Helper()
	for _, n := range lens {
		s := p.nextSeg()
		if s.Flags&^P != A || s.Seq != p.rcv || len(s.Payload) != n {
			p.t.Fatalf("segment %v, want %d bytes at %d", s, n, p.rcv)
		}
		p.take(s)
	}
}

// The peer's window fields are scaled by its shift from the first segment
// after the SYN on, never in the SYN itself (RFC 7323 2.2, 2.3).
func TestPeerWindowScaleAppliesAfterTheSYN(t *testing.T) {
	opts := rawtest.TCPOpts{MSS: 1000, HasWScale: true, WScale: 3}
	t.Run("passive: the SYN's 1000 is 1000, the ACK's 500 is 4000", func(t *testing.T) {
		r := newRig(t, tcp.Config{})
		l := r.listen(0)
		p := r.synPeer(peerPort, peerISN, opts)
		p.wnd = 1000
		s := p.seg(S, nil)
		s.Opts = opts
		p.inject(s)
		p.nxt++
		sa := p.nextSeg()
		p.iss, p.rcv = sa.Seq, sa.Seq+1
		p.wnd = 500
		p.ack()
		c := acceptOne(t, l)
		write(t, c, pattern(10000))
		p.expectSegments(1000, 1000, 1000, 1000)
		r.nothing()
		if w := p.info().SendWindow; w != 4000 {
			t.Errorf("send window %d, want 4000", w)
		}
	})
	t.Run("active: the SYN-ACK's 1000 is 1000, an ACK's 500 is 4000", func(t *testing.T) {
		r := newRig(t, tcp.Config{})
		c, p := r.dialedWindow(opts, 1000)
		write(t, c, pattern(10000))
		p.expectSegments(1000)
		r.nothing()
		p.wnd = 500
		p.ack()
		p.expectSegments(1000, 1000, 1000, 1000)
		r.nothing()
	})
	t.Run("active, not negotiated: an ACK's 500 is 500", func(t *testing.T) {
		r := newRig(t, tcp.Config{})
		c, p := r.dialedWindow(rawtest.TCPOpts{MSS: 1000}, 1000)
		write(t, c, pattern(10000))
		p.expectSegments(1000)
		r.nothing()
		p.wnd = 500
		p.ack()
		p.expectSegments(500)
		r.nothing()
	})
}

// The right edge of the window the stack advertises never moves left (RFC
// 9293 3.8.6.2.2: shrinking the window is strongly discouraged), even when
// the application shrinks its receive buffer.
func TestAdvertisedWindowNeverShrinks(t *testing.T) {
	r := newRig(t, tcp.Config{ReceiveBuffer: smallBuffer})
	c, p := r.accepted(rawtest.TCPOpts{})
	if err := c.SetReadBuffer(1024); err != nil {
		t.Fatal(err)
	}
	p.send(A, pattern(100))
	p.advance(delayedAck)
	if s := p.expectACK(); s.Window != smallBuffer-100 {
		t.Errorf("window %d, want %d: the right edge stays where it was", s.Window, smallBuffer-100)
	}
	p.send(A, pattern(1000))
	p.send(A, pattern(1000))
	acks := p.sent()
	if len(acks) == 0 {
		p.advance(delayedAck)
		acks = p.sent()
	}
	last := acks[len(acks)-1]
	if last.Ack != p.nxt || last.Window != smallBuffer-2100 {
		t.Errorf("ACK %v, want ack %d window %d", last, p.nxt, smallBuffer-2100)
	}
}

// Receiver silly window avoidance (RFC 9293 3.8.6.2.2): once the window has
// closed it reopens only by min(buffer/2, MSS) at least, and the stack
// says so unprompted when it does.
func TestWindowReopensOnlyByAnMSS(t *testing.T) {
	r, c, p := zeroWindow(t)
	data := readAll(t, c, 1000)
	checkData(t, data, pattern(smallBuffer)[:1000])
	r.nothing()
	// A window probe learns the window is still closed.
	p.inject(p.seg(A, []byte("x")))
	if s := p.expectACK(); s.Window != 0 {
		t.Errorf("window %d after reading 1000 bytes, want 0: less than an MSS (%d)", s.Window, stackMSS)
	}
	readAll(t, c, stackMSS-1000)
	if s := p.expectACK(); s.Window != stackMSS {
		t.Errorf("window update %d, want %d", s.Window, stackMSS)
	}
	r.nothing()
}

// A zero window is probed when the retransmission timer expires, with
// backoff; a peer that answers keeps the connection open however long it
// keeps the window closed; and its window update resumes the transfer,
// from the first byte it has not acknowledged (RFC 9293 3.8.6.1).
func TestZeroWindowIsProbed(t *testing.T) {
	const rto = 200 * time.Millisecond // RTOMin: the handshake's RTT was 0
	r := newRig(t, tcp.Config{Retries: 3})
	c, p := r.accepted(rawtest.TCPOpts{})
	p.wnd = 0
	p.ack()
	p.settle()
	write(t, c, pattern(3000))
	r.nothing()
	una := p.rcv
	wait := rto
	for i := range 6 { // more probes than Retries
		p.advance(wait - time.Millisecond)
		r.nothing()
		p.advance(time.Millisecond)
		s := p.nextSeg()
		if s.Flags != A || s.Seq != una || len(s.Payload) != 1 {
			t.Fatalf("probe %d: %v, want one byte at %d", i+1, s, una)
		}
		// The peer has no room: it answers with its window, still 0,
		// acknowledging nothing new.
		p.ack()
		r.nothing()
		wait = min(2*wait, 120*time.Second)
	}
	if st := p.state(); st != "ESTABLISHED" {
		t.Fatalf("state %q after probes answered, want ESTABLISHED", st)
	}
	if n := r.counter("PersistProbes"); n != 6 {
		t.Errorf("PersistProbes = %d, want 6", n)
	}
	p.wnd = 2000
	p.ack()
	p.expectSegments(536, 536, 536)
	r.nothing()
}

// A window update is taken only from a segment newer than the last one
// that updated it (RFC 9293 3.10.7.4: SND.WL1 < SEG.SEQ, or SND.WL1 =
// SEG.SEQ and SND.WL2 =< SEG.ACK): a reordered old ACK does not close the
// window.
func TestOldAckDoesNotUpdateTheWindow(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1000})
	una := p.rcv
	write(t, c, pattern(100))
	p.expectData(100, true)
	// SND.WL2 moves to the peer's ACK, which overtook an older one that
	// closed the window.
	p.ack()
	p.inject(rawtest.TCPSegment{Seq: p.nxt, Ack: una, Flags: A, Window: 0})
	p.settle()
	if w := p.info().SendWindow; w != 65535 {
		t.Fatalf("send window %d after an old ACK, want 65535", w)
	}
	write(t, c, pattern(1000))
	p.expectData(1000, true)
	r.nothing()
}

// Sender silly window avoidance (RFC 9293 3.8.6.2.1) holds a segment that
// is smaller than an MSS, than what waits, and than half the largest window
// the peer offered; but not for ever: when the override timeout (the
// persist timer) expires, what the window allows goes.
func TestSmallWindowIsUsedAfterTheOverrideTimeout(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: 1000})
	p.wnd = 300
	p.ack()
	p.settle()
	write(t, c, pattern(1000))
	r.nothing()
	s := p.expectAfter(rtoMin, p.rcv, 300)
	if s.Flags&^P != A {
		t.Errorf("segment %v", s)
	}
}

// A closed window whose probes go unanswered is a dead peer: after Retries
// probes the connection is aborted with ETIMEDOUT, as one whose
// retransmissions go unanswered (Linux's tcp_probe_timer, BSD's
// tcp_timer_persist). An answer, any ACK, starts the count again.
func TestUnansweredZeroWindowProbesTimeOut(t *testing.T) {
	r := newRig(t, tcp.Config{Retries: 3})
	c, p := r.accepted(rawtest.TCPOpts{})
	read := readAsync(c, 10)
	p.wnd = 0
	p.ack()
	p.settle()
	write(t, c, pattern(100))
	una := p.rcv
	next := rtoMin
	probe := func() {
		t.Helper()
		p.expectAfter(next, una, 1)
		next *= 2
	}
	probe()
	probe()
	p.ack() // answered: the count starts again
	for range 3 {
		probe()
	}
	blocked(t, read)
	p.advance(next)
	p.expect(R|A, una, p.nxt, 0) // the closed window's edge: the probe's byte is not the peer's
	if res := wait(t, read); !isErr(res.err, syscall.ETIMEDOUT) {
		t.Errorf("read: %v, want ETIMEDOUT", res.err)
	}
	p.waitState("")
}

// An unprompted window update (RFC 9293 3.8.6.2.2) waits until what the
// peer may still send has fallen to half the buffer, as Linux's
// tcp_cleanup_rbuf: a receiver that keeps up lets its ACKs for data carry
// the window, rather than adding an ACK after every read.
func TestWindowUpdateWaitsUntilHalfTheWindowIsUsed(t *testing.T) {
	const buf = 16384 // within the window field unscaled
	r := newRig(t, tcp.Config{ReceiveBuffer: buf})
	c, p := r.accepted(rawtest.TCPOpts{})
	deliver := func(n int, wantWindow uint16) {
		t.Helper()
		for sent := 0; sent < n; sent += 1024 {
			p.send(A, pattern(min(1024, n-sent)))
		}
		p.advance(delayedAck)
		acks := p.sent()
		if len(acks) == 0 {
			t.Fatalf("no ACK for %d bytes", n)
		}
		if last := acks[len(acks)-1]; last.Ack != p.nxt || last.Window != wantWindow {
			t.Fatalf("ACK %v, want ack %d window %d", last, p.nxt, wantWindow)
		}
	}
	// A quarter used: the peer may still send three quarters, and
	// reading the quarter says nothing.
	deliver(buf/4, buf-buf/4)
	readAll(t, c, buf/4)
	r.nothing()
	// Half used: reading it reopens the window to twice what the peer
	// had left, and the stack says so.
	deliver(buf/2, buf/2)
	readAll(t, c, buf/2)
	if s := p.expectACK(); s.Window != buf {
		t.Errorf("window update %d, want %d", s.Window, buf)
	}
	r.nothing()
}

// A passive open says no more than its SYN-ACK's window until the peer
// sends: a receive buffer larger than the 65535 bytes a SYN's unscaled
// field can say is no reason for a window update as the handshake
// completes (a segment more per connection, which Linux does not send),
// and the ACK of the peer's first data carries the whole window.
func TestPassiveOpenSendsNoWindowUpdateBeforeData(t *testing.T) {
	for _, buf := range []int{64 << 10, 128 << 10, 1 << 20} {
		t.Run(strconv.Itoa(buf>>10)+" KiB", func(t *testing.T) {
			r := newRig(t, tcp.Config{ReceiveBuffer: buf})
			l := r.listen(0)
			p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{MSS: 1000, HasWScale: true, WScale: 3})
			p.handshake()
			acceptOne(t, l)
			r.nothing()
			p.send(A, pattern(1000))
			p.advance(delayedAck)
			acks := p.sent()
			if len(acks) != 1 {
				t.Fatalf("%d segments for the peer's first data, want its ACK", len(acks))
			}
			want := min(buf-1000, 65535<<stackWScale)
			if got := int(acks[0].Window) << stackWScale; got < want-(1<<stackWScale) || got > want+(1<<stackWScale) {
				t.Errorf("the first ACK's window %d, want the whole buffer's %d", got, want)
			}
		})
	}
}
