package tcp

import (
	"time"

	"github.com/gonetstack/gonet/seqnum"
)

// RACK, time-based loss detection (RFC 8985 section 6). A segment is lost
// when a segment sent after it has been delivered and more than an RTT
// plus a reordering window has passed since it was sent: time, not a
// count of duplicate ACKs, so that a lost retransmission, a short flight
// and reordering beyond three segments are all handled. Each segment's
// transmission time is taken when it is built (sendSegment), so that
// queueing inside the stack does not count as network delay. RACK needs
// SACK to learn what was delivered, so it runs only when SACK is in use.

// rackState is RACK's per-connection state (RFC 8985 section 6.1).
type rackState struct {
	// The most recently sent segment delivered: its transmission time,
	// end, and the RTT it measured (RACK.xmit_ts, RACK.end_seq, RACK.rtt).
	xmitAt time.Time
	endSeq seqnum.Value
	rtt    time.Duration
	// minRTT is the least RTT measured (RACK.min_RTT).
	minRTT time.Duration
	// fack is the highest end of a delivered segment (RACK.fack);
	// reorderingSeen says a segment was delivered below it.
	fack           seqnum.Value
	reorderingSeen bool
	// The reordering window's multiplier, the recoveries it persists
	// for, and the round a D-SACK last raised it in (section 6.2 step 4).
	reoWndMult    int
	reoWndPersist int
	dsackRound    seqnum.Value
	dsackInRound  bool
	// timerAt is the reordering timer's deadline (section 6.3).
	timerAt time.Time
}

// rackOn reports whether RACK-TLP runs on this connection.
func (c *Conn) rackOn() bool { return c.sackOK && !c.p.cfg.DisableRACK }

// sentAfter is RFC 8985's RACK_sent_after: later by time, or, sent at the
// same instant, by sequence.
func sentAfter(t1 time.Time, end1 seqnum.Value, t2 time.Time, end2 seqnum.Value) bool {
	return t1.After(t2) || t1.Equal(t2) && end1.GreaterThan(end2)
}

// rackDelivered is RFC 8985 section 6.2 steps 2 and 3 for a segment just
// delivered, cumulatively or by SACK.
func (c *Conn) rackDelivered(s *sentSeg, now time.Time) {
	if !c.rackOn() {
		return
	}
	rtt := now.Sub(s.sentAt)
	if s.retrans {
		// Step 2: an ACK sooner than the minimum RTT after a
		// retransmission acknowledges the original; without a TSval per
		// transmission, this is the test that keeps the sample honest.
		if rtt < c.snd.rack.minRTT {
			return
		}
	} else {
		if c.snd.rack.minRTT == 0 || rtt < c.snd.rack.minRTT {
			c.snd.rack.minRTT = max(rtt, time.Microsecond)
		}
		// Step 3: delivered below a segment sent after it and delivered
		// first: the network reorders.
		if !c.snd.rack.xmitAt.IsZero() && s.end.LessThan(c.snd.rack.fack) {
			c.snd.rack.reorderingSeen = true
		}
	}
	if c.snd.rack.xmitAt.IsZero() {
		c.snd.rack.fack = s.end
	}
	c.snd.rack.fack = seqnum.Max(c.snd.rack.fack, s.end)
	if c.snd.rack.xmitAt.IsZero() || sentAfter(s.sentAt, s.end, c.snd.rack.xmitAt, c.snd.rack.endSeq) {
		c.snd.rack.xmitAt, c.snd.rack.endSeq, c.snd.rack.rtt = s.sentAt, s.end, rtt
	}
}

// rackUpdateReoWnd is section 6.2 step 4's adaptation of the reordering
// window: a D-SACK (a retransmission that was not needed) widens it by a
// quarter of the minimum RTT, at most once per round trip, and it narrows
// back after 16 recoveries without one.
func (c *Conn) rackUpdateReoWnd(dsack, exitedRecovery bool) {
	if !c.rackOn() {
		return
	}
	if c.snd.rack.reoWndMult == 0 {
		c.snd.rack.reoWndMult = 1
	}
	if c.snd.rack.dsackInRound && !c.snd.una.LessThan(c.snd.rack.dsackRound) {
		c.snd.rack.dsackInRound = false
	}
	switch {
	case dsack && !c.snd.rack.dsackInRound:
		c.snd.rack.dsackInRound, c.snd.rack.dsackRound = true, c.snd.max
		c.snd.rack.reoWndMult++
		c.snd.rack.reoWndPersist = 16
		c.snd.rack.reorderingSeen = true // as Linux: a D-SACK shows reordering
	case exitedRecovery && c.snd.rack.reoWndPersist > 0:
		c.snd.rack.reoWndPersist--
		if c.snd.rack.reoWndPersist == 0 {
			c.snd.rack.reoWndMult = 1
		}
	}
}

// rackReoWnd is the reordering window (section 6.2 step 4): none while no
// reordering has been seen and a loss is already evident (in recovery, or
// DupThresh segments SACKed), else a quarter of the minimum RTT per
// multiplier, at most SRTT.
func (snd *sender) rackReoWnd() time.Duration {
	if !snd.rack.reorderingSeen && (snd.inRecovery || snd.una.LessThan(snd.recover) || snd.sb.sackedSegs >= dupThresh) {
		return 0
	}
	return min(snd.rack.minRTT/4*time.Duration(max(snd.rack.reoWndMult, 1)), snd.srtt)
}

// rackDetectLoss is section 6.2 step 5: every segment sent before the
// most recently delivered one, and not delivered itself, is lost once
// RACK.rtt plus the reordering window has passed since it was sent; the
// reordering timer is armed for the latest of those still waiting.
func (c *Conn) rackDetectLoss(now time.Time) {
	c.snd.rack.timerAt = noTime
	if c.snd.rack.xmitAt.IsZero() || len(c.snd.sent) == 0 {
		return
	}
	reo := c.snd.rackReoWnd()
	var wait time.Duration
	for i := range c.snd.sent {
		s := &c.snd.sent[i]
		if s.sacked || s.lost || !sentAfter(c.snd.rack.xmitAt, c.snd.rack.endSeq, s.sentAt, s.end) {
			continue
		}
		if remaining := s.sentAt.Add(c.snd.rack.rtt + reo).Sub(now); remaining > 0 {
			wait = max(wait, remaining)
			continue
		}
		c.snd.sb.markLost(s)
		c.p.Stats.RACKLoss.Inc()
	}
	if wait > 0 {
		c.snd.rack.timerAt = now.Add(wait)
	}
}

// onReorderTimeout is section 6.3: the reordering window of a segment has
// passed without its delivery. Detect again; a loss starts recovery.
func (c *Conn) onReorderTimeout(now time.Time) {
	if !c.rackOn() || !c.state.synchronized() {
		return
	}
	c.p.Stats.RACKReorderTimeouts.Inc()
	c.rackDetectLoss(now)
	c.maybeEnterRecovery()
}
