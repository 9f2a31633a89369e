package tcp_test

import (
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// A connection whose goroutine falls behind by more than its mailbox holds
// loses the newest segments, counted in InQueueDrops, and acknowledges
// only what it took: the peer retransmits the rest.
func TestFullMailboxDropsAndCounts(t *testing.T) {
	const extra = 5
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	data := pattern(tcp.InQueueLen + extra)
	segs := make([]rawtest.TCPSegment, len(data))
	for i := range data {
		segs[i] = p.seg(rawtest.ACK|rawtest.PSH, data[i:i+1])
		p.nxt++
	}
	release := tcp.Hold(c) // run cannot take its batch
	for len(segs) > 0 {    // a pipe's worth at a time, each dealt before the next
		n := min(len(segs), 32)
		p.inject(segs[:n]...)
		segs = segs[n:]
		r.pending = append(r.pending, r.h.Barrier(t)...)
	}
	if got := r.counter("InQueueDrops"); got != extra {
		t.Errorf("InQueueDrops = %d, want %d", got, extra)
	}
	release()
	sent := r.sent()
	if len(sent) == 0 {
		t.Fatal("no ACK for the segments taken")
	}
	want := uint32(peerISN + 1 + tcp.InQueueLen)
	for _, s := range sent {
		if s.Ack > want {
			t.Errorf("ACK %d beyond the last segment taken (%d)", s.Ack, want)
		}
	}
	if last := sent[len(sent)-1]; last.Ack != want {
		t.Errorf("last ACK %d, want %d", last.Ack, want)
	}
	checkData(t, readAll(t, c, tcp.InQueueLen), data[:tcp.InQueueLen])
}
