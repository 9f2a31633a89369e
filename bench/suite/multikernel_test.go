package suite

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/iperf3"
)

// The UDP figures read the same from GoNet's iperf3 client as from the
// stock one: GoNet's JSON is written by package iperf3 from known counts,
// the stock one's is a 3.12 client's output over a veth.
func TestUDPMetricsReadBothIperf3Clients(t *testing.T) {
	var gonet bytes.Buffer
	res := iperf3.Result{
		Config:   iperf3.Config{UDP: true, Len: 1472, Duration: time.Second},
		Sent:     iperf3.Summary{Bytes: 1472 * 1000, Seconds: 1, Packets: 1000, Lost: 10, Jitter: 25 * time.Microsecond},
		Received: iperf3.Summary{Bytes: 1472 * 990, Seconds: 1, Packets: 1000, Lost: 10, Jitter: 25 * time.Microsecond},
		Streams:  []iperf3.StreamResult{{ID: 1}},
	}
	if err := res.WriteJSON(&gonet); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		raw        []byte
		loss, jit  float64
		sent, recv float64
	}{
		{"gonet iperf3 -J", gonet.Bytes(), 1, 25, 11.776, 11.65824},
		{"iperf3 3.12 -J", []byte(stockUDP), 0.5, 12, 100.0, 99.5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := udpMetrics(tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				metric string
				want   float64
			}{{"loss_pct", tt.loss}, {"jitter_us", tt.jit}, {"sent_mbit_s", tt.sent}, {"recv_mbit_s", tt.recv}} {
				if math.Abs(m[c.metric]-c.want) > 1e-6*math.Max(1, c.want) {
					t.Errorf("%s = %v, want %v", c.metric, m[c.metric], c.want)
				}
			}
		})
	}
}

// stockUDP is the end of what iperf3 3.12's client prints with -J for a
// UDP test: "sum" with the loss and jitter, the sender's and receiver's
// sums besides.
const stockUDP = `{"start":{},"intervals":[],"end":{"streams":[],
"sum":{"start":0,"end":1,"seconds":1,"bytes":12500000,"bits_per_second":100000000,"jitter_ms":0.012,"lost_packets":43,"packets":8600,"lost_percent":0.5,"sender":true},
"sum_sent":{"start":0,"end":1,"seconds":1,"bytes":12500000,"bits_per_second":100000000,"jitter_ms":0,"lost_packets":0,"packets":8600,"lost_percent":0,"sender":true},
"sum_received":{"start":0,"end":1,"seconds":1,"bytes":12437500,"bits_per_second":99500000,"jitter_ms":0.012,"lost_packets":43,"packets":8600,"lost_percent":0.5,"sender":true}}}`

