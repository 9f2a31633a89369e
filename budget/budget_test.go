package budget_test

import (
	"sync"
	"testing"

	"github.com/gonetstack/gonet/budget"
)

func TestNewRejectsANonPositiveLimit(t *testing.T) {
	for _, limit := range []int64{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", limit)
				}
			}()
			budget.New(limit)
		}()
	}
}

func TestReserveAndRelease(t *testing.T) {
	type step struct {
		reserve int // > 0 reserve, < 0 release
		ok      bool
		used    int64
	}
	tests := []struct {
		name  string
		limit int64
		steps []step
	}{
		{"up to the limit exactly", 100, []step{{60, true, 60}, {40, true, 100}, {1, false, 100}}},
		{"a refusal takes nothing", 100, []step{{60, true, 60}, {41, false, 60}, {40, true, 100}}},
		{"release makes room", 100, []step{{100, true, 100}, {1, false, 100}, {-30, true, 70}, {30, true, 100}}},
		{"larger than the whole limit", 10, []step{{11, false, 0}, {10, true, 10}}},
		{"zero always fits", 1, []step{{1, true, 1}, {0, true, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := budget.New(tt.limit)
			var refused uint64
			var peak int64
			for i, s := range tt.steps {
				if s.reserve < 0 {
					b.Release(-s.reserve)
				} else if ok := b.Reserve(s.reserve); ok != s.ok {
					t.Fatalf("step %d: Reserve(%d) = %v, want %v", i, s.reserve, ok, s.ok)
				} else if !ok {
					refused++
				}
				if b.Used() != s.used || b.Available() != tt.limit-s.used {
					t.Fatalf("step %d: Used = %d Available = %d, want %d %d", i, b.Used(), b.Available(), s.used, tt.limit-s.used)
				}
				peak = max(peak, s.used)
			}
			if b.Refused() != refused || b.Peak() != peak || b.Limit() != tt.limit {
				t.Errorf("Refused %d Peak %d Limit %d, want %d %d %d", b.Refused(), b.Peak(), b.Limit(), refused, peak, tt.limit)
			}
		})
	}
}

func TestReleasingMoreThanReservedPanics(t *testing.T) {
	b := budget.New(100)
	b.Reserve(10)
	defer func() {
		if recover() == nil {
			t.Error("releasing 11 of 10 bytes did not panic")
		}
	}()
	b.Release(11)
}

func TestConcurrentReservationsNeverExceedTheLimit(t *testing.T) {
	const limit = 1000
	b := budget.New(limit)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine holds up to five reservations at once: the
			// largest alone need more than the limit.
			n := 150 + g*37%150
			held := 0
			for range 2000 {
				if held < 5 && b.Reserve(n) {
					held++
					if u := b.Used(); u > limit {
						t.Errorf("Used = %d over the limit", u)
					}
					continue
				}
				b.Release(held * n)
				held = 0
			}
			b.Release(held * n)
		}()
	}
	wg.Wait()
	if b.Used() != 0 {
		t.Errorf("Used = %d after every release", b.Used())
	}
	if p := b.Peak(); p > limit || p == 0 {
		t.Errorf("Peak = %d, want in 1..%d", p, limit)
	}
	if b.Refused() == 0 {
		t.Error("no reservation was refused: the test did not contend")
	}
}

func TestFreedIsClosedByTheNextRelease(t *testing.T) {
	b := budget.New(10)
	b.Reserve(10)
	freed := b.Freed()
	if b.Freed() != freed {
		t.Error("two waiters before a Release got different channels")
	}
	select {
	case <-freed:
		t.Fatal("Freed closed before any Release")
	default:
	}
	if b.Reserve(1) {
		t.Fatal("Reserve beyond the limit succeeded")
	}
	b.Release(4)
	select {
	case <-freed:
	default:
		t.Fatal("Freed not closed by Release")
	}
	if next := b.Freed(); next == freed {
		t.Error("Freed after a Release returned the closed channel")
	}
}
