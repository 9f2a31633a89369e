package tcp

import (
	"time"

	"github.com/gonetstack/gonet/seqnum"
)

// Receive-window auto-tuning ("dynamic right-sizing", as Linux's
// tcp_rcv_space_adjust with tcp_moderate_rcvbuf). The window a receiver
// offers caps the sender at one window per round trip, so a buffer sized
// for a LAN starves a long fat path (RFC 7323 section 1.1), and one sized
// for the fattest path wastes memory on every other connection. So each
// connection starts with Config.ReceiveBuffer and measures, once per round
// trip, what its application read in that time; when that grows, the
// buffer grows to twice it (a window must cover a round trip of data and
// another in flight while the application catches up) plus sixteen
// segments of slack, up to twice that while the rate is climbing, as in
// slow start; never beyond Config.ReceiveBufferMax. A slow reader's buffer
// stays where it was: what it does not read would only queue. The window
// scale is chosen at SYN time for the maximum (newConn).
//
// The round trip is the receiver's own estimate: from the timestamps the
// sender echoes (RFC 7323 section 4.3: the TSecr of arriving data is the
// TSval of an ACK of ours, so the time since covers that ACK's trip and
// the trip of the data it let go) or, without timestamps, the time one
// window's worth of data takes to arrive.

// rcvTuner is a connection's auto-tuning state, under mu.
type rcvTuner struct {
	off bool          // SetReadBuffer fixed the buffer, as SO_RCVBUF does
	rtt time.Duration // the receiver's round-trip estimate; 0: none yet
	// Without timestamps: RCV.NXT to reach and since when.
	rttSeq seqnum.Value
	rttAt  time.Time
	// The last TSecr sampled: a repeated echo says nothing new.
	lastEcr uint32
	// What the application read since at, and in the last round trip
	// measured (Linux's rcvq_space).
	copied int
	at     time.Time
	space  int
}

// rcvTuneSegs is the initial measure of consumption, ten segments (as
// Linux's TCP_INIT_CWND * advmss): less than that per round trip is no
// reason to grow.
const rcvTuneSegs = 10

// measureRcvRTT takes a receiver RTT sample from a data segment; mu is
// held.
func (c *Conn) measureRcvRTT(seg *segment, now time.Time) {
	t := &c.rcv.tune
	if t.off || len(seg.payload) == 0 {
		return
	}
	if c.tsOK {
		if !seg.opts.HasTimestamp || seg.opts.TSEcr == 0 || seg.opts.TSEcr == t.lastEcr {
			return
		}
		t.lastEcr = seg.opts.TSEcr
		d := time.Duration(int32(c.tsVal()-seg.opts.TSEcr)) * time.Millisecond
		if d < 0 {
			return
		}
		// The timestamp clock ticks in milliseconds: a shorter trip
		// reads as 0, taken as the tick.
		d = max(d, time.Millisecond)
		if t.rtt == 0 {
			t.rtt = d
		} else {
			t.rtt += (d - t.rtt) / 8 // RFC 6298's gain, as Linux
		}
		return
	}
	// Without timestamps (Linux's tcp_rcv_rtt_measure): the time for
	// RCV.NXT to cover the window offered when the measure began. It
	// is at least a round trip, so the smallest sample is the best.
	if !t.rttAt.IsZero() && !c.rcv.nxt.LessThan(t.rttSeq) {
		if d := max(now.Sub(t.rttAt), time.Millisecond); t.rtt == 0 || d < t.rtt {
			t.rtt = d
		}
		t.rttAt = noTime
	}
	if t.rttAt.IsZero() {
		t.rttSeq = c.rcv.adv
		if !t.rttSeq.GreaterThan(c.rcv.nxt) {
			t.rttSeq = c.rcv.nxt.Add(seqnum.Size(c.rcv.mss))
		}
		t.rttAt = now
	}
}

// rcvSpaceAdjust is told that the application read n bytes; once a round
// trip has passed since the last measure it grows the receive buffer to
// what that round trip's consumption calls for. mu is held; output then
// advertises the larger window.
func (c *Conn) rcvSpaceAdjust(n int) {
	t := &c.rcv.tune
	if t.off || t.rtt == 0 {
		return
	}
	now := c.now()
	if t.at.IsZero() {
		// The first measure starts after this read.
		t.at = now
		t.space = min(c.sock.rcvBufSize, rcvTuneSegs*c.rcv.mss)
		return
	}
	t.copied += n
	if now.Sub(t.at) < t.rtt {
		return
	}
	copied := t.copied
	t.copied, t.at = 0, now
	if copied <= t.space {
		return
	}
	// Two round trips of data and sixteen segments of slack, and, while
	// the rate climbs, more in proportion (Linux's "accommodate for
	// sender rate increase"), but at most twice as much: a sender in
	// slow start no more than doubles its rate each round trip, and the
	// first measure against the initial ten segments would otherwise
	// leap to the maximum.
	win := 2*copied + 16*c.rcv.mss
	win += int(int64(win) * int64(min(copied-t.space, t.space)) / int64(t.space))
	t.space = copied
	if limit := c.p.cfg.ReceiveBufferMax; win > limit {
		win = limit
	}
	if win > c.sock.rcvBufSize {
		c.sock.rcvBufSize = win
		c.p.Stats.RcvBufAutoGrows.Inc()
	}
}
