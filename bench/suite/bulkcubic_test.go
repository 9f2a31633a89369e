package suite

import (
	"slices"
	"strings"
	"testing"
)

// bulk-cubic runs bulk's points again on set-ups of its own (SetupCC),
// after bulk and its IPv6 variant, and a plan without its points has no
// such group.
func TestBulkCubicRunsBulksPointsOnItsOwnSetUps(t *testing.T) {
	for _, c := range []struct {
		plan Plan
		want []string
	}{
		{Full, []string{"up/1", "up/4", "down/1", "down/4"}},
		{Quick, []string{"up/1", "down/1"}},
		{Plan{BulkStreams: []int{1}}, nil},
	} {
		s := &Suite{Plan: c.plan}
		var order, got []string
		for _, g := range s.groups() {
			order = append(order, g.workload)
			if g.workload != "bulk-cubic" {
				continue
			}
			if g.setup == nil {
				t.Errorf("%s plan: bulk-cubic has the default set-up, not SetupCC", c.plan.Name)
			}
			for _, p := range g.points {
				got = append(got, p.name)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s plan: bulk-cubic points %v, want %v", c.plan.Name, got, c.want)
		}
		if c.want != nil && slices.Index(order, "bulk-cubic") < slices.Index(order, "bulk6") {
			t.Errorf("%s plan: groups %v: bulk-cubic before bulk6, which must follow bulk", c.plan.Name, order)
		}
	}
}

// The report sets each stack's throughput with every sender on CUBIC
// beside its throughput with each sender on its own default, holds the
// CUBIC points to bulk's targets, and explains a BBR sender only where the
// machine's kernel runs BBR.
func TestReportSetsCUBICBesideEachSendersDefault(t *testing.T) {
	// bulk up/1: GoNet 12 Gbit/s, gVisor and the kernel 10.
	res := withBulkCubic(cannedFamilies(12, 12), 30, 24, 36)
	for _, c := range []struct {
		cc      string
		explain bool
	}{{"bbr", true}, {"cubic", false}} {
		t.Run(c.cc, func(t *testing.T) {
			res.Machine.CC = c.cc
			md := writeReport(t, res)
			if !strings.Contains(md, "### With every sender on CUBIC") {
				t.Fatalf("no CUBIC subsection:\n%s", md)
			}
			// GoNet 30/12, gVisor 24/10, the kernel 36/10.
			if want := "| kernel→stack, 1 stream(s) | 2.50× | 2.40× | 3.60× |"; !strings.Contains(md, want) {
				t.Errorf("no row %q", want)
			}
			// 30 Gbit/s: 1.25× gVisor's 24, 0.83× the kernel's 36.
			row := glanceRow(md, "Bulk TCP (every sender CUBIC) kernel→stack, 1 stream(s)")
			if !strings.HasSuffix(row, "| 30.0 Gbit/s | 1.25× | 0.83× | ✅ met |") {
				t.Errorf("target row %q", row)
			}
			if got := strings.Contains(md, "BBR keeps about twice"); got != c.explain {
				t.Errorf("machine's default %s: BBR explained %v, want %v", c.cc, got, c.explain)
			}
		})
	}
}

// Without bulk-cubic points (an older run) the report has no such
// subsection and no such target.
func TestReportWithoutBulkCubicHasNoCUBICSubsection(t *testing.T) {
	md := writeReport(t, cannedFamilies(12, 12))
	if strings.Contains(md, "every sender CUBIC") || strings.Contains(md, "With every sender on CUBIC") {
		t.Errorf("a report without bulk-cubic points mentions it")
	}
}

// When bulk misses under a BBR sender, the why section gives GoNet's
// figure with every sender on CUBIC beside it.
func TestWhyBulkGivesTheCUBICFigureUnderABBRSender(t *testing.T) {
	res := withBulkCubic(cannedFamilies(8, 8), 30, 24, 36)
	for _, c := range []struct {
		cc   string
		want bool
	}{{"bbr", true}, {"cubic", false}} {
		res.Machine.CC = c.cc
		md := writeReport(t, res)
		if !strings.Contains(md, "- **Bulk TCP**:") {
			t.Fatalf("%s: no why for the missed bulk target", c.cc)
		}
		got := strings.Contains(md, "with every sender on CUBIC GoNet took 30.0 Gbit/s on one stream, 0.83× the kernel's")
		if got != c.want {
			t.Errorf("machine's default %s: CUBIC figure in the why %v, want %v", c.cc, got, c.want)
		}
	}
}

// withBulkCubic adds bulk-cubic's up/1 point to res, each stack at the
// throughput given.
func withBulkCubic(res Results, gonet, gvisor, kernel float64) Results {
	for st, g := range map[string]float64{"gonet": gonet, "gvisor": gvisor, "kernel": kernel} {
		res.Records = append(res.Records, Record{Workload: "bulk-cubic", Point: "up/1", Stack: st, Rep: 1,
			Metrics: map[string]float64{"gbit_s": g}})
	}
	return res
}
