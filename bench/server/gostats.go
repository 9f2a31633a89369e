package server

import (
	"math"
	"runtime/metrics"
	"sort"
)

// GoStats is what the Go runtime says of itself (runtime/metrics), the
// Biscuit paper's "HLL tax": cumulative, so the suite subtracts two.
type GoStats struct {
	GCCPU      float64       `json:"gc_cpu_s"`    // /cpu/classes/gc/total
	GoCPU      float64       `json:"go_cpu_s"`    // /cpu/classes/total minus idle
	GCCycles   uint64        `json:"gc_cycles"`   // /gc/cycles/total
	Allocs     uint64        `json:"allocs"`      // heap allocations, tiny ones included
	AllocBytes uint64        `json:"alloc_bytes"` // /gc/heap/allocs:bytes
	HeapBytes  uint64        `json:"heap_bytes"`  // live and unswept objects now
	Goroutines uint64        `json:"goroutines"`  // now
	Created    uint64        `json:"goroutines_created"`
	Pauses     []PauseBucket `json:"gc_pauses"` // /sched/pauses/total/gc, non-empty buckets
	// Stopping is the part of each pause spent stopping the world
	// (/sched/pauses/stopping/gc): waiting for every goroutine to reach
	// a safe point, and on a busy machine for the OS to run the threads
	// that must stop. What is left of a pause is the collector's own work.
	Stopping []PauseBucket `json:"gc_stopping"`
}

// PauseBucket is one bucket of the GC pause histogram: N pauses of at
// most Hi seconds (and more than the previous bucket's Hi).
type PauseBucket struct {
	Hi float64 `json:"hi_s"`
	N  uint64  `json:"n"`
}

var goMetrics = []string{
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/cpu/classes/idle:cpu-seconds",
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/allocs:objects",
	"/gc/heap/tiny/allocs:objects",
	"/gc/heap/allocs:bytes",
	"/memory/classes/heap/objects:bytes",
	"/sched/goroutines:goroutines",
	"/sched/goroutines-created:goroutines",
	"/sched/pauses/total/gc:seconds",
	"/sched/pauses/stopping/gc:seconds",
}

func readGoStats() GoStats {
	s := make([]metrics.Sample, len(goMetrics))
	for i, n := range goMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	f := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			return s[i].Value.Float64()
		}
		return 0
	}
	g := GoStats{
		GCCPU:      f(0),
		GoCPU:      f(1) - f(2),
		GCCycles:   u(3),
		Allocs:     u(4) + u(5),
		AllocBytes: u(6),
		HeapBytes:  u(7),
		Goroutines: u(8),
		Created:    u(9),
	}
	g.Pauses = pauseBuckets(s[10].Value)
	g.Stopping = pauseBuckets(s[11].Value)
	return g
}

// pauseBuckets returns a pause histogram's non-empty buckets.
func pauseBuckets(v metrics.Value) []PauseBucket {
	if v.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	h := v.Float64Histogram()
	var p []PauseBucket
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		hi := h.Buckets[i+1]
		if math.IsInf(hi, 1) {
			hi = h.Buckets[i] // the last bucket: its lower bound
		}
		p = append(p, PauseBucket{Hi: hi, N: c})
	}
	return p
}

// PauseDelta returns the pauses of after that are not in before.
func PauseDelta(before, after []PauseBucket) []PauseBucket {
	m := map[float64]uint64{}
	for _, b := range before {
		m[b.Hi] = b.N
	}
	var d []PauseBucket
	for _, a := range after {
		if n := a.N - m[a.Hi]; n > 0 {
			d = append(d, PauseBucket{Hi: a.Hi, N: n})
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i].Hi < d[j].Hi })
	return d
}

// PauseMinus returns the pauses of p that are not in q, bucket by bucket:
// p's collections less a subset of them.
func PauseMinus(p, q []PauseBucket) []PauseBucket {
	m := map[float64]uint64{}
	for _, b := range q {
		m[b.Hi] = b.N
	}
	var d []PauseBucket
	for _, b := range p {
		if n := b.N - min(b.N, m[b.Hi]); n > 0 {
			d = append(d, PauseBucket{Hi: b.Hi, N: n})
		}
	}
	return d
}

// PauseQuantile returns the upper bound of the bucket holding quantile q of
// the pauses (0 when there are none).
func PauseQuantile(p []PauseBucket, q float64) float64 {
	var total uint64
	for _, b := range p {
		total += b.N
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for _, b := range p {
		seen += b.N
		if seen >= want {
			return b.Hi
		}
	}
	return p[len(p)-1].Hi
}

// ownCount is what the server's stats replies allocated after reading the
// runtime's figures.
type ownCount struct {
	objects, bytes uint64
	samples        [3]metrics.Sample
}

// since adds the allocations made since at was read.
func (o *ownCount) since(at GoStats) {
	o.samples[0].Name = "/gc/heap/allocs:objects"
	o.samples[1].Name = "/gc/heap/tiny/allocs:objects"
	o.samples[2].Name = "/gc/heap/allocs:bytes"
	metrics.Read(o.samples[:])
	o.objects += o.samples[0].Value.Uint64() + o.samples[1].Value.Uint64() - at.Allocs
	o.bytes += o.samples[2].Value.Uint64() - at.AllocBytes
}
