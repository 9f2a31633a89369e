package suite

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gonetstack/gonet/bench/server"
)

// calTolerance is how far, in percent, the path's measured round trip and
// rate may be from its settings for the calibration to pass: "within a
// few %".
const calTolerance = 5

// pathSpec is the plan's path named name.
func (r *report) pathSpec(name string) (PathSpec, bool) {
	for _, p := range r.res.Plan.Paths.Paths {
		if p.Name == name {
			return p, true
		}
	}
	return PathSpec{}, false
}

// pathPointName is a paths point, "a1/down", as the tables name it.
func (r *report) pathPointName(pt string) string {
	name, dir, _ := strings.Cut(pt, "/")
	title := name
	if spec, ok := r.pathSpec(name); ok {
		title = spec.Title()
	}
	if dir == "" {
		return title
	}
	return title + ", " + pathDirName(dir)
}

// pathCell is a metric's cell, or for a long transfer some repetition did
// not finish, the cap it was stopped at.
func (r *report) pathCell(workload, pt, stack, metric string) string {
	if metric == "seconds" && workload == pathLong {
		if d, ok := r.get(workload, pt, stack, "done"); ok && d.Min == 0 {
			return fmt.Sprintf("> %v", r.res.Plan.Paths.LongCap)
		}
	}
	return r.cell(workload, pt, stack, metric, 1)
}

// pathTable is a table of a paths workload under heading (when not
// empty): a row per point that has metric, each stack's figure, and
// GoNet's ratios. Without such a point it writes nothing.
func (r *report) pathTable(heading, workload, metric, unit string) {
	var rows []string
	for _, pt := range r.points[workload] {
		have := false
		for _, st := range server.Stacks {
			_, ok := r.get(workload, pt, st, metric)
			have = have || ok || len(r.errs[aggKey{workload, pt, st}]) > 0
		}
		if metric == "seconds" && workload == pathLong {
			if spec, ok := r.pathSpec(strings.Split(pt, "/")[0]); ok && spec.Long == 0 {
				have = false
			}
		}
		if have {
			rows = append(rows, pt)
		}
	}
	if len(rows) == 0 {
		return
	}
	if heading != "" {
		r.p("### %s\n\n", heading)
	}
	r.p("| path, direction | GoNet | gVisor | kernel | GoNet/gVisor | GoNet/kernel |\n|---|---|---|---|---|---|\n")
	for _, pt := range rows {
		_, rg := r.ratio(workload, pt, "gvisor", metric)
		_, rk := r.ratio(workload, pt, "kernel", metric)
		r.p("| %s | %s | %s | %s | %s | %s |\n", r.pathPointName(pt),
			r.pathCell(workload, pt, "gonet", metric), r.pathCell(workload, pt, "gvisor", metric),
			r.pathCell(workload, pt, "kernel", metric), rg, rk)
	}
	r.p("\n*%s; median of the repetitions [min–max].*\n\n", unit)
}

