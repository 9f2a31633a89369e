package suite

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/gonetstack/gonet/link/shm"
)

var mkColor = map[string]color.Color{
	setupRing:   stackColor["gonet"],
	setupBridge: color.RGBA{R: 0x8e, G: 0x24, B: 0xaa, A: 0xff},
	setupTAPs:   color.RGBA{R: 0x2e, G: 0x7d, B: 0x32, A: 0xff},
	setupVeth:   stackColor["kernel"],
}

var mkTitle = map[string]string{
	setupRing:   "GoNet, direct ring",
	setupBridge: "GoNet, gonet bridge",
	setupTAPs:   "GoNet, TAPs + Linux bridge",
	setupVeth:   "kernel, veth",
}

// mkSetups are the set-ups this report has records of, in the family's
// order.
func (r *report) mkSetups() []string { return r.mkSetupsOf(multikernelWorkloads...) }

// mkSetupsOf are the set-ups with records of these workloads.
func (r *report) mkSetupsOf(workloads ...string) []string {
	var out []string
	for _, st := range MultikernelSetups {
		for _, rec := range r.res.Records {
			if rec.Stack == st && slices.Contains(workloads, rec.Workload) {
				out = append(out, st)
				break
			}
		}
	}
	return out
}

// mkPointName is a point of the family as the tables name it.
func mkPointName(pt string) string {
	switch {
	case strings.HasPrefix(pt, "P="):
		return strings.TrimPrefix(pt, "P=") + " stream(s)"
	case strings.HasPrefix(pt, "ring="):
		return strings.TrimPrefix(pt, "ring=") + " descriptors"
	case strings.HasPrefix(pt, "n="):
		return strings.TrimPrefix(pt, "n=") + " connection"
	}
	size, rate := udpPoint(pt)
	switch rate {
	case "max":
		return size + " B, unpaced (saturation)"
	case "0.8sat":
		return size + " B at 80% of saturation"
	}
	return size + " B at " + rate + " Mbit/s"
}

// udpPoint splits "size=64,rate=100" into "64" and "100".
func udpPoint(pt string) (size, rate string) {
	for f := range strings.SplitSeq(pt, ",") {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "size":
			size = v
		case "rate":
			rate = v
		}
	}
	return size, rate
}

// mkRatio is a's median over b's at a point, or "–".
func (r *report) mkRatio(workload, pt, a, b, metric string) (float64, string) {
	x, ok1 := r.get(workload, pt, a, metric)
	y, ok2 := r.get(workload, pt, b, metric)
	if !ok1 || !ok2 || y.Med == 0 {
		return math.NaN(), "–"
	}
	v := x.Med / y.Med
	return v, fmt.Sprintf("%.2f×", v)
}

// mkTable writes a row per point of a workload: each set-up's figure and,
// when ratios, the direct ring's over the TAPs' and over the kernel's.
func (r *report) mkTable(workload, metric, unit string, ratios bool) {
	sts := r.mkSetupsOf(workload)
	r.p("| point |")
	for _, st := range sts {
		r.p(" %s |", mkTitle[st])
	}
	if ratios {
		r.p(" ring/TAPs | ring/veth |")
	}
	n := len(sts)
	if ratios {
		n += 2
	}
	r.p("\n|---|%s\n", strings.Repeat("---|", n))
	for _, pt := range r.points[workload] {
		r.p("| %s |", mkPointName(pt))
		for _, st := range sts {
			r.p(" %s |", r.cell(workload, pt, st, metric, 1))
		}
		if ratios {
			_, t := r.mkRatio(workload, pt, setupRing, setupTAPs, metric)
			_, v := r.mkRatio(workload, pt, setupRing, setupVeth, metric)
			r.p(" %s | %s |", t, v)
		}
		r.p("\n")
	}
	r.p("\n*%s; median of the repetitions [min–max].*\n\n", unit)
}

// mkGoal is one of the goals for the family, judged.
type mkGoal struct{ what, goal, got, met, why string }

