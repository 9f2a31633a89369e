package suite

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gonetstack/gonet/bench/server"
)

// contendedThreshold is the share of the CPUs other processes may have used
// during a measurement before the report counts it as contended.
const contendedThreshold = 0.2

// Summary is a metric over the repetitions: median, min and max.
type Summary struct {
	Med, Min, Max float64
	N             int
}

type aggKey struct{ workload, point, stack string }

// aggregate summarises every metric of every (workload, point, stack) over
// its successful repetitions.
func aggregate(recs []Record) map[aggKey]map[string]Summary {
	vals := map[aggKey]map[string][]float64{}
	for _, r := range recs {
		if r.Error != "" {
			continue
		}
		k := aggKey{r.Workload, r.Point, r.Stack}
		if vals[k] == nil {
			vals[k] = map[string][]float64{}
		}
		for m, v := range r.Metrics {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				vals[k][m] = append(vals[k][m], v)
			}
		}
	}
	out := map[aggKey]map[string]Summary{}
	for k, ms := range vals {
		out[k] = map[string]Summary{}
		for m, vs := range ms {
			med := median(vs)
			out[k][m] = Summary{Med: med, Min: vs[0], Max: vs[len(vs)-1], N: len(vs)}
		}
	}
	return out
}

// median is the median of vs, which it sorts; vs is not empty.
func median(vs []float64) float64 {
	slices.Sort(vs)
	if len(vs)%2 == 0 {
		return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return vs[len(vs)/2]
}

// report holds what the markdown is written from.
type report struct {
	res    Results
	agg    map[aggKey]map[string]Summary
	points map[string][]string // workload → points in run order
	errs   map[aggKey][]string
	b      strings.Builder
	why    strings.Builder  // whyBullets' bullets, before their heading is known
	out    *strings.Builder // where p writes: b, or why
}

func newReport(res Results) *report {
	r := &report{res: res, agg: aggregate(res.Records), points: map[string][]string{}, errs: map[aggKey][]string{}}
	r.out = &r.b
	for _, rec := range res.Records {
		if !slices.Contains(r.points[rec.Workload], rec.Point) {
			r.points[rec.Workload] = append(r.points[rec.Workload], rec.Point)
		}
		if rec.Error != "" {
			k := aggKey{rec.Workload, rec.Point, rec.Stack}
			r.errs[k] = append(r.errs[k], firstLine(rec.Error))
		}
	}
	return r
}

func (r *report) get(workload, point, stack, metric string) (Summary, bool) {
	s, ok := r.agg[aggKey{workload, point, stack}][metric]
	return s, ok
}

func (r *report) p(format string, args ...any) { fmt.Fprintf(r.out, format, args...) }

// num formats v to three significant digits, without exponents.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a >= 0.01:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

// cell is "median [min–max]" of a metric, or why there is none.
func (r *report) cell(workload, point, stack, metric string, scale float64) string {
	s, ok := r.get(workload, point, stack, metric)
	if !ok {
		if e := r.errs[aggKey{workload, point, stack}]; len(e) > 0 {
			return "fail"
		}
		return "n/a"
	}
	if s.N == 1 || s.Min == s.Max {
		return num(s.Med * scale)
	}
	return fmt.Sprintf("%s [%s–%s]", num(s.Med*scale), num(s.Min*scale), num(s.Max*scale))
}

// ratio is GoNet's median over another stack's, or "–".
func (r *report) ratio(workload, point, other, metric string) (float64, string) {
	g, ok1 := r.get(workload, point, "gonet", metric)
	o, ok2 := r.get(workload, point, other, metric)
	if !ok1 || !ok2 || o.Med == 0 {
		return math.NaN(), "–"
	}
	v := g.Med / o.Med
	return v, fmt.Sprintf("%.2f×", v)
}

// deviceTable is a ping workload's mean round trip at the client's
// device, when the run timed it there.
func (r *report) deviceTable(workload string) {
	for _, pt := range r.points[workload] {
		if _, ok := r.get(workload, pt, "gonet", "wire_mean_us"); ok {
			r.table(workload, "pingers", "wire_mean_us", "mean round trip at the client's device, µs: from the request's leaving the client's TAP or veth to the reply's entering it, by the kernel's software timestamps (SO_TIMESTAMPING); the stack under test's own part of the round trip, without the client's kernel and process", 1, pointN(""))
			return
		}
	}
}

// table writes one table: a row per point, a column per stack for metric,
// and GoNet's ratios to the others.
func (r *report) table(workload, pointTitle, metric, unit string, scale float64, pointName func(string) string) {
	r.p("| %s | GoNet | gVisor | kernel | GoNet/gVisor | GoNet/kernel |\n|---|---|---|---|---|---|\n", pointTitle)
	for _, pt := range r.points[workload] {
		_, rg := r.ratio(workload, pt, "gvisor", metric)
		_, rk := r.ratio(workload, pt, "kernel", metric)
		r.p("| %s | %s | %s | %s | %s | %s |\n", pointName(pt),
			r.cell(workload, pt, "gonet", metric, scale), r.cell(workload, pt, "gvisor", metric, scale),
			r.cell(workload, pt, "kernel", metric, scale), rg, rk)
	}
	r.p("\n*%s; median of the repetitions [min–max].*\n\n", unit)
}

// counts is a table like table's without ratios, for counts of rare events
// (drops, retransmissions) where a ratio of two small numbers says nothing.
func (r *report) counts(workload, pointTitle, metric, unit string, pointName func(string) string) {
	r.p("| %s | GoNet | gVisor | kernel |\n|---|---|---|---|\n", pointTitle)
	for _, pt := range r.points[workload] {
		r.p("| %s | %s | %s | %s |\n", pointName(pt),
			r.cell(workload, pt, "gonet", metric, 1), r.cell(workload, pt, "gvisor", metric, 1), r.cell(workload, pt, "kernel", metric, 1))
	}
	r.p("\n*%s; median of the repetitions [min–max].*\n\n", unit)
}

// bulkPointName is a bulk point, "up/1", as the tables name it:
// "kernel→stack, 1 stream(s)".
func bulkPointName(pt string) string {
	dir, n, _ := strings.Cut(pt, "/")
	d := map[string]string{"up": "kernel→stack", "down": "stack→kernel"}[dir]
	return fmt.Sprintf("%s, %s stream(s)", d, n)
}

func pointN(prefix string) func(string) string {
	return func(pt string) string { return prefix + strings.TrimPrefix(pt, "n=") }
}

// Report writes the markdown report and the plots.
func Report(res Results, outDir, mdPath string) error {
	r := newReport(res)
	plots, perr := writePlots(r, outDir)
	rel := func(p string) string {
		if q, err := filepath.Rel(filepath.Dir(mdPath), p); err == nil {
			return q
		}
		return p
	}
	m := res.Machine
	r.p("# GoNet benchmarks: GoNet, gVisor netstack and the Linux kernel\n\n")
	r.p("Generated by `make bench` (`bench/`, issue 5) on %s in %s of wall time; regenerate it rather than edit it. ",
		res.Started.UTC().Format("2006-01-02 15:04 UTC"), (time.Duration(res.WallS) * time.Second).String())
	r.p("Every number is the median of %d repetitions with [min–max]", res.Plan.Reps)
	if r.hasIPv6() && res.Plan.Reps6 > res.Plan.Reps {
		r.p(" (the IPv6 variants' of %d)", res.Plan.Reps6)
	}
	r.p("; the repetitions interleave the stacks, so machine drift hits all three alike. ")
	r.p("Raw results: `%s`. Ratios are GoNet's median over the other stack's: above 1 is better for throughputs, below 1 for latencies, times and memory.\n\n",
		rel(filepath.Join(outDir, "results.json")))

	contended, measured := map[string]int{}, 0
	for _, rec := range res.Records {
		if familyWorkload(rec.Workload) {
			continue // the families' sections count their own; the paths family's are not timed against the CPU
		}
		if v, ok := rec.Metrics["others_cpu_frac"]; ok {
			measured++
			if v > contendedThreshold {
				contended[rec.Stack]++
			}
		}
	}
	if n := contended["gonet"] + contended["gvisor"] + contended["kernel"]; n > 0 || res.QuietWaitS > 0 {
		r.p("**A shared machine:** other processes used more than %.0f%% of the CPUs during %d of the %d measurements (GoNet %d, gVisor %d, kernel %d; `others_cpu_frac` in the JSON), and the run waited %.0f s for them before set-ups. Those measurements are in the medians; the min–max ranges show how much they moved.\n\n",
			100*contendedThreshold, n, measured, contended["gonet"], contended["gvisor"], contended["kernel"], res.QuietWaitS)
	}
	r.p("## Machine\n\n| | |\n|---|---|\n")
	r.p("| CPUs (nproc) | %d |\n| CPU | %s |\n| memory | %d GiB |\n| kernel | %s |\n| Go | %s |\n",
		m.NProc, m.CPU, m.MemGiB, m.Kernel, m.Go)
	if m.Memmove != "" {
		r.p("| Go's copies of 2 KiB or more | %s |\n", m.Memmove)
	}
	r.p("| gVisor | gvisor.dev/gvisor %s |\n| GoNet | %s |\n\n", m.GVisor, m.GoNet)

	others, oerr := otherRecords(outDir, res.Machine)
	r.glance(others)
	r.p("## Set-up\n\n")
	r.p("Each stack runs the same server, `bench/cmd/gonet-bench server`, in a process of its own (so its CPU time and memory are its own), serving the same handlers (`bench/handlers`: echo, discard, source, 1-byte request-response, UDP sink and UDP echo over `net.Conn` and `net.PacketConn`). ")
	r.p("The load generators (`bench/load`) are the same Go programs for all three, run in a client network namespace on the kernel's own TCP/IP. Each stack gets fresh namespaces for each workload in each repetition:\n\n")
	r.p("- **GoNet**: a TAP device in the client namespace (MTU 1500), GoNet's default configuration, the TAP opened as its daemon opens it: `IFF_VNET_HDR` and `TUNSETOFFLOAD` (checksum, TSO4, TSO6), so that TCP super-segments of up to 64 KiB and partial checksums cross it both ways.\n")
	r.p("- **gVisor**: a fresh TAP device opened with `IFF_VNET_HDR` and `TUNSETOFFLOAD` (checksum, TSO4, TSO6), a read loop and a write loop feeding its channel endpoint (host GSO, 64 KiB segments; RX checksum offload), under its Ethernet wrapper; SACK, receive-buffer moderation, 1–4 MiB buffers, Nagle off; servers through its `gonet` adapter.\n")
	r.p("- **kernel**: the server in a second namespace at the other end of a veth pair (MTU 1500, the kernel's default offloads).\n\n")
	r.p("Addresses 10.77.0.1 (client) and 10.77.0.2 (server) exist only inside those namespaces")
	if r.hasIPv6() {
		r.p(", and so do fd77::1 and fd77::2, which the IPv6 variants add (section 8)")
	}
	r.p(". ")
	r.p("CPU per GB is the stack process's user+system time for GoNet and gVisor; for the kernel, the server process's time plus the machine's softirq time (approximate: part of the kernel's work runs in the client's system calls). \"Machine CPU per GB\" is every CPU's busy time, client included, the same measure for all three.\n\n")

	r.p("## 1. Ping latency under load\n\n")
	r.p("N concurrent pingers in the client namespace (ICMP datagram sockets), each sending a 56-byte echo request every %v and waiting for its reply (up to 1 s), for %v per point. The GoNet paper's Figure 3.\n\n",
		res.Plan.PingInterval, res.Plan.PingDur)
	r.table("ping", "pingers", "mean_us", "mean round-trip time, µs", 1, pointN(""))
	r.table("ping", "pingers", "p99_us", "99th percentile round-trip time, µs", 1, pointN(""))
	r.deviceTable("ping")
	r.counts("ping", "pingers", "loss_pct", "requests without a reply within 1 s, %", pointN(""))
	r.plot(plots, "ping_mean", "Mean ping RTT vs concurrent pingers", rel)
	r.plot(plots, "ping_p99", "p99 ping RTT vs concurrent pingers", rel)

	r.p("## 2. Many short TCP transfers\n\n")
	r.p("N concurrent clients, each in a loop for %v: connect, send %d bytes, half-close, wait for the server's close (so every byte was read), close. The GoNet paper's Figure 4.\n\n",
		res.Plan.ShortDur, res.Plan.ShortSize)
	r.table("short", "clients", "mbit_s", "Mbit/s of payload", 1, pointN(""))
	r.table("short", "clients", "conns_s", "completed transfers (connections) per second", 1, pointN(""))
	r.plot(plots, "short", "Short-transfer throughput vs clients", rel)

	r.p("## 3. Bulk TCP\n\n")
	r.p("%v per point; \"kernel→stack\" is the client writing to the stack's discard handler (counted once the server has read everything), \"stack→kernel\" the client reading the stack's source handler.\n\n", res.Plan.BulkDur)
	bulkName := bulkPointName
	r.table("bulk", "direction", "gbit_s", "Gbit/s", 1, bulkName)
	r.table("bulk", "direction", "cpu_s_per_gb", "CPU seconds of the stack per GB moved", 1, bulkName)
	r.table("bulk", "direction", "sys_cpu_s_per_gb", "machine CPU seconds (both sides, all CPUs) per GB moved", 1, bulkName)
	r.counts("bulk", "direction", "retrans_pct", "segments the sender retransmitted (the client's kernel for kernel→stack, the stack for stack→kernel), % of the segments it sent", bulkName)
	r.counts("bulk", "direction", "link_drops", "frames the kernel dropped at the link because the stack did not take them in time (the TAP device's queue; veth's backlog), kernel→stack", bulkName)
	r.superSegments("bulk")
	var drops []string
	for _, pt := range r.points["bulk"] {
		if s, ok := r.get("bulk", pt, "gonet", "stack_queue_drops"); ok && s.Max > 0 {
			drops = append(drops, fmt.Sprintf("%s %s", bulkName(pt), r.cell("bulk", pt, "gonet", "stack_queue_drops", 1)))
		}
	}
	if len(drops) > 0 {
		r.p("Segments GoNet dropped because a connection's input queue was full (`TCP.InQueueDrops`): %s.\n\n", strings.Join(drops, "; "))
	}
	r.plot(plots, "bulk", "Bulk TCP throughput", rel)
	r.bulkCubic()

	r.p("## 4. Request-response latency\n\n")
	r.p("1-byte request, 1-byte response (netperf's TCP_RR), one outstanding per connection, %v per point after a 100 ms warm-up.\n\n", res.Plan.RRDur)
	r.table("rr", "connections", "mean_us", "mean round trip, µs", 1, pointN(""))
	r.table("rr", "connections", "p50_us", "median round trip, µs", 1, pointN(""))
	r.table("rr", "connections", "p99_us", "99th percentile round trip, µs", 1, pointN(""))
	r.table("rr", "connections", "transactions_s", "transactions per second", 1, pointN(""))

	r.p("## 5. UDP\n\n")
	r.p("One sender at an offered rate of payload (\"max\": as fast as the sending socket takes datagrams) for %v, to the UDP sink; loss counts every datagram sent and not received (dropped anywhere: the kernel's queue towards the device, the link, the stack); jitter is RFC 3550's interarrival jitter.\n\n", res.Plan.UDPDur)
	udpName := udpPointName
	r.table("udp", "datagram, offered", "recv_mbit_s", "received Mbit/s", 1, udpName)
	r.counts("udp", "datagram, offered", "loss_pct", "loss, %", udpName)
	r.table("udp", "datagram, offered", "jitter_us", "jitter, µs", 1, udpName)
	r.table("udp", "datagram, offered", "sent_mbit_s", "what the sender managed to offer, Mbit/s", 1, udpName)
	r.plot(plots, "udp", "UDP throughput vs offered rate", rel)

	r.p("## 6. Scale and memory\n\n")
	r.p("%d connections opened (256 dials at a time) to the echo handler and held idle, then each used once (1 byte echoed). Memory per connection is the server process's resident set growth over the connections it holds; for the kernel, plus half the machine's slab growth (both ends are kernel sockets there). The server's echo handler (a goroutine and a 512-byte buffer per connection) is in every stack's number; the kernel's RSS column is that handler's own cost.\n\n", res.Plan.ScaleConns)
	r.table("scale", "connections", "establish_s", "seconds to establish all", 1, pointN(""))
	r.table("scale", "connections", "use_s", "seconds to use each once", 1, pointN(""))
	r.table("scale", "connections", "mem_per_conn", "bytes of memory per held connection", 1, pointN(""))
	r.table("scale", "connections", "rss_per_conn", "bytes of server RSS per held connection", 1, pointN(""))
	r.counts("scale", "connections", "slab_per_conn", "bytes of the machine's kernel slab per connection (the client's sockets, and for the kernel the server's too)", pointN(""))

	r.goCost()
	r.profiles()
	r.ipv6Section()
	r.gatewaySection(plots, rel)
	next := r.multikernelSection(r.nextSection(), plots, rel)
	next = r.issue16Sections(next)
	r.pathsSection(next)
	r.failures()
	if perr != nil {
		r.p("\nPlots failed: %v\n", perr)
	}
	if oerr != nil {
		r.p("\nThe other machines' runs of record could not be read: %v\n", oerr)
	}
	return os.WriteFile(mdPath, []byte(r.b.String()), 0o644)
}

func (r *report) plot(plots map[string]string, name, title string, rel func(string) string) {
	if p, ok := plots[name]; ok {
		r.p("![%s](%s)\n\n", title, rel(p))
	}
}

// udpPointName is a UDP point, "size=1472,rate=100", as the tables name
// it: "1472 B at 100 Mbit/s".
func udpPointName(pt string) string {
	var size, rate string
	for f := range strings.SplitSeq(pt, ",") {
		k, v, _ := strings.Cut(f, "=")
		if k == "size" {
			size = v
		} else {
			rate = v
		}
	}
	if rate != "max" {
		rate += " Mbit/s"
	}
	return size + " B at " + rate
}

// target is one of the issue's goals, judged from the medians.
type target struct {
	what, goal string
	gonet      string
	vsG, vsK   string
	met        string
	kind       string // what the why section explains it by (whyNotMet)
	point      string // the workload's point, where the why section looks per point
}

// mark is a target's verdict: met, not met, or n/a without the numbers
// to judge it.
func mark(ok bool, have bool) string {
	switch {
	case !have:
		return "n/a"
	case ok:
		return "✅ met"
	default:
		return "❌ not met"
	}
}

// med is a metric's median over the repetitions.
func (r *report) med(w, pt, st, m string) (float64, bool) {
	s, ok := r.get(w, pt, st, m)
	return s.Med, ok
}

// medText is a median as the report's prose quotes it, "?" without one.
func (r *report) medText(w, pt, st, m string) string {
	if v, ok := r.med(w, pt, st, m); ok {
		return num(v)
	}
	return "?"
}

// bulkCubic is bulk again with every sender on CUBIC, beside what each
// stack's figures were with each sender on its own default.
func (r *report) bulkCubic() {
	pts := r.points["bulk-cubic"]
	if len(pts) == 0 {
		return
	}
	cc := r.res.Machine.CC
	if cc == "" {
		cc = "its default"
	}
	r.p("### With every sender on CUBIC\n\n")
	r.p("In the tables above each sender runs its own default congestion control: kernel→stack the client's kernel (`%s` on this machine), "+
		"stack→kernel GoNet CUBIC, gVisor Reno and the kernel `%s`. Here every sender runs CUBIC, the kernel's usual default: the kernel's sockets by "+
		"the route to the other end (`ip route ... congctl cubic`, which a socket gets at connect and at accept; the client reads it back from its "+
		"sockets, `TCP_CONGESTION`, and a point whose sockets ran another fails), gVisor's by its option. The same load generators and handlers, "+
		"%v a point.\n\n", cc, cc, r.res.Plan.BulkDur)
	r.table("bulk-cubic", "direction", "gbit_s", "Gbit/s", 1, bulkPointName)
	r.table("bulk-cubic", "direction", "cpu_s_per_gb", "CPU seconds of the stack per GB moved", 1, bulkPointName)
	r.p("| direction | GoNet | gVisor | kernel |\n|---|---|---|---|\n")
	for _, pt := range pts {
		row := "| " + bulkPointName(pt) + " |"
		for _, st := range []string{"gonet", "gvisor", "kernel"} {
			c, okc := r.med("bulk-cubic", pt, st, "gbit_s")
			d, okd := r.med("bulk", pt, st, "gbit_s")
			if !okc || !okd || d == 0 {
				row += " – |"
				continue
			}
			row += fmt.Sprintf(" %.2f× |", c/d)
		}
		r.p("%s\n", row)
	}
	r.p("\n*each stack's throughput with every sender on CUBIC over its throughput with each on its default (the first table of this section), medians. " +
		"GoNet sends with CUBIC in both, so its stack→kernel rows differ only by the groups' set-ups and moments: the two groups' noise.*\n\n")
	if r.res.Machine.CC == "bbr" {
		r.p("BBR keeps about twice the bandwidth times the least round trip it has seen in flight, plus what it learns of ACKs arriving in bursts; " +
			"over a TAP or a veth that round trip is a few microseconds, so its window stays a few hundred segments, and its throughput to a receiver " +
			"is that window over the time the receiver takes to acknowledge under load. The kernel as receiver acknowledges in the softirq that took " +
			"the segment in; a user-space stack's ACK waits for its own goroutines or threads and a write(2), in which the sender's kernel also does its " +
			"sending. CUBIC's window grows until a loss or the receiver's window stops it, so the receiver's delay no longer sets the rate " +
			"(ARCHITECTURE.md, \"A BBR sender and a user-space receiver\").\n\n")
	}
}

// bulkTargets are bulk's targets (issue 5) at each point of workload
// (bulk, or bulk6 with what " over IPv6"): at least 1.2× gVisor and 0.75×
// the kernel.
func (r *report) bulkTargets(workload, what string) []target {
	var ts []target
	for _, pt := range r.points[workload] {
		dir, n, _ := strings.Cut(pt, "/")
		d := map[string]string{"up": "kernel→stack", "down": "stack→kernel"}[dir]
		g, okg := r.med(workload, pt, "gonet", "gbit_s")
		vg, sg := r.ratio(workload, pt, "gvisor", "gbit_s")
		vk, sk := r.ratio(workload, pt, "kernel", "gbit_s")
		ts = append(ts, target{
			what: fmt.Sprintf("Bulk TCP%s %s, %s stream(s)", what, d, n), goal: "≥ 1.2× gVisor, ≥ 0.75× kernel",
			gonet: num(g) + " Gbit/s", vsG: sg, vsK: sk,
			met:  mark(vg >= 1.2 && vk >= 0.75, okg && !math.IsNaN(vg) && !math.IsNaN(vk)),
			kind: "bulk-" + dir,
		})
	}
	return ts
}

// rrTargets are request-response's targets at each point of workload: a
// mean no longer than gVisor's and within 1.4× the kernel's.
func (r *report) rrTargets(workload, what string) []target {
	var ts []target
	for _, pt := range r.points[workload] {
		g, okg := r.med(workload, pt, "gonet", "mean_us")
		vg, sg := r.ratio(workload, pt, "gvisor", "mean_us")
		vk, sk := r.ratio(workload, pt, "kernel", "mean_us")
		ts = append(ts, target{
			what: "1-byte request-response" + what + ", " + strings.TrimPrefix(pt, "n=") + " conn(s), mean", goal: "≤ gVisor, ≤ 1.4× kernel",
			gonet: num(g) + " µs", vsG: sg, vsK: sk,
			met:  mark(vg <= 1 && vk <= 1.4, okg && !math.IsNaN(vg) && !math.IsNaN(vk)),
			kind: "rr",
		})
	}
	return ts
}

// pingTargets is ping's target: the mean at the most pingers no more than
// twice GoNet's at the fewest, and no longer than gVisor's.
func (r *report) pingTargets(workload, what string) []target {
	pts := r.points[workload]
	if len(pts) == 0 {
		return nil
	}
	lo, hi := pts[0], pts[len(pts)-1]
	g1, ok1 := r.med(workload, lo, "gonet", "mean_us")
	gN, okN := r.med(workload, hi, "gonet", "mean_us")
	vg, sg := r.ratio(workload, hi, "gvisor", "mean_us")
	_, sk := r.ratio(workload, hi, "kernel", "mean_us")
	flat := gN / g1
	return []target{{
		what:  fmt.Sprintf("Ping%s under load: mean at %s pingers", what, strings.TrimPrefix(hi, "n=")),
		goal:  fmt.Sprintf("≤ 2× GoNet at %s (%s), ≤ gVisor", strings.TrimPrefix(lo, "n="), fmt.Sprintf("now %.2f×", flat)),
		gonet: num(gN) + " µs", vsG: sg, vsK: sk,
		met: mark(flat <= 2 && vg <= 1, ok1 && okN && !math.IsNaN(vg)),
	}}
}

// targets are the issues' targets, judged on this run.
func (r *report) targets() []target {
	var ts []target
	med := r.med
	ts = append(ts, r.bulkTargets("bulk", "")...)
	ts = append(ts, r.bulkTargets("bulk-cubic", " (every sender CUBIC)")...)
	ts = append(ts, r.rrTargets("rr", "")...)
	ts = append(ts, r.pingTargets("ping", "")...)
	ts = append(ts, r.issue16Targets()...)
	for _, pt := range r.points["short"] {
		g, okg := med("short", pt, "gonet", "mbit_s")
		vg, sg := r.ratio("short", pt, "gvisor", "mbit_s")
		_, sk := r.ratio("short", pt, "kernel", "mbit_s")
		ts = append(ts, target{
			what: "Short transfers, " + strings.TrimPrefix(pt, "n=") + " clients", goal: "≥ gVisor",
			gonet: num(g) + " Mbit/s", vsG: sg, vsK: sk, met: mark(vg >= 1, okg && !math.IsNaN(vg)),
		})
	}
	for _, pt := range r.points["scale"] {
		g, okg := med("scale", pt, "gonet", "mem_per_conn")
		_, sg := r.ratio("scale", pt, "gvisor", "mem_per_conn")
		_, sk := r.ratio("scale", pt, "kernel", "mem_per_conn")
		ts = append(ts, target{
			what: "Memory per idle connection (" + strings.TrimPrefix(pt, "n=") + " held)", goal: "≤ 16 KiB",
			gonet: fmt.Sprintf("%.1f KiB", g/1024), vsG: sg, vsK: sk, met: mark(g <= 16<<10, okg),
		})
	}
	// IPv6 (issue 12): within 5% of IPv4, and IPv4's targets.
	ts = append(ts, r.ipv6Targets()...)
	ts = append(ts, r.bulkTargets("bulk6", " over IPv6")...)
	ts = append(ts, r.rrTargets("rr6", " over IPv6")...)
	ts = append(ts, r.pingTargets("ping6", " over IPv6")...)
	// Real-world paths (issue 16).
	ts = append(ts, r.pathTargets()...)

	// The cost of Go: the worst bulk point.
	worstGC, worstAllocs := math.NaN(), math.NaN()
	for _, pt := range r.points["bulk"] {
		if v, ok := med("bulk", pt, "gonet", "gc_cpu_frac"); ok && !(v <= worstGC) {
			worstGC = v
		}
		if v, ok := med("bulk", pt, "gonet", "allocs_per_frame"); ok && !(v <= worstAllocs) {
			worstAllocs = v
		}
	}
	ts = append(ts, target{what: "GC share of GoNet's CPU in bulk transfer (worst point)", goal: "< 5%",
		gonet: fmt.Sprintf("%.1f%%", 100*worstGC), vsG: "–", vsK: "–", met: mark(worstGC < 0.05, !math.IsNaN(worstGC))})
	ts = append(ts, target{what: "Heap allocations per frame, bulk (worst point; whole server process)", goal: "0 on the steady-state data path",
		gonet: num(worstAllocs), vsG: "–", vsK: "–", met: mark(worstAllocs < 0.01, !math.IsNaN(worstAllocs)), kind: "allocs"})

	// Biscuit's bound on a Go system's collector pauses (issue 14): the
	// longest pause in any repetition, not the median's.
	worst := func(w, m string) (float64, bool) {
		v, have := math.NaN(), false
		for _, pt := range r.points[w] {
			if s, ok := r.get(w, pt, "gonet", m); ok && !(s.Max <= v) {
				v, have = s.Max, true
			}
		}
		return v, have
	}
	pause := func(what, w, m string) {
		v, ok := worst(w, m)
		ts = append(ts, target{what: what, goal: "≤ 115 µs (Biscuit)", gonet: num(v) + " µs", vsG: "–", vsK: "–",
			met: mark(v <= 115, ok), kind: "gc-pause"})
	}
	pause("Longest GC pause in bulk transfer (any point, any repetition)", "bulk", "gc_pause_max_us")
	pause("Longest GC pause opening and holding 10000 connections", "scale", "gc_pause_max_us")
	pause("One collection while 10000 connections are held (forced; longest)", "scale", "gc_forced_max_us")
	return ts
}

// glance opens the report with the targets, why those missed are
// missed, the other machines' verdicts (machines.go) and who wins where.
func (r *report) glance(others []Results) {
	ts := r.targets()
	r.p("## At a glance: the issue's targets\n\n")
	r.p("| workload | target | GoNet | GoNet/gVisor | GoNet/kernel | |\n|---|---|---|---|---|---|\n")
	for _, t := range ts {
		r.p("| %s | %s | %s | %s | %s | %s |\n", t.what, t.goal, t.gonet, t.vsG, t.vsK, t.met)
	}
	r.p("\n")
	r.whyNotMet(ts)
	r.everyMachine(ts, others)
	r.whyElsewhere(ts, others)

	// Who wins each point, by its headline metric.
	r.p("### Who wins where\n\n| workload | point | best | GoNet | gVisor | kernel |\n|---|---|---|---|---|---|\n")
	type hl struct {
		w, metric, unit string
		lower           bool
	}
	for _, h := range []hl{
		{"ping", "mean_us", "µs", true}, {"short", "mbit_s", "Mbit/s", false}, {"bulk", "gbit_s", "Gbit/s", false},
		{"rr", "mean_us", "µs", true}, {"udp", "recv_mbit_s", "Mbit/s", false}, {"scale", "mem_per_conn", "B/conn", true},
		{"ping6", "mean_us", "µs", true}, {"bulk6", "gbit_s", "Gbit/s", false}, {"rr6", "mean_us", "µs", true},
		{pacedPingWorkload, "mean_us", "µs", true}, {udpRRWorkload, "mean_us", "µs", true}, {overloadWorkload, "p99_us", "µs p99", true},
	} {
		for _, pt := range r.points[h.w] {
			best, bestV := "", math.NaN()
			vals := map[string]string{}
			for _, st := range server.Stacks {
				s, ok := r.get(h.w, pt, st, h.metric)
				if !ok {
					vals[st] = "fail"
					continue
				}
				vals[st] = num(s.Med)
				if math.IsNaN(bestV) || (h.lower && s.Med < bestV) || (!h.lower && s.Med > bestV) {
					best, bestV = st, s.Med
				}
			}
			r.p("| %s (%s) | %s | **%s** | %s | %s | %s |\n", h.w, h.unit, pt, best, vals["gonet"], vals["gvisor"], vals["kernel"])
		}
	}
	r.p("\n")
}

func (r *report) goCost() {
	r.p("## 7. The cost of Go\n\n")
	r.p("Measured inside each server process with runtime/metrics between the start and the end of each bulk and request-response point, and of the scale point. The kernel's server is the same Go program with only the handlers and Go's net package in it: its numbers are the floor that the handlers and the runtime cost by themselves. Allocations per frame count every heap allocation in the server process (handlers included) over the frames its link carried (gVisor's TSO segments count once), from a snapshot halfway through each bulk and request-response point to its end: the first half's are the buffer pools growing to the point's peak of packets in flight, a count that stays the same whether a point lasts 3 s or 12 s (GoNet, 4 streams kernel→stack: about 1200 and 1400), so it would fall per frame with the point's length. The server's replies to the suite's own snapshots (walking the stack's counters, encoding them as JSON) allocate too; each snapshot leaves out what the earlier ones allocated.\n\n")
	cols := []struct{ metric, title string }{
		{"gc_cpu_frac", "GC CPU %"}, {"gc_cycles", "GCs"}, {"gc_pause_max_us", "longest pause µs"},
		{"gc_pause_p99_us", "p99 pause µs"}, {"gc_stop_max_us", "longest stopping µs"},
		{"gc_forced_median_us", "forced GC: median pause µs"}, {"gc_forced_max_us", "forced GC: longest µs"},
		{"allocs_per_frame", "allocs/frame"}, {"allocs_per_mb", "allocs/MB"},
		{"allocs_per_transaction", "allocs/transaction"}, {"goroutines_created", "goroutines created"},
	}
	r.p("| workload | stack |")
	for _, c := range cols {
		r.p(" %s |", c.title)
	}
	r.p("\n|---|---|%s\n", strings.Repeat("---|", len(cols)))
	for _, w := range []string{"bulk", "rr", "scale", "bulk6", "rr6"} {
		for _, pt := range r.points[w] {
			for _, st := range server.Stacks {
				if _, ok := r.get(w, pt, st, "gc_cycles"); !ok {
					continue // a point measured before the pauses were
				}
				r.p("| %s %s | %s |", w, pt, st)
				for _, c := range cols {
					scale := 1.0
					if c.metric == "gc_cpu_frac" {
						scale = 100
					}
					if _, ok := r.get(w, pt, st, c.metric); !ok {
						r.p(" – |")
						continue
					}
					r.p(" %s |", r.cell(w, pt, st, c.metric, scale))
				}
				r.p("\n")
			}
		}
	}
	r.p("\n*Pause figures are the upper bounds of runtime/metrics' histogram buckets; \"stopping\" is the part of a pause spent stopping the world (/sched/pauses/stopping/gc), which on a busy machine waits for the OS to run each thread that must stop; the scale rows cover opening and holding the connections and using each once, less three collections the suite forces while the connections are held (one after another, with the load generators idle), which the forced columns show: what a collection costs with 10000 connections in place; GoNet's server runs with the collector as the gonet daemon sets it (`stack.TuneGC`: GOGC off, GOMEMLIMIT 576 MiB), gVisor's and the kernel's with Go's defaults; GC CPU is the runtime's GC time (/cpu/classes/gc/total, added as each cycle ends) over the process's CPU time.*\n\n")
	if len(r.res.Micro) > 0 || r.res.MicroError != "" {
		r.p("### Allocations per packet, layer by layer\n\n")
		r.p("The stack's own Go benchmarks (`go test -run='^$' -bench=. -benchmem -benchtime=%v ./...` in the GoNet module), one operation a packet or a batch as each benchmark says:\n\n", r.res.Plan.MicroBenchTime)
		if r.res.MicroError != "" {
			r.p("**The benchmarks failed**: %s\n\n", strings.ReplaceAll(r.res.MicroError, "|", "\\|"))
		}
		if len(r.res.Micro) > 0 {
			r.p("| package | benchmark | ns/op | B/op | allocs/op |\n|---|---|---|---|---|\n")
			for _, b := range r.res.Micro {
				r.p("| %s | %s | %s | %s | %s |\n", b.Pkg, b.Name, num(b.NsOp), num(b.BytesOp), num(b.AllocsOp))
			}
			r.p("\n")
		}
	}
}

func (r *report) profiles() {
	if len(r.res.Profiles) == 0 {
		return
	}
	r.p("### Where the CPU goes (CPU profiles)\n\n")
	r.p("Separate runs after the measured ones, with the server's CPU profile on: \"bulk\" is %v kernel→stack then %v stack→kernel on one stream (GoNet's \"bulk6\" the same over IPv6), \"rr\" %v of 1-byte request-response on one connection. Categories sort each sample by the function it was in.\n\n",
		r.res.Plan.ProfileDur, r.res.Plan.ProfileDur, r.res.Plan.ProfileDur)
	// Categories side by side.
	var cats []string
	for _, p := range r.res.Profiles {
		for _, c := range p.Categories {
			if !slices.Contains(cats, c.Name) {
				cats = append(cats, c.Name)
			}
		}
	}
	r.p("| category |")
	for _, p := range r.res.Profiles {
		r.p(" %s %s |", p.Stack, p.Workload)
	}
	r.p("\n|---|%s\n", strings.Repeat("---|", len(r.res.Profiles)))
	for _, c := range cats {
		r.p("| %s |", c)
		for _, p := range r.res.Profiles {
			v := "–"
			for _, pc := range p.Categories {
				if pc.Name == c {
					v = fmt.Sprintf("%.1f%%", pc.FlatPct)
				}
			}
			r.p(" %s |", v)
		}
		r.p("\n")
	}
	r.p("| CPU seconds sampled |")
	for _, p := range r.res.Profiles {
		r.p(" %.2f |", p.SampledS)
	}
	r.p("\n\n")
	for _, p := range r.res.Profiles {
		if p.Error != "" {
			r.p("**%s %s**: profile failed: %s\n\n", p.Stack, p.Workload, firstLine(p.Error))
			continue
		}
		if p.Stack != "gonet" {
			continue
		}
		r.p("<details><summary>GoNet %s: top functions by own (flat) time</summary>\n\n| function | flat | cumulative |\n|---|---|---|\n", p.Workload)
		for _, f := range p.Top {
			r.p("| `%s` | %.1f%% | %.1f%% |\n", f.Name, f.FlatPct, f.CumPct)
		}
		r.p("\n</details>\n\n")
	}
}

func (r *report) failures() {
	if len(r.errs) == 0 {
		return
	}
	keys := make([]aggKey, 0, len(r.errs))
	for k := range r.errs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.workload != b.workload {
			return a.workload < b.workload
		}
		if a.point != b.point {
			return a.point < b.point
		}
		return a.stack < b.stack
	})
	r.p("## Failed measurements\n\nA failed repetition is left out of its median; a point with no successful repetition shows \"fail\".\n\n| workload | point | stack | failures | first error |\n|---|---|---|---|---|\n")
	for _, k := range keys {
		e := r.errs[k]
		r.p("| %s | %s | %s | %d | %s |\n", k.workload, k.point, k.stack, len(e), strings.ReplaceAll(e[0], "|", "\\|"))
	}
	r.p("\n")
}

