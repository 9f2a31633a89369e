package tcp

import "github.com/gonetstack/gonet/seqnum"

// Retransmissions that repair nothing. A retransmission is spurious when
// the original was not lost but only late, or its ACK was: the peer then
// receives the data twice, and the window reduction that came with it was
// for nothing. A stack that retransmits spuriously wastes the path and its
// own window; the counters make it visible (Stats, where issue 16 asks that
// they stay rare). Three detections, each counted:
//
//   - D-SACK (RFC 2883 section 4): the peer reports the duplicate. Each
//     D-SACK block counts as DSACKRecv, its segments as DSACKRecvSegs, as
//     Linux's TCPDSACKRecv and TCPDSACKRecvSegs; RFC 3708 section 3 reads a
//     D-SACK for a retransmitted segment as a spurious retransmission
//     (on a path that does not duplicate packets itself, every D-SACK is
//     one). Recognised in takeSACK (sack_sender.go).
//   - Tail loss probes (RFC 8985 section 7.4, tlp.go): a probe that
//     resent the last segment, when a D-SACK reports both copies or a
//     duplicate ACK without SACK comes back, repaired nothing
//     (LossProbeSpurious), as opposed to one whose ACK shows it filled a
//     hole (LossProbeRecovery).
//   - Timeouts, by the Eifel detection algorithm (RFC 3522): with
//     timestamps, the first ACK of new data after a timeout echoes the
//     timestamp of the segment that reached the peer; one older than the
//     retransmission's shows that the original arrived, and the timeout
//     was needless (SpuriousRTOs, as Linux's TCPSpuriousRTOs, which its
//     F-RTO finds instead). The window is not restored (the response,
//     RFC 4015, is not implemented): the count is what is asked for.

// eifelState is a timeout's retransmission awaiting its judgement: the
// TSval it carried (RFC 3522 section 3.2's RetransmitTS).
type eifelState struct {
	armed bool
	tsVal uint32
}

// armSpuriousRTO notes the timestamp of a timeout's retransmission, which
// output sends at once with this clock reading. Only the first
// retransmission counts: after a backoff the ACK of either retransmission
// echoes a timestamp no older than the first's.
func (c *Conn) armSpuriousRTO() {
	if !c.tsOK || c.snd.eifel.armed {
		return
	}
	c.snd.eifel = eifelState{armed: true, tsVal: c.tsVal()}
}

// judgeRTO judges a timeout on the first ACK of new data after it, by the
// timestamp the ACK echoes (RFC 3522 section 3.2: spurious when older
// than the retransmission's, in the timestamps' modular order).
func (c *Conn) judgeRTO(tsEcr uint32) {
	if !c.snd.eifel.armed {
		return
	}
	c.snd.eifel.armed = false
	if tsEcr != 0 && int32(tsEcr-c.snd.eifel.tsVal) < 0 {
		c.p.Stats.SpuriousRTOs.Inc()
	}
}

// dsackSegs returns the segments a D-SACK block [start, end) stands for,
// at least one: the duplicates the peer received.
func dsackSegs(start, end seqnum.Value, mss int) int {
	n := int(end.Sub(start))
	if mss <= 0 {
		return 1
	}
	return max(1, (n+mss-1)/mss)
}
