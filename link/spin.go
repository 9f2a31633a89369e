package link

import (
	"sync/atomic"
	"time"
)

// Polling before sleeping, for endpoints whose reader would otherwise
// sleep until the next frame and be woken for it: a shared-memory ring's
// eventfd, a TAP device's descriptor in the runtime's poller. Sleeping costs
// a frame that arrives at an idle reader a wake-up of a sleeping thread
// and a goroutine hand-off, tens of microseconds on a busy 2-vCPU machine,
// each way of a request and its answer. An answer usually comes back
// sooner than that, so the reader first looks again and again for a
// while, yielding the processor between looks so that the process's other
// goroutines (the one about to send what the peer will answer, say) run
// meanwhile. Linux's busy polling (SO_BUSY_POLL, net.core.busy_read) trades
// the same way.

// DefaultSpin is the longest a reader polls before it sleeps, unless told
// otherwise: 50 µs, about a request-response round trip of a user-space
// stack on these machines.
const DefaultSpin = 50 * time.Microsecond

// minSpin is the shortest spin worth a look: Spin.Adapt stops polling
// below it.
const minSpin = time.Microsecond

// Spin is how long a reader polls now: Max while frames keep coming
// within it, and less, down to not at all, while they come later. The
// zero Spin never polls. Its methods are safe for concurrent use; each
// reader (a queue of a device) has its own.
type Spin struct {
	max time.Duration
	now atomic.Int64 // nanoseconds
}

// NewSpin returns a Spin that polls up to max at first; max <= 0 never
// polls.
func NewSpin(max time.Duration) *Spin {
	s := &Spin{max: max}
	if max > 0 {
		s.now.Store(int64(max))
	}
	return s
}

// Budget is how long to poll before sleeping now.
func (s *Spin) Budget() time.Duration { return time.Duration(s.now.Load()) }

// Adapt sets the next budget from the last wait for a frame, polled or
// slept: the whole of Max when the frame came within it, so that polling
// would have caught it, and half the current budget when it came later. A
// peer that answers fast is polled for; one slower than the spin (a third
// process forwarding between the two, a link idle between bursts) soon
// costs no polling at all, which on two cores matters: a reader polling in
// vain holds a core the others need. Halving rather than stopping at once
// keeps one slow answer among fast ones from losing the next.
func (s *Spin) Adapt(waited time.Duration) {
	switch cur := s.Budget(); {
	case s.max <= 0:
	case waited <= s.max:
		s.now.Store(int64(s.max))
	case cur < minSpin:
		s.now.Store(0)
	default:
		s.now.Store(int64(cur / 2))
	}
}
