package tcp_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Sequence numbers wrap at 2^32 (RFC 9293 3.4) in both directions within
// one transfer: the peer's ISN is 0xfffffff0, and the stack's is brought to
// 2^32-1501 by moving the clock, which RFC 6528's ISN follows (4 µs a
// tick), before the same 4-tuple opens again.
func TestSequenceNumbersWrapDuringATransfer(t *testing.T) {
	const mss = 1000
	const want = 1<<32 - 1501 // the stack's ISN: its second segment wraps
	r := newRig(t, tcp.Config{})
	l := r.listen(0)
	first, p := r.synAckISN(peerPort)
	p.send(R, nil)
	p.waitState("")
	ticks := uint32(want) - first
	p.advance(time.Duration(ticks) * 4 * time.Microsecond)

	p = r.synPeer(peerPort, 0xfffffff0, rawtest.TCPOpts{MSS: mss})
	sa := p.handshake()
	if sa.Seq != want {
		t.Fatalf("ISN %#x, want %#x", sa.Seq, uint32(want))
	}
	c := acceptOne(t, l)

	// The peer's data wraps in its first segment; its second arrives
	// before it, out of order.
	in := pattern(3 * mss)
	p.inject(rawtest.TCPSegment{Seq: p.nxt + mss, Ack: p.rcv, Flags: A, Window: p.wnd, Payload: in[mss : 2*mss]})
	p.expectACK() // a duplicate: RCV.NXT is 0xfffffff1
	p.send(A, in[:mss])
	p.nxt += mss
	p.expectACK() // the hole is filled: RCV.NXT has wrapped
	p.send(P|A, in[2*mss:])
	checkData(t, readAll(t, c, len(in)), in)

	// The stack's data wraps in its second segment, which is lost and
	// fast retransmitted.
	out := pattern(5 * mss)
	write(t, c, out)
	una := p.rcv
	for i := range 5 {
		s := p.nextSeg()
		if s.Seq != una+uint32(i*mss) || len(s.Payload) != mss {
			t.Fatalf("segment %d: %v", i, s)
		}
		checkData(t, s.Payload, out[i*mss:(i+1)*mss])
	}
	p.rcv = una + mss
	for range 4 {
		p.ack()
	}
	s := p.expect(A, una+mss, p.nxt, mss)
	checkData(t, s.Payload, out[mss:2*mss])
	p.rcv = una + 5*mss
	p.ack()
	r.nothing()

	// And both close.
	c.Close()
	p.expect(F|A, p.rcv, p.nxt, 0)
	p.send(F|A, nil)
	p.expectACK()
	p.waitState("TIME-WAIT")
}
