package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
)

var start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// wait bounds a wall-clock wait for another goroutine.
const wait = 10 * time.Second

// fired returns the time a timer's channel holds, if any.
func fired(tm clock.Timer) (time.Time, bool) {
	select {
	case at := <-tm.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestVirtualTimeMovesOnlyWhenTold(t *testing.T) {
	v := clock.NewVirtual(start)
	if !v.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", v.Now(), start)
	}
	steps := []struct {
		name string
		move func()
		want time.Time
	}{
		{"Advance", func() { v.Advance(1500 * time.Millisecond) }, start.Add(1500 * time.Millisecond)},
		{"Advance zero", func() { v.Advance(0) }, start.Add(1500 * time.Millisecond)},
		{"Set backwards is ignored", func() { v.Set(start) }, start.Add(1500 * time.Millisecond)},
		{"Advance backwards is ignored", func() { v.Advance(-time.Hour) }, start.Add(1500 * time.Millisecond)},
		{"Set forwards", func() { v.Set(start.Add(time.Hour)) }, start.Add(time.Hour)},
	}
	for _, s := range steps {
		s.move()
		if got := v.Now(); !got.Equal(s.want) {
			t.Errorf("%s: Now = %v, want %v", s.name, got, s.want)
		}
	}
}

func TestTimerFiresAtItsDeadlineNotBefore(t *testing.T) {
	v := clock.NewVirtual(start)
	tm := v.NewTimer(time.Second)
	v.Advance(time.Second - time.Nanosecond)
	if _, ok := fired(tm); ok {
		t.Fatal("fired early")
	}
	v.Advance(time.Nanosecond)
	at, ok := fired(tm)
	if !ok || !at.Equal(start.Add(time.Second)) {
		t.Fatalf("fired %v at %v, want at %v", ok, at, start.Add(time.Second))
	}
	if v.Pending() != 0 {
		t.Errorf("a fired timer is still pending")
	}
	v.Advance(time.Hour)
	if _, ok := fired(tm); ok {
		t.Error("fired twice")
	}
}

func TestTimersFireInDeadlineOrderEachWithItsOwnTime(t *testing.T) {
	v := clock.NewVirtual(start)
	delays := []time.Duration{3 * time.Second, time.Second, 2 * time.Second, time.Second, 10 * time.Second, 0}
	timers := make([]clock.Timer, len(delays))
	for i, d := range delays {
		timers[i] = v.NewTimer(d)
	}
	if v.Pending() != len(delays) {
		t.Errorf("Pending = %d, want %d", v.Pending(), len(delays))
	}
	if dl, ok := v.NextDeadline(); !ok || !dl.Equal(start) {
		t.Errorf("NextDeadline = %v, %v; want %v", dl, ok, start)
	}
	v.Advance(5 * time.Second)
	for i, d := range delays {
		at, ok := fired(timers[i])
		if d > 5*time.Second {
			if ok {
				t.Errorf("timer %d of %v fired at +5s", i, d)
			}
			continue
		}
		if !ok || !at.Equal(start.Add(d)) {
			t.Errorf("timer %d of %v: fired %v at %v", i, d, ok, at)
		}
	}
	if !v.Now().Equal(start.Add(5 * time.Second)) {
		t.Errorf("Now = %v, want +5s", v.Now())
	}
	if dl, ok := v.NextDeadline(); !ok || !dl.Equal(start.Add(10*time.Second)) || v.Pending() != 1 {
		t.Errorf("NextDeadline = %v, %v with %d pending; want +10s and 1", dl, ok, v.Pending())
	}
}

func TestAfterFuncCallbacksRunInDeadlineOrder(t *testing.T) {
	v := clock.NewVirtual(start)
	ran := make(chan int, 8)
	delays := []time.Duration{3 * time.Second, time.Second, 2 * time.Second, time.Second}
	for i, d := range delays {
		tm := v.AfterFunc(d, func() { ran <- i })
		if tm.C() != nil {
			t.Errorf("AfterFunc timer has a channel")
		}
	}
	// One step per distinct deadline, so that the goroutines' order is the
	// clock's; equal deadlines fire in the order armed.
	want := [][]int{{1, 3}, {2}, {0}}
	for step, ids := range want {
		v.Advance(time.Second)
		got := map[int]bool{}
		for range ids {
			select {
			case i := <-ran:
				got[i] = true
			case <-time.After(wait):
				t.Fatalf("step %d: callbacks did not run", step)
			}
		}
		for _, i := range ids {
			if !got[i] {
				t.Errorf("step %d: callback %d did not run (ran %v)", step, i, got)
			}
		}
	}
	if len(ran) != 0 {
		t.Errorf("%d extra callbacks", len(ran))
	}
}

func TestAfterFuncDoesNotBlockAdvance(t *testing.T) {
	v := clock.NewVirtual(start)
	release := make(chan struct{})
	done := make(chan struct{})
	v.AfterFunc(time.Second, func() { <-release; close(done) })
	v.Advance(time.Second) // returns although the callback blocks
	close(release)
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("callback did not run")
	}
}

