// Package stats holds the stack's counters, in the manner of the kernel's
// SNMP MIB: each layer keeps a struct of named Counters, and Walk lists them
// by name for the CLI, the HTTP status page and tests.
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

// Walk calls fn for every Counter and Gauge field in the struct s points to,
// recursing into nested structs, with names joined by dots
// ("IPv4.ReasmFails"). The prefix is prepended to each name.
func Walk(prefix string, s any, fn func(name string, value int64)) {
	walk(prefix, reflect.ValueOf(s).Elem(), fn)
}

func walk(prefix string, v reflect.Value, fn func(string, int64)) {
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
		switch f.Type {
		case counterType:
			fn(name, int64(fv.Addr().Interface().(*Counter).Load()))
		case gaugeType:
			fn(name, fv.Addr().Interface().(*Gauge).Load())
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
	m := map[string]int64{}
	Walk(prefix, s, func(n string, v int64) { m[n] = v })
	return m
}
