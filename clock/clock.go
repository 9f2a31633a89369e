// Package clock gives the stack its sense of time. Every timer in GoNet (ARP
// retries and expiry, reassembly timeouts, ICMP rate limits, TCP's
// connection timers) runs on a Clock taken from the stack's configuration: the
// wall clock in production, a Virtual clock that tests advance by hand, so
// that timer behaviour is tested without sleeping.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer whose channel receives the time once d has
	// passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has passed; the
	// returned timer's C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer the stack uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
	// Reset restarts the timer to fire after d; it reports whether it was
	// active.
	Reset(d time.Duration) bool
}

// Sleep waits on c for d, or until ctx is done; it reports whether d
// passed. With d zero or negative it returns at once, reporting whether ctx
// is still live. For waits outside the stack (a pause between pings, an
// accept back-off) c is Real{}.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// AfterFunc returns a time.AfterFunc timer.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.Timer.C }

// Virtual is a clock that moves only when told to. Timers fire, in deadline
// order, during Advance or Set.
type Virtual struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*virtualTimer
	changed chan struct{} // closed and replaced whenever timers are added
}

// NewVirtual returns a virtual clock set to start.
func NewVirtual(start time.Time) *Virtual {
	return &Virtual{now: start, changed: make(chan struct{})}
}

// Now returns the virtual time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// NewTimer returns a timer that fires when the virtual time reaches now+d.
func (v *Virtual) NewTimer(d time.Duration) Timer {
	t := &virtualTimer{v: v, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc returns a timer that calls f in its own goroutine when the
// virtual time reaches now+d.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	t := &virtualTimer{v: v, fn: f}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d, firing timers due on the way.
func (v *Virtual) Advance(d time.Duration) { v.Set(v.Now().Add(d)) }

// Set moves the clock to t (never backwards), firing timers due on the way,
// each with its own deadline as the time it reports.
func (v *Virtual) Set(t time.Time) {
	for {
		v.mu.Lock()
		if len(v.timers) == 0 || v.timers[0].when.After(t) {
			if t.After(v.now) {
				v.now = t
			}
			v.mu.Unlock()
			return
		}
		next := v.timers[0]
		v.timers = v.timers[1:]
		next.active = false
		if next.when.After(v.now) {
			v.now = next.when
		}
		v.mu.Unlock()
		if next.fn != nil {
			go next.fn()
			continue
		}
		select {
		case next.c <- next.when:
		default: // the previous firing was not consumed, as with time.Timer
		}
	}
}

// Pending returns the number of active timers.
func (v *Virtual) Pending() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.timers)
}

// WaitPending blocks until at least n timers are active, so that a test can
// advance the clock only after the goroutine under test has armed its timer.
func (v *Virtual) WaitPending(n int) {
	for {
		v.mu.Lock()
		if len(v.timers) >= n {
			v.mu.Unlock()
			return
		}
		ch := v.changed
		v.mu.Unlock()
		<-ch
	}
}

// NextDeadline returns the earliest active timer's deadline.
func (v *Virtual) NextDeadline() (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.timers) == 0 {
		return time.Time{}, false
	}
	return v.timers[0].when, true
}

type virtualTimer struct {
	v      *Virtual
	c      chan time.Time
	fn     func()
	when   time.Time
	active bool
}

func (t *virtualTimer) C() <-chan time.Time { return t.c }

func (t *virtualTimer) Stop() bool {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	return t.remove()
}

func (t *virtualTimer) Reset(d time.Duration) bool {
	v := t.v
	v.mu.Lock()
	defer v.mu.Unlock()
	was := t.remove()
	t.when = v.now.Add(d)
	t.active = true
	i := sort.Search(len(v.timers), func(i int) bool { return v.timers[i].when.After(t.when) })
	v.timers = append(v.timers, nil)
	copy(v.timers[i+1:], v.timers[i:])
	v.timers[i] = t
	close(v.changed)
	v.changed = make(chan struct{})
	return was
}

// remove takes t off the clock's list and drops a firing not yet received,
// as time.Timer does since Go 1.23; v.mu is held.
func (t *virtualTimer) remove() bool {
	select {
	case <-t.c:
	default:
	}
	if !t.active {
		return false
	}
	t.active = false
	for i, o := range t.v.timers {
		if o == t {
			t.v.timers = append(t.v.timers[:i], t.v.timers[i+1:]...)
			break
		}
	}
	return true
}
