package metrics_test

import (
	"bytes"
	"io"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gonetstack/gonet/metrics"
	"github.com/gonetstack/gonet/stats"
)

// TestHandlerServesTheCollectorsPausesAndSettings pins the runtime's
// figures beside the stack's: the pause histogram counts the collections
// made, cumulatively, and GOGC and GOMEMLIMIT are what is in force.
func TestHandlerServesTheCollectorsPausesAndSettings(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(300))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(1 << 30))
	runtime.GC()
	runtime.GC()
	srv := httptest.NewServer(metrics.Handler(func() stats.Snapshot { return stats.Snapshot{} }))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fams := parse(t, bytes.NewReader(body))

	if v := fams["go_gc_gogc_percent"].GetMetric()[0].GetGauge().GetValue(); v != 300 {
		t.Errorf("go_gc_gogc_percent = %v, want 300", v)
	}
	debug.SetGCPercent(-1)
	if v := runtimeGauge(t, "go_gc_gogc_percent"); v != -1 {
		t.Errorf("go_gc_gogc_percent with GOGC off = %v, want -1", v)
	}
	debug.SetGCPercent(300)
	if v := fams["go_gc_gomemlimit_bytes"].GetMetric()[0].GetGauge().GetValue(); v != 1<<30 {
		t.Errorf("go_gc_gomemlimit_bytes = %v, want %v", v, 1<<30)
	}
	cycles := fams["go_gc_cycles_total_gc_cycles_total"].GetMetric()[0].GetCounter().GetValue()
	if cycles < 2 {
		t.Errorf("go_gc_cycles_total_gc_cycles_total = %v after two collections", cycles)
	}
	h := fams["go_sched_pauses_total_gc_seconds"].GetMetric()[0].GetHistogram()
	// Each cycle stops the world twice (sweep termination, mark
	// termination).
	if float64(h.GetSampleCount()) < 2*cycles || h.GetSampleSum() <= 0 {
		t.Errorf("pauses: %d with sum %v, want at least two a cycle (%v cycles)", h.GetSampleCount(), h.GetSampleSum(), cycles)
	}
	var last uint64
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() < last || b.GetCumulativeCount() > h.GetSampleCount() {
			t.Errorf("bucket ≤%v counts %d after %d (of %d): not cumulative", b.GetUpperBound(), b.GetCumulativeCount(), last, h.GetSampleCount())
		}
		last = b.GetCumulativeCount()
	}
	if !hasBound(h.GetBucket(), 115e-6) {
		t.Errorf("no bucket at Biscuit's 115 µs bound")
	}
}

func hasBound(bs []*dto.Bucket, b float64) bool {
	for _, x := range bs {
		if x.GetUpperBound() == b {
			return true
		}
	}
	return false
}

// runtimeGauge reads the runtime's figures for one gauge.
func runtimeGauge(t *testing.T, name string) float64 {
	t.Helper()
	for _, f := range metrics.Runtime() {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s in metrics.Runtime", name)
	return 0
}