// pathTargets are the targets for the paths: goodput at least 0.95×
// the kernel's on every path and direction, the short transfer no slower
// than the kernel's, and Jain's index at least 0.95 when GoNet shares a
// bottleneck with the kernel's CUBIC.
func (r *report) pathTargets() []target {
	var ts []target
	for _, pt := range r.points[pathLong] {
		g, okg := r.med(pathLong, pt, "gonet", "goodput_mbit_s")
		_, sg := r.ratio(pathLong, pt, "gvisor", "goodput_mbit_s")
		vk, sk := r.ratio(pathLong, pt, "kernel", "goodput_mbit_s")
		ts = append(ts, target{what: "Goodput, " + r.pathPointName(pt), goal: "≥ 0.95× kernel",
			gonet: num(g) + " Mbit/s", vsG: sg, vsK: sk, met: mark(vk >= 0.95, okg && !math.IsNaN(vk)), kind: "path-goodput", point: pt})
	}
	for _, pt := range r.points[pathShort] {
		g, okg := r.med(pathShort, pt, "gonet", "seconds")
		_, sg := r.ratio(pathShort, pt, "gvisor", "seconds")
		vk, sk := r.ratio(pathShort, pt, "kernel", "seconds")
		ts = append(ts, target{what: fmt.Sprintf("%s transfer time, %s", mb(r.res.Plan.Paths.Short), r.pathPointName(pt)), goal: "≤ kernel",
			gonet: num(g) + " s", vsG: sg, vsK: sk, met: mark(vk <= 1, okg && !math.IsNaN(vk)), kind: "path-short", point: pt})
	}
	for _, pt := range r.points[pathShare] {
		g, okg := r.med(pathShare, pt, "gonet", "jain")
		_, sg := r.ratio(pathShare, pt, "gvisor", "jain")
		_, sk := r.ratio(pathShare, pt, "kernel", "jain")
		ts = append(ts, target{what: "Sharing with a kernel CUBIC flow, Jain's index, " + r.pathPointName(pt), goal: "≥ 0.95",
			gonet: fmt.Sprintf("%.3f", g), vsG: sg, vsK: sk, met: mark(g >= 0.95, okg), kind: "path-share", point: pt})
	}
	return ts
}

// calibrated reports whether the path at pt reproduced its round trip
// and rate within calTolerance, and whether it was measured.
func (r *report) calibrated(pt string) (ok, have bool) {
	rtt, ok1 := r.med(pathCal, pt, "kernel", "rtt_err_pct")
	rate, ok2 := r.med(pathCal, pt, "kernel", "rate_err_pct")
	return math.Abs(rtt) <= calTolerance && math.Abs(rate) <= calTolerance, ok1 && ok2
}

