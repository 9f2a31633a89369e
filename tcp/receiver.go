package tcp

import (
	"time"

	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// receiver is the receiving half of the TCB: the receive sequence
// variables of RFC 9293 section 3.3.1, the out-of-order queue, what the
// next ACK must say (SACK and D-SACK blocks, the timestamp to echo) and
// when it is owed, and the window with its auto-tuning. The connection's
// goroutine owns it; tune is shared with the application (SetReadBuffer).
//
//	    1          2          3
//	----------|----------|----------
//	       RCV.NXT    RCV.NXT
//	                 +RCV.WND
//
//	1 - old sequence numbers which have been acknowledged
//	2 - sequence numbers allowed for new reception
//	3 - future sequence numbers which are not yet allowed
type receiver struct {
	irs    seqnum.Value // initial receive sequence number
	nxt    seqnum.Value // RCV.NXT: next expected
	adv    seqnum.Value // right edge of the window advertised: RCV.NXT+RCV.WND when sent
	synWnd bool         // adv was a SYN's window: unscaled, at most 65535 (windowUpdateDue)
	wscale uint8        // our window shift (RFC 7323 section 2)
	mss    int          // the MSS we announce

	ooo  []oooSeg // data beyond a hole, sorted by sequence number
	oooN int      // bytes in ooo

	// What the next ACK reports (RFC 2018, RFC 2883, RFC 7323).
	dsack      sackRange // a duplicate to report (RFC 2883)
	lastOOO    sackRange // the latest out-of-order arrival
	sackBuf    [wire.TCPMaxSACKBlocks]wire.SACKBlock
	tsRecent   uint32    // TS.Recent
	tsRecentAt time.Time // when tsRecent was taken: PAWS (paws.go)

	// ACKs owed to the peer.
	ackNow      bool
	segsUnacked int
	acked       seqnum.Value // RCV.NXT as the last ACK sent carried it
	dupAcksOwed int          // segments that arrived out of order since the last output
	// Quick ACKs and interactive mode (quickack.go).
	quickAcks   int       // ACKs still sent at once for data
	lastDataAt  time.Time // when in-order data last arrived
	interactive bool      // our replies carry the ACKs: delay them

	tune        rcvTuner // receive auto-tuning (autotune.go), shared
	memPressure bool     // the budget holds the window back (memory.go)
}

// acceptable is the sequence test of RFC 9293 3.10.7.4 ("first, check
// sequence number"), on the window we advertised.
func (rcv *receiver) acceptable(seg *segment) bool {
	wnd := seqnum.Size(rcv.adv.Sub(rcv.nxt))
	if rcv.adv.LessThan(rcv.nxt) {
		wnd = 0
	}
	n := seg.len()
	switch {
	case n == 0 && wnd == 0:
		return seg.seq == rcv.nxt
	case n == 0:
		return seg.seq.InWindow(rcv.nxt, wnd)
	case wnd == 0:
		// "If the RCV.WND is zero, no segments will be acceptable, but
		// special allowance should be made to accept valid ACKs, URGs,
		// and RSTs": a segment at RCV.NXT is processed, its data dropped.
		return seg.seq == rcv.nxt
	default:
		return seg.seq.InWindow(rcv.nxt, wnd) || seg.seq.Add(n-1).InWindow(rcv.nxt, wnd) ||
			rcv.spansWindow(seg.seq, n, wnd)
	}
}
