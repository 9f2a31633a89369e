package tcp

import (
	"time"

	"github.com/gonetstack/gonet/wire"
)

// Timers. A connection keeps one clock timer, armed for the earliest of its
// deadlines: retransmission or persist (RFC 6298, RFC 9293 3.8.6.1),
// delayed ACK (RFC 9293 3.8.6.3), keepalive (RFC 9293 3.8.4), and the end
// of TIME-WAIT, FIN-WAIT-2 or a linger. All run on the stack's clock.

var noTime time.Time

// armTimer points the clock timer at the earliest deadline.
func (c *Conn) armTimer() {
	next := noTime
	for _, t := range [...]time.Time{c.rexmitAt, c.delackAt, c.keepaliveAt, c.closeAt, c.tlp.at, c.rack.timerAt} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if next.Equal(c.timerAt) {
		return
	}
	c.timerAt = next
	c.timer.Stop()
	if !next.IsZero() {
		c.timer.Reset(max(next.Sub(c.p.env.Clock.Now()), 0))
	}
}

// armRexmit starts the retransmission timer (RFC 6298 5.1).
func (c *Conn) armRexmit(now time.Time) {
	c.noteOutstanding(now)
	c.rexmitAt = c.userDeadline(now.Add(c.rto))
}

// onTimer handles every deadline that has passed.
func (c *Conn) onTimer() {
	now := c.p.env.Clock.Now()
	due := func(t *time.Time) bool {
		if t.IsZero() || t.After(now) {
			return false
		}
		*t = noTime
		return true
	}
	if due(&c.closeAt) {
		c.finish(nil)
		return
	}
	if due(&c.rack.timerAt) {
		c.onReorderTimeout(now) // rack.go
	}
	if due(&c.tlp.at) {
		c.onPTO(now) // tlp.go
	}
	if due(&c.rexmitAt) {
		c.onRexmit(now)
		if c.state == Closed {
			return
		}
	}
	if due(&c.delackAt) {
		c.ackNow = true
		c.p.Stats.DelayedACKs.Inc()
	}
	if due(&c.keepaliveAt) {
		c.onKeepalive(now)
	}
}

// onRexmit handles an expired retransmission timer: RFC 6298 section 5.4-5.6
// (retransmit the earliest unacknowledged segment, back off, restart), with
// go-back-N from SND.UNA as RFC 5681 section 3.1 implies for the loss
// window, and the persist timer's zero-window probe when the peer's window
// is closed.
func (c *Conn) onRexmit(now time.Time) {
	switch c.state {
	case SynSent, SynReceived:
		c.synRetries++
		limit := c.p.cfg.SynRetries
		if c.state == SynReceived {
			limit = c.p.cfg.SynAckRetries
		}
		if c.synRetries > limit {
			c.finish(errTimedOut)
			return
		}
		c.backoffRTO()
		c.p.Stats.Timeouts.Inc()
		c.p.Stats.RetransSegs.Inc()
		c.retransmits++
		c.sendSYN(c.synFlags())
		c.armRexmit(now)
		return
	}
	inflight := int(c.sndMax.Sub(c.sndUna))
	unsent := c.snd.n - int(c.sndNxt.Sub(c.sndBufSeq))
	if inflight == 0 && unsent <= 0 {
		return // nothing to do: everything was acknowledged
	}
	if c.userTimedOut(now) {
		return
	}
	if inflight == 0 && unsent > 0 || c.sndWnd == 0 && inflight <= 1 {
		// Persist (RFC 9293 3.8.6.1): the peer's window is closed, or too
		// small for sender SWS avoidance to use. Probe with what it
		// allows, at least one byte. Probes never abort a connection
		// whose peer answers them (processAck counts an answer); Retries
		// unanswered ones do, as Linux's tcp_probe_timer.
		c.backoff++
		if c.backoff > c.p.cfg.Retries {
			c.p.Stats.TimeoutAborts.Inc()
			c.reset(errTimedOut)
			return
		}
		if c.orphanGivesUp() {
			return
		}
		c.p.Stats.PersistProbes.Inc()
		c.backoffRTO()
		seq := c.sndNxt
		if inflight > 0 {
			seq = c.sndUna
		}
		off := int(seq.Sub(c.sndBufSeq))
		n := min(max(int(c.sndWnd), 1), c.snd.n-off, c.sndMSS)
		if n > 0 {
			c.sendSegment(seq, wire.TCPFlagACK, off, n)
			c.noteSent(seq, n, false)
		}
		if c.sndWnd == 0 {
			// A closed window drops the probe's byte: once it opens,
			// send from SND.UNA again, the probe's byte first (as BSD
			// pulls snd_nxt back to a closed window).
			c.sndNxt = c.sndUna
		}
		c.armRexmit(now)
		return
	}
	c.backoff++
	if c.orphanOutOfRetries() {
		return
	}
	if c.backoff > c.p.cfg.Retries {
		c.p.Stats.TimeoutAborts.Inc()
		c.reset(errTimedOut)
		return
	}
	c.p.Stats.Timeouts.Inc()
	c.cc.OnRTO(inflight)
	c.backoffRTO()
	c.inRecovery = false
	c.dupAcks = 0
	c.sackOnRTO() // sack_sender.go
	// RFC 6582 section 3.2 step 1 after a timeout: recover = highest sent,
	// so duplicate ACKs from the go-back-N retransmissions do not start a
	// false fast retransmit.
	c.recover = c.sndMax
	c.sndNxt = c.sndUna
	c.armRexmit(now)
	// output sends from SND.UNA within the one-MSS loss window.
}