func TestTCPMetricsTakeTheReceiversRate(t *testing.T) {
	var out bytes.Buffer
	res := iperf3.Result{
		Config:   iperf3.Config{Len: 128 << 10, Duration: 2 * time.Second},
		Sent:     iperf3.Summary{Bytes: 3e9, Seconds: 2},
		Received: iperf3.Summary{Bytes: 2.5e9, Seconds: 2},
		Streams:  []iperf3.StreamResult{{ID: 1}},
	}
	if err := res.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	m, err := tcpMetrics(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if m["gbit_s"] != 10 {
		t.Errorf("gbit_s = %v, want the receiver's 10", m["gbit_s"])
	}
	if _, err := tcpMetrics([]byte(`{"error":"unable to connect"}`)); err == nil {
		t.Error("a test that moved nothing gave figures")
	}
}

// mkRecord is a record of the family with one metric or more.
func mkRecord(w, pt, st string, m map[string]float64) Record {
	return Record{Workload: w, Point: pt, Stack: st, Rep: 1, Metrics: m}
}

func TestMultikernelGoalsAreJudgedFromTheMedians(t *testing.T) {
	res := Results{Records: []Record{
		mkRecord(mkTCP, "P=1", setupRing, map[string]float64{"gbit_s": 10}),
		mkRecord(mkTCP, "P=1", setupTAPs, map[string]float64{"gbit_s": 4}),
		mkRecord(mkTCP, "P=1", setupVeth, map[string]float64{"gbit_s": 12}),
		mkRecord(mkRR, "n=1", setupRing, map[string]float64{"mean_us": 20, "p50_us": 18}),
		mkRecord(mkRR, "n=1", setupVeth, map[string]float64{"mean_us": 25, "p50_us": 24}),
		mkRecord(mkUDP, "size=64,rate=max", setupRing, map[string]float64{"recv_mbit_s": 500, "offered_mbit_s": 900, "loss_pct": 40}),
		mkRecord(mkUDP, "size=64,rate=100", setupRing, map[string]float64{"offered_mbit_s": 100, "loss_pct": 0}),
		mkRecord(mkUDP, "size=64,rate=1000", setupRing, map[string]float64{"offered_mbit_s": 1000, "loss_pct": 50}),
		mkRecord(mkUDP, "size=64,rate=0.8sat", setupRing, map[string]float64{"offered_mbit_s": 400, "loss_pct": 0.2}),
		mkRecord(mkUDP, "size=1472,rate=max", setupRing, map[string]float64{"recv_mbit_s": 5000, "offered_mbit_s": 6000, "loss_pct": 20}),
		mkRecord(mkUDP, "size=1472,rate=0.8sat", setupRing, map[string]float64{"offered_mbit_s": 4000, "loss_pct": 0}),
		// Unpaced, the sender starves the receiver: a paced rate
		// delivers more, and is the saturation the goal counts from.
		mkRecord(mkUDP, "size=8192,rate=max", setupRing, map[string]float64{"recv_mbit_s": 700, "offered_mbit_s": 11000, "loss_pct": 93}),
		mkRecord(mkUDP, "size=8192,rate=1000", setupRing, map[string]float64{"recv_mbit_s": 990, "offered_mbit_s": 1000, "loss_pct": 1}),
		mkRecord(mkUDP, "size=8192,rate=0.8sat", setupRing, map[string]float64{"recv_mbit_s": 560, "offered_mbit_s": 560, "loss_pct": 0}),
		mkRecord(mkUDP, "size=8192,rate=100", setupRing, map[string]float64{"recv_mbit_s": 100, "offered_mbit_s": 100, "loss_pct": 0, "lost": 0}),
	}}
	got := map[string]string{}
	for _, g := range newReport(res).mkGoals() {
		got[g.what+" "+g.goal] = g.met + " | " + g.why
	}
	for _, c := range []struct{ goal, want string }{
		{"TCP, 1 stream(s) ≥ 2× TAPs + Linux bridge", "✅ met"},
		{"TCP, 1 stream(s) ≥ kernel over veth", "❌ not met"},
		{"1-byte request-response, mean ≤ kernel over veth", "✅ met"},
		// 1000 Mbit/s is above 80% of 500, and the unpaced point is
		// saturation itself: only the 80% point's loss counts.
		{"UDP 64 B, no loss below 80% of saturation 0% at every rate ≤ 0.8 × saturation", "❌ not met | 64 B at 80% of saturation: 0.200% lost"},
		{"UDP 1472 B, no loss below 80% of saturation 0% at every rate ≤ 0.8 × saturation", "✅ met"},
		{"UDP 8192 B, no loss below 80% of saturation 0% at every rate ≤ 0.8 × saturation", "✅ met | no loss at 8192 B at 80% of saturation, 8192 B at 100 Mbit/s"},
	} {
		if g, ok := got[c.goal]; !ok || !strings.HasPrefix(g, c.want) {
			t.Errorf("%s: %q, want it to start %q (all: %v)", c.goal, g, c.want, got)
		}
	}
}

// -check fails when a set-up produced no numbers, whatever the others did.
func TestCheckFailsASetupWithoutNumbers(t *testing.T) {
	res := Results{Workloads: []string{mkTCP}, Records: []Record{
		mkRecord(mkTCP, "P=1", setupRing, map[string]float64{"gbit_s": 10}),
		{Workload: mkTCP, Point: "P=1", Stack: setupBridge, Rep: 1, Error: "set up bridge: gonet bridge exited"},
	}}
	missing, _ := Check(res)
	if len(missing) != 1 || !strings.Contains(missing[0], "mk-tcp P=1 on bridge") {
		t.Errorf("missing %v, want the bridge's TCP point alone", missing)
	}
}

func TestOnlySelectsTheMultikernelFamilyAndItsWorkloads(t *testing.T) {
	for _, c := range []struct {
		only []string
		want []string // the points' workloads
	}{
		{[]string{"multikernel"}, []string{mkTCP, mkRR, mkUDP, mkRing}},
		{[]string{mkUDP}, []string{mkUDP}},
		{[]string{mkRing}, []string{mkRing}},
	} {
		s := &Suite{Plan: Full, Only: c.only}
		var got []string
		for _, g := range s.selected(s.multikernelGroups()) {
			for _, p := range g.points {
				if w := p.workloadOf(g); !slices.Contains(got, w) {
					got = append(got, w)
				}
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("-only %v: workloads %v, want %v", c.only, got, c.want)
		}
	}
}

// The full plan's UDP points per size are the unpaced one first (whose
// figure the 80% point needs), the fixed rates, then 80% of saturation;
// the ring sizes run on the direct ring alone.
func TestMultikernelPlanOrdersSaturationFirst(t *testing.T) {
	s := &Suite{Plan: Full}
	gs := s.multikernelGroups()
	var udp []string
	for _, p := range gs[0].points {
		if p.workload == mkUDP && strings.HasPrefix(p.name, "size=64,") {
			udp = append(udp, p.name)
		}
	}
	if want := []string{"size=64,rate=max", "size=64,rate=100", "size=64,rate=300", "size=64,rate=1000", "size=64,rate=0.8sat"}; !slices.Equal(udp, want) {
		t.Errorf("64-byte points %v, want %v", udp, want)
	}
	if len(gs) != 2 || !slices.Equal(gs[1].stacks, []string{setupRing}) || len(gs[1].points) != len(Full.Multikernel.RingSizes) {
		t.Errorf("ring-size group: %+v", gs[1:])
	}
}

func TestAMultikernelOnlyRunKeepsTheGatewayFamily(t *testing.T) {
	dir := t.TempDir()
	earlier := Results{
		Records: []Record{
			{Workload: gwBulk, Point: "mtu=1500/up/1", Stack: "gonet", Metrics: map[string]float64{"gbit_s": 1}},
			mkRecord(mkTCP, "P=1", setupRing, map[string]float64{"gbit_s": 3}),
		},
		Workloads: []string{gwBulk, mkTCP},
		Gateway:   &GatewayRun{Reps: 2},
	}
	b, err := json.Marshal(earlier)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Suite{OutDir: dir, Log: io.Discard}
	s.res = Results{
		Records:     []Record{mkRecord(mkTCP, "P=1", setupRing, map[string]float64{"gbit_s": 9})},
		Workloads:   []string{mkTCP},
		Multikernel: &MultikernelRun{Reps: 1},
	}
	if err := s.mergeEarlier(); err != nil {
		t.Fatal(err)
	}
	var gw, mk []float64
	for _, r := range s.res.Records {
		switch r.Workload {
		case gwBulk:
			gw = append(gw, r.Metrics["gbit_s"])
		case mkTCP:
			mk = append(mk, r.Metrics["gbit_s"])
		}
	}
	if !slices.Equal(gw, []float64{1}) || !slices.Equal(mk, []float64{9}) || s.res.Gateway == nil || s.res.Multikernel == nil {
		t.Errorf("merged: gateway %v, multikernel %v (want [1] and [9]), runs %v %v", gw, mk, s.res.Gateway, s.res.Multikernel)
	}
}
