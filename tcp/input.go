package tcp

import (
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// Segment arrival (RFC 9293 section 3.10.7). Everything here runs in the
// connection's goroutine with mu held.

// input processes one segment from the dealer, parsed there, and releases
// its packet unless its data was queued for the application.
func (c *Conn) input(seg *segment) {
	if c.state == Closed {
		seg.pk.Release()
		return
	}
	now := c.now()
	kept := false
	if c.state == SynSent {
		c.inputSynSent(seg, now)
	} else {
		kept = c.inputSynchronized(seg, now)
	}
	if !kept {
		seg.pk.Release()
	}
}

// negotiate takes the options of the peer's SYN (RFC 9293 3.7.1, RFC 6691,
// RFC 7323 sections 1.3 and 2.2: scaling and timestamps only if both
// sides offered them) and starts congestion control with the agreed MSS.
func (c *Conn) negotiate(seg *segment) {
	c.rcv.irs = seg.seq
	c.rcv.nxt = seg.seq + 1
	c.rcv.adv = c.rcv.nxt
	mss := 536 // RFC 9293 3.7.1: the default when no MSS option came
	if seg.opts.MSS != 0 {
		mss = int(seg.opts.MSS)
	}
	c.snd.mss = min(mss, c.rcv.mss)
	if seg.opts.HasWScale {
		c.wsOK = true
		c.snd.wscale = min(seg.opts.WScale, 14) // RFC 7323 2.3: larger values mean 14
	} else {
		c.wsOK = false
		c.rcv.wscale = 0
	}
	// RFC 2018 section 2: SACK only when both SYNs carried SACK-permitted
	// (a passive open replies with it only if the SYN had it).
	c.sackOK = seg.opts.SACKPermitted && !c.p.cfg.DisableSACK
	if seg.opts.HasTimestamp {
		c.tsOK = true
		c.rcv.tsRecent, c.rcv.tsRecentAt = seg.opts.TSVal, c.now()
		c.snd.mss -= 12 // RFC 6691: the option takes room from each segment
	}
	c.snd.mss = max(c.snd.mss, 64)
	c.snd.cc = c.p.congestion(c.snd.mss)
	c.ecnNegotiate(seg)
}

// inputSynSent handles a segment in SYN-SENT (RFC 9293 3.10.7.3).
func (c *Conn) inputSynSent(seg *segment, now time.Time) {
	ackOK := false
	if seg.has(wire.TCPFlagACK) {
		// "If SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset (unless
		// the RST bit is set, if so drop the segment and return)."
		if seg.ack.LessThanEq(c.snd.iss) || seg.ack.GreaterThan(c.snd.nxt) {
			if !seg.has(wire.TCPFlagRST) {
				c.p.sendResetTo(c.id, seg.ack, 0, wire.TCPFlagRST)
			}
			return
		}
		ackOK = true
	}
	if seg.has(wire.TCPFlagRST) {
		// RFC 5961 3.2 for SYN-SENT: a reset counts only with an
		// acceptable ACK; then "connection reset", refused to the caller.
		if ackOK {
			c.p.Stats.InRsts.Inc()
			c.finish(errConnRefused)
		}
		return
	}
	if !seg.has(wire.TCPFlagSYN) {
		return
	}
	c.negotiate(seg)
	c.snd.wnd = uint32(seg.wnd) // a SYN's window is never scaled
	c.snd.wl1, c.snd.wl2 = seg.seq, seg.ack
	c.snd.maxWnd = c.snd.wnd
	c.rcv.ackNow = true
	if !ackOK {
		// Simultaneous open: "enter SYN-RECEIVED, form a SYN,ACK segment
		// <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK> and send it."
		c.setState(SynReceived)
		return
	}
	c.ackSYN(seg.ack, now)
	c.establish(now)
}

// ackSYN takes the acknowledgement of our SYN, with an RTT sample if it
// was not retransmitted (Karn's rule).
func (c *Conn) ackSYN(ack seqnum.Value, now time.Time) {
	c.snd.una = ack
	c.snd.forwardProgress(now)
	if c.snd.nxt.LessThan(c.snd.una) {
		c.snd.nxt = c.snd.una
	}
	if c.timers.synRetries == 0 {
		c.snd.sampleRTT(now.Sub(c.snd.lastSend))
	} else {
		// RFC 6298 5.7: a SYN that timed out leaves an RTO of 3 s.
		c.snd.rto = max(c.snd.rto, 3*time.Second)
	}
	c.snd.backoff = 0
	c.timers.rexmitAt = noTime
}

// establish enters ESTABLISHED and tells whoever waits.
func (c *Conn) establish(now time.Time) {
	c.setState(Established)
	c.armKeepalive(now)
	close(c.established)
	if c.lis != nil {
		lis := c.lis
		c.lis = nil
		lis.halfOpenDone(c, true)
	}
	c.sock.writable.wake()
}

// inputSynchronized handles a segment in SYN-RECEIVED and every later state
// (RFC 9293 3.10.7.4), in the RFC's order of checks. It reports whether the
// segment's packet was kept for its data.
func (c *Conn) inputSynchronized(seg *segment, now time.Time) bool {
	// Simultaneous open (RFC 9293 figure 8, line 6): the peer's SYN-ACK
	// repeats the SYN we hold and acknowledges ours. Take it as the ACK
	// it carries, as Linux does: answering it as a duplicate SYN would
	// start a SYN-ACK ping-pong with a peer doing the same.
	if c.state == SynReceived && !c.passive() && seg.seq == c.rcv.irs && seg.ack == c.snd.iss+1 &&
		seg.flags&(wire.TCPFlagSYN|wire.TCPFlagACK|wire.TCPFlagRST) == wire.TCPFlagSYN|wire.TCPFlagACK {
		seg.flags &^= wire.TCPFlagSYN
		seg.seq++
	}
	// RFC 6191: a newer SYN ends TIME-WAIT and opens anew (timewait.go).
	if c.timeWaitReopen(seg) {
		return true
	}
	// RFC 7323 3.2: no timestamp where one was negotiated (paws.go).
	if c.tsMissing(seg) {
		return false
	}
	// RFC 7323 5.3 R1: PAWS comes before the sequence number test.
	if c.pawsReject(seg, now) {
		return false
	}
	// First, check sequence number.
	if !c.rcv.acceptable(seg) {
		c.p.Stats.OutOfWindow.Inc()
		if n := seg.len(); n > 0 && seg.seq.LessThan(c.rcv.nxt) {
			c.noteDuplicate(seg.seq, seqnum.Min(seg.seq.Add(n), c.rcv.nxt))
		}
		switch {
		case seg.has(wire.TCPFlagRST):
		case seg.has(wire.TCPFlagSYN) && c.state != SynReceived:
			c.challengeACK(now) // RFC 5961 4.2: "irrespective of the sequence number"
		default:
			c.rcv.ackNow = true // "send an acknowledgment"; keepalives get theirs here
		}
		if c.state == TimeWait && seg.has(wire.TCPFlagFIN) {
			c.timers.closeAt = now.Add(2 * c.p.cfg.MSL)
		}
		return false
	}
	// Second, check the RST bit (RFC 9293 3.10.7.4, after RFC 5961 3.2):
	// exactly at RCV.NXT it resets; elsewhere in the window it earns a
	// challenge ACK, so a blind attacker must guess the exact number.
	if seg.has(wire.TCPFlagRST) {
		if seg.seq != c.rcv.nxt {
			c.challengeACK(now)
			return false
		}
		c.p.Stats.InRsts.Inc()
		switch c.state {
		case SynReceived:
			if c.lis != nil {
				c.finish(nil) // passive: the listener forgets it
			} else {
				c.finish(errConnRefused)
			}
		case Established, FinWait1, FinWait2, CloseWait:
			c.p.Stats.EstabResets.Inc()
			c.finish(errConnReset)
		case TimeWait:
			// RFC 1337 section 3 (TIME-WAIT assassination): a reset does
			// not cut TIME-WAIT short.
		default: // CLOSING, LAST-ACK
			c.finish(nil)
		}
		return false
	}
	// Fourth, check the SYN bit: in a synchronized state, a challenge ACK
	// (RFC 5961 4.2, adopted by RFC 9293). A retransmitted SYN in
	// SYN-RECEIVED gets our SYN-ACK again.
	if seg.has(wire.TCPFlagSYN) {
		if c.state == SynReceived && seg.seq == c.rcv.irs {
			c.rcv.ackNow = true
			return false
		}
		c.challengeACK(now)
		return false
	}
	// Fifth, check the ACK field.
	if !seg.has(wire.TCPFlagACK) {
		return false
	}
	if c.state != SynReceived && !c.ackAcceptable(seg, now) {
		return false // RFC 5961 5.2 (challenge.go)
	}
	if c.tsOK && seg.opts.HasTimestamp && !seg.seq.GreaterThan(c.rcv.nxt) {
		c.rcv.tsRecent, c.rcv.tsRecentAt = seg.opts.TSVal, now // RFC 7323 4.3: SEG.SEQ =< Last.ACK.sent
	}
	c.armKeepalive(now)
	c.ecnInput(seg)
	c.pathWorks(seg)
	if c.state == SynReceived {
		if !seg.ack.InRange(c.snd.una+1, c.snd.nxt+1) {
			c.p.sendResetTo(c.id, seg.ack, 0, wire.TCPFlagRST)
			return false
		}
		c.ackSYN(seg.ack, now)
		c.snd.wnd = uint32(seg.wnd) << c.sndWScaleIf()
		c.snd.wl1, c.snd.wl2 = seg.seq, seg.ack
		c.snd.maxWnd = c.snd.wnd
		c.establish(now)
	} else if !c.processAck(seg, seg.opts.TSEcr, now) {
		return false
	}
	switch c.state {
	case FinWait1:
		if c.finAcked() {
			c.setState(FinWait2)
			if c.sock.closed {
				c.timers.closeAt = now.Add(c.p.cfg.FinTimeout)
			}
		}
	case Closing:
		if c.finAcked() {
			c.enterTimeWait(now)
		}
	case LastAck:
		if c.finAcked() {
			c.finish(nil)
			return false
		}
	}
	// Sixth, the URG bit: urgent data is delivered inline (RFC 6093
	// recommends it); the pointer is not acted on.
	// Seventh, process the segment text.
	kept := false
	c.measureRcvRTT(seg, now)
	if len(seg.payload) > 0 || seg.has(wire.TCPFlagFIN) {
		kept = c.receiveText(seg, now)
	}
	return kept
}

// sndWScaleIf is the shift for the peer's window fields.
func (c *Conn) sndWScaleIf() uint8 {
	if c.wsOK {
		return c.snd.wscale
	}
	return 0
}

// finAcked reports whether our FIN has been acknowledged.
func (c *Conn) finAcked() bool { return c.sock.wrShut && c.snd.una.GreaterThan(c.finSeq()) }

func (c *Conn) enterTimeWait(now time.Time) {
	c.setState(TimeWait)
	c.timers.rexmitAt, c.timers.keepaliveAt, c.timers.delackAt = noTime, noTime, noTime
	c.timers.closeAt = now.Add(2 * c.p.cfg.MSL)
}

// processAck handles the ACK field in a synchronized state: the send
// window (3.10.7.4 "fifth"), newly acknowledged data, duplicate ACKs and
// fast retransmit and recovery (RFC 5681 3.2, RFC 6582 3.2, RFC 3042). It
// reports false if the segment must be dropped.
func (c *Conn) processAck(seg *segment, tsEcr uint32, now time.Time) bool {
	ack := seg.ack
	if ack.GreaterThan(c.snd.max) {
		// "If the ACK acks something not yet sent (SEG.ACK > SND.NXT)
		// then send an ACK, drop the segment, and return."
		c.rcv.ackNow = true
		return false
	}
	wnd := uint32(seg.wnd) << c.sndWScaleIf()
	if ack.LessThan(c.snd.una) {
		return true // an old duplicate: ignore the ACK, keep the text
	}
	// A closed window's answers to zero-window probes are not duplicate
	// ACKs: they signal no loss (FreeBSD counts none in persist either).
	isDup := ack == c.snd.una && len(seg.payload) == 0 && !seg.has(wire.TCPFlagFIN) &&
		wnd == c.snd.wnd && wnd != 0 && c.snd.una != c.snd.max
	// RFC 9293 3.10.7.4: update the window if the segment is newer.
	if c.snd.wl1.LessThan(seg.seq) || (c.snd.wl1 == seg.seq && c.snd.wl2.LessThanEq(ack)) {
		c.snd.wnd = wnd
		c.snd.wl1, c.snd.wl2 = seg.seq, ack
		c.snd.maxWnd = max(c.snd.maxWnd, wnd)
	}
	if c.snd.wnd == 0 {
		c.snd.backoff = 0 // an answer to the zero-window probes: the peer lives
	}
	if c.sackOK {
		return c.processSACKAck(seg, isDup, tsEcr, now) // RFC 6675, RFC 8985
	}
	acked := int(ack.Sub(c.snd.una))
	if acked > 0 {
		c.newAck(ack, acked, tsEcr, now)
		return true
	}
	if !isDup {
		c.snd.dupAcks = 0
		return true
	}
	c.p.Stats.DupAcks.Inc()
	c.snd.dupAcks++
	inflight := int(c.snd.max.Sub(c.snd.una))
	switch {
	case c.snd.inRecovery:
		c.snd.cc.OnRecoveryAck(0)
	case c.snd.dupAcks == 3 && ack.GreaterThan(c.snd.recover):
		// Fast retransmit (RFC 6582 3.2 steps 2-4; the "covers more than
		// recover" check avoids a second reduction for one loss).
		c.p.Stats.FastRetrans.Inc()
		c.lossReduce(inflight) // ecn.go: not twice for one window
		c.snd.recover = c.snd.max
		c.snd.inRecovery = true
		c.retransmitHead()
	}
	// Fewer than three duplicates: limited transmit (RFC 3042) lets
	// output send new data beyond cwnd (see usableWindow).
	return true
}

// newAck takes an acknowledgement of acked new bytes up to ack.
func (c *Conn) newAck(ack seqnum.Value, acked int, tsEcr uint32, now time.Time) {
	c.judgeRTO(tsEcr)
	inflight := int(c.snd.max.Sub(c.snd.una))
	// Free the acknowledged data (the FIN's sequence number is not data).
	dataEnd := c.snd.bufSeq.Add(seqnum.Size(c.sock.sndBuf.n))
	if upTo := seqnum.Min(ack, dataEnd); upTo.GreaterThan(c.snd.bufSeq) {
		n := int(upTo.Sub(c.snd.bufSeq))
		c.sock.sndBuf.discard(n, c.p.env.Budget)
		c.snd.bufSeq = upTo
		c.sock.writable.wake()
	}
	c.snd.una = ack
	if c.snd.nxt.LessThan(ack) {
		c.snd.nxt = ack
	}
	c.noteProgress(now)
	c.snd.forwardProgress(now)
	// The retransmission queue: drop what is acknowledged, and take an RTT
	// sample from the newest segment never retransmitted (Karn's rule).
	var rtt time.Duration
	ambiguous := false
	i := 0
	for ; i < len(c.snd.sent) && c.snd.sent[i].end.LessThanEq(ack); i++ {
		if c.snd.sent[i].retrans {
			ambiguous = true
		} else {
			rtt = now.Sub(c.snd.sent[i].sentAt)
		}
	}
	if i > 0 {
		n := copy(c.snd.sent, c.snd.sent[i:])
		c.snd.sent = c.snd.sent[:n]
	}
	if ambiguous {
		// Karn's rule: an ACK that covers a retransmission cannot time
		// the segments before it either (it may have waited for the
		// repair). A timestamp echo, if negotiated, still can (RFC 7323
		// section 4.1).
		rtt = 0
		if c.tsOK && tsEcr != 0 {
			rtt = time.Duration(c.tsVal()-tsEcr) * time.Millisecond
		}
	}
	if rtt > 0 {
		c.snd.sampleRTT(rtt)
	}
	c.snd.backoff = 0
	if c.snd.inRecovery {
		if !ack.LessThan(c.snd.recover) {
			c.snd.inRecovery = false
			c.snd.dupAcks = 0
			c.snd.cc.OnExitRecovery(int(c.snd.max.Sub(c.snd.una)))
		} else if c.sackOK {
			// RFC 6675: the scoreboard, not the partial ACK, says
			// which holes to repair (sendRecovery).
		} else {
			// Partial acknowledgement (RFC 6582 3.2 step 5): the next hole
			// is lost too; retransmit it at once.
			c.p.Stats.PartialAcks.Inc()
			c.snd.cc.OnRecoveryAck(acked)
			c.retransmitHead()
		}
	} else {
		c.snd.dupAcks = 0
		if !c.sackOK && !c.snd.recover.GreaterThan(ack) {
			// Once passed, recover follows just behind SND.UNA: left
			// at the ISS or the last recovery, it would fall 2^31
			// behind after 2 GiB without a loss, and "the ACK covers
			// more than recover" (RFC 6582 3.2 step 2) would then read
			// false in sequence arithmetic and hold every later fast
			// retransmit off. After a timeout it stays at SND.MAX
			// until the ACKs pass it.
			c.snd.recover = ack - 1
		}
		c.snd.cc.OnAck(AckEvent{Acked: acked, Inflight: max(inflight, c.snd.used.high), RTT: rtt, SRTT: c.snd.srtt,
			SndUna: c.snd.una, SndMax: c.snd.max, Now: now})
	}
	// RFC 6298 5.2-5.3: stop the timer when all is acknowledged, else
	// restart it.
	if c.snd.una == c.snd.max {
		c.timers.rexmitAt = noTime
	} else {
		c.armRexmit(now)
	}
}

// retransmitHead resends the first unacknowledged segment.
func (c *Conn) retransmitHead() {
	off := int(c.snd.una.Sub(c.snd.bufSeq))
	n := min(max(c.sock.sndBuf.n-off, 0), c.snd.mss)
	fin := c.sock.wrShut && n == c.sock.sndBuf.n-off && c.snd.max.GreaterThan(c.finSeq())
	if n == 0 && !fin {
		return
	}
	flags := uint8(wire.TCPFlagACK)
	if fin {
		flags |= wire.TCPFlagFIN
	}
	c.sendSegment(c.snd.una, flags, off, n)
	c.noteSent(c.snd.una, n, fin)
}

// receiveText queues the segment's data for the application (in order) or
// holds it (out of order), and takes its FIN (RFC 9293 3.10.7.4 "seventh"
// and "eighth"). It reports whether it kept the packet.
func (c *Conn) receiveText(seg *segment, now time.Time) bool {
	if !c.state.canReceive() {
		// CLOSE-WAIT and later: the peer already sent its FIN. A FIN
		// retransmitted into TIME-WAIT restarts the 2 MSL wait.
		if c.state == TimeWait && seg.has(wire.TCPFlagFIN) {
			c.timers.closeAt = now.Add(2 * c.p.cfg.MSL)
		}
		c.rcv.ackNow = true
		return false
	}
	data := seg.payload
	seq := seg.seq
	fin := seg.has(wire.TCPFlagFIN)
	// Trim what we already have, and what lies beyond the window.
	if seq.LessThan(c.rcv.nxt) {
		c.noteDuplicate(seq, seqnum.Min(seq.Add(seqnum.Size(len(data))), c.rcv.nxt))
		skip := int(c.rcv.nxt.Sub(seq))
		if skip > len(data) {
			skip = len(data)
		}
		data = data[skip:]
		seq = seq.Add(seqnum.Size(skip))
	}
	if wndEnd := c.rcv.adv; seq.Add(seqnum.Size(len(data))).GreaterThan(wndEnd) {
		keep := 0
		if wndEnd.GreaterThan(seq) {
			keep = int(wndEnd.Sub(seq))
		}
		data = data[:keep]
		fin = false
		// Say at once what was taken and what the window is: a zero-
		// window probe must be answered (RFC 9293 3.8.6.1), and the
		// sender of the rest learns to wait.
		c.rcv.ackNow = true
	}
	if len(data) > 0 && c.sock.closed {
		// The application closed and will never read this: RFC 9293
		// 3.6.1 / RFC 1122 4.2.2.13, answer with a reset.
		c.p.Stats.DataAfterClose.Inc()
		c.reset(errConnReset)
		return false
	}
	if seq != c.rcv.nxt {
		if seq.GreaterThan(c.rcv.nxt) {
			c.holdOutOfOrder(seq, seg.pk, data, fin)
			c.rcv.ackNow = true // RFC 5681 4.2: a duplicate ACK at once
			c.rcv.dupAcksOwed++
			return true
		}
		c.rcv.ackNow = true
		return false
	}
	kept := false
	filled := len(c.rcv.ooo) > 0
	if len(data) > 0 {
		kept = c.queueData(seg.pk, data)
	}
	if kept && len(data) > 0 {
		c.noteDataIn(now)
	}
	if kept || len(data) == 0 {
		c.rcv.nxt = c.rcv.nxt.Add(seqnum.Size(len(data)))
		if fin {
			c.takeFIN(now)
		}
		c.pullOutOfOrder(now)
	}
	if filled || fin || !kept && len(data) > 0 {
		c.rcv.ackNow = true
	} else if len(data) > 0 {
		// Delayed ACK (RFC 9293 3.8.6.3, RFC 5681 4.2): at least every
		// second full-sized segment, and within DelayedAck; a
		// super-segment's runt within runtAckDelay; none while quick
		// ACKs run (quickack.go).
		full, runt := segmentsIn(seg.pk, len(data))
		c.rcv.segsUnacked += full
		switch {
		case c.rcv.segsUnacked >= 2 || c.quickAck():
			c.rcv.ackNow = true
		case runt:
			c.delayAck(now.Add(runtAckDelay))
		default:
			c.delayAck(now.Add(c.p.cfg.DelayedAck))
		}
	}
	return kept
}

// runtAckDelay is how long the ACK for a super-segment of one full-sized
// segment and a runt waits for the next super-segment, whose ACK then
// answers both. A sender's write that does not fill its last segment ends
// so (the kernel's 128 KiB writes over IPv6, MSS 1428: two super-segments
// of 45 segments and one of 2552 bytes), and the next write follows
// within tens of microseconds; answered at once, the runt cost a bulk
// receiver a fifth more ACKs over IPv6 than over IPv4, each a write to the
// TAP, and a tenth of its rate in paired rounds (ARCHITECTURE.md, "IPv6").
// Short, so that a sender whose next data waits for this ACK (Nagle's
// algorithm holding a small segment) loses no more than it.
const runtAckDelay = 300 * time.Microsecond

// delayAck arms the delayed-ACK timer for at, unless it is armed sooner.
func (c *Conn) delayAck(at time.Time) {
	if c.timers.delackAt.IsZero() || at.Before(c.timers.delackAt) {
		c.timers.delackAt = at
	}
}

// queueData puts in-order data on the receive queue, within the stack's
// memory budget; data after CloseRead is acknowledged and dropped.
func (c *Conn) queueData(pk *buffer.Packet, data []byte) bool {
	if c.sock.rdShut {
		return false
	}
	if !c.p.env.Budget.Reserve(len(data)) {
		c.p.Stats.RcvBufDrops.Inc()
		return false
	}
	c.sock.rcvBuf.push(pk, data)
	c.sock.readable.wake()
	return true
}

// holdOutOfOrder keeps data that arrived beyond a hole, sorted by sequence
// number; data already held is not stored twice.
func (c *Conn) holdOutOfOrder(seq seqnum.Value, pk *buffer.Packet, data []byte, fin bool) {
	end := seq.Add(seqnum.Size(len(data)))
	i := 0
	for ; i < len(c.rcv.ooo); i++ {
		o := &c.rcv.ooo[i]
		if !o.seq.GreaterThan(seq) && !o.end().LessThan(end) && (!fin || o.fin) {
			c.noteDuplicate(seq, end)
			pk.Release() // a duplicate of what we hold
			return
		}
		if o.seq.GreaterThan(seq) {
			break
		}
	}
	if !c.p.env.Budget.Reserve(len(data)) {
		c.p.Stats.RcvBufDrops.Inc()
		pk.Release()
		return
	}
	c.p.Stats.OFOQueue.Inc()
	c.rcv.lastOOO = sackRange{seq, end, true}
	c.rcv.ooo = append(c.rcv.ooo, oooSeg{})
	copy(c.rcv.ooo[i+1:], c.rcv.ooo[i:])
	c.rcv.ooo[i] = oooSeg{seq: seq, pk: pk, data: data, fin: fin}
	c.rcv.oooN += len(data)
}

// pullOutOfOrder moves held data that the new RCV.NXT reaches to the
// receive queue.
func (c *Conn) pullOutOfOrder(now time.Time) {
	bud := c.p.env.Budget
	pulled := 0
	for pulled < len(c.rcv.ooo) && !c.rcv.ooo[pulled].seq.GreaterThan(c.rcv.nxt) && c.state.canReceive() {
		o := c.rcv.ooo[pulled]
		pulled++
		c.rcv.oooN -= len(o.data)
		skip := int(c.rcv.nxt.Sub(o.seq))
		if skip > len(o.data) || (skip == len(o.data) && !o.fin) {
			bud.Release(len(o.data))
			o.pk.Release()
			continue
		}
		data := o.data[skip:]
		bud.Release(skip)
		if len(data) > 0 {
			if c.sock.rdShut {
				bud.Release(len(data))
				o.pk.Release()
			} else {
				c.sock.rcvBuf.push(o.pk, data)
				c.sock.readable.wake()
			}
		} else {
			o.pk.Release()
		}
		c.rcv.nxt = c.rcv.nxt.Add(seqnum.Size(len(data)))
		if o.fin {
			c.takeFIN(now)
		}
	}
	// Shift what is left down once rather than reslice per segment: a
	// queue that slides forward, or is dropped when emptied, makes
	// holdOutOfOrder's append allocate anew after every hole filled.
	n := copy(c.rcv.ooo, c.rcv.ooo[pulled:])
	clear(c.rcv.ooo[n:])
	c.rcv.ooo = c.rcv.ooo[:n]
}

// takeFIN processes the peer's FIN (RFC 9293 3.10.7.4 "eighth").
func (c *Conn) takeFIN(now time.Time) {
	c.rcv.nxt++
	c.sock.rcvEOF = true
	c.rcv.ackNow = true
	c.sock.readable.wake()
	switch c.state {
	case Established:
		c.setState(CloseWait)
	case FinWait1:
		if c.finAcked() {
			c.enterTimeWait(now)
		} else {
			c.setState(Closing)
		}
	case FinWait2:
		c.enterTimeWait(now)
	}
}