// backoffRTO doubles the RTO up to RTOMax (RFC 6298 5.5).
func (c *Conn) backoffRTO() { c.rto = min(2*c.rto, c.p.cfg.RTOMax) }

// sampleRTT updates SRTT, RTTVAR and RTO from a measurement (RFC 6298
// section 2, with alpha 1/8 and beta 1/4, and a clock granularity of 1 ms).
func (c *Conn) sampleRTT(r time.Duration) {
	if r <= 0 {
		r = time.Microsecond
	}
	if c.srtt == 0 {
		c.srtt = r
		c.rttvar = r / 2
	} else {
		d := c.srtt - r
		if d < 0 {
			d = -d
		}
		c.rttvar = (3*c.rttvar + d) / 4
		c.srtt = (7*c.srtt + r) / 8
	}
	c.rto = min(max(c.srtt+max(time.Millisecond, 4*c.rttvar), c.p.cfg.RTOMin), c.p.cfg.RTOMax)
}

// onKeepalive sends a keepalive probe, or gives up after kaCount
// unanswered ones (RFC 1122 4.2.3.6): a segment with a sequence number the
// peer has already acknowledged (SND.UNA-1, as Linux), which fails its
// acceptability test and so must be answered with an ACK.
func (c *Conn) onKeepalive(now time.Time) {
	if !c.keepalive || !c.state.synchronized() {
		return
	}
	if c.sndUna != c.sndMax || c.snd.n > int(c.sndNxt.Sub(c.sndBufSeq)) {
		// Data in flight or waiting: the retransmission and persist
		// timers watch the peer already (Linux's keepalive timer skips
		// a probe then too).
		c.keepaliveAt = now.Add(c.kaIdle)
		return
	}
	if c.kaProbes >= c.kaCount {
		c.p.Stats.KeepaliveAborts.Inc()
		c.reset(errTimedOut)
		return
	}
	c.kaProbes++
	c.p.Stats.KeepaliveProbes.Inc()
	c.sendFlags(c.sndUna-1, wire.TCPFlagACK)
	c.keepaliveAt = now.Add(c.kaInterval)
}

// armKeepalive restarts the idle clock after a segment from the peer.
func (c *Conn) armKeepalive(now time.Time) {
	c.kaProbes = 0
	if c.keepalive && c.state.synchronized() {
		c.keepaliveAt = now.Add(c.kaIdle)
	} else {
		c.keepaliveAt = noTime
	}
}
