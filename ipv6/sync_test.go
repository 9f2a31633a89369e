package ipv6_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/dealer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
)

// blocking is a transport that holds the dealer on the first datagram
// until told to go, and takes the rest at once. The first is told by a
// flag, not by a send that may find nobody waiting yet: that race hung
// CI once, the dealer arriving before the test was at its receive.
type blocking struct {
	entered, release chan struct{}
	held             atomic.Bool
}

func (b *blocking) HandleIP(pkt *buffer.Packet, _ ip.Header) {
	pkt.Release()
	if b.held.CompareAndSwap(false, true) {
		b.entered <- struct{}{}
		<-b.release
	}
}

// Deliver never blocks the NIC: with the dealer held, what does not fit
// the inbox is dropped and counted in InDiscards; once the dealer goes on
// it deals with the rest, and Sync says when.
func TestDeliverDropsWhenTheDealerIsBehind(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	b := &blocking{entered: make(chan struct{}), release: make(chan struct{})}
	h.p.Register(protoTest, b)
	dg := whole(t, peerAddr, ourAddr, protoTest, data(8))
	deliver := func() {
		bt := buffer.GetBatch()
		pk := h.env.Pool.Get(len(dg))
		copy(pk.Bytes(), dg)
		bt.Pkts = append(bt.Pkts, pk)
		h.eth0.Deliver(bt)
	}
	deliver()
	<-b.entered
	const n = dealer.NetworkInbox + 44
	for range n {
		deliver()
	}
	close(b.release)
	h.sync(t)
	c := h.counters()
	if c["InDiscards"] != n-dealer.NetworkInbox || c["InDelivers"] != dealer.NetworkInbox+1 {
		t.Errorf("InDiscards = %d, InDelivers = %d, want %d and %d", c["InDiscards"], c["InDelivers"], n-dealer.NetworkInbox, dealer.NetworkInbox+1)
	}
}

func TestSyncAfterCloseIsErrClosed(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	h.inject(t, h.eth0, whole(t, peerAddr, ourAddr, protoTest, data(8)))
	h.p.Close()
	if err := h.p.Sync(context.Background()); !errors.Is(err, dealer.ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
	// Delivered after Close: released, not leaked (the harness checks).
	b := buffer.GetBatch()
	b.Pkts = append(b.Pkts, h.env.Pool.Get(60))
	h.eth0.Deliver(b)
}
