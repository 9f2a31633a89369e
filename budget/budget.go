// Package budget bounds the memory the stack holds on behalf of others:
// reassembly buffers, packets queued on ARP, datagrams waiting in socket
// queues, and TCP's connections with their send and receive queues.
//
// A layer reserves before it holds data and releases when it lets go, as the
// Biscuit kernel does for its heap: when the budget is spent, new work is
// refused (and counted), so the stack never crashes or queues without bound.
package budget

import (
	"fmt"
	"sync/atomic"
)

// Budget is a bound on bytes held. It is safe for concurrent use.
type Budget struct {
	limit   int64
	used    atomic.Int64
	peak    atomic.Int64
	refused atomic.Uint64
	freed   atomic.Pointer[chan struct{}] // closed by the next Release
}

// New returns a budget of limit bytes.
func New(limit int64) *Budget {
	if limit <= 0 {
		panic(fmt.Sprintf("budget: limit %d is not positive", limit))
	}
	return &Budget{limit: limit}
}

// Reserve takes n bytes from the budget. It reports false, takes nothing and
// counts a refusal when fewer than n bytes are left.
func (b *Budget) Reserve(n int) bool {
	for {
		used := b.used.Load()
		if used+int64(n) > b.limit {
			b.refused.Add(1)
			return false
		}
		if b.used.CompareAndSwap(used, used+int64(n)) {
			b.notePeak(used + int64(n))
			return true
		}
	}
}

func (b *Budget) notePeak(u int64) {
	for {
		p := b.peak.Load()
		if u <= p || b.peak.CompareAndSwap(p, u) {
			return
		}
	}
}

// Release gives n bytes back. Releasing more than was reserved is a bug and
// panics, since it would silently lift the bound.
func (b *Budget) Release(n int) {
	if b.used.Add(-int64(n)) < 0 {
		panic(fmt.Sprintf("budget: released %d bytes more than reserved", n))
	}
	if ch := b.freed.Load(); ch != nil && b.freed.CompareAndSwap(ch, nil) {
		close(*ch)
	}
}

// Freed returns a channel closed by the next Release, for one whose
// reservation was refused to wait on: call it before retrying, so that a
// release between the retry and the wait is not missed. Without waiters a
// Release costs one atomic load more.
func (b *Budget) Freed() <-chan struct{} {
	for {
		if ch := b.freed.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		if b.freed.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// Limit returns the bound in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Available returns the bytes left to reserve now: a hint, since others
// may reserve them before the caller does.
func (b *Budget) Available() int64 { return max(b.limit-b.used.Load(), 0) }

// Used returns the bytes reserved now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Peak returns the most bytes ever reserved at once.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// Refused returns how many reservations were refused.
func (b *Budget) Refused() uint64 { return b.refused.Load() }
