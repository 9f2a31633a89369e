package suite

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/link/fault"
)

func TestJainsIndexIsOneForEqualSharesAndHalfForOneTakingAll(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{50, 50}, 1},
		{[]float64{100, 0}, 0.5},
		{[]float64{75, 25}, 0.8},
		{[]float64{10, 10, 10, 0}, 0.75},
	} {
		if got := jain(c.xs...); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if got := jain(0, 0); !math.IsNaN(got) {
		t.Errorf("jain of nothing delivered = %v, want NaN (no index)", got)
	}
}

// The spec the suite hands pathemu is the path: link/fault reads it back
// as half the round trip each way, the rate, a buffer of the path's
// bandwidth-delay products, the loss and the seed.
func TestPathSpecReadsBackAsThePath(t *testing.T) {
	for _, p := range IssuePaths {
		c, err := fault.ParseSpec(p.impair(7))
		if err != nil {
			t.Fatalf("path %s: %v", p.Name, err)
		}
		want := fault.Config{Delay: p.RTT / 2, Rate: int64(p.RateMbit * 1e6), Queue: int(p.QueueBDP * float64(p.BDP())), Loss: p.Loss, Seed: 7}
		if c != want {
			t.Errorf("path %s: %q reads back as %+v, want %+v", p.Name, p.impair(7), c, want)
		}
	}
	if b := IssuePaths[2].BDP(); b != 12_500_000 {
		t.Errorf("BDP of 1 Gbit/s over 100 ms = %d bytes, want 12500000", b)
	}
}

// The full plan runs the calibration once per shape of path (a's two
// variants share one), every path's short and long transfers both ways,
// and the sharing point on (a); the quick one a calibration and one short
// transfer. -only picks the family or one of its workloads.
func TestPathsGroupsCoverTheIssuesGrid(t *testing.T) {
	s := &Suite{Plan: Full}
	var cal, share []string
	points := map[string]int{}
	for _, g := range s.pathsGroups() {
		if g.family != pathsFamily {
			t.Errorf("group %s outside the family", g.workload)
		}
		for _, p := range g.points {
			switch w := p.workloadOf(g); w {
			case pathCal:
				cal = append(cal, p.name)
				if !slices.Equal(g.stackList(), []string{"kernel"}) {
					t.Errorf("calibration runs on %v, want the kernel alone", g.stackList())
				}
			case pathShare:
				share = append(share, p.name)
			default:
				points[w]++
			}
		}
	}
	if !slices.Equal(cal, []string{"a0", "b", "c"}) || !slices.Equal(share, []string{"a0"}) {
		t.Errorf("calibrations %v, sharing %v; want [a0 b c] and [a0]", cal, share)
	}
	if points[pathShort] != 8 || points[pathLong] != 8 {
		t.Errorf("points %v, want 8 short and 8 long (4 paths, 2 directions)", points)
	}

	q := &Suite{Plan: Quick}
	var got []string
	for _, g := range q.pathsGroups() {
		for _, p := range g.points {
			got = append(got, p.workloadOf(g)+" "+p.name)
		}
	}
	if !slices.Equal(got, []string{"path-cal a0", "path-1mb a0/down"}) {
		t.Errorf("quick plan's points %v", got)
	}

	for _, c := range []struct {
		only []string
		want int
	}{{[]string{"paths"}, 8}, {[]string{pathShort}, 4}, {[]string{pathShare, pathCal}, 4}} {
		s := &Suite{Plan: Full, Only: c.only}
		if got := len(s.selected(s.pathsGroups())); got != c.want {
			t.Errorf("-only %v: %d groups, want %d", c.only, got, c.want)
		}
	}
}

// cannedPaths is a paths-only run: calibrated paths, GoNet short of the
// kernel's goodput on the lossy path and slower on its 1 MB, a long
// transfer GoNet did not finish, and a fair share.
func cannedPaths() Results {
	plan := Full
	var recs []Record
	add := func(w, pt, st string, m map[string]float64) {
		recs = append(recs, Record{Workload: w, Point: pt, Stack: st, Rep: 1, Metrics: m})
	}
	for _, pt := range []string{"a0", "b", "c"} {
		add(pathCal, pt, "kernel", map[string]float64{"rtt_ms": 40.2, "rtt_set_ms": 40, "rtt_err_pct": 0.5, "rate_set_mbit": 100,
			"wire_mbit_s": 99, "rate_err_pct": -1, "goodput_mbit_s": 94, "goodput_of_max_pct": 98})
	}
	for _, st := range []string{"gonet", "gvisor", "kernel"} {
		for _, dir := range []string{"down", "up"} {
			good, secs := 94.0, 0.5
			if st == "gonet" && dir == "down" {
				good, secs = 80, 0.6
			}
			add(pathLong, "a1/"+dir, st, map[string]float64{"goodput_mbit_s": good, "retrans_pct": 1})
			add(pathShort, "a1/"+dir, st, map[string]float64{"seconds": secs, "retrans_pct": 1})
			done := 1.0
			if st == "gonet" && dir == "up" {
				done = 0
			}
			add(pathLong, "a0/"+dir, st, map[string]float64{"goodput_mbit_s": 94, "seconds": 9, "done": done})
		}
		add(pathShare, "a0", st, map[string]float64{"jain": 0.99, "stack_mbit_s": 45, "rival_mbit_s": 47})
	}
	return Results{Plan: plan, Records: recs, Workloads: pathWorkloads, Paths: &PathsRun{Started: time.Unix(0, 0), Reps: 1}}
}

