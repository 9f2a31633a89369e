// Package deadline implements net.Conn deadlines on the stack's clock: a
// Deadline is a channel that closes when the time set passes, which a
// blocked reader or writer selects on.
package deadline

import (
	"sync"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// Deadline is one direction's deadline. The zero value is not usable; call
// New.
type Deadline struct {
	clk   clock.Clock
	mu    sync.Mutex
	timer clock.Timer
	fired chan struct{} // closed when the deadline has passed
	gen   uint64        // counts Set calls, so a stale callback knows it is one
}

// New returns a deadline that is not set.
func New(clk clock.Clock) *Deadline {
	return &Deadline{clk: clk, fired: make(chan struct{})}
}

// Set arms the deadline for t; the zero time clears it. A time in the past
// expires it at once, as net.Conn requires.
func (d *Deadline) Set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		// A callback already running finds d.gen moved on and leaves
		// the deadline alone.
		d.timer.Stop()
		d.timer = nil
	}
	closed := isClosed(d.fired)
	if t.IsZero() {
		if closed {
			d.fired = make(chan struct{})
		}
		return
	}
	wait := t.Sub(d.clk.Now())
	if wait <= 0 {
		if !closed {
			close(d.fired)
		}
		return
	}
	if closed {
		d.fired = make(chan struct{})
	}
	fired, gen := d.fired, d.gen
	d.timer = d.clk.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		// A timer that Set stopped too late (its callback already
		// started) must not expire the deadline Set armed after it,
		// which may share its channel.
		if d.gen == gen && d.fired == fired && !isClosed(fired) {
			close(fired)
		}
	})
}

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
