package metrics

import (
	"math"
	"runtime/metrics"
	"testing"
)

// TestRebucketCountsEachRuntimeBucketInTheFirstThatHoldsItWhole pins the
// coarse histogram: a runtime bucket straddling a bound counts above it
// (a pause is never reported shorter than it may have been), and one past
// the last bound only in the total.
func TestRebucketCountsEachRuntimeBucketInTheFirstThatHoldsItWhole(t *testing.T) {
	h := &metrics.Float64Histogram{
		Buckets: []float64{math.Inf(-1), 5e-6, 20e-6, 110e-6, 120e-6, 1, math.Inf(1)},
		Counts:  []uint64{1, 2, 3, 4, 0, 5},
	}
	got := rebucket(h, []float64{10e-6, 115e-6, 1e-3})
	// ≤10 µs: the (-inf, 5 µs] bucket; (5, 20] µs straddles 10 µs and
	// (20, 110] µs fits 115 µs; (110, 120] µs straddles 115 µs and counts
	// at 1 ms; (120 µs, 1 s] fits none.
	want := []uint64{1, 1 + 2 + 3, 1 + 2 + 3 + 4}
	for i, b := range got.GetBucket() {
		if b.GetCumulativeCount() != want[i] {
			t.Errorf("bucket ≤%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want[i])
		}
	}
	if got.GetSampleCount() != 15 {
		t.Errorf("count %d, want 15 (the ones past the last bound too)", got.GetSampleCount())
	}
}
