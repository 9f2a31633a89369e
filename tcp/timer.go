package tcp

import (
	"sync/atomic"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/wire"
)

// Timers. A connection keeps one clock timer, armed for the earliest of its
// deadlines: retransmission or persist (RFC 6298, RFC 9293 3.8.6.1),
// delayed ACK (RFC 9293 3.8.6.3), keepalive (RFC 9293 3.8.4), and the end
// of TIME-WAIT, FIN-WAIT-2 or a linger. All run on the stack's clock.

var noTime time.Time

// timers are a connection's deadlines, zero when not set, and the one
// clock timer armed for the earliest (armTimer); with them, the counters of
// the probes and retries they send. Deadlines of the sender's own
// machinery live with it (snd.tlp.at, snd.rack.timerAt). The connection's
// goroutine owns them.
type timers struct {
	clock   clock.Timer
	armedAt time.Time   // when clock fires; zero when stopped
	fired   atomic.Bool // set by clock's function (timerFired), taken by run

	rexmitAt    time.Time // retransmission or persist (RFC 6298, RFC 9293 3.8.6.1)
	delackAt    time.Time // delayed ACK (RFC 9293 3.8.6.3)
	keepaliveAt time.Time // keepalive (RFC 9293 3.8.4)
	closeAt     time.Time // TIME-WAIT, FIN-WAIT-2 or linger end

	kaProbes   int // keepalive probes unanswered
	synRetries int // SYN or SYN-ACK retransmissions
	// Time bounds (timeouts.go): since when data has been outstanding
	// without an ACK taking any, and an orphan's zero-window probes.
	stallSince   time.Time
	orphanProbes int
}

// armTimer points the clock timer at the earliest deadline. A timer armed
// for no later than that is left alone: it fires early, onTimer finds
// nothing due, and the next armTimer points it further. Most events push
// deadlines later (every ACK restarts the retransmission and probe
// timers), so stopping and resetting the timer for each would cost more
// than the one early wake-up per armed deadline (Linux's
// sk_reset_timer on the retransmission timer does the same with its
// pending flag and timer slack).
func (c *Conn) armTimer() {
	next := noTime
	for _, t := range [...]time.Time{c.timers.rexmitAt, c.timers.delackAt, c.timers.keepaliveAt, c.timers.closeAt, c.snd.tlp.at, c.snd.rack.timerAt} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	armed := c.timers.armedAt
	if !armed.IsZero() && (next.IsZero() || !next.Before(armed)) {
		return
	}
	c.timers.armedAt = next
	c.timers.clock.Stop()
	if next.IsZero() {
		return
	}
	// The wait is measured from the clock as it reads now, not from the
	// event's reading (now): a clock that moved on meanwhile would set
	// the timer that much late. A deadline already passed is run's to
	// handle at its next turn (timerDue), not a timer's: a virtual
	// clock fires a timer set in the past only at its next Advance.
	wait := next.Sub(c.p.env.Clock.Now())
	if wait <= 0 {
		c.wakeup.wake()
		return
	}
	c.timers.clock.Reset(wait)
}

// armRexmit starts the retransmission timer (RFC 6298 5.1).
func (c *Conn) armRexmit(now time.Time) {
	c.noteOutstanding(now)
	c.timers.rexmitAt = c.userDeadline(now.Add(c.snd.rto))
}

