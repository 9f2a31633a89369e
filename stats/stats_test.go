package stats_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gonetstack/gonet/stats"
)

type inner struct {
	Hits   stats.Counter
	Queued stats.Gauge
}

type sample struct {
	In       stats.Counter
	Out      stats.Counter
	Level    stats.Gauge
	Name     string // not a counter: skipped
	Limit    int    // likewise
	private  stats.Counter
	Cache    inner
	Ptr      *inner
	NilPtr   *inner
	IntPtr   *int
	Embedded struct{ Deep struct{ Drops stats.Counter } }
}

func TestWalkNamesEveryCounterAndGaugeInFieldOrder(t *testing.T) {
	var s sample
	s.In.Add(3)
	s.Out.Inc()
	s.Level.Add(-5)
	s.private.Inc()
	s.Cache.Hits.Add(7)
	s.Cache.Queued.Add(2)
	s.Ptr = &inner{}
	s.Ptr.Hits.Inc()
	s.Embedded.Deep.Drops.Add(9)
	type kv struct {
		name string
		v    int64
	}
	tests := []struct {
		prefix string
		want   []kv
	}{
		{"L", []kv{
			{"L.In", 3}, {"L.Out", 1}, {"L.Level", -5},
			{"L.Cache.Hits", 7}, {"L.Cache.Queued", 2},
			{"L.Ptr.Hits", 1}, {"L.Ptr.Queued", 0},
			{"L.Embedded.Deep.Drops", 9},
		}},
		{"", []kv{
			{"In", 3}, {"Out", 1}, {"Level", -5},
			{"Cache.Hits", 7}, {"Cache.Queued", 2},
			{"Ptr.Hits", 1}, {"Ptr.Queued", 0},
			{"Embedded.Deep.Drops", 9},
		}},
	}
	for _, tt := range tests {
		var got []kv
		stats.Walk(tt.prefix, &s, func(n string, v int64) { got = append(got, kv{n, v}) })
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Walk(%q) = %v, want %v", tt.prefix, got, tt.want)
		}
	}
}

func TestMap(t *testing.T) {
	var s inner
	s.Hits.Add(4)
	got := stats.Map("X", &s)
	want := map[string]int64{"X.Hits": 4, "X.Queued": 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Map = %v, want %v", got, want)
	}
}

func TestCountersAreSafeForConcurrentUse(t *testing.T) {
	var c stats.Counter
	var g stats.Gauge
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Inc()
				c.Add(2)
				g.Add(1)
				g.Add(-1)
			}
		}()
	}
	wg.Wait()
	if c.Load() != 8*3000 || g.Load() != 0 {
		t.Errorf("Counter = %d Gauge = %d, want %d and 0", c.Load(), g.Load(), 8*3000)
	}
}

func TestWriteCounters(t *testing.T) {
	counters := map[string]int64{"UDP.InDatagrams": 3, "TCP.ActiveOpens": 1, "IPv4.InDiscards": 0, "Memory.Used": -1}
	tests := []struct {
		name string
		all  bool
		want string
	}{
		{"the non-zero ones, sorted", false, "Memory.Used -1\nTCP.ActiveOpens 1\nUDP.InDatagrams 3\n"},
		{"all of them", true, "IPv4.InDiscards 0\nMemory.Used -1\nTCP.ActiveOpens 1\nUDP.InDatagrams 3\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := stats.Write(&b, counters, tt.all); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("counters\n%q\nwant\n%q", b.String(), tt.want)
			}
		})
	}
}

type withUnits struct {
	Sent    stats.Counter
	Held    stats.Gauge   `unit:"bytes"`
	Elapsed stats.Counter `unit:"seconds"`
}

func TestTakeGivesEachValueItsKindAndUnit(t *testing.T) {
	var s withUnits
	s.Sent.Add(2)
	s.Held.Add(-4)
	s.Elapsed.Add(9)
	got := stats.Take("W", &s)
	want := stats.Snapshot{
		"W.Sent":    {Kind: stats.KindCounter, Value: 2},
		"W.Held":    {Kind: stats.KindGauge, Unit: "bytes", Value: -4},
		"W.Elapsed": {Kind: stats.KindCounter, Unit: "seconds", Value: 9},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Take = %v, want %v", got, want)
	}
	if v := got.Values(); !reflect.DeepEqual(v, stats.Map("W", &s)) {
		t.Errorf("Values = %v, want what Map gives, %v", v, stats.Map("W", &s))
	}
}

func TestSnapshotAddMergesUnderAPrefix(t *testing.T) {
	var a inner
	var b withUnits
	a.Hits.Inc()
	snap := stats.Take("A", &a)
	snap.Add("B", &b)
	names := slices.Sorted(maps.Keys(snap))
	want := []string{"A.Hits", "A.Queued", "B.Elapsed", "B.Held", "B.Sent"}
	if !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
}

func TestSampleJSONNamesTheKind(t *testing.T) {
	tests := []struct {
		in   stats.Sample
		want string
	}{
		{stats.Sample{Kind: stats.KindCounter, Value: 3}, `{"kind":"counter","value":3}`},
		{stats.Sample{Kind: stats.KindGauge, Unit: "bytes", Value: -1}, `{"kind":"gauge","unit":"bytes","value":-1}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.in)
		if err != nil || string(b) != tt.want {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", tt.in, b, err, tt.want)
		}
	}
	if _, err := json.Marshal(stats.Sample{}); err == nil {
		t.Error("json.Marshal of a Sample without a kind: no error")
	}
}
