package tcp_test

import (
	"context"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// State machine: RFC 9293 sections 3.3.2 (figure 5) and 3.10.

const (
	S, A, F, R, P, U = rawtest.SYN, rawtest.ACK, rawtest.FIN, rawtest.RST, rawtest.PSH, rawtest.URG
)

// The stack's MSS on a 1500-byte link (RFC 9293 3.7.1, RFC 6691), and the
// window scale that lets 65535 express the 6 MiB a receive buffer may
// auto-tune to (the default ReceiveBufferMax).
const (
	stackMSS    = 1460
	stackWScale = 7
)

const (
	rtoMin     = 200 * time.Millisecond // the default RTOMin: the RTO after a handshake with no delay
	finTimeout = 3 * time.Second
)

var allOpts = rawtest.TCPOpts{MSS: 1460, HasWScale: true, WScale: 2, HasTimestamp: true, TSVal: 777}

// sameOpts compares options, ignoring the stack's own timestamp value.
func sameOpts(got, want rawtest.TCPOpts) bool {
	got.TSVal = want.TSVal
	return got == want
}

func TestPassiveOpenAnswersOnlyTheOptionsOffered(t *testing.T) {
	tests := []struct {
		name  string
		offer rawtest.TCPOpts
		want  rawtest.TCPOpts // TSVal is the stack's own and not compared
	}{
		{"none", rawtest.TCPOpts{}, rawtest.TCPOpts{MSS: stackMSS}},
		{"MSS", rawtest.TCPOpts{MSS: 1000}, rawtest.TCPOpts{MSS: stackMSS}},
		{"window scale", rawtest.TCPOpts{MSS: 1460, HasWScale: true, WScale: 3},
			rawtest.TCPOpts{MSS: stackMSS, HasWScale: true, WScale: stackWScale}},
		{"timestamps", rawtest.TCPOpts{MSS: 1460, HasTimestamp: true, TSVal: 777},
			rawtest.TCPOpts{MSS: stackMSS, HasTimestamp: true, TSEcr: 777}},
		{"all", allOpts, rawtest.TCPOpts{MSS: stackMSS, HasWScale: true, WScale: stackWScale, HasTimestamp: true, TSEcr: 777}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			l := r.listen(0)
			p := r.synPeer(peerPort, peerISN, tt.offer)
			sa := p.handshake()
			if sa.Window != 65535 {
				t.Errorf("SYN-ACK window %d, want 65535: a SYN's window is never scaled (RFC 7323 2.2)", sa.Window)
			}
			if !sameOpts(sa.Opts, tt.want) {
				t.Errorf("SYN-ACK options %v, want %v", sa.Opts, tt.want)
			}
			c := acceptOne(t, l)
			if st := p.info().State; st != "ESTABLISHED" {
				t.Errorf("state %s after the ACK, want ESTABLISHED", st)
			}
			if c.RemoteAddr().String() != p.addr.String() {
				t.Errorf("accepted %v, want %v", c.RemoteAddr(), p.addr)
			}
			r.nothing()
		})
	}
}

func TestActiveOpenUsesOnlyTheOptionsTheSynAckCarried(t *testing.T) {
	tests := []struct {
		name   string
		answer rawtest.TCPOpts
		window uint16 // in the ACK: scaled only when negotiated
		ts     bool   // the ACK and what follows carry timestamps
	}{
		{"none", rawtest.TCPOpts{}, 65535, false},
		{"MSS", rawtest.TCPOpts{MSS: 536}, 65535, false},
		{"window scale", rawtest.TCPOpts{MSS: 1460, HasWScale: true, WScale: 0}, (128 << 10) >> stackWScale, false},
		{"timestamps", rawtest.TCPOpts{MSS: 1460, HasTimestamp: true, TSVal: 99}, 65535, true},
		{"all", allOpts, (128 << 10) >> stackWScale, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			raddr := netip.AddrPortFrom(rawtest.PeerAddr, 80)
			ch := r.dial(context.Background(), raddr)
			syn := r.nextSeg()
			want := rawtest.TCPOpts{MSS: stackMSS, HasWScale: true, WScale: stackWScale, SACKPermitted: true, HasTimestamp: true}
			if syn.Flags != S || syn.Ack != 0 || syn.Window != 65535 || !sameOpts(syn.Opts, want) {
				t.Fatalf("SYN %v, want flags S, window 65535, options %v", syn, want)
			}
			p := &peer{rig: r, addr: raddr, stack: syn.Src, iss: syn.Seq, rcv: syn.Seq + 1, nxt: peerISN, wnd: 65535}
			sa := p.seg(S|A, nil)
			sa.Opts = tt.answer
			p.inject(sa)
			p.nxt++
			ack := p.expectACK()
			if ack.Window != tt.window {
				t.Errorf("ACK window %d, want %d", ack.Window, tt.window)
			}
			if ack.Opts.HasTimestamp != tt.ts || tt.ts && ack.Opts.TSEcr != tt.answer.TSVal {
				t.Errorf("ACK options %v, want timestamps %v echoing %d", ack.Opts, tt.ts, tt.answer.TSVal)
			}
			res := waitDial(t, ch)
			if res.err != nil {
				t.Fatal(res.err)
			}
			write(t, res.c, []byte("x"))
			d := p.expectData(1, true)
			if d.Opts.HasTimestamp != tt.ts || d.Opts.MSS != 0 || d.Opts.HasWScale {
				t.Errorf("data segment options %v, want timestamps %v and nothing else", d.Opts, tt.ts)
			}
			if st := p.info().State; st != "ESTABLISHED" {
				t.Errorf("state %s, want ESTABLISHED", st)
			}
		})
	}
}

