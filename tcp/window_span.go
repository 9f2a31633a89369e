package tcp

import "github.com/gonetstack/gonet/seqnum"

// A segment that covers the whole receive window, starting before RCV.NXT
// and ending beyond the right edge, fails both halves of RFC 9293
// 3.10.7.4's acceptability test, which looks only at the first and the
// last octet. Its middle is exactly the data the window asks for, though,
// and the same section says that "segments with higher beginning sequence
// numbers may be held" and that "the portion that lies in the window" is
// the segment to process. Linux's tcp_sequence tests the same way (the
// start before the right edge, the end after RCV.NXT). A sender that
// repacketizes a retransmission, or one that overran a window we could
// not shrink, sends such segments; refusing them would stall it until its
// segments happened to line up with our edges. receiveText trims both
// ends.

// spansWindow reports whether n octets from seq cover the window of wnd
// octets from RCV.NXT from edge to edge, with room to spare on both sides.
func (rcv *receiver) spansWindow(seq seqnum.Value, n, wnd seqnum.Size) bool {
	return seq.LessThan(rcv.nxt) && seq.Add(n).GreaterThan(rcv.nxt.Add(wnd))
}
