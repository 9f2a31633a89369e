package logs_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/internal/logs"
)

// jsonLines decodes a JSON handler's output, one object a line.
func jsonLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestRepeatedLogsFirstThenOncePerIntervalWithSuppressedCount(t *testing.T) {
	// Each step is occurrences at one instant, the clock then advanced by
	// after; want is the "suppressed" of each line logged, in order (0:
	// none).
	type step struct {
		occurrences int
		after       time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  []uint64
	}{
		{"one occurrence is logged", []step{{1, 0}}, []uint64{0}},
		{"a burst is logged once", []step{{1000, 0}}, []uint64{0}},
		{"the next after the interval carries the burst's count", []step{{1000, time.Second}, {1, 0}}, []uint64{0, 999}},
		{"within the interval nothing more is logged", []step{{5, 999 * time.Millisecond}, {5, 0}}, []uint64{0}},
		{"an occurrence a whole interval after the last logged one is logged alone",
			[]step{{1, time.Second}, {1, time.Second}, {1, 0}}, []uint64{0, 0, 0}},
		{"a steady flood yields one line an interval",
			[]step{{10, time.Second}, {10, time.Second}, {10, time.Second}, {1, 0}}, []uint64{0, 9, 9, 9}},
		{"the interval runs from the last logged occurrence, not the first suppressed",
			[]step{{1, 600 * time.Millisecond}, {3, 600 * time.Millisecond}, {1, 0}}, []uint64{0, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			clk := clock.NewVirtual(time.Unix(1e9, 0))
			log := slog.New(slog.NewJSONHandler(&b, nil))
			r := logs.NewRepeated(log, clk, slog.LevelWarn, "dropped", time.Second)
			for _, s := range tc.steps {
				for range s.occurrences {
					if n, ok := r.Allow(); ok {
						r.Log(n, slog.String("tap", "tap0"))
					}
				}
				clk.Advance(s.after)
			}
			lines := jsonLines(t, &b)
			if len(lines) != len(tc.want) {
				t.Fatalf("%d lines logged, want %d:\n%s", len(lines), len(tc.want), b.String())
			}
			for i, m := range lines {
				got, _ := m["suppressed"].(float64)
				if uint64(got) != tc.want[i] || m["msg"] != "dropped" || m["level"] != "WARN" || m["tap"] != "tap0" {
					t.Errorf("line %d: %v; want msg dropped, level WARN, tap tap0, suppressed %d", i, m, tc.want[i])
				}
			}
		})
	}
}

func TestRepeatedIsSilentAndCountsNothingBelowTheLoggersLevel(t *testing.T) {
	var b bytes.Buffer
	clk := clock.NewVirtual(time.Unix(1e9, 0))
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelError)
	r := logs.NewRepeated(slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{Level: lv})), clk, slog.LevelWarn, "dropped", time.Second)
	for range 100 {
		if _, ok := r.Allow(); ok {
			t.Fatal("Allow let an occurrence through below the logger's level")
		}
	}
	// Lowered, the level lets the next occurrence through with no count
	// of the ones nobody would have seen.
	lv.Set(slog.LevelInfo)
	n, ok := r.Allow()
	if !ok || n != 0 {
		t.Errorf("Allow after lowering the level: %d, %v; want 0, true", n, ok)
	}
}

func TestRepeatedOnTheDiscardLoggerNeverAllows(t *testing.T) {
	r := logs.NewRepeated(nil, nil, slog.LevelError, "dropped", 0)
	if _, ok := r.Allow(); ok {
		t.Error("a Repeated with no logger let an occurrence through")
	}
}

func TestFlowAndCounterAttributes(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, nil))
	src, dst := mustAddrPort("10.0.2.100:40000"), mustAddrPort("93.184.216.34:443")
	log.LogAttrs(t.Context(), slog.LevelInfo, "event", append(logs.Counter("Gateway.FlowLimit", 7), logs.Flow(src, dst))...)
	m := jsonLines(t, &b)[0]
	flow, _ := m["flow"].(map[string]any)
	if flow["src"] != "10.0.2.100:40000" || flow["dst"] != "93.184.216.34:443" || m["counter"] != "Gateway.FlowLimit" || m["value"] != 7.0 {
		t.Errorf("logged %v; want flow.src, flow.dst, counter and value", m)
	}
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