// whyNotMet says, for each kind of target this run missed, where GoNet's
// time goes by this run's own profiles, and what that points at. The
// figures are this run's; the reading of them is the project's current
// understanding (ARCHITECTURE.md, "Measured decisions").
func (r *report) whyNotMet(ts []target) {
	if r.whyBullets(ts) {
		fmt.Fprintf(&r.b, "### Why the missed targets are missed\n\n%s\n", r.why.String())
	}
}

// whyBullets writes a bullet into r.why for each kind of target among ts
// that was missed, and reports whether there was one.
func (r *report) whyBullets(ts []target) bool {
	missed := map[string]bool{}
	var unexplained []string
	for _, t := range ts {
		switch {
		case !strings.HasPrefix(t.met, "❌"):
		case t.kind == "":
			unexplained = append(unexplained, t.what)
		default:
			missed[strings.TrimSuffix(strings.TrimSuffix(t.kind, "-up"), "-down")] = true
		}
	}
	if len(missed) == 0 && len(unexplained) == 0 {
		return false
	}
	r.out = &r.why
	defer func() { r.out = &r.b }()
	pct := func(workload, cat string) string {
		for _, p := range r.res.Profiles {
			if p.Stack != "gonet" || p.Workload != workload {
				continue
			}
			for _, c := range p.Categories {
				if strings.HasPrefix(c.Name, cat) {
					return fmt.Sprintf("%.0f%%", c.FlatPct)
				}
			}
		}
		return "?"
	}
	if missed["bulk"] {
		r.p("- **Bulk TCP**: in GoNet's bulk profile, system calls take %s (writing) and %s (reading) of the CPU and copying %s; the stack's own code %s. "+
			"Both directions already cross the TAP as 64 KiB super-segments with partial checksums; what is left is one TAP queue, read by one goroutine and written by another "+
			"(`IFF_MULTI_QUEUE`'s second queue bought nothing beyond the noise on two vCPUs, so one queue is the default), and two copies of every byte (TAP to buffer, buffer to reader; "+
			"writer to send buffer, send buffer to TAP) where the kernel over veth hands pages over. The daemon's services and IPv6 move their bytes the same way.%s "+
			"Tried and not kept, each measured against the code without it: 2 or 8 frames per receive batch instead of 64, GOMAXPROCS 3 or 4, ACKs stretched to 200 or 400 KB, "+
			"small frames written by their sender when nothing is queued, and dealing unfragmented datagrams in the NIC's receive goroutine (ARCHITECTURE.md, \"A BBR sender and a user-space receiver\" and \"Measured decisions\").",
			pct("bulk", "system calls: writing"), pct("bulk", "system calls: reading"), pct("bulk", "copying"), pct("bulk", "the stack's own code"), r.bimodalBulk())
		g, okg := r.med("bulk-cubic", "up/1", "gonet", "gbit_s")
		k, okk := r.med("bulk-cubic", "up/1", "kernel", "gbit_s")
		if r.res.Machine.CC == "bbr" && okg && okk && k > 0 {
			r.p(" Kernel→stack, the client's kernel sends with BBR, whose rate to a user-space receiver is its small window over the time the receiver takes to acknowledge "+
				"under load; with every sender on CUBIC GoNet took %s Gbit/s on one stream, %.2f× the kernel's (section 3, \"With every sender on CUBIC\"). "+
				"Polling the TAP before sleeping, which sends the ACKs sooner, gained the BBR stream a quarter in paired rounds on AMD EPYC (ARCHITECTURE.md, \"Measured decisions\").", num(g), g/k)
		}
		r.p("\n")
	}
	if missed["rr"] {
		var pts []string
		for _, t := range ts {
			if t.kind == "rr" && strings.HasPrefix(t.met, "❌") {
				name := strings.TrimSpace(strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(t.what, "1-byte request-response"), ", mean"), ","))
				pts = append(pts, fmt.Sprintf("%s %s, %s the kernel's and %s gVisor's", name, t.gonet, t.vsK, t.vsG))
			}
		}
		r.p("- **1-byte request-response** (%s): in GoNet's rr profile", strings.Join(pts, "; "))
		r.p(" the scheduler takes %s (sleeping and waking threads and goroutines) and system calls %s; "+
			"a round trip crosses five goroutines (NIC receive, IPv4 dealer, connection, application, NIC transmit), where the kernel answers in one softirq "+
			"and one system call each way. It beats gVisor (whose own profile shows the same costs) but not 1.4× the kernel. Fusing hops, measured one at a time, has bought nothing so far: "+
			"neither a direct write of a small frame on an idle link, nor dealing unfragmented datagrams in the NIC's receive goroutine (8 paired rounds on AMD EPYC, 1 connection: a median of 76 µs against 74). "+
			"The dealer, woken by a channel send, is queued to run next on the receive goroutine's processor (Go's runnext) and runs when that goroutine blocks in its next read, "+
			"so its hop was a goroutine switch, not a thread's wake-up; what is left is the system calls and the sleeping threads a frame arriving at an idle stack wakes. "+
			"Polling the TAP before sleeping (`tap.Options.Spin`, 50 µs, adaptive) takes the wake-up away and took 8-17%% off in paired rounds on AMD EPYC (ARCHITECTURE.md, \"Measured decisions\").\n",
			pct("rr", "scheduler"), pct("rr", "system calls: writing"))
	}
	if missed["gc-pause"] {
		maxOf := func(st, m string) (float64, bool) {
			v := math.NaN()
			for _, pt := range r.points["scale"] {
				if s, ok := r.get("scale", pt, st, m); ok && !(s.Max <= v) {
					v = s.Max
				}
			}
			return v, !math.IsNaN(v)
		}
		worst := func(st, m string) string {
			v, _ := maxOf(st, m)
			return num(v)
		}
		median := func(st, m string) string {
			for _, pt := range r.points["scale"] {
				if s, ok := r.get("scale", pt, st, m); ok {
					return num(s.Med)
				}
			}
			return "?"
		}
		tail := "the tail is the runtime's own work with the world stopped"
		if stop, ok := maxOf("gonet", "gc_forced_stop_max_us"); ok {
			if all, ok := maxOf("gonet", "gc_forced_max_us"); ok && stop >= all/2 {
				tail = "the tail is the stopping, a running thread reaching a safe point late or the OS running it late, not work done with the world stopped"
			}
		}
		r.p("- **GC pauses**: Go's stops of the world scan no heap. In a workload they wait for every running thread to stop, and on two CPUs shared with the load generators "+
			"for the OS to run them: the kernel's server, the same runtime with Go's net package, paused up to %s µs while the connections were opened and held. "+
			"GoNet's lever is to make no collection in steady state (`stack.TuneGC`: GOGC off, GOMEMLIMIT at the stack's memory budget plus 64 MiB, as the daemon runs), and it made none. "+
			"A collection forced with the connections held and the load generators idle stopped the world for a median of %s µs, at most %s µs, of which stopping took at most %s µs: "+
			"%s; the kernel's server shows such tails as well (at most %s µs forced) and gVisor's (%s µs).\n",
			worst("kernel", "gc_pause_max_us"), median("gonet", "gc_forced_median_us"), worst("gonet", "gc_forced_max_us"),
			worst("gonet", "gc_forced_stop_max_us"), tail, worst("kernel", "gc_forced_max_us"), worst("gvisor", "gc_forced_max_us"))
	}
	if missed["ipv6"] {
		r.whyIPv6()
	}
	r.whyIssue16(missed)
	r.whyPaths(ts)
	if missed["allocs"] {
		r.p("- **Allocations per frame**: counted over the whole server process (handlers, runtime, the stack) per frame its link carried; section 7 has them per " +
			"transaction and per MB, and the layer-by-layer benchmarks show which paths allocate.\n")
	}
	if len(unexplained) > 0 {
		r.p("- **Not explained yet**: %s. The report has no reading of these written; each one's section has its figures.\n", strings.Join(unexplained, "; "))
	}
	return true
}

