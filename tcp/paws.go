package tcp

import (
	"time"

	"github.com/gonetstack/gonet/wire"
)

// PAWS, Protection Against Wrapped Sequences (RFC 7323 section 5). On a
// fast connection the 32-bit sequence space wraps within a segment's
// lifetime, and an old duplicate could land in the window of a later
// wrap. With timestamps negotiated, every segment carries the sender's
// clock, and one older than TS.Recent, the last timestamp taken from the
// peer in order, is such a duplicate.

// pawsIdle is how long TS.Recent stays valid on an idle connection (RFC
// 7323 section 5.5): after 24 days a timestamp clock ticking as fast as
// once a millisecond may have gone half-way round, and "older" no longer
// means anything.
const pawsIdle = 24 * 24 * time.Hour

// tsMissing applies RFC 7323 section 3.2: "Once TSopt has been
// successfully negotiated [...] If a non-<RST> segment is received without
// a TSopt, a TCP SHOULD silently drop the segment." It reports whether the
// segment is dropped.
//
// GoNet follows the RFC where Linux does not (Linux's tcp_validate_incoming
// takes such segments): a peer that negotiated timestamps and stops sending
// them is broken or is not the peer, and a segment without one escapes
// PAWS, the very test timestamps were negotiated for. Silently means no
// ACK: an answer would serve a blind injector as an oracle. Two kinds of
// segment are exempt. A RST, because the RFC exempts it (a peer that lost
// its state may not know timestamps were on). A SYN, because it speaks for
// a new incarnation with options of its own: on a synchronized connection
// it still earns the challenge ACK of RFC 5961 4.2, and in TIME-WAIT it may
// reopen the connection by its sequence number (RFC 6191 section 2, RFC
// 1122 4.2.2.13).
func (c *Conn) tsMissing(seg *segment) bool {
	if !c.tsOK || seg.opts.HasTimestamp || seg.flags&(wire.TCPFlagRST|wire.TCPFlagSYN) != 0 {
		return false
	}
	c.p.Stats.TSOptMissing.Inc()
	return true
}

// pawsReject is test R1 of RFC 7323 section 5.3, made before the sequence
// number test: "If there is a Timestamps option in the arriving segment,
// SEG.TSval < TS.Recent, TS.Recent is valid (see later discussion) and the
// RST bit is not set, then treat the arriving segment as not acceptable:
// Send an acknowledgment in reply [...] and drop the segment." A SYN gets
// a challenge ACK instead, as any SYN on a synchronized connection does
// (RFC 5961 4.2). It reports whether the segment is dropped.
//
// A RST is exempt because the peer may have rebooted, and its clock with
// it; RFC 5961 makes a reset guess the exact sequence number instead.
func (c *Conn) pawsReject(seg *segment, now time.Time) bool {
	if !c.tsOK || !seg.opts.HasTimestamp || seg.has(wire.TCPFlagRST) {
		return false
	}
	if int32(seg.opts.TSVal-c.rcv.tsRecent) >= 0 || now.Sub(c.rcv.tsRecentAt) >= pawsIdle || c.disorderedACK(seg) {
		return false
	}
	c.p.Stats.PAWSEstab.Inc()
	if seg.has(wire.TCPFlagSYN) && c.state != SynReceived {
		c.challengeACK(now)
	} else {
		c.rcv.ackNow = true
	}
	return true
}

// disorderedACK recognises, as Linux's tcp_disordered_ack does, a pure
// duplicate ACK that only lost a race on the path with a later segment: it
// is at RCV.NXT, acknowledges SND.UNA, would not move the send window, and
// its timestamp is older than TS.Recent by less than an RTO. PAWS has
// nothing to protect there, and dropping it would only cost the sender a
// duplicate ACK it counts on for fast retransmit.
func (c *Conn) disorderedACK(seg *segment) bool {
	if seg.flags&(wire.TCPFlagSYN|wire.TCPFlagFIN|wire.TCPFlagRST|wire.TCPFlagACK) != wire.TCPFlagACK || len(seg.payload) != 0 {
		return false
	}
	if seg.seq != c.rcv.nxt || seg.ack != c.snd.una || c.state == SynReceived {
		return false
	}
	if seg.seq.GreaterThan(c.snd.wl1) || uint32(seg.wnd)<<c.sndWScaleIf() > c.snd.wnd {
		return false // it would update the window: not a mere duplicate
	}
	return int32(c.rcv.tsRecent-seg.opts.TSVal) <= int32(c.snd.rto/time.Millisecond)
}
