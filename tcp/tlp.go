package tcp

import (
	"time"

	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// Tail loss probes (RFC 8985 section 7). When the last segments of a
// flight are lost no later segment is delivered, so neither RACK nor
// duplicate ACKs can see the loss, and only the retransmission timer,
// with its long RTO and collapse of the window, would repair it. After a
// probe timeout of about two RTTs the sender sends one segment, new data
// or the last one again, whose ACK (with its SACK blocks) lets RACK find
// and repair the loss in fast recovery.

// wcDelAckT is RFC 8985's worst-case delayed-ACK timer (section 7.2): a
// flight of one segment may wait this long for its ACK.
const wcDelAckT = 200 * time.Millisecond

// ptoSlack is added to a PTO of more than one segment, as Linux adds
// TCP_TIMEOUT_MIN (2 ms): on a path of a few microseconds, 2*SRTT is less
// than the jitter of the peer's ACK clock and of goroutine scheduling,
// and would send needless probes.
const ptoSlack = 2 * time.Millisecond

// tlpState is the probe timer and the episode a probe opened.
type tlpState struct {
	at time.Time // PTO deadline
	// The episode (section 7.4): SND.NXT after the probe (TLP.end_seq),
	// whether the probe was a retransmission, and whether a D-SACK
	// reported both copies of it delivered.
	active    bool
	endSeq    seqnum.Value
	isRetrans bool
	dsacked   bool
	// seenUna and seenMax are SND.UNA and SND.MAX when the timer was
	// last set: it restarts when new data goes out or an ACK
	// acknowledges new data.
	seenUna, seenMax seqnum.Value
}

// restartPTO is section 7.2: after new data is sent or new data is
// acknowledged, (re)start the probe timer, unless in recovery, with
// segments SACKed (RACK's reordering timer covers those), or while a
// probe's episode is open. PTO = 2*SRTT, plus the worst-case delayed ACK
// when one segment is in flight (else a little slack); no later than the
// RTO would fire.
func (c *Conn) restartPTO() {
	if !c.rackOn() || c.snd.max == c.snd.tlp.seenMax && c.snd.una == c.snd.tlp.seenUna {
		return
	}
	c.snd.tlp.seenUna, c.snd.tlp.seenMax = c.snd.una, c.snd.max
	c.snd.tlp.at = noTime
	if !c.tlpAllowed() {
		return
	}
	now := c.now()
	pto := time.Second // section 7.2: no RTT sample yet
	if c.snd.srtt > 0 {
		pto = 2 * c.snd.srtt
		if int(c.snd.max.Sub(c.snd.una)) <= c.snd.mss {
			pto += wcDelAckT
		} else {
			pto += ptoSlack
		}
	}
	c.snd.tlp.at = now.Add(pto)
	if !c.timers.rexmitAt.IsZero() && c.timers.rexmitAt.Before(c.snd.tlp.at) {
		c.snd.tlp.at = c.timers.rexmitAt
	}
}

// tlpAllowed reports whether a probe may be scheduled or sent now.
func (c *Conn) tlpAllowed() bool {
	return c.state.synchronized() && c.state != TimeWait && c.snd.una != c.snd.max &&
		!c.snd.inRecovery && !c.snd.una.LessThan(c.snd.recover) && c.snd.sb.sacked == 0 &&
		!c.snd.tlp.active && c.snd.wnd > 0
}

// onPTO is section 7.3: send one MSS of new data if the peer's window
// takes it, else the last segment again; open the episode and restart
// the retransmission timer behind the probe.
func (c *Conn) onPTO(now time.Time) {
	if !c.rackOn() || !c.tlpAllowed() {
		return
	}
	sent := false
	retrans := false
	off := int(c.snd.nxt.Sub(c.snd.bufSeq))
	room := int(c.snd.wnd) - int(c.snd.nxt.Sub(c.snd.una))
	if n := min(c.sock.sndBuf.n-off, c.snd.mss, room); n > 0 && c.snd.nxt == c.snd.max {
		flags := uint8(wire.TCPFlagACK)
		fin := c.finPending() && n == c.sock.sndBuf.n-off
		if fin {
			flags |= wire.TCPFlagFIN
		}
		c.sendSegment(c.snd.nxt, flags, off, n)
		c.noteSent(c.snd.nxt, n, fin)
		sent = true
	} else if len(c.snd.sent) > 0 {
		sent = c.retransmitEntry(len(c.snd.sent) - 1)
		retrans = true
	}
	if !sent {
		return
	}
	c.p.Stats.LossProbes.Inc()
	c.snd.tlp.active, c.snd.tlp.endSeq, c.snd.tlp.isRetrans, c.snd.tlp.dsacked = true, c.snd.nxt, retrans, false
	c.snd.tlp.seenUna, c.snd.tlp.seenMax = c.snd.una, c.snd.max // the probe does not restart PTO
	c.armRexmit(now)
}

// tlpOnDSACK notes a D-SACK for the probe's retransmission: the original
// arrived too, and nothing was lost.
func (snd *sender) tlpOnDSACK(start, end seqnum.Value) {
	if snd.tlp.active && snd.tlp.isRetrans && !end.LessThan(snd.tlp.endSeq) && start.LessThan(snd.tlp.endSeq) {
		snd.tlp.dsacked = true
	}
}

// tlpOnAck is section 7.4: an ACK that reaches the probe's end closes the
// episode. A probe of new data leaves any loss to RACK. A retransmitted
// probe either repaired a loss, which an ACK beyond it without a D-SACK
// shows, and the congestion control then reduces the window as for any
// loss; or both copies arrived (a D-SACK, or a duplicate ACK with no
// SACK), and nothing was lost.
func (c *Conn) tlpOnAck(ack seqnum.Value, pureDup bool) {
	if !c.snd.tlp.active || ack.LessThan(c.snd.tlp.endSeq) {
		return
	}
	switch {
	case !c.snd.tlp.isRetrans:
		c.snd.tlp.active = false
	case c.snd.tlp.dsacked, pureDup:
		c.snd.tlp.active = false
		c.p.Stats.LossProbeSpurious.Inc()
	case ack.GreaterThan(c.snd.tlp.endSeq):
		c.snd.tlp.active = false
		c.p.Stats.LossProbeRecovery.Inc()
		if !c.snd.inRecovery {
			inflight := int(c.snd.max.Sub(c.snd.una))
			c.snd.cc.OnEnterRecovery(inflight)
			c.snd.cc.OnExitRecovery(inflight)
		}
	}
}
