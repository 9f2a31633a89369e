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
	// Merge the held segments (sorted, possibly overlapping) into
	// ranges, keeping the one that holds the latest arrival and the
	// highest few: however many holes there are, the latest arrival is
	// reported (RFC 2018 section 4), or the sender, never told of it,
	// would take it for lost and send it again.
	var top [wire.TCPMaxSACKBlocks]sackRange // the highest ranges, a ring
	var latest sackRange
	count := 0
	cur := sackRange{}
	for i := 0; i <= len(rcv.ooo); i++ {
		var s, e seqnum.Value
		if i < len(rcv.ooo) {
			s, e = rcv.ooo[i].seq, rcv.ooo[i].seq.Add(seqnum.Size(len(rcv.ooo[i].data)))
			if cur.valid && !s.GreaterThan(cur.end) {
				cur.end = seqnum.Max(cur.end, e)
				continue
			}
		}
		if cur.valid {
			// cur is whole: the next segment starts beyond it.
			if rcv.lastOOO.valid && rcv.lastOOO.start.InRange(cur.start, cur.end) {
				latest = cur
			}
			top[count%len(top)] = cur
			count++
		}
		cur = sackRange{s, e, true}
	}
	if latest.valid {
		dst = append(dst, wire.SACKBlock{Start: uint32(latest.start), End: uint32(latest.end)})
	}
	for k := 0; k < min(count, len(top)) && len(dst) < wire.TCPMaxSACKBlocks; k++ {
		if r := top[(count-1-k)%len(top)]; r != latest {
			dst = append(dst, wire.SACKBlock{Start: uint32(r.start), End: uint32(r.end)})
		}
	}
	return dst
}