// Simultaneous open (RFC 9293 figure 8): our SYN and the peer's cross; each
// side answers the other's SYN with a SYN-ACK, and the peer's SYN-ACK
// completes the handshake.
func TestSimultaneousOpen(t *testing.T) {
	r := newRig(t, tcp.Config{})
	raddr := netip.AddrPortFrom(rawtest.PeerAddr, 80)
	ch := r.dial(context.Background(), raddr)
	syn := r.nextSeg()
	p := &peer{rig: r, addr: raddr, stack: syn.Src, iss: syn.Seq, rcv: syn.Seq, nxt: peerISN, wnd: 65535}
	// The peer's SYN crosses ours: it acknowledges nothing.
	p.send(S, nil)
	// SYN-SENT -> SYN-RECEIVED: <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>.
	p.expect(S|A, p.iss, p.nxt, 0)
	if st := p.info().State; st != "SYN-RECEIVED" {
		t.Errorf("state %s, want SYN-RECEIVED", st)
	}
	// The peer's SYN-ACK (line 6 of figure 8) repeats its SYN and
	// acknowledges ours.
	p.inject(rawtest.TCPSegment{Seq: p.nxt - 1, Ack: p.rcv, Flags: S | A, Window: p.wnd})
	res := waitDial(t, ch)
	if res.err != nil {
		t.Fatalf("dial: %v", res.err)
	}
	if st := p.info().State; st != "ESTABLISHED" {
		t.Errorf("state %s, want ESTABLISHED", st)
	}
	// No SYN-ACK ping-pong: the stack has nothing more to say.
	r.nothing()
	write(t, res.c, []byte("hello"))
	p.expectData(5, true)
}

// Half-close (RFC 9293 3.6): after CloseWrite the stack sends its FIN and
// still receives until the peer's FIN.
func TestHalfCloseStillReceives(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	p.expect(F|A, p.rcv, p.nxt, 0)
	p.ack()
	p.waitState("FIN-WAIT-2")
	p.send(P|A, []byte("still here"))
	checkData(t, readAll(t, c, 10), []byte("still here"))
	p.send(F|A, nil)
	p.expectACK()
	if r := wait(t, readAsync(c, 10)); r.err != io.EOF {
		t.Errorf("read after the peer's FIN: %d, %v; want io.EOF", r.n, r.err)
	}
	if st := p.info().State; st != "TIME-WAIT" {
		t.Errorf("state %s, want TIME-WAIT", st)
	}
}

