package tcp

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
)

// armTimer measures the wait from the clock as it reads when it arms, not
// from the event's reading, and leaves a deadline that has already passed
// to run's next turn: a virtual clock fires a timer set in the past only
// at its next Advance, which a test waiting for the retransmission never
// makes.
func TestArmTimerMeasuresFromTheClockNotTheEvent(t *testing.T) {
	for _, c := range []struct {
		name     string
		deadline time.Duration // after the event's reading; the clock is 1 s on
		wantWake bool          // run woken at once, no timer armed
	}{
		{"a deadline the clock has passed during the event", 500 * time.Millisecond, true},
		{"a deadline still ahead of the clock", 1500 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewVirtual(time.Unix(1e9, 0))
			conn := &Conn{p: &Protocol{env: &env.Env{Clock: clk}}, wakeup: newWaker()}
			conn.timers.clock = clk.AfterFunc(time.Hour, conn.timerFired)
			conn.timers.clock.Stop()
			conn.beginEvent()
			clk.Advance(time.Second) // the clock moves on while the event runs
			conn.timers.rexmitAt = conn.eventAt.Add(c.deadline)
			conn.armTimer()
			select {
			case <-conn.wakeup:
				if !c.wantWake {
					t.Fatal("run woken for a deadline still ahead")
				}
				return
			default:
				if c.wantWake {
					t.Fatal("a deadline already passed left to a timer that a virtual clock fires only at its next Advance")
				}
			}
			// The timer fires at the deadline itself, not a second late.
			clk.Advance(c.deadline - time.Second - time.Millisecond)
			if conn.timers.fired.Load() {
				t.Fatal("the timer fired before its deadline")
			}
			clk.Advance(time.Millisecond)
			deadline := time.Now().Add(5 * time.Second)
			for !conn.timers.fired.Load() {
				if time.Now().After(deadline) {
					t.Fatal("the timer did not fire at its deadline")
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}