// onTimer handles every deadline that has passed.
func (c *Conn) onTimer() {
	now := c.now()
	due := func(t *time.Time) bool {
		if t.IsZero() || t.After(now) {
			return false
		}
		*t = noTime
		return true
	}
	if due(&c.timers.closeAt) {
		c.finish(nil)
		return
	}
	if due(&c.snd.rack.timerAt) {
		c.onReorderTimeout(now) // rack.go
	}
	if due(&c.snd.tlp.at) {
		c.onPTO(now) // tlp.go
	}
	if due(&c.timers.rexmitAt) {
		c.onRexmit(now)
		if c.state == Closed {
			return
		}
	}
	if due(&c.timers.delackAt) {
		c.rcv.ackNow = true
		c.delayedAckExpired()
		c.p.Stats.DelayedACKs.Inc()
	}
	if due(&c.timers.keepaliveAt) {
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
		c.timers.synRetries++
		limit := c.p.cfg.SynRetries
		if c.state == SynReceived {
			limit = c.p.cfg.SynAckRetries
		}
		if c.timers.synRetries > limit {
			c.finish(errTimedOut)
			return
		}
		c.snd.backoffRTO()
		c.p.Stats.Timeouts.Inc()
		c.p.Stats.RetransSegs.Inc()
		c.snd.retransmits++
		c.sendSYN(c.synFlags())
		c.armRexmit(now)
		return
	}
	inflight := int(c.snd.max.Sub(c.snd.una))
	unsent := c.sock.sndBuf.n - int(c.snd.nxt.Sub(c.snd.bufSeq))
	if inflight == 0 && unsent <= 0 {
		return // nothing to do: everything was acknowledged
	}
	if c.userTimedOut(now) {
		return
	}
	if inflight == 0 && unsent > 0 || c.snd.wnd == 0 && inflight <= 1 {
		// Persist (RFC 9293 3.8.6.1): the peer's window is closed, or too
		// small for sender SWS avoidance to use. Probe with what it
		// allows, at least one byte. Probes never abort a connection
		// whose peer answers them (processAck counts an answer); Retries
		// unanswered ones do, as Linux's tcp_probe_timer.
		c.snd.backoff++
		if c.snd.backoff > c.p.cfg.Retries {
			c.p.Stats.TimeoutAborts.Inc()
			c.reset(errTimedOut)
			return
		}
		if c.orphanGivesUp() {
			return
		}
		c.p.Stats.PersistProbes.Inc()
		c.snd.backoffRTO()
		seq := c.snd.nxt
		if inflight > 0 {
			seq = c.snd.una
		}
		off := int(seq.Sub(c.snd.bufSeq))
		n := min(max(int(c.snd.wnd), 1), c.sock.sndBuf.n-off, c.snd.mss)
		if n > 0 {
			c.sendSegment(seq, wire.TCPFlagACK, off, n)
			c.noteSent(seq, n, false)
		}
		if c.snd.wnd == 0 {
			// A closed window drops the probe's byte: once it opens,
			// send from SND.UNA again, the probe's byte first (as BSD
			// pulls snd_nxt back to a closed window).
			c.snd.nxt = c.snd.una
		}
		c.armRexmit(now)
		return
	}
	c.snd.backoff++
	if c.orphanOutOfRetries() {
		return
	}
	if c.snd.backoff > c.p.cfg.Retries {
		c.p.Stats.TimeoutAborts.Inc()
		c.reset(errTimedOut)
		return
	}
	c.p.Stats.Timeouts.Inc()
	c.armSpuriousRTO()
	c.snd.cc.OnRTO(inflight)
	c.snd.backoffRTO()
	c.snd.inRecovery = false
	c.snd.dupAcks = 0
	c.sackOnRTO() // sack_sender.go
	// RFC 6582 section 3.2 step 1 after a timeout: recover = highest sent,
	// so duplicate ACKs from the go-back-N retransmissions do not start a
	// false fast retransmit.
	c.snd.recover = c.snd.max
	c.snd.nxt = c.snd.una
	c.armRexmit(now)
	// output sends from SND.UNA within the one-MSS loss window.
}

// onKeepalive sends a keepalive probe, or gives up after kaCount
// unanswered ones (RFC 1122 4.2.3.6): a segment with a sequence number the
// peer has already acknowledged (SND.UNA-1, as Linux), which fails its
// acceptability test and so must be answered with an ACK.
func (c *Conn) onKeepalive(now time.Time) {
	if !c.sock.keepalive || !c.state.synchronized() {
		return
	}
	if c.snd.una != c.snd.max || c.sock.sndBuf.n > int(c.snd.nxt.Sub(c.snd.bufSeq)) {
		// Data in flight or waiting: the retransmission and persist
		// timers watch the peer already (Linux's keepalive timer skips
		// a probe then too).
		c.timers.keepaliveAt = now.Add(c.sock.kaIdle)
		return
	}
	if c.timers.kaProbes >= c.sock.kaCount {
		c.p.Stats.KeepaliveAborts.Inc()
		c.reset(errTimedOut)
		return
	}
	c.timers.kaProbes++
	c.p.Stats.KeepaliveProbes.Inc()
	c.sendFlags(c.snd.una-1, wire.TCPFlagACK)
	c.timers.keepaliveAt = now.Add(c.sock.kaInterval)
}

// armKeepalive restarts the idle clock after a segment from the peer.
func (c *Conn) armKeepalive(now time.Time) {
	c.timers.kaProbes = 0
	if c.sock.keepalive && c.state.synchronized() {
		c.timers.keepaliveAt = now.Add(c.sock.kaIdle)
	} else {
		c.timers.keepaliveAt = noTime
	}
}
