package tcp_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Receive-window auto-tuning (autotune.go): a connection's receive buffer
// follows what its application reads per round trip, within
// ReceiveBufferMax.

const (
	tuneInitial = 64 << 10
	tuneMax     = 1 << 20
	tuneRTT     = 50 * time.Millisecond
)

// tunePath is a peer sending to the stack over a path with a round trip of
// tuneRTT on the virtual clock: each round trip it sends all the window the
// stack last offered, and the application reads what it is told to.
type tunePath struct {
	*peer
	c       *tcp.Conn
	shift   uint8
	edge    uint32 // the right edge of the window offered
	stackTS uint32 // the TSval of the stack's last ACK
	ts      uint32
	windows []int // the window offered after each round trip
}

// newTunePath opens a connection from a peer offering opts (window scaling
// at least) to a stack configured with cfg.
func newTunePath(t *testing.T, cfg tcp.Config, opts rawtest.TCPOpts) *tunePath {
	t.Helper()
	r := newRig(t, cfg)
	l := r.listen(0)
	p := r.synPeer(peerPort, peerISN, opts)
	sa := p.handshake()
	tp := &tunePath{peer: p, c: acceptOne(t, l), shift: sa.Opts.WScale, ts: opts.TSVal}
	tp.edge = p.nxt + uint32(sa.Window)
	tp.stackTS = sa.Opts.TSVal
	tp.acks("the handshake")
	return tp
}

// acks takes the stack's ACKs: the right edge of its window, which must
// never move left (RFC 9293 3.8.6.2.2), and its timestamp.
func (tp *tunePath) acks(what string) {
	tp.t.Helper()
	for _, s := range tp.sent() {
		if s.Flags != A || len(s.Payload) != 0 {
			tp.t.Fatalf("%s: %v, want ACKs", what, s)
		}
		edge := s.Ack + uint32(s.Window)<<tp.shift
		if int32(edge-tp.edge) < 0 {
			tp.t.Fatalf("%s: %v moves the right edge left of %d", what, s, tp.edge)
		}
		tp.edge = edge
		if s.Opts.HasTimestamp {
			tp.stackTS = s.Opts.TSVal
		}
	}
}

// round is one round trip: the peer's data arrives, echoing the stack's
// last timestamp, and the application reads read bytes of what is queued
// (all of it if read < 0).
func (tp *tunePath) round(read int) {
	tp.t.Helper()
	tp.advance(tuneRTT)
	var segs []rawtest.TCPSegment
	for left := int(tp.edge - tp.nxt); left > 0; {
		n := min(left, stackMSS-12)
		s := tp.seg(A, pattern(n))
		if tp.opts.HasTimestamp {
			tp.ts++
			s.Opts = rawtest.TCPOpts{HasTimestamp: true, TSVal: tp.ts, TSEcr: tp.stackTS}
		}
		segs = append(segs, s)
		tp.nxt += uint32(n)
		left -= n
		if len(segs) == 64 { // within the link's queue (pipe.QueueLen)
			tp.inject(segs...)
			tp.settle()
			segs = segs[:0]
		}
	}
	tp.inject(segs...)
	tp.settle()
	queued := tp.info().RecvQueue
	if read < 0 || read > queued {
		read = queued
	}
	if read > 0 {
		readAll(tp.t, tp.c, read)
	}
	tp.acks("a round trip")
	tp.windows = append(tp.windows, int(tp.edge-tp.nxt))
}

var tsOpts = rawtest.TCPOpts{MSS: 1460, HasWScale: true, WScale: 2, HasTimestamp: true, TSVal: 777}

// An application that reads everything at once makes the buffer grow,
// round trip by round trip, to the maximum and no further; the receiver's
// round trip comes from timestamps or, without them, from the time a
// window takes to arrive.
func TestReceiveBufferGrowsWithAFastReader(t *testing.T) {
	tests := []struct {
		name string
		opts rawtest.TCPOpts
	}{
		{"timestamps", tsOpts},
		{"no timestamps", rawtest.TCPOpts{MSS: stackMSS, HasWScale: true, WScale: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTunePath(t, tcp.Config{ReceiveBuffer: tuneInitial, ReceiveBufferMax: tuneMax}, tt.opts)
			for range 6 {
				tp.round(-1)
			}
			t.Logf("windows offered after each round trip: %v", tp.windows)
			if tp.windows[0] > tuneInitial {
				t.Errorf("window %d after the first round trip, want the initial %d at most", tp.windows[0], tuneInitial)
			}
			for i, w := range tp.windows {
				if w > tuneMax {
					t.Errorf("window %d after round trip %d, beyond the maximum %d", w, i+1, tuneMax)
				}
			}
			if last := tp.windows[len(tp.windows)-1]; last < tuneMax-2*stackMSS {
				t.Errorf("window %d at the end, want the maximum %d", last, tuneMax)
			}
			if b := tp.info().RecvBuffer; b != tuneMax {
				t.Errorf("RecvBuffer %d, want %d", b, tuneMax)
			}
			if n := tp.counter("RcvBufAutoGrows"); n == 0 {
				t.Error("RcvBufAutoGrows = 0")
			}
		})
	}
}

// A reader slower than the path, or a buffer the application sized with
// SetReadBuffer (as SO_RCVBUF turns Linux's tuning off), keeps the buffer
// where it was.
func TestReceiveBufferStaysPut(t *testing.T) {
	tests := []struct {
		name string
		set  bool
		read int
	}{
		{"slow reader", false, 8 << 10},
		{"SetReadBuffer", true, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTunePath(t, tcp.Config{ReceiveBuffer: tuneInitial, ReceiveBufferMax: tuneMax}, tsOpts)
			if tt.set {
				if err := tp.c.SetReadBuffer(tuneInitial); err != nil {
					t.Fatal(err)
				}
			}
			for range 6 {
				tp.round(tt.read)
			}
			t.Logf("windows offered after each round trip: %v", tp.windows)
			for i, w := range tp.windows {
				if w > tuneInitial {
					t.Errorf("window %d after round trip %d, beyond the buffer's %d", w, i+1, tuneInitial)
				}
			}
			if b := tp.info().RecvBuffer; b != tuneInitial {
				t.Errorf("RecvBuffer %d, want %d", b, tuneInitial)
			}
			if n := tp.counter("RcvBufAutoGrows"); n != 0 {
				t.Errorf("RcvBufAutoGrows = %d, want 0", n)
			}
		})
	}
}