// mkGoals judges the goals: over a direct ring, TCP at least twice
// the TAPs' and at least the kernel's, request-response at most the
// kernel's, and no UDP loss below 80% of saturation.
func (r *report) mkGoals() []mkGoal {
	var gs []mkGoal
	med := func(w, pt, st, m string) (float64, bool) {
		s, ok := r.get(w, pt, st, m)
		return s.Med, ok
	}
	cpu := func(w, pt, st string) string {
		if v, ok := med(w, pt, st, "machine_cpu_frac"); ok {
			return fmt.Sprintf("%.0f%%", 100*v)
		}
		return "?"
	}
	ratioGoal := func(w, pt, other, metric, unit string, min, max float64, goal string) mkGoal {
		v, s := r.mkRatio(w, pt, setupRing, other, metric)
		g := mkGoal{goal: goal, got: s}
		a, okA := med(w, pt, setupRing, metric)
		b, okB := med(w, pt, other, metric)
		switch {
		case math.IsNaN(v):
			g.met = "n/a (no figure for one of the two)"
			return g
		case v >= min && v <= max:
			g.met = "✅ met"
		default:
			g.met = "❌ not met"
		}
		if okA && okB {
			g.why = fmt.Sprintf("direct ring %s %s against %s %s; the machine's CPUs were %s and %s busy",
				num(a), unit, num(b), unit, cpu(w, pt, setupRing), cpu(w, pt, other))
		}
		return g
	}
	for _, pt := range r.points[mkTCP] {
		g := ratioGoal(mkTCP, pt, setupTAPs, "gbit_s", "Gbit/s", 2, math.Inf(1), "≥ 2× TAPs + Linux bridge")
		g.what = "TCP, " + mkPointName(pt)
		gs = append(gs, g)
		g = ratioGoal(mkTCP, pt, setupVeth, "gbit_s", "Gbit/s", 1, math.Inf(1), "≥ kernel over veth")
		g.what = "TCP, " + mkPointName(pt)
		gs = append(gs, g)
	}
	for _, pt := range r.points[mkRR] {
		g := ratioGoal(mkRR, pt, setupVeth, "mean_us", "µs", 0, 1, "≤ kernel over veth")
		g.what = "1-byte request-response, mean"
		if p50, ok := med(mkRR, pt, setupRing, "p50_us"); ok {
			if k, ok := med(mkRR, pt, setupVeth, "p50_us"); ok {
				g.why += fmt.Sprintf("; medians %s and %s µs", num(p50), num(k))
			}
		}
		if w, ok := med(mkRR, pt, setupRing, "server_wakeups_per_transaction"); ok {
			sl, _ := med(mkRR, pt, setupRing, "server_sleeps_per_transaction")
			g.why += fmt.Sprintf("; per transaction the serving GoNet's ring reader slept %s times and it woke its peer %s times", num(sl), num(w))
			if sl >= 0.5 {
				g.why += " (an eventfd write and the peer's goroutine scheduled: each byte finds the other side asleep)"
			} else {
				g.why += " (the reader polls an empty ring before it sleeps, link/shm's Options.Spin, and an answer comes within it)"
			}
		}
		gs = append(gs, g)
	}
	for _, size := range r.mkUDPSizes() {
		g := mkGoal{what: "UDP " + size + " B, no loss below 80% of saturation", goal: "0% at every rate ≤ 0.8 × saturation"}
		sat, ok := r.mkSaturation(size, setupRing)
		if !ok {
			g.met = "n/a (no saturation measured)"
			gs = append(gs, g)
			continue
		}
		var judged, lossy []string
		for _, pt := range r.points[mkUDP] {
			sz, _ := udpPoint(pt)
			off, ok := med(mkUDP, pt, setupRing, "offered_mbit_s")
			if sz != size || !ok || strings.HasSuffix(pt, "rate=max") || off > 0.8*sat*1.001 {
				continue
			}
			s, _ := r.get(mkUDP, pt, setupRing, "loss_pct")
			judged = append(judged, mkPointName(pt))
			if s.Max > 0 {
				where := ""
				lost, _ := med(mkUDP, pt, setupRing, "lost")
				if q, ok := med(mkUDP, pt, setupRing, "server_rcvbuf_drops"); ok && lost > 0 {
					where = fmt.Sprintf("; the server's full socket queue dropped %.0f%% of them", 100*math.Min(1, q/lost))
				}
				lossy = append(lossy, fmt.Sprintf("%s: %s%% lost (worst repetition; offered %s Mbit/s%s)", mkPointName(pt), num(s.Max), num(off), where))
			}
		}
		g.got = fmt.Sprintf("saturation %s Mbit/s", num(sat))
		if len(judged) > 0 && len(lossy) == 0 {
			g.got += ", no loss"
		}
		switch {
		case len(judged) == 0:
			g.met = "n/a (no point below 80%)"
		case len(lossy) == 0:
			g.met = "✅ met"
			g.why = "no loss at " + strings.Join(judged, ", ")
		default:
			g.met = "❌ not met"
			g.why = strings.Join(lossy, "; ")
		}
		gs = append(gs, g)
	}
	return gs
}