// pathsSection writes the real-world paths family's part of the report.
func (r *report) pathsSection(section int) {
	if len(r.points[pathCal])+len(r.points[pathShort])+len(r.points[pathLong])+len(r.points[pathShare]) == 0 {
		return
	}
	pp := r.res.Plan.Paths
	r.p("## %d. TCP on real-world paths (issue 16)\n\n", section)
	if g := r.res.Paths; g != nil {
		r.p("Measured by `gonet-bench run -only paths` (or `make bench`) on %s in %s of wall time, %d repetition(s), GoNet %s.\n\n",
			g.Started.UTC().Format("2006-01-02 15:04 UTC"), (time.Duration(g.WallS) * time.Second).String(), g.Reps, g.GoNet)
	}
	r.p("The kernel here has no netem, so the path is emulated in user space: `gonet-bench pathemu` (`bench/pathemu`) joins two TAP devices through GoNet's `link/fault`, ")
	r.p("a delay line of half the round trip, a token bucket at the path's rate (Ethernet frames as the kernel hands them over, headers included), a drop-tail queue of the path's buffer, and random loss from a seeded generator, in each direction. ")
	r.p("Namespace A holds a bridge joining the path's end to the stack under test: GoNet's or gVisor's TAP device (their servers as in the stack comparison), or a veth to the kernel's own namespace. Namespace B holds the path's other end and the peer, the kernel, where the flows are driven from. ")
	r.p("Plain frames on the path's devices: the kernel cuts super-segments to the MTU (1500) before the path, so a loss is one packet's. ")
	r.p("Every stack runs **CUBIC**: GoNet's default; gVisor's set (`tcpip.CongestionControlOption`, its default is Reno); the kernel's given on every route to the path (`ip route ... congctl cubic`) and set again on the peer's sockets (`TCP_CONGESTION`), since this machine's default is BBR, which a namespace cannot make its own default. ")
	r.p("The kernels' buffers may grow to 64 MB (`tcp_rmem`, `tcp_wmem`), room for a window of two bandwidth-delay products at 1 Gbit/s and 100 ms; GoNet's and gVisor's are their own (4 MiB). `tcp_no_metrics_save` keeps one connection's ssthresh from deciding the next one's start. The loss generators start afresh before every measured flow, from a seed of the repetition and the flow's place in the set-up, the same for every stack: the nth frame of each stack's flow meets the same fate in each direction, whatever crossed the path before it.\n\n")
	times := fmt.Sprintf("%d times in a row", pp.ShortCount)
	if pp.ShortCount == 1 {
		times = "once"
	}
	r.p("Per path and stack, one set-up: %s transferred %s in each direction measured (the median time is the point's; each from before the connect to the last byte read by the receiver)", mb(pp.Short), times)
	if pp.LongDur > 0 {
		var long []string
		for _, spec := range pp.Paths {
			if spec.Long > 0 {
				long = append(long, fmt.Sprintf("%s on (%s), stopped at %v", mb(spec.Long), spec.Name, pp.LongCap))
			} else {
				long = append(long, fmt.Sprintf("a %v flow on (%s)", pp.LongDur, spec.Name))
			}
		}
		r.p(", then the long transfer: %s. Goodput is what the receiving application got over the transfer's time", strings.Join(long, "; "))
	}
	r.p(". \"Stack→kernel\" is the stack sending (the client reads its source handler), \"kernel→stack\" the peer sending to its discard handler. ")
	r.p("Retransmissions are the sender's (GoNet's and gVisor's own counters; the kernel's `Tcp.RetransSegs` in its namespace, as nstat reads it), per 100 full segments of the payload delivered.\n\n")

	r.p("### Calibration: the kernel at both ends\n\n")
	r.p("Each path without its loss, the kernel at both ends. The round trip: the median of a ping against the configured one. The rate: the peer's kernel sends full-sized UDP datagrams paced %.0f%% above the path's rate for %v (kernel→stack), and what the path delivers on the wire after the first quarter (Ethernet frames, headers included) against its bucket's rate: a measure of the path alone, whatever a congestion control makes of it. Within %d%% both ways is \"calibrated\". ",
		100*(calUDPOver-1), pp.CalDur, calTolerance)
	r.p("Beside them, what TCP makes of the path: %d kernel CUBIC flows at once (stack→kernel) for %v, their goodput over the second half against the most a full link carries (%d of every %d bytes on the wire); several flows, because one that left slow start early (HyStart) takes tens of seconds to fill a long fat path again.\n\n",
		max(1, pp.CalStreams), pp.CalDur, tcpPayload, wireFrame)
	if len(r.points[pathCal]) > 0 {
		r.p("| path | RTT set | ping RTT | off by | rate set | delivered | off by | offered | TCP goodput | of a full link | TCP's queue drops | device drops | |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, pt := range r.points[pathCal] {
			ok, have := r.calibrated(pt)
			verdict := mark(ok, have)
			if verdict == "✅ met" {
				verdict = "✅ calibrated"
			} else if have {
				verdict = "❌ off"
			}
			c := func(m string) string { return r.cell(pathCal, pt, "kernel", m, 1) }
			name := r.pathPointName(pt)
			if spec, ok := r.pathSpec(pt); ok && spec.Loss > 0 {
				spec.Loss = 0
				name = spec.Title() + " (its loss off)"
			}
			r.p("| %s | %s ms | %s ms | %s%% | %s Mbit/s | %s Mbit/s | %s%% | %s Mbit/s | %s Mbit/s | %s%% | %s | %s | %s |\n", name,
				c("rtt_set_ms"), c("rtt_ms"), c("rtt_err_pct"), c("rate_set_mbit"), c("wire_mbit_s"), c("rate_err_pct"), c("udp_offered_mbit_s"),
				c("goodput_mbit_s"), c("goodput_of_max_pct"), c("path_drops"), c("udp_dev_drops"), verdict)
		}
		r.p("\n*Offered is what reached the path from the UDP sender, on the wire; device drops what the kernel dropped at the path's TAP devices during the UDP flow, frames the forwarder did not read in time.*\n\n")
		for _, pt := range r.points[pathCal] {
			if ok, have := r.calibrated(pt); have && !ok {
				spec, _ := r.pathSpec(pt)
				r.p("**Path %s is not reproduced:** it delivered %s Mbit/s of the %s configured (offered %s), its ping took %s ms of %v. ",
					pt, r.cell(pathCal, pt, "kernel", "wire_mbit_s", 1), num(spec.RateMbit), r.cell(pathCal, pt, "kernel", "udp_offered_mbit_s", 1),
					r.cell(pathCal, pt, "kernel", "rtt_ms", 1), spec.RTT)
				r.p("Its figures below are the stacks' over the path as the forwarder carried it, not as configured: the forwarder moves every frame through two system calls and two copies, in Go, on %d CPUs shared with the stacks and the load; where it cannot keep up, the kernel drops at its TAP devices what it did not read in time.\n\n", r.res.Machine.NProc)
			}
		}
	}

	r.p("### The issue's targets\n\n")
	r.p("| workload | target | GoNet | GoNet/gVisor | GoNet/kernel | |\n|---|---|---|---|---|---|\n")
	for _, t := range r.pathTargets() {
		r.p("| %s | %s | %s | %s | %s | %s |\n", t.what, t.goal, t.gonet, t.vsG, t.vsK, t.met)
	}
	r.p("\n")

	r.pathTable("Goodput", pathLong, "goodput_mbit_s", "Mbit/s delivered to the receiving application over the long transfer or flow")
	r.pathTable("Time to complete a transfer", pathShort, "seconds", fmt.Sprintf("seconds to move %s, connect to last byte (median of %d)", mb(pp.Short), pp.ShortCount))
	r.pathTable("", pathLong, "seconds", "seconds to move the long transfer, connect to last byte")
	r.pathTable("Retransmissions and what the path dropped", pathShort, "retrans_pct",
		fmt.Sprintf("the sender's retransmitted segments per 100 full segments delivered, over the %d short transfers", pp.ShortCount))
	r.pathTable("", pathLong, "retrans_pct", "the same, long transfer")
	r.pathTable("", pathLong, "path_queue_drops", "frames the bottleneck's queue dropped in the data's direction (the sender overran its buffer), long transfer")
	r.pathTable("", pathLong, "path_lost", "frames the path lost at random in the data's direction, long transfer")
	r.pathTable("", pathLong, "dev_drops", "frames a device's queue dropped before the path (the path's TAP devices when the forwarder falls behind; the stack's), long transfer")

	if len(r.points[pathShare]) > 0 {
		r.p("### Sharing a bottleneck with the kernel's CUBIC\n\n")
		r.p("The stack's flow (stack→kernel) alone for %v, then a kernel CUBIC flow from a third namespace on the same bridge to the same peer, both for %v through the same queue. Jain's index of the two goodputs over the time they share the path (1: equal shares, 0.5: one takes all), and over its second half; the kernel row is the kernel against itself, what a fair pair gets here.\n\n",
			pp.ShareGap, pp.ShareDur)
		r.p("| path | stack | its flow | kernel CUBIC flow | its share | Jain's index | second half | link used | its flow alone |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, pt := range r.points[pathShare] {
			for _, st := range server.Stacks {
				c := func(m string) string { return r.cell(pathShare, pt, st, m, 1) }
				r.p("| %s | %s | %s Mbit/s | %s Mbit/s | %s | %s | %s | %s | %s Mbit/s |\n", r.pathPointName(pt), st,
					c("stack_mbit_s"), c("rival_mbit_s"), c("stack_share"), c("jain"), c("jain_last_half"), c("utilisation"), c("alone_mbit_s"))
			}
		}
		r.p("\n")
	}
}

