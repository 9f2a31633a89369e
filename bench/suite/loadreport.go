package suite

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The report's sections for issue 16's workloads: small packets (ping at a
// faster pace and in a closed loop, UDP request-response, packets per
// second of CPU), the overload of many bursty connections, and the daemon
// through its own services beside the library.

// pacedPointName is a ping-pace point, "n=1000/10ms", as the tables name
// it: "1000 pingers, 10ms pace" or "1000 pingers, closed loop".
func pacedPointName(pt string) string {
	n, pace, _ := strings.Cut(strings.TrimPrefix(pt, "n="), "/")
	if pace == "closed" {
		return n + " pingers, closed loop"
	}
	return n + " pingers, " + pace + " pace"
}

// daemonBulkName is a daemon-bulk point, "up/1", as the tables name it.
func daemonBulkName(pt string) string {
	dir, n, _ := strings.Cut(pt, "/")
	d := map[string]string{"up": "kernel→discard", "down": "chargen→kernel"}[dir]
	return fmt.Sprintf("%s, %s stream(s)", d, n)
}

// nextSection is the number of the section after the stack comparison's
// seven and the IPv6 and gateway sections, when present.
func (r *report) nextSection() int {
	n := 8
	if r.hasIPv6() {
		n++
	}
	if len(r.points[gwBulk])+len(r.points[gwRR])+len(r.points[gwIdle]) > 0 {
		n++
	}
	return n
}

// issue16Sections writes the sections of issue 16's workloads, numbered
// from section on, and returns the next number.
func (r *report) issue16Sections(section int) int {
	if len(r.points[pacedPingWorkload])+len(r.points[udpRRWorkload]) > 0 {
		r.smallPacketSection(section)
		section++
	}
	if len(r.points[overloadWorkload]) > 0 {
		r.overloadSection(section)
		section++
	}
	if len(r.points[daemonBulk])+len(r.points[daemonRR]) > 0 {
		r.daemonSection(section)
		section++
	}
	return section
}

func (r *report) smallPacketSection(section int) {
	p := r.res.Plan
	r.p("## %d. Small packets (issue 16)\n\n", section)
	if len(r.points[pacedPingWorkload]) > 0 {
		r.p("The ping workload's pingers at a %v pace (section 1's at %v) and in a closed loop, each pinger sending its next request as soon as the reply to the last arrives, so that every pinger always has one request in flight; %v per point.\n\n",
			p.PacedInterval, p.PingInterval, p.PingDur)
		r.table(pacedPingWorkload, "pingers", "mean_us", "mean round-trip time, µs", 1, pacedPointName)
		r.table(pacedPingWorkload, "pingers", "p99_us", "99th percentile round-trip time, µs", 1, pacedPointName)
		r.table(pacedPingWorkload, "pingers", "replies_s", "replies per second", 1, pacedPointName)
		r.counts(pacedPingWorkload, "pingers", "loss_pct", "requests without a reply within 1 s, %", pacedPointName)
	}
	if len(r.points[udpRRWorkload]) > 0 {
		r.p("UDP request-response: each socket sends a 1-byte datagram to the server's UDP echo handler and waits for it to come back before the next (netperf's UDP_RR), %v per point after a 100 ms warm-up.\n\n", p.RRDur)
		r.table(udpRRWorkload, "sockets", "mean_us", "mean round trip, µs", 1, pointN(""))
		r.table(udpRRWorkload, "sockets", "transactions_s", "transactions per second", 1, pointN(""))
	}
	r.p("Packets per second of the stack's CPU on the small-packet paths: the IPv4 packets the client namespace's kernel received and sent during the measurement (the same count for all three stacks), over the CPU seconds of the stack (the server process; for the kernel plus the machine's softirq time, as CPU per GB). One request and one answer are two packets; TCP's acknowledgements, when not piggybacked, count too. `pkts_per_server_cpu_s` in the JSON divides by the server process's time alone.\n\n")
	r.p("| path | point | GoNet | gVisor | kernel | GoNet/gVisor | GoNet/kernel |\n|---|---|---|---|---|---|---|\n")
	for _, w := range []struct{ workload, what string }{
		{"rr", "TCP 1-byte request-response, connections"},
		{udpRRWorkload, "UDP 1-byte request-response, sockets"},
		{pacedPingWorkload, "ICMP echo"},
	} {
		for _, pt := range r.points[w.workload] {
			_, rg := r.ratio(w.workload, pt, "gvisor", "pkts_per_cpu_s")
			_, rk := r.ratio(w.workload, pt, "kernel", "pkts_per_cpu_s")
			name := strings.TrimPrefix(pt, "n=")
			if w.workload == pacedPingWorkload {
				name = pacedPointName(pt)
			}
			r.p("| %s | %s | %s | %s | %s | %s | %s |\n", w.what, name,
				r.cell(w.workload, pt, "gonet", "pkts_per_cpu_s", 1), r.cell(w.workload, pt, "gvisor", "pkts_per_cpu_s", 1),
				r.cell(w.workload, pt, "kernel", "pkts_per_cpu_s", 1), rg, rk)
		}
	}
	r.p("\n*packets per CPU second of the stack; median of the repetitions [min–max].*\n\n")
}

func (r *report) overloadSection(section int) {
	p := r.res.Plan
	r.p("## %d. Overload: many connections at once (issue 16)\n\n", section)
	r.p("N connections from the kernel in the client namespace to the stack's 1-byte request-response handler (256 dials at a time), then for %v bursts: every connection writes its request at the same moment and reads the answer; once the last answer is in, all pause %v and send again. Each burst puts N segments in the kernel's queue towards the stack at once (the TAP device's, 1000 frames by default; veth's for the kernel as server). The counters are those of the bursts alone, read once the connections are up and after the last burst. Each point runs on a set-up of its own.\n\n",
		p.BurstDur, p.BurstPause)
	name := pointN("")
	r.table(overloadWorkload, "connections", "p99_us", "99th percentile request latency (write to answer), µs", 1, name)
	r.table(overloadWorkload, "connections", "mean_us", "mean request latency, µs", 1, name)
	r.table(overloadWorkload, "connections", "burst_p50_us", "median time for a whole burst to be answered, µs", 1, name)
	r.table(overloadWorkload, "connections", "transactions_s", "requests answered per second (pauses included)", 1, name)
	r.counts(overloadWorkload, "connections", "link_drops", "frames the kernel dropped on their way to the stack (the TAP device's tx_dropped; veth's for the kernel)", name)
	r.counts(overloadWorkload, "connections", "client_retrans", "segments the kernel client retransmitted", name)
	r.counts(overloadWorkload, "connections", "client_timeouts", "the kernel client's retransmission timeouts", name)
	r.counts(overloadWorkload, "connections", "stack_retrans", "segments the stack retransmitted", name)
	r.counts(overloadWorkload, "connections", "stack_loss_probes", "tail loss probes the stack sent (gVisor counts none apart: n/a)", name)
	r.counts(overloadWorkload, "connections", "tap_write_fails", "frames the stack's writes to the TAP device failed to hand over (the kernel has none: n/a)", name)
	r.counts(overloadWorkload, "connections", "errors", "requests unanswered within 5 s, or failed (each ends its connection's part)", name)
	r.counts(overloadWorkload, "connections", "failed_conns", "connections that could not be established", name)
	var drops []string
	for _, pt := range r.points[overloadWorkload] {
		if s, ok := r.get(overloadWorkload, pt, "gonet", "stack_queue_drops"); ok && s.Max > 0 {
			drops = append(drops, fmt.Sprintf("%s connections %s", strings.TrimPrefix(pt, "n="), r.cell(overloadWorkload, pt, "gonet", "stack_queue_drops", 1)))
		}
	}
	if len(drops) > 0 {
		r.p("Segments GoNet dropped because a connection's input queue was full (`TCP.InQueueDrops`): %s.\n\n", strings.Join(drops, "; "))
	}
}

// daemonPair is a daemon point and the library's point it stands beside.
type daemonPair struct {
	daemon, lib, point, metric string
}

func (r *report) daemonSection(section int) {
	r.p("## %d. The daemon through its own services (issue 16)\n\n", section)
	r.p("`gonet up -serve echo,discard,chargen` (the daemon as a user runs it, built from this tree) on a fresh TAP device with offloads in the client namespace, 10.77.0.2/24, MTU 1500, driven by the same load generators: bulk to its discard service (RFC 863) and from its chargen (RFC 864), request-response through its echo (RFC 862). Beside it, the library's figures of the same run (sections 3 and 4: the bench server's discard, source and 1-byte request-response handlers on GoNet, gVisor and the kernel). The daemon's CPU is its process's (`/proc/PID/stat`).\n\n")
	r.p("| workload | GoNet daemon | GoNet library | gVisor | kernel | daemon/library | daemon/gVisor | daemon/kernel |\n|---|---|---|---|---|---|---|---|\n")
	row := func(what string, d daemonPair) {
		dm, okd := r.med(d.daemon, d.point, "gonet", d.metric)
		lib, okl := r.med(d.lib, d.point, "gonet", d.metric)
		gv, okg := r.med(d.lib, d.point, "gvisor", d.metric)
		k, okk := r.med(d.lib, d.point, "kernel", d.metric)
		ratio := func(v float64, ok bool) string {
			if !okd || !ok || v == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f×", dm/v)
		}
		r.p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", what,
			r.cell(d.daemon, d.point, "gonet", d.metric, 1), r.cell(d.lib, d.point, "gonet", d.metric, 1),
			r.cell(d.lib, d.point, "gvisor", d.metric, 1), r.cell(d.lib, d.point, "kernel", d.metric, 1),
			ratio(lib, okl), ratio(gv, okg), ratio(k, okk))
	}
	for _, pt := range r.points[daemonBulk] {
		row(daemonBulkName(pt)+", Gbit/s", daemonPair{daemonBulk, "bulk", pt, "gbit_s"})
	}
	for _, pt := range r.points[daemonBulk] {
		row(daemonBulkName(pt)+", CPU s per GB", daemonPair{daemonBulk, "bulk", pt, "cpu_s_per_gb"})
	}
	for _, pt := range r.points[daemonRR] {
		n := strings.TrimPrefix(pt, "n=")
		row("echo, "+n+" conn(s), mean µs", daemonPair{daemonRR, "rr", pt, "mean_us"})
		row("echo, "+n+" conn(s), transactions/s", daemonPair{daemonRR, "rr", pt, "transactions_s"})
	}
	r.p("\n*median of the repetitions [min–max]; the library's columns are the bulk and rr workloads' at the same point (\"n/a\" when the run did not measure it).*\n\n")
}

