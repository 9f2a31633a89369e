package tcp

import (
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// Sending (RFC 9293 sections 3.8.6 and 3.10.4). Everything here runs in the
// connection's goroutine with mu held.

// output sends what the TCB allows: new or retransmitted data within the
// congestion and receive windows (Nagle and sender-side SWS avoidance
// decide about small segments), the FIN once the application shut its side
// and the data before it went out, and an ACK if one is owed and nothing
// else carried it.
func (c *Conn) output() {
	if c.state == SynSent || c.state == SynReceived {
		if c.rcv.ackNow {
			c.sendSYN(c.synFlags()) // a duplicate SYN gets our SYN again
		}
		return
	}
	now := c.now()
	if c.snd.una == c.snd.max && !c.snd.lastSend.IsZero() && now.Sub(c.snd.lastSend) > c.snd.rto {
		c.snd.cc.OnIdle() // RFC 5681 section 4.1: restart after idle
	}
	// RFC 5681 4.2: one immediate duplicate ACK per segment that arrived
	// out of order, even when a batch brought several, and without data:
	// a segment carrying data is no duplicate ACK to the sender (RFC 5681
	// section 2), which would then wait for its timer to repair the loss.
	for ; c.rcv.dupAcksOwed > 0; c.rcv.dupAcksOwed-- {
		c.sendFlags(c.snd.ackSeq(), wire.TCPFlagACK)
	}
	sent := false
	for c.sendRecovery() {
		sent = true
	}
	for c.sendData() {
		sent = true
	}
	if !sent && (c.rcv.ackNow || c.windowUpdateDue()) {
		// SND.MAX, not SND.NXT: after a timeout SND.NXT goes back to
		// SND.UNA, and an ACK carrying a sequence number the peer has
		// passed would fail its acceptability test and be dropped with the
		// acknowledgement it carries (as Linux's tcp_acceptable_seq avoids).
		c.sendFlags(c.snd.ackSeq(), wire.TCPFlagACK)
	}
}

func (c *Conn) synFlags() uint8 {
	if c.state == SynReceived {
		return wire.TCPFlagSYN | wire.TCPFlagACK
	}
	return wire.TCPFlagSYN
}

// sendData sends one segment of data (or the FIN) if allowed, and reports
// whether it did.
func (c *Conn) sendData() bool {
	if !c.state.synchronized() || c.state == TimeWait {
		return false
	}
	off := int(c.snd.nxt.Sub(c.snd.bufSeq))
	unsent := max(c.sock.sndBuf.n-off, 0)
	finDue := c.finPending()
	if unsent == 0 && !finDue {
		return false
	}
	inflight := int(c.snd.nxt.Sub(c.snd.una))
	usable := max(min(int(c.snd.wnd)-inflight, c.congestionRoom(inflight)), 0)
	n := min(unsent, c.snd.mss, usable)
	if unsent > 0 && n == 0 {
		// Zero usable window. If the peer's window is the cause and
		// nothing is in flight, the persist timer (RFC 9293 3.8.6.1)
		// probes it; otherwise ACKs or the retransmission timer will.
		if c.snd.wnd == 0 && inflight == 0 && c.timers.rexmitAt.IsZero() {
			c.armRexmit(c.now())
		}
		return false
	}
	if n < c.snd.mss && n == unsent && n > 0 && !c.sock.noDelay && inflight > 0 && !finDue {
		// Nagle (RFC 9293 3.7.4): hold a small segment while data is
		// unacknowledged.
		return false
	}
	if n < unsent && n < c.snd.mss && n < int(c.snd.maxWnd/2) {
		// Sender SWS avoidance (RFC 9293 3.8.6.2.1): no small segment
		// while more data waits for a larger window. With nothing in
		// flight no ACK will come to reopen it: the persist timer is the
		// RFC's override timeout.
		if inflight == 0 && c.timers.rexmitAt.IsZero() {
			c.armRexmit(c.now())
		}
		return false
	}
	n = c.superSegment(n, unsent, usable, inflight, finDue)
	flags := uint8(wire.TCPFlagACK)
	fin := finDue && n == unsent
	if fin {
		flags |= wire.TCPFlagFIN
	}
	if n > 0 && n == unsent {
		flags |= wire.TCPFlagPSH
	}
	c.sendSegment(c.snd.nxt, flags, off, n)
	c.noteSentSegments(c.snd.nxt, n, fin)
	return true
}

// finSeq is the FIN's sequence number once the application shut its side:
// right after the last byte it wrote.
func (c *Conn) finSeq() seqnum.Value { return c.snd.bufSeq.Add(seqnum.Size(c.sock.sndBuf.n)) }

// finPending reports whether a FIN is due and SND.NXT has not passed it.
func (c *Conn) finPending() bool { return c.sock.wrShut && !c.snd.nxt.GreaterThan(c.finSeq()) }

// noteSent advances the send variables after a segment of n bytes (and a
// FIN) from seq, records it in the retransmission queue and arms the timer.
func (c *Conn) noteSent(seq seqnum.Value, n int, fin bool) {
	end := seq.Add(seqnum.Size(n))
	if fin {
		end++
		switch c.state {
		case Established:
			c.setState(FinWait1)
		case CloseWait:
			c.setState(LastAck)
		}
	}
	now := c.snd.builtAt // RFC 8985 section 6.1: the time it was built, not queued
	c.snd.lastSend = now
	if seq.LessThan(c.snd.max) {
		c.snd.retransmits++
		c.p.Stats.RetransSegs.Inc()
		for i := range c.snd.sent {
			if c.snd.sent[i].start.LessThan(end) && seq.LessThan(c.snd.sent[i].end) {
				c.snd.sent[i].retrans = true
				c.snd.sent[i].sentAt = now
				c.snd.sb.retransmitted(&c.snd.sent[i])
			}
		}
	}
	if end.GreaterThan(c.snd.max) {
		if n > 0 {
			c.noteDataOut(now)
		}
		start := seqnum.Max(seq, c.snd.max)
		c.snd.sent = append(c.snd.sent, sentSeg{start: start, end: end, sentAt: now, retrans: start != seq})
		c.snd.max = end
	}
	if end.GreaterThan(c.snd.nxt) {
		c.snd.nxt = end
	}
	c.snd.noteFlight()
	if c.timers.rexmitAt.IsZero() {
		c.armRexmit(now)
	}
}

// sendSYN sends our SYN (or SYN-ACK) with the options we offer.
func (c *Conn) sendSYN(flags uint8) {
	now := c.now()
	c.sendSegment(c.snd.iss, flags, 0, 0)
	c.snd.nxt = c.snd.iss + 1
	if c.snd.max.LessThan(c.snd.nxt) {
		c.snd.max = c.snd.nxt
	}
	c.snd.lastSend = now
	if c.timers.rexmitAt.IsZero() {
		c.armRexmit(now)
	}
}

// sendFlags sends a segment without data (an ACK, a RST, a probe).
func (c *Conn) sendFlags(seq seqnum.Value, flags uint8) { c.sendSegment(seq, flags, 0, 0) }

// sendSegment builds and sends one segment with n bytes from the send
// buffer at offset off.
func (c *Conn) sendSegment(seq seqnum.Value, flags uint8, off, n int) {
	c.snd.builtAt = c.now()
	var opts wire.TCPOptions
	syn := flags&wire.TCPFlagSYN != 0
	if syn {
		opts.MSS = uint16(min(c.rcv.mss, 65535))
		// Offer window scaling and timestamps on our SYN; on a SYN-ACK
		// only if the peer offered them (RFC 7323 sections 1.3, 3.2).
		if c.state == SynSent || c.wsOK {
			opts.HasWScale, opts.WScale = true, c.rcv.wscale
		}
		if c.state == SynSent || c.tsOK {
			opts.HasTimestamp = true
		}
		opts.SACKPermitted = c.state == SynSent && !c.p.cfg.DisableSACK || c.sackOK
	} else if c.tsOK && flags&wire.TCPFlagRST == 0 {
		opts.HasTimestamp = true
	}
	if !syn && c.sackOK && flags&wire.TCPFlagACK != 0 && flags&wire.TCPFlagRST == 0 && (len(c.rcv.ooo) > 0 || c.rcv.dsack.valid) {
		opts.SACK = c.rcv.sackBlocks(c.rcv.sackBuf[:0])
		c.rcv.dsack.valid = false
	}
	if opts.HasTimestamp {
		opts.TSVal = c.tsVal()
		if flags&wire.TCPFlagACK != 0 {
			opts.TSEcr = c.rcv.tsRecent
		}
	}
	optLen := wire.TCPOptionsLen(&opts)
	if len(opts.SACK) > 0 && c.net.HeaderLen()+wire.TCPMinHeaderLen+optLen+min(n, c.snd.mss) > c.route.MTU {
		// The MSS left room for timestamps only (RFC 6691): a full data
		// segment goes without SACK blocks rather than be fragmented;
		// the next pure ACK carries them.
		opts.SACK = nil
		optLen = wire.TCPOptionsLen(&opts)
	}
	hl := wire.TCPMinHeaderLen + optLen
	ecn := c.ecnMark(&flags, seq, n)
	pk := c.p.env.Pool.Get(hl + n)
	b := pk.Bytes()
	wire.EncodeTCPOptions(b[wire.TCPMinHeaderLen:], &opts)
	lend := n >= lendMin && c.route.Offloads.TxGather && c.route.Offloads.TxChecksum
	if n > 0 && !lend {
		c.sock.sndBuf.copyAt(b[hl:], off)
	}
	f := wire.TCPFields{
		SrcPort: c.id.local.Port(), DstPort: c.id.remote.Port(),
		Seq: uint32(seq), Flags: flags, OptionsLen: optLen,
	}
	if syn && flags&wire.TCPFlagACK == 0 {
		f.Window = c.windowField(true) // a SYN offers a window too
	}
	if flags&wire.TCPFlagACK != 0 {
		f.Ack = uint32(c.rcv.nxt)
		f.Window = c.windowField(syn)
		// A retransmission may carry data the peer already has: it then
		// fails the peer's acceptability test and is dropped, ACK field
		// and all. Only a segment at SND.MAX (or at ackSeq, where the
		// peer's window ends before it) settles an ACK we owe; after a
		// retransmission output sends a pure ACK as well.
		if syn || flags&wire.TCPFlagRST != 0 || !seq.LessThan(c.snd.ackSeq()) {
			c.rcv.ackNow = false
			c.rcv.segsUnacked = 0
			c.rcv.acked = c.rcv.nxt
			c.timers.delackAt = noTime
			c.noteAckSent()
		}
	}
	wire.EncodeTCP(b, &f)
	c.finishSegment(pk, hl, n)
	if lend {
		// After finishSegment: a partial checksum reads no payload.
		c.sock.sndBuf.lendTo(pk, off, n)
	}
	// DF on every segment: path MTU discovery (RFC 1191, tcp/icmp.go),
	// unless the path MTU is locked at the floor.
	c.net.SendRoute(pk, ip.SendParams{Src: c.id.local.Addr(), Dst: c.id.remote.Addr(), Proto: wire.ProtoTCP,
		DF: !c.route.PMTULocked, TOS: ecn, Confirm: c.snd.confirm}, c.route)
	c.snd.confirm = false
}

// lendMin is the smallest payload a segment borrows from the send buffer
// rather than copies, on a link that gathers (link.Capabilities.TxGather).
// Bulk data leaves in super-segments of up to 64 KiB, whose copy the loans
// save; a segment under a frame's worth is a request, a reply or a tail,
// which stays one piece in one buffer, as request-response was measured.
const lendMin = 2048

// windowField computes the window to advertise and records its right edge.
// Receiver SWS avoidance (RFC 9293 3.8.6.2.2): the right edge moves only
// by at least min(buffer/2, MSS); it never moves left (3.8.6.2.2, "shrinking
// the window" is strongly discouraged).
func (c *Conn) windowField(syn bool) uint16 {
	free := c.budgetWindow(max(c.sock.rcvBufSize-c.sock.rcvBuf.n-c.rcv.oooN, 0))
	if c.sock.rdShut {
		free = c.sock.rcvBufSize // data after CloseRead is discarded
	}
	right := c.rcv.nxt.Add(seqnum.Size(free))
	if c.rcv.adv.LessThan(c.rcv.nxt) {
		c.rcv.adv = c.rcv.nxt
	}
	if right.GreaterThan(c.rcv.adv) {
		grow := int(right.Sub(c.rcv.adv))
		if grow >= min(c.sock.rcvBufSize/2, c.rcv.mss) || c.rcv.adv == c.rcv.nxt && grow > 0 && free >= c.rcv.mss {
			c.rcv.adv = right
		}
	}
	wnd := int(c.rcv.adv.Sub(c.rcv.nxt))
	shift := c.rcv.wscale
	if syn || !c.wsOK {
		shift = 0 // RFC 7323 2.2: a SYN's window is never scaled
	}
	// Round the scaled field up, as Linux's tcp_select_window does:
	// rounding down would move the right edge left by up to 2^shift-1
	// bytes each time RCV.NXT moves, shrinking a window the peer may
	// already have filled (RFC 9293 3.8.6.2.2: SHLD-15), and data it sent
	// within it would be dropped and retransmitted.
	field := min((wnd+1<<shift-1)>>shift, 65535)
	// The edge the peer will compute from the field.
	c.rcv.adv = c.rcv.nxt.Add(seqnum.Size(field << shift))
	c.rcv.synWnd = syn
	return uint16(field)
}

// windowUpdateDue reports whether the receive window has opened enough
// since the last advertisement to tell the peer unprompted, as Linux's
// tcp_cleanup_rbuf decides: once what the peer may still send has fallen
// to half the window or less, and the window now is at least twice that
// (and a segment more, RFC 9293 3.8.6.2.2's receiver SWS avoidance). While
// the application keeps up, the ACKs that data calls for carry the
// window: an update after every Read doubled the ACKs a bulk receiver
// sent, one write to the link each (1.28 ACKs per 54 KB super-segment
// received).
func (c *Conn) windowUpdateDue() bool {
	free := c.budgetFree(max(c.sock.rcvBufSize-c.sock.rcvBuf.n-c.rcv.oooN, 0))
	// No more than the window field can say: beyond it nothing would change.
	most := min(c.sock.rcvBufSize, 65535<<c.rcv.wscale)
	if c.rcv.synWnd {
		// The peer knows only the SYN's unscaled window, which a
		// buffer of more than 65535 bytes outgrows by itself: judged by
		// the buffer, an update would look due as the handshake
		// completes, a segment more per passive open that Linux does
		// not send. Until the next segment tells the peer the whole
		// window, what the SYN said is the window.
		most = min(most, 65535)
	}
	free = min(free, most)
	offered := max(int(c.rcv.adv.Sub(c.rcv.nxt)), 0)
	if !c.rcv.nxt.Add(seqnum.Size(free)).GreaterThan(c.rcv.adv) {
		return false
	}
	return 2*offered <= most && free >= 2*offered && free-offered >= c.rcv.mss
}
