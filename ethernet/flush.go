package ethernet

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Flushing: a stack that shuts down has last words for the link (a
// router's final advertisement, RFC 4861 section 6.2.5) and sends them
// before it closes the endpoint, which would refuse them. Flush waits for
// the transmit goroutine to have written what was queued before it: a
// count of the frames queued and one of the frames written or dropped, and
// a channel the goroutine closes, when someone waits, as it finishes a
// batch.

// flushState is the NIC's side of Flush.
type flushState struct {
	queued, handled atomic.Uint64
	waiters         atomic.Int32
	mu              sync.Mutex
	progress        chan struct{} // closed and replaced after a batch, when waited on
}

// queuedOne counts a frame taken by the transmit queue.
func (f *flushState) queuedOne() { f.queued.Add(1) }

// handled counts frames the transmit goroutine is done with and wakes the
// flushers, if any.
func (f *flushState) handledSome(n int) {
	f.handled.Add(uint64(n))
	if f.waiters.Load() == 0 {
		return
	}
	f.mu.Lock()
	if f.progress != nil {
		close(f.progress)
		f.progress = nil
	}
	f.mu.Unlock()
}

// wait returns a channel closed at the next progress.
func (f *flushState) wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.progress == nil {
		f.progress = make(chan struct{})
	}
	return f.progress
}

// Flush returns once every frame Send queued before the call has been
// written to the endpoint (or dropped), or with ctx's error, or with an
// error wrapping net.ErrClosed if the NIC closes while it waits.
func (n *NIC) Flush(ctx context.Context) error {
	f := &n.flush
	target := f.queued.Load()
	f.waiters.Add(1)
	defer f.waiters.Add(-1)
	for f.handled.Load() < target {
		progress := f.wait()
		if f.handled.Load() >= target {
			break // the goroutine moved on between the load and wait
		}
		select {
		case <-progress:
		case <-n.done:
			return fmt.Errorf("nic %s: flush: %w", n.name, net.ErrClosed)
		case <-ctx.Done():
			return fmt.Errorf("nic %s: flush: %w", n.name, ctx.Err())
		}
	}
	return nil
}
