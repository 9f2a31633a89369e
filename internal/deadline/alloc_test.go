//go:build !race

// The race detector's instrumentation allocates, so allocation counts mean
// something only without it: `make allocs` runs these.

package deadline_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/internal/deadline"
)

// A server sets its deadlines per request: moving an armed deadline, or
// clearing and setting it again, must not allocate.
func TestMovingADeadlineDoesNotAllocate(t *testing.T) {
	d := deadline.New(clock.Real{})
	d.Set(time.Now().Add(time.Hour)) // the first Set makes the timer
	if allocs := testing.AllocsPerRun(1000, func() {
		d.Set(time.Now().Add(time.Minute))
		d.Set(time.Time{})
	}); allocs > 0 {
		t.Errorf("%.2f allocations per deadline set and cleared, want 0", allocs)
	}
	d.Set(time.Time{})
}
