package tcp_test

import (
	"context"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Resets: RFC 9293 section 3.10.7 and RFC 5961.

// A segment to a port nobody listens on (RFC 9293 3.10.7.1): "If the ACK
// bit is off, sequence number zero is used, <SEQ=0><ACK=SEG.SEQ+SEG.LEN>
// <CTL=RST,ACK>. If the ACK bit is on, <SEQ=SEG.ACK><CTL=RST>." A reset
// is never answered.
func TestClosedPortAnswersWithReset(t *testing.T) {
	const seq, ack = 5000, 777777
	tests := []struct {
		name    string
		flags   uint8
		payload int
		reset   bool
		want    rawtest.TCPSegment // Flags, Seq, Ack
	}{
		{"SYN", S, 0, true, rawtest.TCPSegment{Flags: R | A, Seq: 0, Ack: seq + 1}},
		{"SYN with data", S, 10, true, rawtest.TCPSegment{Flags: R | A, Seq: 0, Ack: seq + 11}},
		{"FIN with data", F, 3, true, rawtest.TCPSegment{Flags: R | A, Seq: 0, Ack: seq + 4}},
		{"no flags, data", 0, 7, true, rawtest.TCPSegment{Flags: R | A, Seq: 0, Ack: seq + 7}},
		{"ACK", A, 0, true, rawtest.TCPSegment{Flags: R, Seq: ack}},
		{"SYN-ACK", S | A, 0, true, rawtest.TCPSegment{Flags: R, Seq: ack}},
		{"data, FIN, ACK", P | F | A, 20, true, rawtest.TCPSegment{Flags: R, Seq: ack}},
		{"RST", R, 0, false, rawtest.TCPSegment{}},
		{"RST-ACK", R | A, 0, false, rawtest.TCPSegment{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			p := r.synPeer(peerPort, seq, rawtest.TCPOpts{})
			p.stack = netip.AddrPortFrom(rawtest.StackAddr, 9)
			p.inject(rawtest.TCPSegment{Seq: seq, Ack: ack, Flags: tt.flags, Window: 1000, Payload: pattern(tt.payload)})
			if !tt.reset {
				r.nothing()
				if n := r.counter("OutRsts"); n != 0 {
					t.Errorf("OutRsts = %d", n)
				}
				return
			}
			got := r.nextSeg()
			if got.Src != p.stack || got.Dst != p.addr || got.Flags != tt.want.Flags || got.Seq != tt.want.Seq ||
				tt.want.Flags&A != 0 && got.Ack != tt.want.Ack || len(got.Payload) != 0 {
				t.Errorf("got %v\nwant Flags [%s], seq %d, ack %d", got, rawtest.FlagString(tt.want.Flags), tt.want.Seq, tt.want.Ack)
			}
			r.nothing()
			if n := r.counter("OutRsts"); n != 1 {
				t.Errorf("OutRsts = %d, want 1", n)
			}
		})
	}
}

// In LISTEN (RFC 9293 3.10.7.2): a RST is ignored, "any acknowledgment is
// bad if it arrives on a connection still in the LISTEN state": a reset
// <SEQ=SEG.ACK><CTL=RST>; anything else without SYN is dropped.
func TestListenerResetsAStrayACK(t *testing.T) {
	const ack = 424242
	tests := []struct {
		name  string
		flags uint8
		reset bool
	}{
		{"ACK", A, true},
		{"data with ACK", P | A, true},
		{"FIN-ACK", F | A, true},
		{"SYN-ACK", S | A, true},
		{"RST", R, false},
		{"RST-ACK", R | A, false},
		{"data without ACK", P, false},
		{"FIN without ACK", F, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			r.listen(0)
			p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{})
			p.inject(rawtest.TCPSegment{Seq: peerISN, Ack: ack, Flags: tt.flags, Window: 1000, Payload: []byte("x")})
			if tt.reset {
				p.expect(R, ack, 0, 0)
			}
			r.nothing()
			if rows := r.h.S.Connections(); len(rows) != 1 {
				t.Errorf("connection table %+v, want the listener alone", rows)
			}
		})
	}
}