// Every closing transition of figure 5, one a row: from a state the test
// reaches, one event, what the stack sends, the state it is in after.
func TestClosingTransitions(t *testing.T) {
	type step func(t *testing.T, c *tcp.Conn, p *peer)
	closeApp := func(t *testing.T, c *tcp.Conn, p *peer) {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	closeWrite := func(t *testing.T, c *tcp.Conn, p *peer) {
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	expectFIN := func(t *testing.T, c *tcp.Conn, p *peer) { p.expect(F|A, p.rcv, p.nxt, 0) }
	expectACK := func(t *testing.T, c *tcp.Conn, p *peer) { p.expectACK() }
	nothing := func(t *testing.T, c *tcp.Conn, p *peer) { p.nothing() }
	peerFIN := func(t *testing.T, c *tcp.Conn, p *peer) { p.send(F|A, nil) }
	peerACK := func(t *testing.T, c *tcp.Conn, p *peer) { p.ack() }
	peerRST := func(t *testing.T, c *tcp.Conn, p *peer) { p.inject(p.seg(R, nil)) }
	// The stack closing aborts every connection (RFC 9293 3.10.4 ABORT).
	stackCloses := func(t *testing.T, c *tcp.Conn, p *peer) { p.rig.proto().Close() }
	expectRST := func(t *testing.T, c *tcp.Conn, p *peer) { p.expect(R|A, p.rcv, p.nxt, 0) }
	// The peer's FIN that does not acknowledge ours: the FINs crossed.
	crossingFIN := func(t *testing.T, c *tcp.Conn, p *peer) {
		s := p.seg(F|A, nil)
		s.Ack = p.rcv - 1
		p.inject(s)
		p.nxt++
	}
	seq := func(steps ...step) step {
		return func(t *testing.T, c *tcp.Conn, p *peer) {
			for _, s := range steps {
				s(t, c, p)
			}
		}
	}
	var (
		established = seq()
		finWait1    = seq(closeApp, expectFIN)
		finWait2    = seq(finWait1, peerACK, nothing)
		closing     = seq(finWait1, crossingFIN, expectACK)
		closeWait   = seq(peerFIN, expectACK)
		lastAck     = seq(closeWait, closeApp, expectFIN)
		timeWait    = seq(finWait2, peerFIN, expectACK)
	)
	tests := []struct {
		name      string
		from      step
		fromState string
		event     step
		sends     step
		to        string // "" for CLOSED: gone from the table
	}{
		{"ESTABLISHED -Close-> FIN-WAIT-1", established, "ESTABLISHED", closeApp, expectFIN, "FIN-WAIT-1"},
		{"ESTABLISHED -CloseWrite-> FIN-WAIT-1", established, "ESTABLISHED", closeWrite, expectFIN, "FIN-WAIT-1"},
		{"ESTABLISHED -FIN-> CLOSE-WAIT", established, "ESTABLISHED", peerFIN, expectACK, "CLOSE-WAIT"},
		{"FIN-WAIT-1 -ACK of FIN-> FIN-WAIT-2", finWait1, "FIN-WAIT-1", peerACK, nothing, "FIN-WAIT-2"},
		{"FIN-WAIT-1 -FIN-> CLOSING", finWait1, "FIN-WAIT-1", crossingFIN, expectACK, "CLOSING"},
		{"FIN-WAIT-1 -FIN,ACK of FIN-> TIME-WAIT", finWait1, "FIN-WAIT-1", peerFIN, expectACK, "TIME-WAIT"},
		{"FIN-WAIT-2 -FIN-> TIME-WAIT", finWait2, "FIN-WAIT-2", peerFIN, expectACK, "TIME-WAIT"},
		{"CLOSING -ACK of FIN-> TIME-WAIT", closing, "CLOSING", peerACK, nothing, "TIME-WAIT"},
		{"CLOSE-WAIT -Close-> LAST-ACK", closeWait, "CLOSE-WAIT", closeApp, expectFIN, "LAST-ACK"},
		{"LAST-ACK -ACK of FIN-> CLOSED", lastAck, "LAST-ACK", peerACK, nothing, ""},
		{"TIME-WAIT -2 MSL-> CLOSED", timeWait, "TIME-WAIT", func(t *testing.T, c *tcp.Conn, p *peer) { p.advance(2 * time.Second) }, nothing, ""},
		// The FIN is retransmitted like data (RFC 9293 3.10.4 CLOSE,
		// RFC 6298): RTOMin after a handshake with no delay.
		{"FIN-WAIT-1 -RTO-> FIN-WAIT-1", finWait1, "FIN-WAIT-1", func(t *testing.T, c *tcp.Conn, p *peer) { p.advance(rtoMin) },
			func(t *testing.T, c *tcp.Conn, p *peer) { p.expect(F|A, p.rcv-1, p.nxt, 0) }, "FIN-WAIT-1"},
		{"LAST-ACK -RTO-> LAST-ACK", lastAck, "LAST-ACK", func(t *testing.T, c *tcp.Conn, p *peer) { p.advance(rtoMin) },
			func(t *testing.T, c *tcp.Conn, p *peer) { p.expect(F|A, p.rcv-1, p.nxt, 0) }, "LAST-ACK"},
		// An orphaned FIN-WAIT-2 ends after FinTimeout, silently (as
		// Linux's tcp_fin_timeout).
		{"FIN-WAIT-2 -FinTimeout-> CLOSED", finWait2, "FIN-WAIT-2", func(t *testing.T, c *tcp.Conn, p *peer) { p.advance(finTimeout) }, nothing, ""},
		// A reset ends the closing states at once, but not TIME-WAIT
		// (RFC 1337 section 3: TIME-WAIT assassination).
		{"CLOSING -RST-> CLOSED", closing, "CLOSING", peerRST, nothing, ""},
		{"LAST-ACK -RST-> CLOSED", lastAck, "LAST-ACK", peerRST, nothing, ""},
		{"TIME-WAIT -RST-> TIME-WAIT", timeWait, "TIME-WAIT", peerRST, nothing, "TIME-WAIT"},
		// ABORT resets a peer that may still send or wait for data, and
		// only deletes the TCB once both sides have said all (RFC 9293
		// 3.10.4): a TIME-WAIT left when the stack closes sends nothing.
		{"ESTABLISHED -stack closes-> CLOSED", established, "ESTABLISHED", stackCloses, expectRST, ""},
		{"FIN-WAIT-2 -stack closes-> CLOSED", finWait2, "FIN-WAIT-2", stackCloses, expectRST, ""},
		{"CLOSE-WAIT -stack closes-> CLOSED", closeWait, "CLOSE-WAIT", stackCloses, expectRST, ""},
		{"CLOSING -stack closes-> CLOSED", closing, "CLOSING", stackCloses, nothing, ""},
		{"LAST-ACK -stack closes-> CLOSED", lastAck, "LAST-ACK", stackCloses, nothing, ""},
		{"TIME-WAIT -stack closes-> CLOSED", timeWait, "TIME-WAIT", stackCloses, nothing, ""},
		// Data the peer sends after its FIN (a broken peer) changes
		// nothing but earns an ACK.
		{"CLOSE-WAIT -data-> CLOSE-WAIT", closeWait, "CLOSE-WAIT", func(t *testing.T, c *tcp.Conn, p *peer) {
			p.inject(p.seg(P|A, []byte("after FIN")))
		}, expectACK, "CLOSE-WAIT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{MSL: time.Second, FinTimeout: finTimeout})
			c, p := r.accepted(rawtest.TCPOpts{})
			tt.from(t, c, p)
			p.settle()
			if st := p.state(); st != tt.fromState {
				t.Fatalf("reached %q, want %q", st, tt.fromState)
			}
			tt.event(t, c, p)
			tt.sends(t, c, p)
			p.waitState(tt.to)
			r.nothing()
		})
	}
}

// TIME-WAIT lasts 2*MSL (RFC 9293 3.6.1) and then the connection leaves the
// table.
func TestTimeWaitLastsTwoMSL(t *testing.T) {
	const msl = 5 * time.Second
	r := newRig(t, tcp.Config{MSL: msl})
	c, p := r.accepted(rawtest.TCPOpts{})
	c.Close()
	p.expect(F|A, p.rcv, p.nxt, 0)
	p.send(F|A, nil)
	p.expectACK()
	p.advance(2*msl - time.Millisecond)
	if st := p.state(); st != "TIME-WAIT" {
		t.Fatalf("state %q a millisecond before 2 MSL, want TIME-WAIT", st)
	}
	p.advance(time.Millisecond)
	p.waitState("")
	r.nothing()
}

// A FIN retransmitted into TIME-WAIT (its ACK was lost) is acknowledged
// again, and the 2 MSL wait starts over (RFC 9293 3.10.7.4, TIME-WAIT).
func TestTimeWaitReacknowledgesARetransmittedFIN(t *testing.T) {
	const msl = 5 * time.Second
	r := newRig(t, tcp.Config{MSL: msl})
	c, p := r.accepted(rawtest.TCPOpts{})
	c.Close()
	p.expect(F|A, p.rcv, p.nxt, 0)
	p.send(F|A, nil)
	p.expectACK()
	p.advance(msl)
	p.inject(rawtest.TCPSegment{Seq: p.nxt - 1, Ack: p.rcv, Flags: F | A, Window: p.wnd})
	p.expectACK()
	p.advance(2*msl - time.Millisecond)
	if st := p.state(); st != "TIME-WAIT" {
		t.Fatalf("state %q 2 MSL after the first FIN, want TIME-WAIT: the retransmitted FIN restarts the wait", st)
	}
	p.advance(time.Millisecond)
	p.waitState("")
}

// SYN-RECEIVED on a passive open (RFC 9293 3.10.7.4): a duplicate SYN gets
// the SYN-ACK again; an ACK of something never sent, a reset; a reset at
// RCV.NXT returns the listener to LISTEN for that peer, with nothing to
// accept; silence gets SynAckRetries retransmissions and then the end.
func TestSynReceived(t *testing.T) {
	tests := []struct {
		name  string
		event func(t *testing.T, p *peer)
		sends func(t *testing.T, p *peer)
		to    string
	}{
		{"duplicate SYN: the SYN-ACK again", func(t *testing.T, p *peer) {
			p.inject(rawtest.TCPSegment{Seq: p.nxt - 1, Flags: S, Window: p.wnd})
		}, func(t *testing.T, p *peer) { p.expect(S|A, p.iss, p.nxt, 0) }, "SYN-RECEIVED"},
		{"ACK of what was never sent: a reset", func(t *testing.T, p *peer) {
			p.inject(rawtest.TCPSegment{Seq: p.nxt, Ack: p.iss + 2, Flags: A, Window: p.wnd})
		}, func(t *testing.T, p *peer) { p.expect(R, p.iss+2, 0, 0) }, "SYN-RECEIVED"},
		{"reset: back to LISTEN", func(t *testing.T, p *peer) {
			p.send(R, nil)
		}, func(t *testing.T, p *peer) {}, ""},
		{"silence: SYN-ACKs after 1, 2 and 4 s, then the end", func(t *testing.T, p *peer) {
			for _, d := range []time.Duration{time.Second, 2 * time.Second} {
				s := p.expectAfter(d, p.iss, 0)
				if s.Flags != S|A {
					t.Fatalf("retransmission %v, want the SYN-ACK", s)
				}
			}
			p.advance(4 * time.Second)
		}, func(t *testing.T, p *peer) {}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{SynAckRetries: 2})
			l := r.listen(1)
			_, p := r.synAckISN(peerPort)
			tt.event(t, p)
			tt.sends(t, p)
			p.waitState(tt.to)
			r.nothing()
			if tt.to != "" {
				return
			}
			// Nothing to accept, and the backlog's place is free again.
			l.SetDeadline(r.h.Clock.Now())
			if c, err := l.Accept(); err == nil {
				t.Errorf("accepted %v", c.RemoteAddr())
			}
			r.synAckISN(peerPort + 1)
		})
	}
}

