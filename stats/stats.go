// Package stats holds the stack's counters, in the manner of the kernel's
// SNMP MIB: each layer keeps a struct of named Counters, and Walk lists them
// by name for the CLI, the HTTP status page and tests; Take gives them as a
// typed Snapshot, each with its kind, for programs and exposition formats.
package stats

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync/atomic"
)

// Counter is a monotonically increasing event count, safe for concurrent use.
type Counter struct{ v atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Load returns the count.
func (c *Counter) Load() uint64 { return c.v.Load() }

// Gauge is a value that goes up and down (queued packets, open sockets).
type Gauge struct{ v atomic.Int64 }

// Add adds n, which may be negative.
func (g *Gauge) Add(n int64) { g.v.Add(n) }

// Load returns the value.
func (g *Gauge) Load() int64 { return g.v.Load() }

var (
	counterType = reflect.TypeFor[Counter]()
	gaugeType   = reflect.TypeFor[Gauge]()
)

// Kind says how a value moves, which is what an exposition format must be
// told (Prometheus' TYPE line): a counter only goes up, so its rate means
// something; a gauge goes up and down, and only its level does.
type Kind uint8

// The kinds of value.
const (
	KindCounter Kind = iota + 1
	KindGauge
)

// String returns "counter" or "gauge", as Prometheus names them.
func (k Kind) String() string {
	switch k {
	case KindCounter:
		return "counter"
	case KindGauge:
		return "gauge"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText gives a Kind as its String, so that JSON shows "counter".
func (k Kind) MarshalText() ([]byte, error) {
	if k != KindCounter && k != KindGauge {
		return nil, fmt.Errorf("stats: marshalling %v: not a kind of value", k)
	}
	return []byte(k.String()), nil
}

// Sample is one counter or gauge, read at one moment.
type Sample struct {
	Kind Kind `json:"kind"`
	// Unit is the value's unit in Prometheus' words ("bytes",
	// "seconds"), from the field's `unit:"..."` tag; empty for a count
	// of events or things, and for a field whose name says its unit
	// ("RxBytes").
	Unit  string `json:"unit,omitempty"`
	Value int64  `json:"value"`
}

// Snapshot is a set of counters and gauges by dotted name ("TCP.RetransSegs",
// "NIC.tap0.RxFrames"), each read atomically, the set not as one. It is the
// typed form of Map, for a program that wants values without parsing text
// and for exposition formats that must know a counter from a gauge.
type Snapshot map[string]Sample

// Take returns the counters and gauges of the struct s points to, named as
// Walk names them.
func Take(prefix string, s any) Snapshot {
	snap := Snapshot{}
	snap.Add(prefix, s)
	return snap
}

// Add takes the counters and gauges of the struct s points to into snap,
// named as Walk names them.
func (snap Snapshot) Add(prefix string, s any) {
	WalkSamples(prefix, s, func(n string, x Sample) { snap[n] = x })
}

// Values returns the values alone, by name, as Map does.
func (snap Snapshot) Values() map[string]int64 {
	m := make(map[string]int64, len(snap))
	for n, x := range snap {
		m[n] = x.Value
	}
	return m
}

// Walk calls fn for every Counter and Gauge field in the struct s points to,
// recursing into nested structs, with names joined by dots
// ("IPv4.ReasmFails"). The prefix is prepended to each name.
func Walk(prefix string, s any, fn func(name string, value int64)) {
	WalkSamples(prefix, s, func(n string, x Sample) { fn(n, x.Value) })
}

// WalkSamples is Walk with each value's kind and unit.
func WalkSamples(prefix string, s any, fn func(name string, x Sample)) {
	walk(prefix, reflect.ValueOf(s).Elem(), fn)
}

func walk(prefix string, v reflect.Value, fn func(string, Sample)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if prefix != "" {
			name = prefix + "." + name
		}
		fv := v.Field(i)
		unit := f.Tag.Get("unit")
		switch f.Type {
		case counterType:
			fn(name, Sample{KindCounter, unit, int64(fv.Addr().Interface().(*Counter).Load())})
		case gaugeType:
			fn(name, Sample{KindGauge, unit, fv.Addr().Interface().(*Gauge).Load()})
		default:
			if f.Type.Kind() == reflect.Struct {
				walk(name, fv, fn)
			} else if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct && !fv.IsNil() {
				walk(name, fv.Elem(), fn)
			}
		}
	}
}

// Write prints counters, as Map or a stack's Counters give them, one
// "Layer.Name value" a line, sorted by name: the non-zero ones, or all of
// them when all is set. It is how the daemon, gonet stats and the status
// page print them.
func Write(w io.Writer, counters map[string]int64, all bool) error {
	names := make([]string, 0, len(counters))
	for n, v := range counters {
		if all || v != 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if _, err := fmt.Fprintf(w, "%s %d\n", n, counters[n]); err != nil {
			return err
		}
	}
	return nil
}

// Map returns the counters of s by name.
func Map(prefix string, s any) map[string]int64 {
	return Take(prefix, s).Values()
}