// SYN-SENT (RFC 9293 3.10.7.3, RFC 5961 3.2): an ACK outside ISS < ACK =<
// SND.NXT earns a reset unless it carries one; a reset counts only with an
// acceptable ACK, and then refuses the connection.
func TestSynSentResets(t *testing.T) {
	tests := []struct {
		name    string
		flags   uint8
		ackOff  int32 // SEG.ACK - ISS
		reset   bool  // the stack answers <SEQ=SEG.ACK><CTL=RST>
		refused bool  // Dial fails with ECONNREFUSED
	}{
		{"SYN-ACK acknowledging ISS", S | A, 0, true, false},
		{"SYN-ACK acknowledging beyond SND.NXT", S | A, 2, true, false},
		{"ACK acknowledging beyond SND.NXT", A, 2, true, false},
		{"ACK acknowledging before ISS", A, -100, true, false},
		{"RST-ACK acknowledging the SYN", R | A, 1, false, true},
		{"RST-ACK acknowledging ISS", R | A, 0, false, false},
		{"RST without ACK", R, 1, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			raddr := netip.AddrPortFrom(rawtest.PeerAddr, 80)
			ch := r.dial(context.Background(), raddr)
			syn := r.nextSeg()
			p := &peer{rig: r, addr: raddr, stack: syn.Src, iss: syn.Seq, rcv: syn.Seq + 1, nxt: peerISN, wnd: 65535}
			ack := syn.Seq + uint32(tt.ackOff)
			p.inject(rawtest.TCPSegment{Seq: peerISN, Ack: ack, Flags: tt.flags, Window: 1000})
			if tt.reset {
				p.expect(R, ack, 0, 0)
			}
			if tt.refused {
				res := waitDial(t, ch)
				if !isErr(res.err, syscall.ECONNREFUSED) {
					t.Fatalf("dial: %v, want ECONNREFUSED", res.err)
				}
				p.waitState("")
				r.nothing()
				return
			}
			r.nothing()
			if st := p.state(); st != "SYN-SENT" {
				t.Fatalf("state %q, want SYN-SENT still", st)
			}
			// The handshake still completes.
			sa := p.seg(S|A, nil)
			p.inject(sa)
			p.nxt++
			p.expectACK()
			if res := waitDial(t, ch); res.err != nil {
				t.Fatalf("dial: %v", res.err)
			} else {
				res.c.Close()
			}
		})
	}
}