// whyPaths says, for each missed path target, what this run's figures
// show of the reason.
func (r *report) whyPaths(ts []target) {
	missed := map[string][]string{}
	for _, t := range ts {
		if strings.HasPrefix(t.met, "❌") && strings.HasPrefix(t.kind, "path-") {
			missed[t.kind] = append(missed[t.kind], t.point)
		}
	}
	if len(missed) == 0 {
		return
	}
	reps := "one repetition"
	if n := r.res.Plan.Paths.Reps; n > 1 {
		reps = fmt.Sprintf("%d repetitions", n)
	}
	if len(missed["path-goodput"]) > 0 {
		var pts []string
		for _, pt := range r.points[pathLong] {
			_, sk := r.ratio(pathLong, pt, "kernel", "goodput_mbit_s")
			if !slices.Contains(missed["path-goodput"], pt) {
				continue
			}
			cell := func(st, m string) string { return r.medText(pathLong, pt, st, m) }
			acks := ""
			if g, k := cell("gonet", "rcv_segs_per_ack"), cell("kernel", "rcv_segs_per_ack"); g != "?" && k != "?" {
				acks = fmt.Sprintf(", and the receiver sent an ACK per %s segments beside the kernel's %s", g, k)
			}
			pts = append(pts, fmt.Sprintf("%s: %s of the kernel's; the sender resent %s%% of its segments beside the kernel's %s%%%s",
				r.pathPointName(pt), sk, cell("gonet", "retrans_pct"), cell("kernel", "retrans_pct"), acks))
		}
		r.p("- **Goodput on the paths** (%s per path): %s. With random loss a flow's goodput is set by the window it had reached at each loss; every stack's flow meets the same seeded sequence of decisions, frame by frame, in each direction, until the stacks' own timing (when an ACK arrives, what a retransmission repeats) makes their frames differ, so a gap at equal loss shares is the congestion control's or the receiver's, and one at unequal shares partly where the same draws fell. "+
			"Where GoNet's receiver acknowledged far less often than the kernel's (an ACK per batch its NIC reads, where the kernel's ACKs every second segment), its sender had fewer ACKs to grow its window and clock its sending by; that, and the receive window's auto-tuning across a loss, are what to measure next.\n",
			reps, strings.Join(pts, "; "))
	}
	if len(missed["path-short"]) > 0 {
		var near, far []string
		for _, pt := range r.points[pathShort] {
			v, sk := r.ratio(pathShort, pt, "kernel", "seconds")
			switch {
			case !slices.Contains(missed["path-short"], pt):
			case v <= 1.02:
				near = append(near, r.pathPointName(pt)+" "+sk)
			default:
				far = append(far, r.pathPointName(pt)+" "+sk)
			}
		}
		if len(near) > 0 {
			r.p("- **1 MB within 2%% of the kernel** (%s): a handful of milliseconds on transfers that take hundreds, less than one repetition resolves; on loss-free paths every stack finishes in the same number of round trips.\n", strings.Join(near, "; "))
		}
		if len(far) > 0 {
			r.p("- **1 MB, further off** (%s, %s per path): a 1 MB transfer on a lossy path meets a loss or none, and where in slow start it falls decides its time; the median of three transfers in a repetition smooths only part of that "+
				"(the same point took every stack more than twice as long in one repetition as in another: bench/README.md, \"paths\"). "+
				"On a loss-free path every stack needs the same round trips, and what is left is a fraction of one; GoNet's sender once took 1.53× the kernel's time on (a), its window stopping short in slow start while the peer's receive window opened (tcp's windowLimited since lets it grow while half of it is in flight, as Linux's does).\n",
				strings.Join(far, "; "), reps)
		}
	}
	if len(missed["path-share"]) > 0 {
		for _, pt := range r.points[pathShare] {
			g, ok1 := r.med(pathShare, pt, "gonet", "jain")
			k, ok2 := r.med(pathShare, pt, "kernel", "jain")
			last, ok3 := r.med(pathShare, pt, "gonet", "jain_last_half")
			if !ok1 || !ok2 || !slices.Contains(missed["path-share"], pt) {
				continue
			}
			lastHalf := ""
			if ok3 {
				lastHalf = fmt.Sprintf("; over the flows' last half GoNet's index was %.3f", last)
			}
			also := "."
			if k < 0.95 {
				also = ", so the kernel's own pair misses 0.95 as well."
			}
			r.p("- **Sharing, %s**: Jain's index %.3f with GoNet's flow against the kernel's, %.3f with the kernel's own CUBIC in its place%s. Two CUBIC flows started 5 s apart on a buffer of one bandwidth-delay product converge over tens of seconds%s\n",
				r.pathPointName(pt), g, k, lastHalf, also)
		}
	}
}
