package ipv4_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/dealer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ipv4"
)

// truncated returns a batch of n packets too short for an IPv4 header.
func truncated(pool *buffer.Pool, n int) *buffer.Batch {
	b := buffer.GetBatch()
	for range n {
		b.Pkts = append(b.Pkts, pool.Get(10))
	}
	return b
}

func TestSyncReturnsOnceTheDealerHasDealtWithWhatWasDelivered(t *testing.T) {
	e := &env.Env{Clock: clock.Real{}, Rand: env.NewRand(nil), Pool: buffer.NewPool(), Budget: budget.New(1 << 20)}
	p := ipv4.New(ipv4.Config{}, e)
	p.Start()
	p.Deliver(truncated(e.Pool, 3))
	p.Deliver(truncated(e.Pool, 2))
	if err := p.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	// Read without waiting: Sync is the only thing ordering it after the dealer.
	if got := p.Stats.InTruncated.Load(); got != 5 {
		t.Errorf("InTruncated = %d right after Sync, want 5", got)
	}
	p.Close()
	if err := p.Sync(context.Background()); !errors.Is(err, dealer.ErrClosed) {
		t.Errorf("Sync after Close = %v, want dealer.ErrClosed", err)
	}
	if n := e.Pool.Outstanding(); n != 0 {
		t.Errorf("%d packets not released", n)
	}
}
