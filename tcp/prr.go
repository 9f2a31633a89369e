package tcp

// Proportional Rate Reduction (RFC 6937) paces SACK recovery. RFC 6675
// alone sends nothing until pipe falls below cwnd and then a burst; with
// a small window it may send nothing at all while the peer still ACKs, and
// a retransmission lost then waits for the timer, as nothing sent after
// it can be delivered for RACK to notice. PRR spreads the window's
// reduction over the recovery's ACKs: while pipe is above ssthresh, it
// sends in proportion to what was delivered (ssthresh/RecoverFS of it);
// below, it grows back towards ssthresh no faster than slow start (the
// slow start reduction bound, PRR-SSRB), one segment more per ACK.

// prrState is RFC 6937's per-recovery state. prr_out, the bytes sent
// since recovery began, is the new data beyond RecoveryPoint plus what
// recovery retransmitted.
type prrState struct {
	recoverFS int // the flight when recovery began (RecoverFS)
	delivered int // bytes delivered to the peer since (prr_delivered)
	rexmitOut int // bytes retransmitted since
	allow     int // the prr_out the last ACK's sndcnt lets the sender reach
}

// prrStart begins PRR for a recovery (RFC 6937 section 3, "at the
// beginning of recovery").
func (snd *sender) prrStart() {
	snd.prr = prrState{recoverFS: max(int(snd.max.Sub(snd.una)), 1)}
}

// prrOut is RFC 6937's prr_out: what was sent since recovery began, new
// data beyond recover and retransmissions.
func (snd *sender) prrOut() int { return int(snd.max.Sub(snd.recover)) + snd.prr.rexmitOut }

// prrOnAck is RFC 6937's "on every ACK during recovery": delivered is
// DeliveredData, the change in SND.UNA plus the change in SACKed bytes.
func (snd *sender) prrOnAck(delivered int) {
	p := &snd.prr
	p.delivered += max(delivered, 0)
	out := snd.prrOut()
	pipe, ssthresh := snd.pipe(), snd.cc.SSThresh()
	var sndcnt int
	if pipe > ssthresh {
		// Proportional rate reduction: CEIL(prr_delivered * ssthresh /
		// RecoverFS) - prr_out.
		sndcnt = (p.delivered*ssthresh+p.recoverFS-1)/p.recoverFS - out
	} else {
		// PRR-SSRB: MIN(ssthresh - pipe, MAX(prr_delivered - prr_out,
		// DeliveredData) + MSS).
		sndcnt = min(ssthresh-pipe, max(p.delivered-out, delivered)+snd.mss)
	}
	p.allow = out + max(sndcnt, 0)
}

// prrRoom is what PRR lets recovery send now, in whole segments, rounded
// up as Linux counts sndcnt in segments: a fraction of one still sends
// one, or a small window would never send at all.
func (snd *sender) prrRoom() int {
	room := snd.prr.allow - snd.prrOut()
	if room <= 0 {
		return 0
	}
	return (room + snd.mss - 1) / snd.mss * snd.mss
}
