package deadline_test

import (
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/internal/deadline"
)

var start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// fire advances v by d and waits for the AfterFunc callbacks it started to
// have run: they take the deadline's lock, which Done takes too, so a Done
// that returns a closed channel proves the callback ran, and a callback that
// should not close it is given the chance by waiting for the goroutine.
func fire(t *testing.T, v *clock.Virtual, dl *deadline.Deadline, d time.Duration, wantClosed bool) {
	t.Helper()
	v.Advance(d)
	if !wantClosed {
		return
	}
	end := time.Now().Add(10 * time.Second)
	for !closed(dl.Done()) {
		if time.Now().After(end) {
			t.Fatal("the deadline did not expire")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func TestNewDeadlineIsNotSet(t *testing.T) {
	v := clock.NewVirtual(start)
	d := deadline.New(v)
	if closed(d.Done()) {
		t.Fatal("a new deadline has expired")
	}
	if v.Pending() != 0 {
		t.Errorf("a new deadline armed %d timers", v.Pending())
	}
}

func TestPastOrPresentDeadlineExpiresAtOnce(t *testing.T) {
	for _, off := range []time.Duration{0, -time.Nanosecond, -time.Hour} {
		v := clock.NewVirtual(start)
		d := deadline.New(v)
		d.Set(start.Add(off))
		if !closed(d.Done()) {
			t.Errorf("deadline at now%+v has not expired", off)
		}
		if v.Pending() != 0 {
			t.Errorf("deadline at now%+v armed a timer", off)
		}
	}
}

func TestFutureDeadlineExpiresWhenTheClockReachesIt(t *testing.T) {
	v := clock.NewVirtual(start)
	d := deadline.New(v)
	d.Set(start.Add(time.Second))
	done := d.Done()
	fire(t, v, d, time.Second-time.Nanosecond, false)
	if closed(done) {
		t.Fatal("expired before its time")
	}
	fire(t, v, d, time.Nanosecond, true)
	if !closed(done) {
		t.Error("the channel a waiter holds did not close")
	}
}

func TestClearingBeforeExpiryStopsTheTimer(t *testing.T) {
	v := clock.NewVirtual(start)
	d := deadline.New(v)
	d.Set(start.Add(time.Second))
	done := d.Done()
	d.Set(time.Time{})
	if v.Pending() != 0 {
		t.Errorf("%d timers armed after clearing", v.Pending())
	}
	v.Advance(time.Hour)
	if closed(done) || closed(d.Done()) {
		t.Error("a cleared deadline expired")
	}
}

func TestClearingAfterExpiryGivesAnOpenChannel(t *testing.T) {
	v := clock.NewVirtual(start)
	d := deadline.New(v)
	d.Set(start)
	d.Set(time.Time{})
	if closed(d.Done()) {
		t.Error("Done still closed after clearing")
	}
}

func TestExtendingKeepsTheWaitersChannel(t *testing.T) {
	// A reader blocked on Done sees a deadline moved while it waits.
	v := clock.NewVirtual(start)
	d := deadline.New(v)
	d.Set(start.Add(time.Second))
	done := d.Done()
	d.Set(start.Add(5 * time.Second))
	if d.Done() != done {
		t.Fatal("moving an unexpired deadline replaced the channel a waiter holds")
	}
	if v.Pending() != 1 {
		t.Errorf("%d timers armed, want 1", v.Pending())
	}
	fire(t, v, d, 4*time.Second, false)
	if closed(done) {
		t.Fatal("expired at the old deadline")
	}
	fire(t, v, d, time.Second, true)
}

func TestRearmingAfterExpiry(t *testing.T) {
	v := clock.NewVirtual(start)
	d := deadline.New(v)
	d.Set(start)
	d.Set(start.Add(time.Second))
	if closed(d.Done()) {
		t.Fatal("re-armed deadline is still expired")
	}
	fire(t, v, d, time.Second, true)
}

func TestShorteningExpiresEarlier(t *testing.T) {
	v := clock.NewVirtual(start)
	d := deadline.New(v)
	d.Set(start.Add(time.Hour))
	d.Set(start.Add(time.Second))
	fire(t, v, d, time.Second, true)
	if v.Pending() != 0 {
		t.Errorf("%d timers left armed", v.Pending())
	}
}

// scripted is a clock whose AfterFunc timers fire only when the test runs
// their callbacks, so that a callback can be made to run after Stop has
// failed to stop it, as happens when the timer fires just before Set.
type scripted struct {
	mu     sync.Mutex
	now    time.Time
	timers []*scriptedTimer
}

type scriptedTimer struct {
	f     func()
	fired bool // Stop fails: the callback is on its way
}

func (c *scripted) Now() time.Time                     { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *scripted) NewTimer(time.Duration) clock.Timer { panic("not used") }
func (c *scripted) AfterFunc(_ time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &scriptedTimer{f: f}
	c.timers = append(c.timers, t)
	return t
}
func (t *scriptedTimer) C() <-chan time.Time      { return nil }
func (t *scriptedTimer) Stop() bool               { was := !t.fired; t.fired = true; return was }
func (t *scriptedTimer) Reset(time.Duration) bool { was := !t.fired; t.fired = false; return was }

func TestStaleCallbackDoesNotExpireAMovedDeadline(t *testing.T) {
	c := &scripted{now: start}
	d := deadline.New(c)
	d.Set(start.Add(time.Second))
	// The clock reaches the first deadline: its timer fires, but before the
	// callback takes the lock the owner moves the deadline on.
	c.timers[0].fired = true
	c.now = start.Add(time.Second)
	d.Set(start.Add(time.Hour))
	c.timers[0].f() // the late callback
	if closed(d.Done()) {
		t.Fatal("the late callback expired the moved deadline")
	}
	if len(c.timers) != 1 || c.timers[0].fired {
		t.Fatalf("%d timers, the first fired %v: want the one timer rearmed", len(c.timers), c.timers[0].fired)
	}
	c.now = start.Add(time.Hour)
	c.timers[0].f() // the firing Set armed
	if !closed(d.Done()) {
		t.Fatal("the timer did not expire the deadline when its time came")
	}
}

func TestStaleCallbackDoesNotExpireAClearedDeadline(t *testing.T) {
	c := &scripted{now: start}
	d := deadline.New(c)
	d.Set(start.Add(time.Second))
	c.timers[0].fired = true
	d.Set(time.Time{})
	c.timers[0].f()
	if closed(d.Done()) {
		t.Fatal("the callback of a cleared deadline expired it")
	}
}

func TestCallbackBeforeTheTimeRearms(t *testing.T) {
	// The timer runs on the monotonic clock, the deadline is a wall time:
	// a wall clock stepped back finds the callback early.
	c := &scripted{now: start}
	d := deadline.New(c)
	d.Set(start.Add(time.Second))
	c.timers[0].fired = true
	c.timers[0].f()
	if closed(d.Done()) {
		t.Fatal("a callback before the deadline expired it")
	}
	if c.timers[0].fired {
		t.Fatal("the early callback did not rearm the timer")
	}
	c.now = start.Add(time.Second)
	c.timers[0].f()
	if !closed(d.Done()) {
		t.Fatal("the rearmed timer did not expire the deadline")
	}
}

func TestSetsShareOneTimer(t *testing.T) {
	v := clock.NewVirtual(start)
	d := deadline.New(v)
	for i := range 10 {
		d.Set(start.Add(time.Duration(i+1) * time.Second))
		if v.Pending() != 1 {
			t.Fatalf("after Set %d: %d timers armed, want 1", i, v.Pending())
		}
	}
	fire(t, v, d, 10*time.Second, true)
}