// issue16Targets are issue 16's targets on its workloads' figures, and
// those it sets on the stack comparison's: four streams against one, CPU
// per GB, and one pinger.
func (r *report) issue16Targets() []target {
	ts := r.issue16BulkTargets()
	if v, s := r.ratio("ping", "n=1", "gvisor", "mean_us"); !math.IsNaN(v) {
		g, _ := r.med("ping", "n=1", "gonet", "mean_us")
		_, sk := r.ratio("ping", "n=1", "kernel", "mean_us")
		ts = append(ts, target{what: "Ping, 1 pinger, mean", goal: "≤ gVisor", gonet: num(g) + " µs", vsG: s, vsK: sk,
			met: mark(v <= 1, true), kind: "ping-one"})
	}
	// Ping at 10 ms and in a closed loop: no slower than gVisor, within
	// 3× GoNet's own figure with one pinger (the ping workload's).
	for _, pt := range r.points[pacedPingWorkload] {
		g, okg := r.med(pacedPingWorkload, pt, "gonet", "mean_us")
		one, ok1 := r.med("ping", "n=1", "gonet", "mean_us")
		vg, sg := r.ratio(pacedPingWorkload, pt, "gvisor", "mean_us")
		_, sk := r.ratio(pacedPingWorkload, pt, "kernel", "mean_us")
		flat := g / one
		now := ""
		if okg && ok1 {
			now = fmt.Sprintf(" (now %.2f×)", flat)
		}
		kind := "ping-paced"
		if strings.HasSuffix(pt, "/closed") {
			kind = "ping-closed"
		}
		ts = append(ts, target{
			what:  "Ping, " + pacedPointName(pt) + ", mean",
			goal:  "≤ gVisor, ≤ 3× GoNet's 1 pinger" + now,
			gonet: num(g) + " µs", vsG: sg, vsK: sk,
			met:  mark(vg <= 1 && flat <= 3, okg && ok1 && !math.IsNaN(vg)),
			kind: kind,
		})
	}
	// Request-response on 100 connections: transactions/s, library and
	// daemon, at least 1.3× gVisor's.
	rrTPS := func(w, pt, what string) {
		g, okg := r.med(w, pt, "gonet", "transactions_s")
		gv, okv := r.med("rr", pt, "gvisor", "transactions_s")
		k, okk := r.med("rr", pt, "kernel", "transactions_s")
		sg, sk := "–", "–"
		if okv && gv > 0 {
			sg = fmt.Sprintf("%.2f×", g/gv)
		}
		if okk && k > 0 {
			sk = fmt.Sprintf("%.2f×", g/k)
		}
		ts = append(ts, target{
			what: what + ", " + strings.TrimPrefix(pt, "n=") + " conns, transactions/s", goal: "≥ 1.3× gVisor",
			gonet: num(g) + "/s", vsG: sg, vsK: sk, met: mark(g >= 1.3*gv, okg && okv && gv > 0),
		})
	}
	for _, pt := range r.points["rr"] {
		if pt != "n=1" {
			rrTPS("rr", pt, "1-byte request-response")
		}
	}
	for _, pt := range r.points[daemonRR] {
		if pt != "n=1" {
			rrTPS(daemonRR, pt, "The daemon's echo")
		}
	}
	// The daemon's bulk against the library's peers.
	for _, pt := range r.points[daemonBulk] {
		g, okg := r.med(daemonBulk, pt, "gonet", "gbit_s")
		gv, okv := r.med("bulk", pt, "gvisor", "gbit_s")
		k, okk := r.med("bulk", pt, "kernel", "gbit_s")
		sg, sk := "–", "–"
		if okv && gv > 0 {
			sg = fmt.Sprintf("%.2f×", g/gv)
		}
		if okk && k > 0 {
			sk = fmt.Sprintf("%.2f×", g/k)
		}
		ts = append(ts, target{
			what: "The daemon's bulk TCP " + daemonBulkName(pt), goal: "≥ 1.2× gVisor, ≥ 0.75× kernel",
			gonet: num(g) + " Gbit/s", vsG: sg, vsK: sk,
			met: mark(g >= 1.2*gv && g >= 0.75*k, okg && okv && okk && gv > 0 && k > 0), kind: "bulk",
		})
	}
	// The overload: nothing lost at the TAP, nothing retransmitted, a
	// p99 no worse than the kernel's.
	for _, pt := range r.points[overloadWorkload] {
		n := strings.TrimPrefix(pt, "n=")
		drops, okd := r.get(overloadWorkload, pt, "gonet", "link_drops")
		cre, okc := r.get(overloadWorkload, pt, "gonet", "client_retrans")
		sre, oks := r.get(overloadWorkload, pt, "gonet", "stack_retrans")
		ts = append(ts, target{
			what: "Overload, " + n + " bursty connections: frames dropped at the TAP (any repetition)", goal: "0",
			gonet: num(drops.Max), vsG: "–", vsK: "–", met: mark(drops.Max == 0, okd),
		})
		ts = append(ts, target{
			what: "Overload, " + n + " bursty connections: retransmissions, kernel client + GoNet (any repetition)", goal: "0",
			gonet: num(cre.Max + sre.Max), vsG: "–", vsK: "–", met: mark(cre.Max+sre.Max == 0, okc && oks),
		})
		g, okg := r.med(overloadWorkload, pt, "gonet", "p99_us")
		vk, sk := r.ratio(overloadWorkload, pt, "kernel", "p99_us")
		_, sg := r.ratio(overloadWorkload, pt, "gvisor", "p99_us")
		ts = append(ts, target{
			what: "Overload, " + n + " bursty connections: p99 latency", goal: "≤ kernel",
			gonet: num(g) + " µs", vsG: sg, vsK: sk, met: mark(vk <= 1, okg && !math.IsNaN(vk)), kind: "overload-p99",
		})
	}
	return ts
}

