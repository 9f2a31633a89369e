package tcp

import (
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// Selective acknowledgements, the receiver's side (RFC 2018 section 4,
// RFC 2883). When data waits beyond a hole, each ACK carries SACK blocks
// describing it, the block holding the most recent arrival first; a
// duplicate segment is reported once as a D-SACK block in front. The
// sender then repairs exactly the holes (Linux does, with SACK recovery)
// instead of waiting for its retransmission timer.

// sackRange is a range of sequence space, [start, end).
type sackRange struct {
	start, end seqnum.Value
	valid      bool
}

// noteDuplicate records a duplicate arrival for the next ACK's D-SACK
// block (RFC 2883 section 4: the first block reports it), and makes that
// ACK go at once.
func (c *Conn) noteDuplicate(start, end seqnum.Value) {
	if !c.sackOK || !start.LessThan(end) {
		return
	}
	c.rcv.dsack = sackRange{start, end, true}
	c.rcv.ackNow = true
	if end.LessThanEq(c.rcv.nxt) {
		c.p.Stats.DSACKOldSent.Inc()
	} else {
		c.p.Stats.DSACKOfoSent.Inc()
	}
}

// sackBlocks appends the SACK blocks for the next ACK to dst: the D-SACK
// block if one is due, then the out-of-order ranges, the one holding the
// latest arrival first and the others from the highest down. The encoder
// keeps as many as the option space allows (3 with timestamps).
func (rcv *receiver) sackBlocks(dst []wire.SACKBlock) []wire.SACKBlock {
	if rcv.dsack.valid {
		dst = append(dst, wire.SACKBlock{Start: uint32(rcv.dsack.start), End: uint32(rcv.dsack.end)})
	}
	if len(rcv.ooo) == 0 {
		return dst
	}
	// Merge the held segments (sorted, possibly overlapping) into ranges.
	var ranges [16]sackRange
	n := 0
	for _, o := range rcv.ooo {
		s, e := o.seq, o.seq.Add(seqnum.Size(len(o.data)))
		if n > 0 && !s.GreaterThan(ranges[n-1].end) {
			ranges[n-1].end = seqnum.Max(ranges[n-1].end, e)
			continue
		}
		if n == len(ranges) {
			break
		}
		ranges[n] = sackRange{s, e, true}
		n++
	}
	first := -1
	if rcv.lastOOO.valid {
		for i := range n {
			if rcv.lastOOO.start.InRange(ranges[i].start, ranges[i].end) {
				first = i
				dst = append(dst, wire.SACKBlock{Start: uint32(ranges[i].start), End: uint32(ranges[i].end)})
				break
			}
		}
	}
	for i := n - 1; i >= 0 && len(dst) < wire.TCPMaxSACKBlocks; i-- {
		if i != first {
			dst = append(dst, wire.SACKBlock{Start: uint32(ranges[i].start), End: uint32(ranges[i].end)})
		}
	}
	return dst
}
