package dealer_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/dealer"
	"github.com/gonetstack/gonet/stats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// batch returns a batch of n packets from pool, the first byte of each
// numbering it from first.
func batch(pool *buffer.Pool, first, n int) *buffer.Batch {
	b := buffer.GetBatch()
	for i := range n {
		p := pool.Get(1)
		p.Bytes()[0] = byte(first + i)
		b.Pkts = append(b.Pkts, p)
	}
	return b
}

// run deals in's batches until stop is closed, appending each packet's
// number to *got; it closes exited when it returns.
func run(in *dealer.Inbox[*buffer.Batch], got *[]byte, stop, exited chan struct{}) {
	defer close(exited)
	for {
		select {
		case e := <-in.C():
			if b, ok := e.Open(); ok {
				for _, p := range b.Pkts {
					*got = append(*got, p.Bytes()[0])
				}
				b.Release()
			}
		case <-stop:
			return
		}
	}
}

func checkNoLeaks(t *testing.T, pool *buffer.Pool) {
	t.Helper()
	if n := pool.Outstanding(); n != 0 {
		t.Errorf("%d packets not released", n)
	}
}

func TestDeliverDropsAndCountsPacketsWhenFull(t *testing.T) {
	pool := buffer.NewPool()
	var dropped stats.Counter
	in := dealer.New[*buffer.Batch](4, &dropped)
	in.Deliver(batch(pool, 0, 3))
	in.Deliver(batch(pool, 3, 2)) // room for one packet, not two: dropped
	if got := dropped.Load(); got != 2 {
		t.Errorf("dropped = %d packets, want 2 (the second batch)", got)
	}
	in.Close() // releases the first
	checkNoLeaks(t, pool)
}

// The inbox is bounded in packets: a burst dealt a frame at a time fits
// as it would in full batches, and what the dealer has taken is room
// again.
func TestInboxHoldsPacketsNotBatches(t *testing.T) {
	pool := buffer.NewPool()
	var dropped stats.Counter
	in := dealer.New[*buffer.Batch](8, &dropped)
	for i := range 8 {
		in.Deliver(batch(pool, i, 1))
	}
	if got := dropped.Load(); got != 0 {
		t.Fatalf("dropped %d of 8 one-packet batches in an inbox of 8 packets", got)
	}
	in.Deliver(batch(pool, 8, 1))
	if got := dropped.Load(); got != 1 {
		t.Fatalf("dropped = %d, want the ninth packet", got)
	}
	e := <-in.C() // the dealer takes one: a packet's room again
	b, _ := e.Open()
	b.Release()
	in.Deliver(batch(pool, 9, 1))
	if got := dropped.Load(); got != 1 {
		t.Errorf("dropped = %d after the dealer took a packet, want still 1", got)
	}
	in.Close()
	checkNoLeaks(t, pool)
}

func TestSyncReturnsOnceEverythingQueuedBeforeItIsDealt(t *testing.T) {
	pool := buffer.NewPool()
	var dropped stats.Counter
	in := dealer.New[*buffer.Batch](8, &dropped)
	var got []byte // written by the dealer, read here after Sync: the race detector checks Sync orders them
	stop, exited := make(chan struct{}), make(chan struct{})
	for i := range 4 { // the inbox's packets are all taken before the dealer starts
		in.Deliver(batch(pool, 2*i, 2))
	}
	synced := make(chan error)
	go func() { synced <- in.Sync(context.Background()) }()
	go run(in, &got, stop, exited)
	if err := <-synced; err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if string(got) != "\x00\x01\x02\x03\x04\x05\x06\x07" {
		t.Errorf("dealt before Sync returned: %v, want 0..7 in order", got)
	}
	if dropped.Load() != 0 {
		t.Errorf("dropped = %d: a Sync marker waiting for room must not make others drop", dropped.Load())
	}
	close(stop)
	<-exited
	in.Close()
	checkNoLeaks(t, pool)
}

func TestSyncEndsWithTheContext(t *testing.T) {
	var dropped stats.Counter
	in := dealer.New[*buffer.Packet](1, &dropped)
	defer in.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// No dealer takes the marker: only the context can end the wait.
	if err := in.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Sync with no dealer and a cancelled context = %v, want context.Canceled", err)
	}
}

func TestClosedInboxDropsAndSyncSaysSo(t *testing.T) {
	pool := buffer.NewPool()
	var dropped stats.Counter
	in := dealer.New[*buffer.Packet](4, &dropped)
	in.Deliver(pool.Get(10))
	synced := make(chan error)
	go func() { synced <- in.Sync(context.Background()) }() // queued behind the packet, never dealt
	in.Close()
	if err := <-synced; !errors.Is(err, dealer.ErrClosed) {
		t.Errorf("Sync pending at Close = %v, want ErrClosed", err)
	}
	if err := in.Sync(context.Background()); !errors.Is(err, dealer.ErrClosed) {
		t.Errorf("Sync after Close = %v, want ErrClosed", err)
	}
	in.Deliver(pool.Get(10))
	if got := dropped.Load(); got != 1 {
		t.Errorf("dropped = %d, want 1: only the packet delivered after Close", got)
	}
	in.Close()
	checkNoLeaks(t, pool)
}