func TestReportJudgesThePathsTargets(t *testing.T) {
	md := writeReport(t, cannedPaths())
	if !strings.Contains(md, "TCP on real-world paths") || strings.Count(md, "✅ calibrated") != 3 {
		t.Fatalf("no paths section with three calibrated paths:\n%s", md)
	}
	for _, c := range []struct{ row, verdict string }{
		{"| Goodput, (a) 100 Mbit/s, 40ms, 1% loss, buffer 1 BDP, stack→kernel", "❌ not met"},
		{"| Goodput, (a) 100 Mbit/s, 40ms, 1% loss, buffer 1 BDP, kernel→stack", "✅ met"},
		{"| 1 MB transfer time, (a) 100 Mbit/s, 40ms, 1% loss, buffer 1 BDP, stack→kernel", "❌ not met"},
		{"| Sharing with a kernel CUBIC flow, Jain's index, (a) 100 Mbit/s, 40ms, no loss", "✅ met"},
	} {
		row := glanceRow(md, strings.TrimPrefix(c.row, "| "))
		if !strings.HasSuffix(row, c.verdict+" |") {
			t.Errorf("row %q: %q, want %s", c.row, row, c.verdict)
		}
	}
	if !strings.Contains(md, "> 30s") {
		t.Errorf("the unfinished 100 MB transfer is not shown as stopped at the cap")
	}
}

// A paths-only run has no profiles to check, and a calibration off by more
// than a few percent says so.
func TestPathsOnlyRunNeedsNoProfilesAndShowsAnUncalibratedPath(t *testing.T) {
	res := cannedPaths()
	if missing, _ := Check(res); len(missing) != 0 {
		t.Errorf("Check of a paths-only run: %v", missing)
	}
	for i, r := range res.Records {
		if r.Workload == pathCal && r.Point == "b" {
			res.Records[i].Metrics["wire_mbit_s"] = 610
			res.Records[i].Metrics["rate_err_pct"] = -39
		}
	}
	md := writeReport(t, res)
	if !strings.Contains(md, "❌ off") || !strings.Contains(md, "**Path b is not reproduced:**") {
		t.Errorf("an uncalibrated path is not reported as such")
	}
}

// A paths-only run replaces the earlier run's paths records and keeps the
// rest, gateways included.
func TestAPathsOnlyRunKeepsTheEarlierRecords(t *testing.T) {
	dir := t.TempDir()
	earlier := Results{
		Records: []Record{
			{Workload: "bulk", Point: "up/1", Stack: "gonet", Metrics: map[string]float64{"gbit_s": 6}},
			{Workload: gwBulk, Point: "mtu=1500/up/1", Stack: "gonet", Metrics: map[string]float64{"gbit_s": 1}},
			{Workload: pathLong, Point: "a0/down", Stack: "gonet", Metrics: map[string]float64{"goodput_mbit_s": 1}},
		},
		Gateway: &GatewayRun{Reps: 2},
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
		Records:   []Record{{Workload: pathLong, Point: "a0/down", Stack: "gonet", Metrics: map[string]float64{"goodput_mbit_s": 90}}},
		Workloads: []string{pathLong},
		Paths:     &PathsRun{Reps: 1},
	}
	if err := s.mergeEarlier(); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, r := range s.res.Records {
		got[r.Workload] += r.Metrics["gbit_s"] + r.Metrics["goodput_mbit_s"]
	}
	if len(s.res.Records) != 3 || got["bulk"] != 6 || got[gwBulk] != 1 || got[pathLong] != 90 {
		t.Errorf("merged records %+v", s.res.Records)
	}
	if s.res.Gateway == nil || s.res.Gateway.Reps != 2 || s.res.Paths == nil {
		t.Errorf("merged runs: gateway %+v, paths %+v", s.res.Gateway, s.res.Paths)
	}
}

// Missed path targets are explained point by point from the run: the
// goodput gap with each side's resends, the 1 MB gap by how far it is.
func TestWhyPathsNamesEachMissedPoint(t *testing.T) {
	r := newReport(cannedPaths())
	r.whyPaths(r.pathTargets())
	md := r.b.String()
	for _, want := range []string{
		"- **Goodput on the paths** (one repetition per path): (a) 100 Mbit/s, 40ms, 1% loss, buffer 1 BDP, stack→kernel: 0.85× of the kernel's; the sender resent 1.00% of its segments beside the kernel's 1.00%",
		"- **1 MB, further off** ((a) 100 Mbit/s, 40ms, 1% loss, buffer 1 BDP, stack→kernel 1.20×, one repetition per path)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the explanation lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Sharing") {
		t.Errorf("a met share is explained:\n%s", md)
	}
}