// whyIssue16 says, for issue 16's missed small-packet and overload
// targets, what this run's own figures show of the reason.
func (r *report) whyIssue16(missed map[string]bool) {
	dirName := map[string]string{"up": "kernel→stack", "down": "stack→kernel"}
	if missed["bulk-streams"] {
		var dirs []string
		for _, dir := range []string{"up", "down"} {
			one, ok1 := r.med("bulk", dir+"/1", "gonet", "gbit_s")
			four, ok4 := r.med("bulk", dir+"/4", "gonet", "gbit_s")
			k1, okk1 := r.med("bulk", dir+"/1", "kernel", "gbit_s")
			k4, okk4 := r.med("bulk", dir+"/4", "kernel", "gbit_s")
			if !ok1 || !ok4 || one == 0 {
				continue
			}
			kernel := ""
			if okk1 && okk4 && k1 > 0 {
				kernel = fmt.Sprintf(" (the kernel's %.2f×)", k4/k1)
			}
			dirs = append(dirs, fmt.Sprintf("%s %.2f×%s", dirName[dir], four/one, kernel))
		}
		r.p("- **Four streams over one**: %s. One stream already keeps the TAP's one queue busy, read by one goroutine and written by another; a second queue (`-tap-queues 2`, `IFF_MULTI_QUEUE`) with a reader and a writer per queue measured within the noise of one on these two shared vCPUs, where the kernel's side of every stream runs too (ARCHITECTURE.md, \"The TAP device's queues\"), so one queue stays the default.\n",
			strings.Join(dirs, "; "))
	}
	if missed["bulk-cpu"] {
		var pts []string
		for _, pt := range r.points["bulk"] {
			if v, _ := r.ratio("bulk", pt, "gvisor", "cpu_s_per_gb"); v > 1 {
				g, _ := r.med("bulk", pt, "gonet", "cpu_s_per_gb")
				o, _ := r.med("bulk", pt, "gvisor", "cpu_s_per_gb")
				pts = append(pts, fmt.Sprintf("%s %s s against %s", bulkPointName(pt), num(g), num(o)))
			}
		}
		r.p("- **CPU per GB**: %s. The same two costs as bulk throughput's: a system call per frame on the TAP and two copies of every byte.\n", strings.Join(pts, "; "))
	}
	if missed["ping-one"] {
		g, _ := r.med("ping", "n=1", "gonet", "mean_us")
		o, _ := r.med("ping", "n=1", "gvisor", "mean_us")
		r.p("- **One pinger**: %s µs against gVisor's %s: an echo crosses the NIC's receive goroutine, the IPv4 dealer and the NIC's transmit goroutine, each a wake-up when the stack is idle.\n", num(g), num(o))
	}
	if missed["ping-closed"] {
		pacedMet := "; the paced points, which are about waiting, are met"
		if missed["ping-paced"] {
			pacedMet = ", and the paced points' too (below)"
		}
		for _, pt := range r.points[pacedPingWorkload] {
			if !strings.HasSuffix(pt, "/closed") {
				continue
			}
			n, err := strconv.Atoi(strings.TrimPrefix(strings.Split(pt, "/")[0], "n="))
			one, ok1 := r.med("ping", "n=1", "gonet", "mean_us")
			kOne, ok2 := r.med("ping", "n=1", "kernel", "mean_us")
			kLoop, ok3 := r.med(pacedPingWorkload, pt, "kernel", "mean_us")
			kRate, ok4 := r.med(pacedPingWorkload, pt, "kernel", "replies_s")
			if err != nil || !ok1 || !ok2 || !ok3 || !ok4 || one == 0 || kOne == 0 {
				continue
			}
			rate := func(st string) string { return r.medText(pacedPingWorkload, pt, st, "replies_s") }
			need := float64(n) / (3 * one * 1e-6)
			than := "less"
			if need > kRate {
				than = "more"
			}
			r.p("- **Ping in a closed loop** (%d pingers): each pinger always has a request in flight, so the mean round trip is the pingers over the replies per second (Little's law), a figure of rate rather than of waiting. "+
				"GoNet answered %s/s, gVisor %s/s, the kernel %s/s. Three times GoNet's one-pinger mean (%s µs) would take %s/s, %s than the kernel answered, whose own closed loop is %.0f× its one-pinger mean. "+
				"The lever is echoes per CPU second (section \"Small packets\")%s.\n",
				n, rate("gonet"), rate("gvisor"), num(kRate), num(one), num(need), than, kLoop/kOne, pacedMet)
		}
	}
	if missed["ping-paced"] {
		r.whyPacedPing()
	}
	if missed["overload-p99"] {
		var pts []string
		for _, pt := range r.points[overloadWorkload] {
			cell := func(st, m string) string { return r.medText(overloadWorkload, pt, st, m) }
			pts = append(pts, fmt.Sprintf("at %s connections a whole burst took GoNet %s µs (median) and the kernel %s µs, and GoNet answered %s requests/s to the kernel's %s",
				strings.TrimPrefix(pt, "n="), cell("gonet", "burst_p50_us"), cell("kernel", "burst_p50_us"), cell("gonet", "transactions_s"), cell("kernel", "transactions_s")))
		}
		r.p("- **Overload p99**: a burst's requests reach the stack together and the last answered waits for all the others, so the p99 is close to a whole burst's time: %s. "+
			"No frame was lost at the TAP and nothing retransmitted (the TAP's queue is sized for a burst, 16384 frames: ARCHITECTURE.md, \"The TAP device's queues\"), so what is left is the time per small packet on the stack's CPU, which the two cores share with the kernel's client. "+
			"Dealing unfragmented datagrams in the NIC's receive goroutine, a hop fewer per packet, left the p99 where it was (4 paired rounds at 1000 connections on AMD EPYC: a median of 17367 µs against 15546); "+
			"the lever is the same as the closed loop's, packets per CPU second, spent mostly in the TAP's read(2) and write(2) per frame and in the scheduler's wake-ups (section 7's profiles).\n", strings.Join(pts, "; "))
	}
}

