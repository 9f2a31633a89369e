package metrics

import (
	"math"
	"runtime/metrics"

	dto "github.com/prometheus/client_model/go"
)

// The Go runtime's own figures, served beside the stack's so that the
// collector's pauses (issue 14: Biscuit's 115 µs bound) and its settings
// are watched where the rest is. Names are runtime/metrics' own, made
// Prometheus names the way the official Go collector makes them:
// "/sched/pauses/total/gc:seconds" is go_sched_pauses_total_gc_seconds.

// runtimeValues are the runtime's single values served.
var runtimeValues = []struct {
	key, name, help string
	typ             dto.MetricType
}{
	{"/gc/cycles/total:gc-cycles", "go_gc_cycles_total_gc_cycles_total", "collections completed (runtime/metrics /gc/cycles/total)", dto.MetricType_COUNTER},
	{"/gc/gogc:percent", "go_gc_gogc_percent", "GOGC in force; -1 when off, as debug.SetGCPercent says (runtime/metrics /gc/gogc)", dto.MetricType_GAUGE},
	{"/gc/gomemlimit:bytes", "go_gc_gomemlimit_bytes", "GOMEMLIMIT in force (runtime/metrics /gc/gomemlimit)", dto.MetricType_GAUGE},
	{"/memory/classes/total:bytes", "go_memory_classes_total_bytes", "memory the runtime has mapped (runtime/metrics /memory/classes/total)", dto.MetricType_GAUGE},
	{"/sched/goroutines:goroutines", "go_sched_goroutines_goroutines", "live goroutines (runtime/metrics /sched/goroutines)", dto.MetricType_GAUGE},
}

// pauseKey is the histogram of every stop-the-world pause the collector
// made, each from the moment it began to stop the world to the moment the
// world ran again.
const pauseKey = "/sched/pauses/total/gc:seconds"

// pauseBounds are the upper bounds the pause histogram is served with:
// runtime/metrics keeps over a hundred buckets, too many to scrape, so
// each of its buckets is counted in the first of these that holds it
// whole. 115 µs is Biscuit's bound.
var pauseBounds = []float64{10e-6, 25e-6, 50e-6, 115e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3}

// Runtime returns the Go runtime's figures as metric families.
func Runtime() []*dto.MetricFamily {
	samples := make([]metrics.Sample, len(runtimeValues)+1)
	for i, v := range runtimeValues {
		samples[i].Name = v.key
	}
	samples[len(runtimeValues)].Name = pauseKey
	metrics.Read(samples)
	var fams []*dto.MetricFamily
	for i, v := range runtimeValues {
		var x float64
		switch s := samples[i].Value; s.Kind() {
		case metrics.KindUint64:
			x = float64(s.Uint64())
			if s.Uint64() == math.MaxUint64 {
				x = -1 // GOGC=off, which the runtime keeps as -1
			}
		case metrics.KindFloat64:
			x = s.Float64()
		default:
			continue // a runtime without it
		}
		m := &dto.Metric{}
		if v.typ == dto.MetricType_COUNTER {
			m.Counter = &dto.Counter{Value: &x}
		} else {
			m.Gauge = &dto.Gauge{Value: &x}
		}
		fams = append(fams, &dto.MetricFamily{Name: ptr(v.name), Help: ptr(v.help), Type: ptr(v.typ), Metric: []*dto.Metric{m}})
	}
	if s := samples[len(runtimeValues)].Value; s.Kind() == metrics.KindFloat64Histogram {
		fams = append(fams, &dto.MetricFamily{
			Name:   ptr("go_sched_pauses_total_gc_seconds"),
			Help:   ptr("the collector's stop-the-world pauses (runtime/metrics /sched/pauses/total/gc), each counted in the first bucket that holds its runtime bucket whole"),
			Type:   ptr(dto.MetricType_HISTOGRAM),
			Metric: []*dto.Metric{{Histogram: rebucket(s.Float64Histogram(), pauseBounds)}},
		})
	}
	return fams
}

// rebucket turns a runtime histogram into a Prometheus one with the given
// upper bounds: cumulative counts, and a sum estimated from each runtime
// bucket's midpoint (the runtime keeps no sum).
func rebucket(h *metrics.Float64Histogram, bounds []float64) *dto.Histogram {
	counts := make([]uint64, len(bounds))
	var total uint64
	var sum float64
	for i, n := range h.Counts {
		if n == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		total += n
		switch {
		case math.IsInf(hi, 1):
			sum += float64(n) * lo
		case math.IsInf(lo, -1):
			sum += float64(n) * hi
		default:
			sum += float64(n) * (lo + hi) / 2
		}
		for j, b := range bounds {
			if hi <= b {
				counts[j] += n
				break
			}
		}
	}
	out := &dto.Histogram{SampleCount: &total, SampleSum: &sum}
	var cum uint64
	for j, b := range bounds {
		cum += counts[j]
		out.Bucket = append(out.Bucket, &dto.Bucket{UpperBound: ptr(b), CumulativeCount: ptr(cum)})
	}
	return out
}