// mkSaturation is a set-up's saturation at a datagram size: the most it
// delivered at any offered rate. Mostly that is the unpaced point's, but
// a sender unpaced on the same two cores can take the CPU its receiver
// needs (and 8 KB datagrams, fragmented, lose whole datagrams for one
// fragment), so that a paced rate delivers more.
func (r *report) mkSaturation(size, setup string) (float64, bool) {
	best, ok := 0.0, false
	for _, pt := range r.points[mkUDP] {
		if sz, _ := udpPoint(pt); sz != size {
			continue
		}
		if s, have := r.get(mkUDP, pt, setup, "recv_mbit_s"); have {
			best, ok = math.Max(best, s.Med), true
		}
	}
	return best, ok
}

// mkUDPSizes are the datagram sizes of the UDP points, in run order.
func (r *report) mkUDPSizes() []string {
	var out []string
	for _, pt := range r.points[mkUDP] {
		if s, _ := udpPoint(pt); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// multikernelSection writes the family's part of the report as section
// number section, and returns the next number.
func (r *report) multikernelSection(section int, plots map[string]string, rel func(string) string) int {
	if len(r.mkSetups()) == 0 {
		return section
	}
	mp := r.res.Plan.Multikernel
	r.p("## %d. Two stacks in two processes: a ring, a bridge, TAPs, the kernel (issue 13)\n\n", section)
	if m := r.res.Multikernel; m != nil {
		r.p("Measured by `gonet-bench run -only multikernel` (or `make bench`) on %s in %s of wall time (shared with the other families when run with them), %d repetitions, GoNet %s, the stock %s. The repetitions interleave the set-ups, starting with a different one each time.\n\n",
			m.Started.UTC().Format("2006-01-02 15:04 UTC"), (time.Duration(m.WallS) * time.Second).String(), m.Reps, m.GoNet, m.Iperf3)
	}
	r.p("The experiments of the co-kernel systems GoNet descends from, where each partition runs a network stack of its own, between two processes. Client 10.79.0.1, server 10.79.0.2, in a namespace of each set-up's own:\n\n")
	r.p("- **%s**: `gonet up -ring-listen SOCK -serve iperf3,echo` and the client attached with `-ring SOCK`, one shared-memory ring each way (link/shm); both ends offer offloads, so TCP crosses as 64 KiB super-segments. -ring-listen takes one peer, so each point starts a fresh pair (a point that fails, the client having found the server's services not yet listening, is tried once more).\n", mkTitle[setupRing])
	r.p("- **%s**: `gonet bridge -ring-listen SOCK`, the server and each client attached to it as ring ports; the bridge's ports offer no offloads (a frame from one may leave by any port), so frames are at most the 1500-byte MTU.\n", mkTitle[setupBridge])
	r.p("- **%s**: two TAP devices made with `ip tuntap` as ports of a Linux bridge, GoNet on each (`-tap`, with `IFF_VNET_HDR` and TSO, as the daemon opens them); the bridge hands super-segments from one TAP to the other.\n", mkTitle[setupTAPs])
	r.p("- **%s**: the kernel in two namespaces joined by a veth pair (MTU 1500, the default offloads), the stock `iperf3 -s` and `iperf3 -c`; request-response with the suite's load generator against its kernel server.\n\n", mkTitle[setupVeth])
	r.p("TCP and UDP are iperf3 tests, `-J` read for the receiver's figures: the client end is `gonet iperf3 -c` (GoNet's iperf3 client, its own process with its own stack) against `-serve iperf3`, and the stock tool on the kernel. TCP runs %v with 1 and 4 streams (`-P`), client to server. ", mp.TCPDur)
	r.p("UDP offers `-l` bytes a datagram at `-b` for %v: first unpaced (`-b %s`, more than either sender reaches), whose received rate is the set-up's saturation at that size, then at %s Mbit/s and at 80%% of the saturation just measured; loss is iperf3's (the receiver's gaps over what was sent), jitter RFC 3550's as iperf3 computes it. The goal takes as **saturation** the most a set-up delivered at a size at any offered rate: usually the unpaced point's, but an unpaced sender on the same two cores can take the CPU its receiver needs, and a lost fragment loses a whole 8 KB datagram, so that a paced rate may deliver more. On the direct ring, where each point has a server of its own, the server's counters (in the JSON as `server.*`) say where datagrams were lost: `server_rcvbuf_drops` at its full socket queue, the rest before its stack (the sender's ring full, or its own stack). ",
		mp.UDPDur, mkMaxRate, joinFloats(mp.UDPRates))
	r.p("Request-response is 1 byte each way on one connection for %v (netperf's TCP_RR): on the GoNet set-ups from `gonet-bench gnclient`, the suite's load generator in a process with a GoNet stack of its own on the client's link, against GoNet's echo service (RFC 862), because `gonet iperf3` has no such test and a kernel socket has no place on a ring. ", mp.RRDur)
	r.p("\"Machine CPU\" in the JSON (`machine_cpu_frac`) is the share of all CPUs busy during a point: both ends and whatever joins them share the same cores.\n\n")

	r.p("### The issue's goals\n\n| workload | goal | direct ring | | why |\n|---|---|---|---|---|\n")
	for _, g := range r.mkGoals() {
		r.p("| %s | %s | %s | %s | %s |\n", g.what, g.goal, g.got, g.met, g.why)
	}
	r.p("\n*Ratios are the direct ring's median over the other set-up's.*\n\n")

	r.p("### TCP\n\n")
	r.mkTable(mkTCP, "gbit_s", "Gbit/s received", true)
	r.p("### Request-response\n\n")
	r.mkTable(mkRR, "mean_us", "mean round trip, µs", true)
	r.mkTable(mkRR, "p50_us", "median round trip, µs", true)
	r.mkTable(mkRR, "p99_us", "99th percentile round trip, µs", true)

	r.p("### UDP against offered rate\n\n")
	r.mkTable(mkUDP, "recv_mbit_s", "received Mbit/s", false)
	r.mkTable(mkUDP, "sent_mbit_s", "offered (what the sender sent) Mbit/s", false)
	r.mkTable(mkUDP, "loss_pct", "loss, % of the datagrams sent", false)
	r.mkTable(mkUDP, "jitter_us", "jitter, µs", false)
	for _, size := range r.mkUDPSizes() {
		r.plot(plots, "mk_loss_"+size, "UDP loss against offered rate, "+size+" B", rel)
		r.plot(plots, "mk_jitter_"+size, "UDP jitter against offered rate, "+size+" B", rel)
	}

	if len(r.points[mkRing]) > 0 {
		r.p("### UDP loss against the ring's size\n\n")
		r.p("The direct ring with `-ring-size N` descriptors each way (the listener's choice; the default is %d; the data area is %d MiB each way whatever N, so that from %d descriptors of 1514-byte frames the data area, not the descriptors, bounds what the ring holds), 1472-byte datagrams for %v at 80%% of the default ring's unpaced saturation at that size in the same repetition (%s Mbit/s when none was measured). The paper's figure: what a smaller ring loses when the receiver is late.\n\n",
			shm.DefaultRingSize, shm.DefaultDataSize>>20, shm.DefaultDataSize/1514+1, mp.UDPDur, num(mp.RingRate))
		r.mkTable(mkRing, "loss_pct", "loss, %", false)
		r.mkTable(mkRing, "lost", "datagrams lost", false)
		r.mkTable(mkRing, "server_rcvbuf_drops", "of those, dropped by the server's full socket queue (the rest were lost before its stack: the client's ring full)", false)
		r.mkTable(mkRing, "offered_mbit_s", "offered Mbit/s", false)
		r.mkTable(mkRing, "jitter_us", "jitter, µs", false)
		r.plot(plots, "mk_ring", "UDP loss against ring size", rel)
	}
	return section + 1
}

// joinFloats lists rates as a sentence does: "100, 300 and 1000".
func joinFloats(fs []float64) string {
	var s []string
	for _, f := range fs {
		s = append(s, strconv.FormatFloat(f, 'f', -1, 64))
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// mkSeries is, for each set-up, metric against the offered rate over a
// size's UDP points, in order of rate.
func (r *report) mkSeries(workload, metric string, keep func(pt string) bool, x func(pt, st string) (float64, bool)) map[string]xyErr {
	out := map[string]xyErr{}
	for _, st := range r.mkSetups() {
		var s xyErr
		for _, pt := range r.points[workload] {
			if !keep(pt) {
				continue
			}
			xv, ok := x(pt, st)
			v, ok2 := r.get(workload, pt, st, metric)
			if !ok || !ok2 {
				continue
			}
			s.XYs = append(s.XYs, plotter.XY{X: xv, Y: v.Med})
			s.YErrors = append(s.YErrors, struct{ Low, High float64 }{v.Med - v.Min, v.Max - v.Med})
		}
		// By rate: the unpaced point is measured first.
		idx := make([]int, len(s.XYs))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return cmpFloat(s.XYs[a].X, s.XYs[b].X) })
		var sorted xyErr
		for _, i := range idx {
			sorted.XYs = append(sorted.XYs, s.XYs[i])
			sorted.YErrors = append(sorted.YErrors, s.YErrors[i])
		}
		if len(sorted.XYs) > 0 {
			out[st] = sorted
		}
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeMultikernelPlots draws the family's figures: loss and jitter
// against the offered rate for each datagram size, a line per set-up, and
// loss against the ring's size.
func (r *report) writeMultikernelPlots(path func(string) string, add func(string, error)) {
	order := MultikernelSetups
	offered := func(pt, st string) (float64, bool) {
		s, ok := r.get(mkUDP, pt, st, "offered_mbit_s")
		return s.Med, ok
	}
	for _, size := range r.mkUDPSizes() {
		keep := func(pt string) bool { s, _ := udpPoint(pt); return s == size }
		add("mk_loss_"+size, lines("UDP loss, "+size+"-byte datagrams", "offered (Mbit/s)", "loss (%)", true, false,
			r.mkSeries(mkUDP, "loss_pct", keep, offered), path("mk_loss_"+size), order, mkColor, mkTitle))
		add("mk_jitter_"+size, lines("UDP jitter, "+size+"-byte datagrams", "offered (Mbit/s)", "jitter (µs)", true, false,
			r.mkSeries(mkUDP, "jitter_us", keep, offered), path("mk_jitter_"+size), order, mkColor, mkTitle))
	}
	if len(r.points[mkRing]) > 0 {
		size := func(pt, _ string) (float64, bool) {
			v, err := strconv.ParseFloat(strings.TrimPrefix(pt, "ring="), 64)
			return v, err == nil
		}
		add("mk_ring", lines("UDP loss against the direct ring's size (1472 B)", "descriptors each way", "loss (%)", true, false,
			r.mkSeries(mkRing, "loss_pct", func(string) bool { return true }, size), path("mk_ring"), order, mkColor, mkTitle))
	}
}
