package link

import (
	"testing"
	"time"
)

// The spin follows the peer: the whole of its limit after a frame that
// came within it, half as long after one that came later, and none once
// that falls below a microsecond.
func TestSpinAdapts(t *testing.T) {
	const limit = 40 * time.Microsecond
	for _, tc := range []struct {
		name      string
		now       time.Duration
		waited    time.Duration
		wantAfter time.Duration
	}{
		{"a fast answer restores the whole spin", 0, 10 * time.Microsecond, limit},
		{"a slow answer halves it", limit, 100 * time.Microsecond, limit / 2},
		{"halving stops below a microsecond", 900 * time.Nanosecond, time.Millisecond, 0},
		{"an answer just within the limit counts as fast", 5 * time.Microsecond, limit, limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSpin(limit)
			s.now.Store(int64(tc.now))
			s.Adapt(tc.waited)
			if got := s.Budget(); got != tc.wantAfter {
				t.Fatalf("spin %v after waiting %v from %v; want %v", got, tc.waited, tc.now, tc.wantAfter)
			}
		})
	}
}

// A spin of no length never polls, however fast the frames come.
func TestNoSpinNeverPolls(t *testing.T) {
	for _, max := range []time.Duration{0, -1} {
		s := NewSpin(max)
		s.Adapt(0)
		if got := s.Budget(); got != 0 {
			t.Errorf("NewSpin(%v): budget %v after a fast frame, want 0", max, got)
		}
	}
}