// issue16BulkTargets are issue 16's targets on the bulk workload beyond
// the stack comparison's: four streams at least 1.3× one (both cores at
// work), and GoNet's CPU per GB moved no more than gVisor's.
func (r *report) issue16BulkTargets() []target {
	var ts []target
	for _, dir := range []string{"up", "down"} {
		one, ok1 := r.med("bulk", dir+"/1", "gonet", "gbit_s")
		four, ok4 := r.med("bulk", dir+"/4", "gonet", "gbit_s")
		if !ok1 || !ok4 || one == 0 {
			continue
		}
		ts = append(ts, target{
			what: "Bulk TCP " + map[string]string{"up": "kernel→stack", "down": "stack→kernel"}[dir] + ", 4 streams over 1 (both cores)",
			goal: "≥ 1.3×", gonet: fmt.Sprintf("%.2f×", four/one), vsG: "–", vsK: "–",
			met: mark(four >= 1.3*one, true), kind: "bulk-streams",
		})
	}
	for _, pt := range r.points["bulk"] {
		v, sg := r.ratio("bulk", pt, "gvisor", "cpu_s_per_gb")
		g, ok := r.med("bulk", pt, "gonet", "cpu_s_per_gb")
		_, sk := r.ratio("bulk", pt, "kernel", "cpu_s_per_gb")
		ts = append(ts, target{
			what: "CPU seconds per GB, bulk TCP " + bulkPointName(pt), goal: "≤ gVisor",
			gonet: num(g) + " s", vsG: sg, vsK: sk, met: mark(v <= 1, ok && !math.IsNaN(v)), kind: "bulk-cpu",
		})
	}
	return ts
}

