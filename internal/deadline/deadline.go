// Package deadline implements net.Conn deadlines on the stack's clock: a
// Deadline is a channel that closes when the time set passes, which a
// blocked reader or writer selects on.
package deadline

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// Deadline is one direction's deadline. The zero value is not usable; call
// New.
type Deadline struct {
	clk   clock.Clock
	mu    sync.Mutex
	timer clock.Timer   // made by the first Set, then reset: see Set
	when  time.Time     // the deadline armed; zero when not set
	fired chan struct{} // closed when the deadline has passed
	// passed mirrors fired's being closed, for Passed without the lock.
	passed atomic.Bool
	// wake, if set (NewWaking), is called each time the deadline passes.
	wake func()
}

// New returns a deadline that is not set.
func New(clk clock.Clock) *Deadline {
	return &Deadline{clk: clk, fired: make(chan struct{})}
}

// NewWaking returns a deadline that is not set and calls wake, which must
// not block, each time it passes: for a waiter that waits on a wake-up of
// its own (one channel) rather than selecting on Done beside it, and
// checks Passed when woken.
func NewWaking(clk clock.Clock, wake func()) *Deadline {
	d := New(clk)
	d.wake = wake
	return d
}

// Set arms the deadline for t; the zero time clears it. A time in the past
// expires it at once, as net.Conn requires.
//
// One timer serves every Set, reset rather than made anew: a server that
// sets its deadlines per request (net/http does) would otherwise allocate
// a timer and its callback each time, two allocations per Set. The
// callback it shares cannot know which Set armed it, so it checks the time
// instead: see expire.
func (d *Deadline) Set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		// A callback already running finds d.when moved on or cleared
		// and leaves the deadline alone.
		d.timer.Stop()
	}
	d.when = t
	closed := isClosed(d.fired)
	if t.IsZero() {
		if closed {
			d.reopen()
		}
		return
	}
	wait := t.Sub(d.clk.Now())
	if wait <= 0 {
		if !closed {
			d.pass()
		}
		return
	}
	if closed {
		d.reopen()
	}
	if d.timer == nil {
		d.timer = d.clk.AfterFunc(wait, d.expire)
		return
	}
	d.timer.Reset(wait)
}

// expire is the timer's callback. It may be a late one, from a firing that
// Set's Stop came too late to prevent, running after Set moved or cleared
// the deadline: it expires the deadline only when the time armed has
// passed, and otherwise rearms for it (which also covers a wall clock
// behind the monotonic one the timer ran on).
func (d *Deadline) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.when.IsZero() || isClosed(d.fired) {
		return
	}
	if wait := d.when.Sub(d.clk.Now()); wait > 0 {
		d.timer.Reset(wait)
		return
	}
	d.pass()
}

// pass marks the deadline passed and wakes its waiter; mu is held.
func (d *Deadline) pass() {
	close(d.fired)
	d.passed.Store(true)
	if d.wake != nil {
		d.wake()
	}
}

// reopen makes a passed deadline pending again; mu is held.
func (d *Deadline) reopen() {
	d.fired = make(chan struct{})
	d.passed.Store(false)
}

// Passed reports whether the deadline has passed, without a lock: what a
// waiter of NewWaking checks when woken, and what a read or write checks
// before it starts.
func (d *Deadline) Passed() bool { return d.passed.Load() }

// Done returns a channel closed once the deadline has passed.
func (d *Deadline) Done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