// bimodalBulk names the bulk points kernel→stack, library's or daemon's,
// whose GoNet repetitions spread by more than half again: under BBR a
// stream settles either near the library's usual rate or near half of it,
// when the machine's copies slow (ARCHITECTURE.md, "Measured decisions").
func (r *report) bimodalBulk() string {
	var pts []string
	for _, w := range []string{"bulk", daemonBulk} {
		for _, pt := range r.points[w] {
			s, ok := r.get(w, pt, "gonet", "gbit_s")
			if !ok || !strings.HasPrefix(pt, "up/") || s.Min <= 0 || s.Max < 1.5*s.Min {
				continue
			}
			name := bulkPointName(pt)
			if w == daemonBulk {
				name = "the daemon's " + daemonBulkName(pt)
			}
			pts = append(pts, fmt.Sprintf("%s ranged %s–%s Gbit/s", name, num(s.Min), num(s.Max)))
		}
	}
	if len(pts) == 0 {
		return ""
	}
	return fmt.Sprintf(" Over its repetitions %s: a kernel→stack stream under BBR settles either near the library's usual rate or near half of it, the slower with more CPU per GB, and in the slow spells the kernel's own copies (the sender's into its socket buffer, the TAP's read) cost three to four times as much per byte, whichever vCPU each side runs on (ARCHITECTURE.md, \"Measured decisions\").", strings.Join(pts, "; "))
}