func TestStop(t *testing.T) {
	v := clock.NewVirtual(start)
	tm := v.NewTimer(time.Second)
	if !tm.Stop() {
		t.Error("Stop of an active timer reported false")
	}
	if tm.Stop() {
		t.Error("second Stop reported true")
	}
	v.Advance(time.Hour)
	if _, ok := fired(tm); ok {
		t.Error("a stopped timer fired")
	}
	called := false
	f := v.AfterFunc(time.Second, func() { called = true })
	f.Stop()
	v.Advance(time.Hour)
	if called {
		t.Error("a stopped AfterFunc ran")
	}
	// After firing, Stop reports false and drops the unread firing, as
	// time.Timer does since Go 1.23.
	tm2 := v.NewTimer(time.Second)
	v.Advance(time.Second)
	if tm2.Stop() {
		t.Error("Stop after firing reported true")
	}
	if _, ok := fired(tm2); ok {
		t.Error("the firing survived Stop")
	}
}

func TestReset(t *testing.T) {
	v := clock.NewVirtual(start)
	tm := v.NewTimer(time.Second)
	if !tm.Reset(3 * time.Second) {
		t.Error("Reset of an active timer reported false")
	}
	v.Advance(2 * time.Second)
	if _, ok := fired(tm); ok {
		t.Fatal("fired at the old deadline")
	}
	v.Advance(time.Second)
	if at, ok := fired(tm); !ok || !at.Equal(start.Add(3*time.Second)) {
		t.Fatalf("fired %v at %v, want at +3s", ok, at)
	}
	// Reset after a firing nobody read drops it: the channel then holds
	// only the new firing.
	v.Advance(time.Second) // now +4s
	tm.Reset(time.Second)
	v.Advance(time.Second)
	if tm.Reset(time.Second) {
		t.Error("Reset of a fired timer reported true")
	}
	if !tm.Reset(2 * time.Second) {
		t.Error("Reset of an active, re-armed timer reported false")
	}
	if _, ok := fired(tm); ok {
		t.Fatal("an old firing survived Reset")
	}
	v.Advance(2 * time.Second)
	if at, ok := fired(tm); !ok || !at.Equal(start.Add(7*time.Second)) {
		t.Fatalf("fired %v at %v, want at +7s", ok, at)
	}
	if tm.Reset(time.Second) {
		t.Error("Reset of a fired timer reported true")
	}
}

func TestWaitPendingReturnsOnceAnotherGoroutineArmsATimer(t *testing.T) {
	v := clock.NewVirtual(start)
	v.WaitPending(0) // nothing to wait for
	armed := make(chan clock.Timer)
	go func() {
		tm := v.NewTimer(time.Second)
		tm2 := v.NewTimer(2 * time.Second)
		tm2.Stop()
		armed <- tm
	}()
	v.WaitPending(1)
	tm := <-armed
	v.Advance(time.Second)
	if _, ok := fired(tm); !ok {
		t.Error("the awaited timer did not fire")
	}
	waited := make(chan struct{})
	go func() { v.WaitPending(2); close(waited) }()
	v.NewTimer(time.Second)
	select {
	case <-waited:
		t.Fatal("WaitPending(2) returned with one timer")
	default:
	}
	v.AfterFunc(time.Second, func() {})
	select {
	case <-waited:
	case <-time.After(wait):
		t.Fatal("WaitPending(2) did not return with two timers")
	}
}

func TestNextDeadlineOfAnIdleClock(t *testing.T) {
	v := clock.NewVirtual(start)
	if _, ok := v.NextDeadline(); ok || v.Pending() != 0 {
		t.Error("an idle clock has a deadline")
	}
}

func TestRealClock(t *testing.T) {
	var c clock.Clock = clock.Real{}
	before := time.Now()
	if now := c.Now(); now.Before(before) || now.Sub(before) > time.Minute {
		t.Errorf("Real.Now = %v, time.Now = %v", now, before)
	}
	tm := c.NewTimer(0)
	select {
	case <-tm.C():
	case <-time.After(wait):
		t.Fatal("a zero real timer did not fire")
	}
	if tm.Reset(time.Hour) {
		t.Error("Reset of a fired real timer reported true")
	}
	if !tm.Stop() {
		t.Error("Stop of an armed real timer reported false")
	}
	done := make(chan struct{})
	f := c.AfterFunc(0, func() { close(done) })
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("a zero real AfterFunc did not run")
	}
	if f.C() != nil {
		t.Error("a real AfterFunc timer has a channel")
	}
}

func TestSleepWaitsForTheClockOrTheContext(t *testing.T) {
	v := clock.NewVirtual(start)
	slept := make(chan bool)
	go func() { slept <- clock.Sleep(context.Background(), v, time.Second) }()
	v.WaitPending(1)
	v.Advance(time.Second)
	if !<-slept {
		t.Error("Sleep reported its context done when the clock passed the wait")
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { slept <- clock.Sleep(ctx, v, time.Second) }()
	v.WaitPending(1)
	cancel()
	if <-slept {
		t.Error("Sleep reported the wait passed when its context ended first")
	}

	if !clock.Sleep(context.Background(), v, 0) || clock.Sleep(ctx, v, -time.Second) {
		t.Error("Sleep of no time should report only whether the context is live")
	}
}
