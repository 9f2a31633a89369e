package tcp

import (
	"sort"
	"time"

	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// Selective acknowledgements, the sender's side: the scoreboard (RFC 2018
// section 3, RFC 6675 section 3), D-SACK recognition (RFC 2883 section 4)
// and SACK-based loss recovery (RFC 6675 section 5). The retransmission
// queue keeps one entry per segment sent; the scoreboard is each entry's
// sacked and lost marks, with running totals so that pipe costs nothing
// per ACK. Which segments are lost is decided by RACK (rack.go) or, with
// RACK off, by RFC 6675's DupThresh rule (isLost below); this file repairs
// them. The congestion control is told once per recovery (OnEnterRecovery)
// and sets the window; pipe, not NewReno's window inflation, says how
// much may go out meanwhile.

// dupThresh is RFC 6675's DupThresh: three segments SACKed above a hole.
const dupThresh = 3

// scoreboard holds the totals over the retransmission queue's marks and
// RFC 6675's recovery variables.
type scoreboard struct {
	sacked     int // bytes SACKed above SND.UNA
	sackedSegs int // entries SACKed
	lost       int // bytes deemed lost and not retransmitted since
	// highSACK is the highest sequence number SACKed (RACK.fack).
	highSACK seqnum.Value
	// HighRxt and RescueRxt of RFC 6675 section 2; rescued says RescueRxt
	// is set for this recovery.
	highRxt   seqnum.Value
	rescueRxt seqnum.Value
	rescued   bool
	// entered says recovery has just begun: its first retransmission goes
	// whatever pipe says (RFC 6675 section 5 step (4.3)).
	entered bool
}

// retransmitted is told that s went out again: it is in flight once more.
func (sb *scoreboard) retransmitted(s *sentSeg) {
	if s.lost {
		s.lost = false
		sb.lost -= int(s.end.Sub(s.start))
	}
}

// markLost marks s lost; it reports whether it was not already.
func (sb *scoreboard) markLost(s *sentSeg) bool {
	if s.lost || s.sacked {
		return false
	}
	s.lost = true
	sb.lost += int(s.end.Sub(s.start))
	return true
}

// forget takes n bytes of s, acknowledged cumulatively, off the totals.
func (sb *scoreboard) forget(s *sentSeg, n int) {
	if s.sacked {
		sb.sacked -= n
	}
	if s.lost {
		sb.lost -= n
	}
}

// pipe is RFC 6675's estimate of the bytes in the network: everything
// between SND.UNA and SND.MAX that is neither SACKed nor deemed lost (a
// lost segment counts again once retransmitted).
func (snd *sender) pipe() int {
	return max(int(snd.max.Sub(snd.una))-snd.sb.sacked-snd.sb.lost, 0)
}

// congestionRoom is how many more bytes the congestion window allows with
// inflight bytes sent beyond SND.UNA. With SACK it is cwnd - pipe (RFC
// 6675 section 4), and during recovery what PRR allows (prr.go, RFC 6937,
// in place of RFC 6675's cwnd = ssthresh): pipe already discounts what
// the peer holds, so the window needs neither NewReno's inflation nor
// limited transmit.
func (c *Conn) congestionRoom(inflight int) int {
	if !c.sackOK {
		return c.snd.cc.CWnd() + c.snd.limitedTransmit() - inflight
	}
	if c.snd.inRecovery {
		return c.snd.prrRoom()
	}
	return c.snd.cc.CWnd() - c.snd.pipe()
}

// processSACKAck handles the ACK field when SACK is in use: the
// scoreboard takes the cumulative acknowledgement and the SACK blocks,
// RACK (or RFC 6675's DupThresh) marks what is lost, and recovery starts
// or ends. It reports false if the segment must be dropped.
func (c *Conn) processSACKAck(seg *segment, isDup bool, tsEcr uint32, now time.Time) bool {
	ack := seg.ack
	acked := int(ack.Sub(c.snd.una))
	sackedBefore := c.snd.sb.sacked
	if c.snd.sb.sackedSegs == 0 {
		c.snd.sb.highSACK = c.snd.una
	}
	if !c.snd.una.LessThan(c.snd.recover) {
		// No recovery under way: RecoveryPoint follows SND.UNA, so that
		// after 2 GiB without a loss it does not seem ahead of it in
		// sequence arithmetic and hold every later recovery off.
		c.snd.recover = c.snd.una
	}
	c.ackedEntries(ack, now)
	newly, dsack := c.takeSACK(seg.sackBlocks(), ack, now)
	wasInRecovery := c.snd.inRecovery
	if acked > 0 {
		c.newAck(ack, acked, tsEcr, now)
	} else if isDup || newly {
		c.p.Stats.DupAcks.Inc()
		c.snd.dupAcks++
	} else {
		c.snd.dupAcks = 0
	}
	c.tlpOnAck(ack, isDup && seg.nSACK == 0)
	c.rackUpdateReoWnd(dsack, wasInRecovery && !c.snd.inRecovery)
	if c.rackOn() {
		// Only SACKed data, or a recovery under way, can leave a segment
		// sent before the latest delivered one outstanding: a loss-free
		// ACK costs no walk of the queue.
		if c.snd.sb.sacked > 0 || c.snd.sb.lost > 0 || c.snd.una.LessThan(c.snd.recover) || !c.snd.rack.timerAt.IsZero() {
			c.rackDetectLoss(now)
		}
	} else if newly || c.snd.dupAcks >= dupThresh {
		c.snd.markLostByDupThresh()
	}
	c.maybeEnterRecovery()
	if c.snd.inRecovery {
		c.snd.prrOnAck(acked + c.snd.sb.sacked - sackedBefore)
	}
	return true
}

// ackedEntries takes the entries the cumulative ACK covers off the
// scoreboard's totals before newAck drops them, tells RACK of those the
// peer had not SACKed, and trims an entry the ACK covers in part.
func (c *Conn) ackedEntries(ack seqnum.Value, now time.Time) {
	for i := range c.snd.sent {
		s := &c.snd.sent[i]
		if !s.start.LessThan(ack) {
			break
		}
		if s.end.LessThanEq(ack) {
			if s.sacked {
				c.snd.sb.sackedSegs--
			} else {
				c.rackDelivered(s, now)
			}
			c.snd.sb.forget(s, int(s.end.Sub(s.start)))
			continue
		}
		c.snd.sb.forget(s, int(ack.Sub(s.start)))
		s.start = ack
	}
}

// takeSACK marks the segments the blocks of an ACK cover (RFC 2018
// section 3). The first block may be a D-SACK (RFC 2883 section 4), which
// reports a duplicate and marks nothing; a block outside SND.UNA..SND.MAX
// is discarded, as Linux's tcp_is_sackblock_valid does, since marking
// data never sent, or already acknowledged, would corrupt pipe. It
// reports whether new data was SACKed and whether a D-SACK came.
func (c *Conn) takeSACK(blocks []wire.SACKBlock, ack seqnum.Value, now time.Time) (newly, dsack bool) {
	for i, b := range blocks {
		start, end := seqnum.Value(b.Start), seqnum.Value(b.End)
		if i == 0 && isDSACK(start, end, ack, blocks) {
			if !start.LessThan(end) || end.GreaterThan(c.snd.max) {
				c.p.Stats.SACKDiscard.Inc()
				continue
			}
			c.p.Stats.DSACKRecv.Inc()
			c.p.Stats.DSACKRecvSegs.Add(uint64(dsackSegs(start, end, c.snd.mss)))
			dsack = true
			c.snd.tlpOnDSACK(start, end)
			continue
		}
		if !start.LessThan(end) || start.LessThan(c.snd.una) || end.GreaterThan(c.snd.max) {
			c.p.Stats.SACKDiscard.Inc()
			continue
		}
		if c.markSACKed(start, end, now) {
			newly = true
		}
	}
	return newly, dsack
}

// isDSACK is RFC 2883 section 4's test of the first block: below the
// cumulative acknowledgement, or inside the second block.
func isDSACK(start, end, ack seqnum.Value, blocks []wire.SACKBlock) bool {
	if start.LessThan(ack) {
		return true
	}
	if len(blocks) < 2 {
		return false
	}
	s2, e2 := seqnum.Value(blocks[1].Start), seqnum.Value(blocks[1].End)
	return !start.LessThan(s2) && !end.GreaterThan(e2)
}

// markSACKed marks the entries within [start, end), splitting an entry
// the block covers in part so that the marks stay exact (the peer holds
// only what the block names). It reports whether anything was newly
// SACKed.
func (c *Conn) markSACKed(start, end seqnum.Value, now time.Time) bool {
	newly := false
	i := sort.Search(len(c.snd.sent), func(i int) bool { return c.snd.sent[i].end.GreaterThan(start) })
	for ; i < len(c.snd.sent) && c.snd.sent[i].start.LessThan(end); i++ {
		if c.snd.sent[i].sacked {
			continue
		}
		if c.snd.sent[i].start.LessThan(start) {
			c.snd.splitSent(i, start)
			continue // the next entry begins at start
		}
		if c.snd.sent[i].end.GreaterThan(end) {
			c.snd.splitSent(i, end)
		}
		s := &c.snd.sent[i]
		if s.lost {
			s.lost = false
			c.snd.sb.lost -= int(s.end.Sub(s.start))
		}
		s.sacked = true
		c.snd.sb.sacked += int(s.end.Sub(s.start))
		c.snd.sb.sackedSegs++
		c.snd.sb.highSACK = seqnum.Max(c.snd.sb.highSACK, s.end)
		c.rackDelivered(s, now)
		newly = true
	}
	return newly
}

// splitSent cuts entry i at seq, which lies inside it, into two entries
// with the same marks and transmission time.
func (snd *sender) splitSent(i int, at seqnum.Value) {
	snd.sent = append(snd.sent, sentSeg{})
	copy(snd.sent[i+1:], snd.sent[i:])
	snd.sent[i].end = at
	snd.sent[i+1].start = at
}

// markLostByDupThresh is RFC 6675's IsLost (section 4) over the queue,
// from the top down: a segment not SACKed is lost once DupThresh
// segments, or more than (DupThresh-1)*SMSS bytes, are SACKed above it.
// Segments below HighRxt were retransmitted in this recovery already and
// are not marked again: each hole goes out once per recovery. Without any
// SACK, DupThresh duplicate ACKs mark the first segment (RFC 6675 section
// 5, step (4.3) retransmits it).
func (snd *sender) markLostByDupThresh() {
	segs, bytes := 0, 0
	for i := len(snd.sent) - 1; i >= 0; i-- {
		s := &snd.sent[i]
		if snd.inRecovery && s.start.LessThan(snd.sb.highRxt) {
			break
		}
		if s.sacked {
			segs++
			bytes += int(s.end.Sub(s.start))
			continue
		}
		if segs >= dupThresh || bytes > (dupThresh-1)*snd.mss {
			if s.lost {
				break // and so is everything below it, marked before
			}
			snd.sb.markLost(s)
		}
	}
	if snd.dupAcks >= dupThresh && !snd.inRecovery && len(snd.sent) > 0 {
		snd.sb.markLost(&snd.sent[0])
	}
}

// maybeEnterRecovery starts loss recovery when a segment is deemed lost
// (RFC 6675 section 5 step (4), RFC 8985 section 6.2): RecoveryPoint is
// SND.MAX and the congestion control reduces the window, once for all
// the losses until then. After a timeout none starts before SND.UNA
// reaches the timeout's recovery point (RFC 6675 section 5.1): the
// go-back-N retransmissions repair that window.
func (c *Conn) maybeEnterRecovery() {
	if c.snd.inRecovery || c.snd.sb.lost == 0 || c.snd.una.LessThan(c.snd.recover) {
		return
	}
	c.p.Stats.SACKRecovery.Inc()
	c.p.Stats.FastRetrans.Inc() // its first retransmission is a fast one, as Linux counts
	// Not twice for one window (ecn.go).
	c.lossReduce(int(c.snd.max.Sub(c.snd.una)))
	c.snd.inRecovery = true
	c.snd.recover = c.snd.max
	c.snd.sb.highRxt = c.snd.una
	c.snd.sb.rescued = false
	c.snd.sb.entered = true
	c.snd.prrStart()
}

// sendRecovery sends one segment by RFC 6675's NextSeg (section 4) if
// the window allows (cwnd - pipe >= SMSS, section 5 step (C)), and
// reports whether it did: (1) the first segment deemed lost; (2) new data
// is left to sendData; (4) once per recovery, a rescue retransmission of
// the flight's tail when there is nothing else to send. Rule
// (3), segments not deemed lost below the highest SACK, is left out: RACK
// marks those by time instead of sending them on speculation. Outside
// recovery it only moves a go-back-N resend past what the peer SACKed.
func (c *Conn) sendRecovery() bool {
	if !c.sackOK {
		return false
	}
	c.snd.skipSACKed()
	// After a timeout, until SND.UNA reaches its recovery point, segments
	// RACK finds lost again (go-back-N's own retransmissions) are resent
	// by rule (1) too, as Linux does in its Loss state: otherwise each
	// would wait for another timeout.
	rtoRecovery := !c.snd.inRecovery && c.snd.una.LessThan(c.snd.recover)
	if !c.snd.inRecovery && !rtoRecovery || !c.snd.sb.entered && c.congestionRoom(0) < c.snd.mss {
		return false
	}
	c.snd.sb.entered = false
	if c.snd.sb.lost > 0 {
		for i := range c.snd.sent {
			if c.snd.sent[i].lost {
				head := c.snd.sent[i].start == c.snd.una
				if c.snd.inRecovery {
					c.snd.sb.highRxt = seqnum.Max(c.snd.sb.highRxt, c.snd.sent[i].end)
					c.p.Stats.SACKRetrans.Inc()
				}
				sent := c.retransmitEntry(i)
				if sent && head && c.snd.inRecovery {
					// The hole at SND.UNA resent: its ACK is a round
					// trip away, so the retransmission timer restarts
					// from now, as Linux's tcp_xmit_retransmit_queue
					// rearms it. Left running from the original's send,
					// it would fire as that ACK travels whenever the RTO
					// is near two round trips (its 200 ms floor on a
					// 100 ms path): a spurious timeout, and go-back-N
					// resending what the peer holds.
					c.armRexmit(c.now())
				}
				return sent
			}
		}
	}
	if rtoRecovery {
		return false
	}
	off := int(c.snd.nxt.Sub(c.snd.bufSeq))
	if c.sock.sndBuf.n > off || c.finPending() {
		return false // rule (2): sendData sends it
	}
	// RescueRxt is RecoveryPoint once used, so "HighACK > RescueRxt" holds
	// only in a later recovery: rescued says it per recovery. The rescue
	// is for the flight's tail beyond the highest SACK, which IsLost can
	// never mark: the last segment below RecoveryPoint not SACKed, unless
	// this recovery resent it already. RACK needs none (as Linux, which
	// has no rescue): its timers watch the tail.
	if c.rackOn() || c.snd.sb.rescued {
		return false
	}
	for i := len(c.snd.sent) - 1; i >= 0 && !c.snd.sent[i].start.LessThan(c.snd.sb.highSACK); i-- {
		s := &c.snd.sent[i]
		if s.sacked || s.end.GreaterThan(c.snd.recover) {
			continue
		}
		if s.start.LessThan(c.snd.sb.highRxt) {
			break
		}
		c.snd.sb.rescued, c.snd.sb.rescueRxt = true, c.snd.recover
		c.p.Stats.SACKRetrans.Inc()
		return c.retransmitEntry(i)
	}
	return false
}

// retransmitEntry resends the queue's entry i (no more than one MSS of
// it) and reports whether anything went out.
func (c *Conn) retransmitEntry(i int) bool {
	s := c.snd.sent[i]
	dataEnd := c.snd.bufSeq.Add(seqnum.Size(c.sock.sndBuf.n))
	n := 0
	if dataEnd.GreaterThan(s.start) {
		n = int(seqnum.Min(s.end, dataEnd).Sub(s.start))
	}
	if n > c.snd.mss {
		c.snd.splitSent(i, s.start.Add(seqnum.Size(c.snd.mss)))
		s, n = c.snd.sent[i], c.snd.mss
	}
	fin := c.sock.wrShut && s.end.GreaterThan(c.finSeq())
	if n == 0 && !fin {
		c.snd.sb.retransmitted(&c.snd.sent[i]) // nothing left to send of it
		return false
	}
	flags := uint8(wire.TCPFlagACK)
	if fin {
		flags |= wire.TCPFlagFIN
	}
	c.sendSegment(s.start, flags, int(s.start.Sub(c.snd.bufSeq)), n)
	c.noteSent(s.start, n, fin)
	c.snd.prr.rexmitOut += n
	return true
}

// skipSACKed moves SND.NXT, when a timeout pulled it back to SND.UNA,
// past segments the peer SACKed since: go-back-N need not resend them.
func (snd *sender) skipSACKed() {
	if snd.sb.sacked == 0 || !snd.nxt.LessThan(snd.max) {
		return
	}
	i := sort.Search(len(snd.sent), func(i int) bool { return snd.sent[i].end.GreaterThan(snd.nxt) })
	for ; i < len(snd.sent) && snd.sent[i].sacked && !snd.sent[i].start.GreaterThan(snd.nxt); i++ {
		snd.nxt = snd.sent[i].end
	}
}

// sackOnRTO is the scoreboard's part of a retransmission timeout: the
// SACKed marks are dropped, since the receiver may have reneged on them
// (RFC 2018 section 8, RFC 6675 section 5.1), and every segment is deemed
// lost, so that pipe counts only what go-back-N sends again; SACKs that
// arrive meanwhile mark segments anew. The episode of RACK and TLP ends.
func (c *Conn) sackOnRTO() {
	if !c.sackOK {
		return
	}
	c.snd.sb = scoreboard{highSACK: c.snd.una}
	for i := range c.snd.sent {
		c.snd.sent[i].sacked, c.snd.sent[i].lost = false, false
		c.snd.sb.markLost(&c.snd.sent[i])
	}
	c.snd.rack.timerAt = noTime
	c.snd.tlp = tlpState{seenUna: c.snd.una, seenMax: c.snd.max}
}
