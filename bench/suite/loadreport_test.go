package suite

import (
	"slices"
	"strings"
	"testing"
)

// Issue 16's workloads run at their points in the full plan and once at
// their smallest in the quick one; the daemon is GoNet's alone.
func TestPlansRunIssue16sWorkloadsAtTheirPoints(t *testing.T) {
	for _, c := range []struct {
		plan   Plan
		points map[string][]string // workload of the points → their names
	}{
		{Full, map[string][]string{
			pacedPingWorkload: {"n=1000/10ms", "n=1000/closed"},
			udpRRWorkload:     {"n=1", "n=100"},
			overloadWorkload:  {"n=1000", "n=5000"},
			daemonBulk:        {"up/1", "up/4", "down/1", "down/4"},
			daemonRR:          {"n=1", "n=100"},
		}},
		{Quick, map[string][]string{
			pacedPingWorkload: {"n=1/10ms", "n=1/closed"},
			udpRRWorkload:     {"n=1"},
			overloadWorkload:  {"n=100"},
			daemonBulk:        {"up/1", "down/1"},
			daemonRR:          {"n=1"},
		}},
	} {
		s := &Suite{Plan: c.plan}
		got := map[string][]string{}
		for _, g := range s.groups() {
			for _, p := range g.points {
				w := p.workloadOf(g)
				if _, ok := c.points[w]; !ok {
					continue
				}
				got[w] = append(got[w], p.name)
				if daemon := w == daemonBulk || w == daemonRR; daemon != slices.Equal(g.stacks, []string{"gonet"}) {
					t.Errorf("%s plan: %s runs on %v", c.plan.Name, w, g.stackList())
				}
				if w == overloadWorkload && !g.isolated {
					t.Errorf("%s plan: the overload's points share a set-up", c.plan.Name)
				}
			}
		}
		for w, want := range c.points {
			if !slices.Equal(got[w], want) {
				t.Errorf("%s plan: %s points %v, want %v", c.plan.Name, w, got[w], want)
			}
		}
	}
}

// -only daemon runs the daemon's group, both of its workloads.
func TestOnlyDaemonSelectsTheDaemonsGroup(t *testing.T) {
	s := &Suite{Plan: Quick, Only: []string{daemonWorkload}}
	gs := s.selected(s.groups())
	if len(gs) != 1 || gs[0].workload != daemonWorkload || len(gs[0].points) != 3 {
		t.Fatalf("groups %+v: want the daemon's alone, with its three points", gs)
	}
}

// A new workload that produced no numbers fails -check like any other.
func TestCheckWantsNumbersFromIssue16sWorkloads(t *testing.T) {
	ok := map[string]float64{"p99_us": 1}
	res := Results{
		Workloads: []string{overloadWorkload, daemonBulk},
		Records: []Record{
			{Workload: overloadWorkload, Point: "n=1000", Stack: "gonet", Error: "no request answered"},
			{Workload: overloadWorkload, Point: "n=1000", Stack: "kernel", Metrics: ok},
		},
	}
	missing, _ := Check(res)
	want := []string{"overload n=1000 on gonet: no request answered", "daemon-bulk: not run"}
	if !slices.Equal(missing, want) {
		t.Errorf("missing %q, want %q", missing, want)
	}
}

// rec is a record of one repetition with these metrics.
func rec(workload, point, stack string, m map[string]float64) Record {
	return Record{Workload: workload, Point: point, Stack: stack, Rep: 1, Metrics: m}
}

func TestIssue16TargetsAreJudgedAgainstTheirPeers(t *testing.T) {
	res := Results{Records: []Record{
		rec("ping", "n=1", "gonet", map[string]float64{"mean_us": 100}),
		// 2.5× the 1-pinger figure and below gVisor: met.
		rec(pacedPingWorkload, "n=1000/10ms", "gonet", map[string]float64{"mean_us": 250}),
		rec(pacedPingWorkload, "n=1000/10ms", "gvisor", map[string]float64{"mean_us": 300}),
		rec(pacedPingWorkload, "n=1000/10ms", "kernel", map[string]float64{"mean_us": 10}),
		// 4× the 1-pinger figure: not met, though below gVisor.
		rec(pacedPingWorkload, "n=1000/closed", "gonet", map[string]float64{"mean_us": 400}),
		rec(pacedPingWorkload, "n=1000/closed", "gvisor", map[string]float64{"mean_us": 500}),
		rec("rr", "n=100", "gonet", map[string]float64{"transactions_s": 130}),
		rec("rr", "n=100", "gvisor", map[string]float64{"transactions_s": 100}),
		rec(daemonRR, "n=100", "gonet", map[string]float64{"transactions_s": 120}),
		rec("bulk", "up/1", "gvisor", map[string]float64{"gbit_s": 10}),
		rec("bulk", "up/1", "kernel", map[string]float64{"gbit_s": 20}),
		rec(daemonBulk, "up/1", "gonet", map[string]float64{"gbit_s": 14}),
		rec(overloadWorkload, "n=1000", "gonet", map[string]float64{"link_drops": 0, "client_retrans": 0, "stack_retrans": 3, "p99_us": 900}),
		rec(overloadWorkload, "n=1000", "kernel", map[string]float64{"p99_us": 1000}),
	}}
	r := newReport(res)
	got := map[string]string{}
	for _, tg := range r.issue16Targets() {
		got[tg.what] = tg.met
	}
	for what, want := range map[string]string{
		"Ping, 1000 pingers, 10ms pace, mean":                                                        "✅ met",
		"Ping, 1000 pingers, closed loop, mean":                                                      "❌ not met",
		"1-byte request-response, 100 conns, transactions/s":                                         "✅ met",
		"The daemon's echo, 100 conns, transactions/s":                                               "❌ not met",
		"The daemon's bulk TCP kernel→discard, 1 stream(s)":                                          "❌ not met",
		"Overload, 1000 bursty connections: frames dropped at the TAP (any repetition)":              "✅ met",
		"Overload, 1000 bursty connections: retransmissions, kernel client + GoNet (any repetition)": "❌ not met",
		"Overload, 1000 bursty connections: p99 latency":                                             "✅ met",
	} {
		if got[what] != want {
			t.Errorf("%q: %q, want %q (all: %v)", what, got[what], want, got)
		}
	}
	next := r.issue16Sections(r.nextSection())
	md := r.b.String()
	for _, want := range []string{"## 8. Small packets (issue 16)", "## 9. Overload: many connections at once (issue 16)",
		"## 10. The daemon through its own services (issue 16)", "| kernel→discard, 1 stream(s), Gbit/s | 14.0 | n/a | 10.0 | 20.0 | – | 1.40× | 0.70× |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if next != 11 {
		t.Errorf("next section %d, want 11", next)
	}
}

