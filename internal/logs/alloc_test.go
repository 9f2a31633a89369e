//go:build !race

package logs_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/internal/logs"
)

// Allow runs once per dropped packet: declining must not allocate, whether
// the logger is off at the event's level or the interval is not over.
func TestRepeatedAllowDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  *slog.Logger
	}{
		{"no logger", nil},
		{"logger above the event's level", slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))},
		{"within the interval", slog.New(slog.NewTextHandler(io.Discard, nil))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := logs.NewRepeated(tc.log, clock.Real{}, slog.LevelWarn, "dropped", time.Hour)
			r.Allow() // the first may be logged
			if allocs := testing.AllocsPerRun(1000, func() {
				if n, ok := r.Allow(); ok {
					r.Log(n, slog.String("tap", "tap0"))
				}
			}); allocs != 0 {
				t.Errorf("%v allocations per declined occurrence, want 0", allocs)
			}
		})
	}
}