// Closing a listener resets the connections it had not handed out.
func TestClosingAListenerResetsUnacceptedConnections(t *testing.T) {
	r := newRig(t, tcp.Config{})
	l := r.listen(0)
	p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{})
	p.handshake()
	p.waitState("ESTABLISHED")
	l.Close()
	p.expect(R|A, p.rcv, p.nxt, 0)
	p.waitState("")
	r.nothing()
}

// A FIN that arrives ahead of data is held with it, and taken when the
// hole is filled.
func TestOutOfOrderFIN(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	p.inject(rawtest.TCPSegment{Seq: p.nxt + 5, Ack: p.rcv, Flags: F | A, Window: p.wnd, Payload: []byte("world")})
	p.expectACK() // a duplicate
	if st := p.state(); st != "ESTABLISHED" {
		t.Errorf("state %q with the FIN out of order, want ESTABLISHED", st)
	}
	p.send(A, []byte("hello"))
	p.nxt += 6
	p.expectACK()
	p.waitState("CLOSE-WAIT")
	checkData(t, readAll(t, c, 10), []byte("helloworld"))
	if res := wait(t, readAsync(c, 10)); res.err != io.EOF {
		t.Errorf("read after the FIN: %v, want io.EOF", res.err)
	}
}

// Close after a write: the FIN rides on the last data segment.
func TestFINRidesOnTheLastData(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	p.wnd = 0
	p.ack()
	p.settle()
	write(t, c, pattern(100))
	c.Close()
	r.nothing()
	p.wnd = 65535
	p.ack()
	p.expect(F|P|A, p.rcv, p.nxt, 100)
	r.nothing()
}

// A segment whose checksum is wrong is dropped unanswered and counted
// (RFC 9293 3.1: the checksum is never optional).
func TestBadChecksumIsDropped(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	f := r.h.TCPFrame(t, p.seg(P|A, []byte("corrupted")))
	f[len(f)-1] ^= 0x20
	r.h.Inject(f)
	r.nothing()
	if n := r.counter("InCsumErrors"); n != 1 {
		t.Errorf("InCsumErrors = %d, want 1", n)
	}
	p.send(P|A, []byte("intact"))
	checkData(t, readAll(t, c, 6), []byte("intact"))
}
