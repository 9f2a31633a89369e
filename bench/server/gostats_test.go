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
