package tcp

import (
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// Explicit Congestion Notification (RFC 3168): a router short of queue
// space marks a packet Congestion Experienced instead of dropping it; the
// receiver echoes the mark with ECE on its ACKs until the sender, having
// reduced its window as for a loss, says so with CWR. The IP layer carries
// the codepoint in the TOS byte (IPv6's traffic class) both ways:
// sendSegment sets it through ip.SendParams.TOS, and the dealer keeps the
// received one in the segment (segment.tos, from ip.Header.TOS).

// ECNMode says when connections use ECN (Config.ECN).
type ECNMode int

const (
	// ECNPassive answers an ECN-setup SYN but asks on no SYN of its own:
	// Linux's default, tcp_ecn=2.
	ECNPassive ECNMode = iota
	// ECNOn asks on our SYNs too (tcp_ecn=1).
	ECNOn
	// ECNOff neither asks nor answers (tcp_ecn=0).
	ECNOff
)

// The ECN field, the low two bits of the TOS byte (RFC 3168 section 5).
const (
	ecnNotECT uint8 = 0
	ecnECT0   uint8 = 2
	ecnCE     uint8 = 3
	ecnMask   uint8 = 3
)

// ecnState is a connection's ECN state, owned by run.
type ecnState struct {
	ok    bool // negotiated (section 6.1.1)
	asked bool // our SYN was an ECN-setup SYN
	// Receiver (section 6.1.3): a CE mark arrived, so every ACK carries
	// ECE until a segment with CWR comes; seen: any CE ever (ss's
	// "ecnseen").
	ceOwed bool
	seen   bool
	// Sender (section 6.1.2): the window was reduced for an ECE, and the
	// next new data segment says so with CWR; no further reduction until
	// an ACK passes recover, the SND.MAX of that reduction: at most one
	// per window of data.
	cwrDue  bool
	reduced bool
	recover seqnum.Value
}

// ecnNegotiate takes the ECN setup from the peer's SYN or SYN-ACK (section
// 6.1.1): an ECN-setup SYN has ECE and CWR, the answering SYN-ACK ECE
// only.
func (c *Conn) ecnNegotiate(seg *segment) {
	ece, cwr := seg.has(wire.TCPFlagECE), seg.has(wire.TCPFlagCWR)
	switch {
	case c.state == SynSent && seg.has(wire.TCPFlagACK):
		c.ecn.ok = c.ecn.asked && ece && !cwr
	case c.state == SynReceived && c.passive():
		c.ecn.ok = c.p.cfg.ECN != ECNOff && ece && cwr
	default:
		c.ecn.ok = false // simultaneous open: neither SYN answers the other
	}
	if c.ecn.ok {
		c.p.Stats.ECNNegotiated.Inc()
	}
}

// ecnMark sets the ECN flags of a segment about to go and returns its ECN
// codepoint.
func (c *Conn) ecnMark(flags *uint8, seq seqnum.Value, n int) uint8 {
	f := *flags
	if f&wire.TCPFlagRST != 0 {
		return ecnNotECT
	}
	if f&wire.TCPFlagSYN != 0 {
		switch {
		case f&wire.TCPFlagACK == 0 && c.state == SynSent && c.p.cfg.ECN == ECNOn && c.timers.synRetries == 0:
			// Section 6.1.1.1: a SYN retransmitted goes without the
			// setup, in case a middlebox drops ECN-setup SYNs.
			*flags |= wire.TCPFlagECE | wire.TCPFlagCWR
			c.ecn.asked = true
		case f&wire.TCPFlagACK != 0 && c.ecn.ok:
			*flags |= wire.TCPFlagECE
		}
		return ecnNotECT // section 6.1.1: SYNs are never ECT
	}
	if !c.ecn.ok {
		return ecnNotECT
	}
	if c.ceOwedFor(f) {
		*flags |= wire.TCPFlagECE
	}
	// Sections 6.1.4-6.1.6: no ECT on pure ACKs, retransmissions (a
	// mark on one could not be told from one on the original) or window
	// probes.
	if n == 0 || seq.LessThan(c.snd.max) || c.snd.wnd == 0 {
		return ecnNotECT
	}
	if c.ecn.cwrDue {
		*flags |= wire.TCPFlagCWR
		c.ecn.cwrDue = false
		c.p.Stats.ECNCWRSent.Inc()
	}
	return ecnECT0
}

// ceOwedFor reports whether a segment with flags echoes congestion.
func (c *Conn) ceOwedFor(flags uint8) bool { return c.ecn.ceOwed && flags&wire.TCPFlagACK != 0 }

// ecnInput takes the ECN signals of an acceptable segment.
func (c *Conn) ecnInput(seg *segment) {
	if !c.ecn.ok {
		return
	}
	// Receiver, section 6.1.3: CWR ends the echo, a CE mark (re)starts
	// it; the first is acknowledged at once, as Linux does, since the
	// sender may have a small window.
	if seg.has(wire.TCPFlagCWR) {
		c.ecn.ceOwed = false
	}
	if seg.tos&ecnMask == ecnCE {
		c.p.Stats.ECNCEReceived.Inc()
		c.ecn.seen = true
		if !c.ecn.ceOwed {
			c.ecn.ceOwed = true
			c.rcv.ackNow = true
		}
	}
	if !seg.has(wire.TCPFlagECE) || !c.state.synchronized() || c.snd.cc == nil {
		return
	}
	// Sender, section 6.1.2: reduce the window as for a loss, once per
	// window of data, and not during a recovery that already did.
	c.p.Stats.ECNEchoReceived.Inc()
	if c.snd.inRecovery || c.ecn.reduced && !seg.ack.GreaterThan(c.ecn.recover) {
		return
	}
	// RFC 3168 6.1.2 halves cwnd and ssthresh as fast retransmit does
	// (RFC 9438 section 4.6: CUBIC's own beta for ECN too). Entering and
	// leaving recovery at once gives cwnd = ssthresh = the reduced window,
	// through the CongestionControl interface as it is.
	inflight := int(c.snd.max.Sub(c.snd.una))
	c.snd.cc.OnEnterRecovery(inflight)
	c.snd.cc.OnExitRecovery(inflight)
	c.ecn.reduced, c.ecn.recover, c.ecn.cwrDue = true, c.snd.max, true
	c.p.Stats.ECNReductions.Inc()
}

// lossReduce tells the congestion control of a loss found by duplicate
// ACKs or SACK (fast retransmit and the RFC 6675 recovery entry), unless
// an ECE already reduced the window for the data it belongs to: RFC 3168
// section 6.1.2, "the TCP source should not decrease the slow-start
// threshold [...] if it has been decreased within the last round trip
// time", and it reacts "at most once per window of data" whatever the
// signal, as Linux's tcp_enter_recovery keeps the CWR state's window. The
// recovery itself goes ahead: the lost data must still be resent.
func (c *Conn) lossReduce(inflight int) {
	if c.ecn.reduced && !c.snd.una.GreaterThan(c.ecn.recover) {
		c.p.Stats.ECNLossNoReduce.Inc()
		return
	}
	c.snd.cc.OnEnterRecovery(inflight)
}