// In a synchronized state (RFC 9293 3.10.7.4 "second", RFC 5961 3.2): a
// reset exactly at RCV.NXT resets the connection; elsewhere in the window
// it earns a challenge ACK; outside the window it is dropped.
func TestEstablishedResets(t *testing.T) {
	tests := []struct {
		name      string
		seqOff    int32 // SEG.SEQ - RCV.NXT
		flags     uint8
		reset     bool
		challenge bool
	}{
		{"RST at RCV.NXT", 0, R, true, false},
		{"RST-ACK at RCV.NXT", 0, R | A, true, false},
		{"RST in the window", 100, R, false, true},
		{"RST at the window's last byte", 65534, R, false, true},
		{"RST just past the window", 65535, R, false, false},
		{"RST before RCV.NXT", -1, R, false, false},
		{"RST far out", 1 << 30, R, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.accepted(rawtest.TCPOpts{})
			read := readAsync(c, 10)
			p.inject(rawtest.TCPSegment{Seq: p.nxt + uint32(tt.seqOff), Ack: p.rcv, Flags: tt.flags, Window: p.wnd})
			switch {
			case tt.reset:
				res := wait(t, read)
				if !isErr(res.err, syscall.ECONNRESET) {
					t.Fatalf("read after the reset: %v, want ECONNRESET", res.err)
				}
				p.waitState("")
			case tt.challenge:
				p.expectACK()
			}
			r.nothing()
			if want := int64(b2i(tt.challenge)); r.counter("ChallengeACKs") != want {
				t.Errorf("ChallengeACKs = %d, want %d", r.counter("ChallengeACKs"), want)
			}
			if !tt.reset {
				blocked(t, read)
				if st := p.state(); st != "ESTABLISHED" {
					t.Errorf("state %q, want ESTABLISHED", st)
				}
				// The connection still works.
				p.send(P|A, []byte("ok"))
				if res := wait(t, read); res.err != nil || string(res.b) != "ok" {
					t.Errorf("read %q, %v", res.b, res.err)
				}
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A SYN in a synchronized state earns a challenge ACK (RFC 5961 4.2,
// adopted by RFC 9293 3.10.7.4 "fourth") and changes nothing.
func TestSynInEstablishedEarnsAChallengeACK(t *testing.T) {
	tests := []struct {
		name   string
		seqOff int32
	}{
		{"at RCV.NXT", 0},
		{"in the window", 1000},
		{"the original SYN again", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			_, p := r.accepted(rawtest.TCPOpts{})
			p.inject(rawtest.TCPSegment{Seq: p.nxt + uint32(tt.seqOff), Flags: S, Window: p.wnd})
			p.expectACK()
			r.nothing()
			if st := p.state(); st != "ESTABLISHED" {
				t.Errorf("state %q, want ESTABLISHED", st)
			}
		})
	}
}

// Data for an application that closed its socket cannot be delivered: RFC
// 9293 3.10.4 and RFC 1122 4.2.2.13 answer with a reset.
func TestDataAfterCloseIsAnsweredWithReset(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	c.Close()
	p.expect(F|A, p.rcv, p.nxt, 0)
	p.send(P|A, []byte("too late"))
	s := p.nextSeg()
	if s.Flags&R == 0 || s.Seq != p.rcv {
		t.Fatalf("answer %v, want a reset at %d", s, p.rcv)
	}
	p.waitState("")
	r.nothing()
	if n := r.counter("DataAfterClose"); n != 1 {
		t.Errorf("DataAfterClose = %d, want 1", n)
	}
}

// Closing with data unread, or with SO_LINGER 0, aborts: a reset instead of
// a FIN (RFC 2525 2.17; RFC 9293 3.10.5 ABORT), and unsent data is lost.
func TestAbortiveClose(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c *tcp.Conn, p *peer)
	}{
		{"unread data", func(t *testing.T, c *tcp.Conn, p *peer) {
			p.send(P|A, []byte("unread"))
			p.settle() // the data is queued (and its ACK delayed)
		}},
		{"linger 0", func(t *testing.T, c *tcp.Conn, p *peer) {
			c.SetLinger(0)
		}},
		{"linger 0 with data unsent", func(t *testing.T, c *tcp.Conn, p *peer) {
			c.SetLinger(0)
			p.wnd = 0
			p.ack() // the peer's window closes
			p.settle()
			write(t, c, []byte("never sent"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.accepted(rawtest.TCPOpts{})
			tt.setup(t, c, p)
			// Whatever the stack had to say before the Close, such as a
			// delayed ACK, it has not said yet.
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			s := p.nextSeg()
			if s.Flags != R|A || s.Seq != p.rcv {
				t.Fatalf("after Close: %v, want Flags [R.] at %d", s, p.rcv)
			}
			p.waitState("")
			r.nothing()
		})
	}
}

// SO_LINGER with a time: Close waits for the data to be acknowledged, and
// resets when the time runs out first.
func TestLingerWaitsForTheData(t *testing.T) {
	tests := []struct {
		name   string
		acked  bool
		expect func(p *peer)
	}{
		{"acknowledged in time: FIN", true, func(p *peer) { p.expect(F|A, p.rcv, p.nxt, 0) }},
		{"not acknowledged in time: reset", false, func(p *peer) { p.expect(R|A, p.rcv, p.nxt, 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No retransmission or probe within the linger time.
			r := newRig(t, tcp.Config{RTOMin: 10 * time.Second})
			c, p := r.accepted(rawtest.TCPOpts{})
			c.SetLinger(1)
			p.wnd = 0
			p.ack()
			p.settle()
			write(t, c, pattern(100))
			p.settle()
			armed := r.h.Clock.Pending()
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			r.h.WaitTimers(t, armed+1) // Close's linger timer
			r.nothing()
			if tt.acked {
				p.wnd = 65535
				p.ack()
				p.expect(F|P|A, p.rcv, p.nxt, 100)
				p.ack()
			} else {
				p.advance(time.Second)
				tt.expect(p)
			}
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("close: %v", err)
				}
			case <-time.After(rawtest.Timeout):
				t.Fatal("Close did not return")
			}
			if tt.acked {
				p.waitState("FIN-WAIT-2")
			} else {
				p.waitState("")
			}
			r.nothing()
		})
	}
}