// whyPacedPing explains a paced ping point that missed by how near the
// offered rate came to what GoNet can answer at all: its closed loop's
// replies per second at the same number of pingers.
func (r *report) whyPacedPing() {
	for _, pt := range r.points[pacedPingWorkload] {
		n, pace, _ := strings.Cut(strings.TrimPrefix(pt, "n="), "/")
		interval, err := time.ParseDuration(pace)
		pingers, err2 := strconv.Atoi(n)
		if err != nil || err2 != nil || interval <= 0 {
			continue
		}
		g, okg := r.get(pacedPingWorkload, pt, "gonet", "mean_us")
		one, ok1 := r.med("ping", "n=1", "gonet", "mean_us")
		if !okg || !ok1 || g.Med <= 3*one {
			continue
		}
		offered := float64(pingers) / interval.Seconds()
		load := func(st string) string {
			c, ok := r.med(pacedPingWorkload, "n="+n+"/closed", st, "replies_s")
			if !ok || c == 0 {
				return "unmeasured"
			}
			return fmt.Sprintf("%s/s, a load of %.0f%%", num(c), 100*offered/c)
		}
		r.p("- **Ping, %s**: %s pingers each sending every %s offer %s echoes/s. What each stack answers at most (its closed loop at as many pingers) puts that at: GoNet %s; gVisor %s; the kernel %s. "+
			"A queue's wait grows as its load over what is left (ρ/(1-ρ)), so near full load the mean is set by the echoes a stack can answer per second, not by one echo's path: "+
			"GoNet's repetitions ranged %s–%s µs (median %s) while its one-pinger mean was %s µs. The lever is the closed loop's, echoes per CPU second; "+
			"dealing unfragmented datagrams in the NIC's receive goroutine, which takes one goroutine hop off every echo, changed neither the closed loop's rate nor this point beyond their noise (ARCHITECTURE.md, \"Measured decisions\").\n",
			pacedPointName(pt), n, pace, num(offered), load("gonet"), load("gvisor"), load("kernel"), num(g.Min), num(g.Max), num(g.Med), num(one))
	}
}
