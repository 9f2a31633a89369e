package stack_test

import (
	"context"
	"testing"
	"time"

	"github.com/gonetstack/gonet/stats"
)

func TestMetricsGiveEveryCounterWithItsKind(t *testing.T) {
	a, b := pair(t, 1500)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.Ping(ctx, addrB.Addr(), 56); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	m := b.Metrics()
	const nic = "eth0" // stacktest.Pair's
	tests := []struct {
		name string
		kind stats.Kind
		unit string
		min  int64
	}{
		{"ICMP.OutEchoReps", stats.KindCounter, "", 1},
		{"IPv4.InReceives", stats.KindCounter, "", 1},
		{"NIC." + nic + ".RxFrames", stats.KindCounter, "", 1},
		{"ARP." + nic + ".PendingResolutns", stats.KindGauge, "", 0},
		{"TCP.RetransSegs", stats.KindCounter, "", 0},
		{"TCP.CurrEstab", stats.KindGauge, "", 0},
		{"UDP.Sockets", stats.KindGauge, "", 0},
		{"Memory.Limit", stats.KindGauge, "bytes", 1},
		{"Memory.Used", stats.KindGauge, "bytes", 0},
		{"Memory.Peak", stats.KindGauge, "bytes", 0},
		{"Memory.Refused", stats.KindCounter, "", 0},
		{"Buffers.Outstanding", stats.KindGauge, "", 0},
	}
	for _, tt := range tests {
		x, ok := m[tt.name]
		switch {
		case !ok:
			t.Errorf("Metrics has no %s", tt.name)
		case x.Kind != tt.kind || x.Unit != tt.unit || x.Value < tt.min:
			t.Errorf("Metrics[%s] = %+v, want a %v in %q of at least %d", tt.name, x, tt.kind, tt.unit, tt.min)
		}
	}
	c := b.Counters()
	if len(c) != len(m) {
		t.Errorf("Counters has %d names, Metrics %d: they should list the same", len(c), len(m))
	}
}