// A missed closed-loop ping, paced ping and overload p99 are explained
// from the run's own figures: Little's law for the closed loop, the paced
// load over what the closed loop answers, the burst's time for overload.
func TestWhyIssue16ExplainsFromTheRunsFigures(t *testing.T) {
	res := Results{Records: []Record{
		rec("ping", "n=1", "gonet", map[string]float64{"mean_us": 200}),
		rec("ping", "n=1", "kernel", map[string]float64{"mean_us": 25}),
		rec(pacedPingWorkload, "n=1000/10ms", "gonet", map[string]float64{"mean_us": 3000}),
		rec(pacedPingWorkload, "n=1000/closed", "gonet", map[string]float64{"mean_us": 5000, "replies_s": 200000}),
		rec(pacedPingWorkload, "n=1000/closed", "gvisor", map[string]float64{"mean_us": 8000, "replies_s": 125000}),
		rec(pacedPingWorkload, "n=1000/closed", "kernel", map[string]float64{"mean_us": 800, "replies_s": 1250000}),
		rec(overloadWorkload, "n=1000", "gonet", map[string]float64{"p99_us": 14000, "burst_p50_us": 12000, "transactions_s": 50000}),
		rec(overloadWorkload, "n=1000", "kernel", map[string]float64{"p99_us": 7000, "burst_p50_us": 6000, "transactions_s": 90000}),
	}}
	r := newReport(res)
	r.whyIssue16(map[string]bool{"ping-closed": true, "ping-paced": true, "overload-p99": true})
	md := r.b.String()
	for _, want := range []string{
		"GoNet answered 200000/s, gVisor 125000/s, the kernel 1250000/s",
		"(200 µs) would take 1666667/s, more than the kernel answered, whose own closed loop is 32× its one-pinger mean",
		"at 1000 connections a whole burst took GoNet 12000 µs (median) and the kernel 6000 µs",
		"and the paced points' too (below)",
		// 1000 pingers every 10 ms offer 100000/s: half of what GoNet
		// answers at most, 80% of gVisor's, a tenth of the kernel's.
		"offer 100000 echoes/s. What each stack answers at most (its closed loop at as many pingers) puts that at: GoNet 200000/s, a load of 50%; gVisor 125000/s, a load of 80%; the kernel 1250000/s, a load of 8%.",
		"GoNet's repetitions ranged 3000–3000 µs (median 3000) while its one-pinger mean was 200 µs",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the explanation lacks %q:\n%s", want, md)
		}
	}
}

// Issue 16's targets on the bulk workload: four streams at least 1.3× one
// in each direction, and CPU per GB no more than gVisor's.
func TestIssue16BulkTargets(t *testing.T) {
	res := Results{Records: []Record{
		rec("bulk", "up/1", "gonet", map[string]float64{"gbit_s": 10, "cpu_s_per_gb": 1.0}),
		rec("bulk", "up/4", "gonet", map[string]float64{"gbit_s": 14, "cpu_s_per_gb": 1.5}),
		rec("bulk", "up/1", "gvisor", map[string]float64{"gbit_s": 8, "cpu_s_per_gb": 1.2}),
		rec("bulk", "up/4", "gvisor", map[string]float64{"gbit_s": 9, "cpu_s_per_gb": 1.2}),
		rec("bulk", "down/1", "gonet", map[string]float64{"gbit_s": 30}),
		rec("bulk", "down/4", "gonet", map[string]float64{"gbit_s": 32}),
	}}
	r := newReport(res)
	got := map[string]string{}
	for _, tg := range r.issue16BulkTargets() {
		got[tg.what] = tg.met + " " + tg.gonet
	}
	for what, want := range map[string]string{
		"Bulk TCP kernel→stack, 4 streams over 1 (both cores)":   "✅ met 1.40×",
		"Bulk TCP stack→kernel, 4 streams over 1 (both cores)":   "❌ not met 1.07×",
		"CPU seconds per GB, bulk TCP kernel→stack, 1 stream(s)": "✅ met 1.00 s",
		"CPU seconds per GB, bulk TCP kernel→stack, 4 stream(s)": "❌ not met 1.50 s",
	} {
		if got[what] != want {
			t.Errorf("%q: %q, want %q (all: %v)", what, got[what], want, got)
		}
	}
	r.whyIssue16(map[string]bool{"bulk-streams": true, "bulk-cpu": true})
	for _, want := range []string{"stack→kernel 1.07×", "kernel→stack, 4 stream(s) 1.50 s against 1.20"} {
		if !strings.Contains(r.b.String(), want) {
			t.Errorf("the explanation lacks %q:\n%s", want, r.b.String())
		}
	}
}
