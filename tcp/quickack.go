package tcp

import "time"

// Quick ACKs and interactive mode, as Linux's receiver has them.
//
// A delayed ACK (RFC 9293 section 3.8.6.3, RFC 5681 section 4.2) waits for
// a second full-sized segment or for DelayedAck. A sender running Nagle's
// algorithm (RFC 9293 3.7.4) meanwhile holds back any small segment behind
// one unacknowledged: a client that writes a request in two pieces before
// it reads the answer waits out our delayed ACK, 40 ms, on every new
// connection. So the receiver acknowledges data at once while the
// connection is young (up to QuickAcks ACKs, one per two segments the
// window holds, at least two) and again after data stopped for longer
// than the retransmission timeout, when the sender's congestion window
// restarts small and wants its ACKs promptly.
//
// Quick ACKs are pure ACKs that a reply would have carried for free, so
// they stop when the connection turns out to be interactive: once we send
// data within DelayedAck of receiving some, our replies carry the ACKs
// (Linux's pingpong mode) and the delayed ACK is kept for them. The
// connection leaves interactive mode when a delayed ACK had to go out on
// its own, its timer having expired with no reply to ride on.

// noteDataIn records the arrival of in-order data at now: the connection's
// first data, or the first after a pause longer than the retransmission
// timeout, starts a run of quick ACKs.
func (c *Conn) noteDataIn(now time.Time) {
	if c.rcv.lastDataAt.IsZero() || now.Sub(c.rcv.lastDataAt) > c.snd.rto {
		c.rcv.quickAcks = c.quickAckBudget()
	}
	c.rcv.lastDataAt = now
}

// quickAckBudget is how many quick ACKs a run may send: one per two
// segments the window holds, at least two, at most Config.QuickAcks, as
// Linux's tcp_incr_quickack with TCP_MAX_QUICKACKS.
func (c *Conn) quickAckBudget() int {
	if c.p.cfg.QuickAcks <= 0 {
		return 0
	}
	wnd := 0
	if c.rcv.nxt.LessThan(c.rcv.adv) {
		wnd = int(c.rcv.adv.Sub(c.rcv.nxt))
	}
	return min(max(wnd/(2*max(c.rcv.mss, 1)), 2), c.p.cfg.QuickAcks)
}

// quickAck reports whether the data just received is acknowledged at once.
func (c *Conn) quickAck() bool { return c.rcv.quickAcks > 0 && !c.rcv.interactive }

// noteAckSent counts an ACK sent against the run of quick ACKs.
func (c *Conn) noteAckSent() {
	if c.rcv.quickAcks > 0 {
		c.rcv.quickAcks--
	}
}

// noteDataOut records that new data left at now: sent within DelayedAck of
// data received, it is a reply, and the connection interactive.
func (c *Conn) noteDataOut(now time.Time) {
	if !c.rcv.lastDataAt.IsZero() && now.Sub(c.rcv.lastDataAt) < c.p.cfg.DelayedAck {
		c.rcv.interactive = true
	}
}

// delayedAckExpired leaves interactive mode: no reply came to carry the ACK.
func (c *Conn) delayedAckExpired() { c.rcv.interactive = false }
