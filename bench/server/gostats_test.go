package server

import "testing"

func TestPauseDeltaQuantile(t *testing.T) {
	before := []PauseBucket{{Hi: 1e-5, N: 3}}
	after := []PauseBucket{{Hi: 1e-5, N: 10}, {Hi: 1e-4, N: 2}, {Hi: 1e-3, N: 1}}
	d := PauseDelta(before, after)
	if len(d) != 3 || d[0].N != 7 {
		t.Fatalf("delta %+v", d)
	}
	if q := PauseQuantile(d, 1); q != 1e-3 {
		t.Fatalf("max %v", q)
	}
	if q := PauseQuantile(d, 0.5); q != 1e-5 {
		t.Fatalf("median %v", q)
	}
	if q := PauseQuantile(nil, 0.99); q != 0 {
		t.Fatalf("no pauses: %v", q)
	}
	if g := readGoStats(); g.GCCycles == 0 && g.Allocs == 0 {
		t.Fatalf("runtime/metrics read nothing: %+v", g)
	}
}

// TestPauseMinusLeavesOutASubset pins how the suite takes forced
// collections out of a workload's pauses.
func TestPauseMinusLeavesOutASubset(t *testing.T) {
	all := []PauseBucket{{Hi: 1e-5, N: 4}, {Hi: 1e-4, N: 1}, {Hi: 1e-3, N: 2}}
	forced := []PauseBucket{{Hi: 1e-5, N: 1}, {Hi: 1e-3, N: 2}}
	got := PauseMinus(all, forced)
	want := []PauseBucket{{Hi: 1e-5, N: 3}, {Hi: 1e-4, N: 1}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("PauseMinus = %+v, want %+v", got, want)
	}
	if q := PauseQuantile(got, 1); q != 1e-4 {
		t.Errorf("longest after taking out the forced ones = %v, want 1e-4", q)
	}
	if got := PauseMinus(forced, all); len(got) != 0 {
		t.Errorf("a subset less the whole = %+v, want nothing", got)
	}
}
