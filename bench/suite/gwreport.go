package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var gatewayColor = map[string]color.Color{
	"gonet":       stackColor["gonet"],
	"pasta":       color.RGBA{R: 0x8e, G: 0x24, B: 0xaa, A: 0xff},
	"slirp4netns": color.RGBA{R: 0x2e, G: 0x7d, B: 0x32, A: 0xff},
	"gvproxy":     stackColor["gvisor"],
}

var gatewayTitle = map[string]string{"gonet": "GoNet (gonet gateway)", "pasta": "pasta", "slirp4netns": "slirp4netns", "gvproxy": "gvproxy (+ relay)"}

// splitMTU splits a gateway point "mtu=1500/up/1" into its MTU and the
// rest.
func splitMTU(pt string) (mtu, rest string) {
	m, rest, _ := strings.Cut(strings.TrimPrefix(pt, "mtu="), "/")
	return m, rest
}

// gwPointName is a gateway point as the report's rows name it.
func gwPointName(pt string) string {
	mtu, rest := splitMTU(pt)
	switch {
	case strings.HasPrefix(rest, "down/size="):
		return fmt.Sprintf("MTU %s, internet→guest, %s", mtu, udpPointName(strings.TrimPrefix(rest, "down/")))
	case strings.HasPrefix(rest, "down-runs/size="):
		return fmt.Sprintf("MTU %s, internet→guest in runs of %d, %s", mtu, udpSourceRun, udpPointName(strings.TrimPrefix(rest, "down-runs/")))
	case strings.HasPrefix(rest, "up/") || strings.HasPrefix(rest, "down/"):
		dir, n, _ := strings.Cut(rest, "/")
		d := map[string]string{"up": "guest→internet", "down": "internet→guest"}[dir]
		return fmt.Sprintf("MTU %s, %s, %s stream(s)", mtu, d, n)
	case strings.HasPrefix(rest, "size="):
		return fmt.Sprintf("MTU %s, guest→internet, %s", mtu, udpPointName(rest))
	default:
		return fmt.Sprintf("MTU %s, %s", mtu, strings.TrimPrefix(rest, "n="))
	}
}

// gwCounted names a point "mtu=1500/n=16" with what n counts: "MTU 1500,
// 16 clients".
func gwCounted(what string) func(string) string {
	return func(pt string) string {
		mtu, rest := splitMTU(pt)
		return fmt.Sprintf("MTU %s, %s %s", mtu, strings.TrimPrefix(rest, "n="), what)
	}
}

var (
	rrName   = gwCounted("connection")
	crrName  = gwCounted("client(s)")
	idleName = gwCounted("flows held")
)

// gateways are the gateways this report has records of, in the family's
// order.
func (r *report) gateways() []string {
	var out []string
	for _, g := range Gateways {
		for _, rec := range r.res.Records {
			if rec.Stack == g && slices.Contains(gatewayWorkloads, rec.Workload) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// peers are the gateways of the report other than GoNet's.
func (r *report) peers() []string {
	return slices.DeleteFunc(r.gateways(), func(g string) bool { return g == "gonet" })
}

// gwRatio is GoNet's median over a peer's for a gateway point.
func (r *report) gwRatio(workload, pt, peer, metric string) (float64, string) {
	return r.ratio(workload, pt, peer, metric)
}

// gwTable writes a row per point of a gateway workload: each gateway's
// figure, and GoNet's ratios to pasta and slirp4netns.
func (r *report) gwTable(workload, pointTitle, metric, unit string, scale float64, pointName func(string) string, ratios bool) {
	gws, peers := r.gateways(), r.peers()
	r.p("| %s |", pointTitle)
	for _, g := range gws {
		r.p(" %s |", gatewayTitle[g])
	}
	if ratios {
		for _, p := range peers {
			r.p(" GoNet/%s |", p)
		}
	}
	n := len(gws)
	if ratios {
		n += len(peers)
	}
	r.p("\n|---|%s\n", strings.Repeat("---|", n))
	for _, pt := range r.points[workload] {
		r.p("| %s |", pointName(pt))
		for _, g := range gws {
			r.p(" %s |", r.cell(workload, pt, g, metric, scale))
		}
		if ratios {
			for _, p := range peers {
				_, s := r.gwRatio(workload, pt, p, metric)
				r.p(" %s |", s)
			}
		}
		r.p("\n")
	}
	r.p("\n*%s; median of the repetitions [min–max].*\n\n", unit)
}

// gwGoals judges the speed goals for the gateway.
func (r *report) gwGoals() {
	type goal struct{ what, goal, gonet, vsP, vsS, met string }
	var gs []goal
	med := func(w, pt, st, m string) (float64, bool) {
		s, ok := r.get(w, pt, st, m)
		return s.Med, ok
	}
	// judge marks a goal from GoNet's ratios to its peers; a peer that
	// failed the point cannot be compared with, and says so.
	judge := func(w, pt string, have bool, checks map[string]func(v float64) bool, metric string) string {
		if !have {
			return "n/a (GoNet failed)"
		}
		ok, missing := true, []string{}
		for _, p := range r.peers() {
			check, judged := checks[p]
			if !judged {
				continue
			}
			v, _ := r.gwRatio(w, pt, p, metric)
			if math.IsNaN(v) {
				missing = append(missing, p+" failed")
				continue
			}
			ok = ok && check(v)
		}
		note := ""
		if len(missing) > 0 {
			note = " (" + strings.Join(missing, ", ") + ")"
		}
		switch {
		case len(missing) == len(checks):
			return "n/a" + note
		case ok && len(missing) > 0:
			return "✅ met against the rest" + note
		case ok:
			return "✅ met"
		}
		return "❌ not met" + note
	}
	for _, pt := range r.points[gwBulk] {
		g, ok := med(gwBulk, pt, "gonet", "gbit_s")
		_, sp := r.gwRatio(gwBulk, pt, "pasta", "gbit_s")
		_, ss := r.gwRatio(gwBulk, pt, "slirp4netns", "gbit_s")
		gs = append(gs, goal{"Bulk TCP, " + gwPointName(pt), "≥ 1.0× pasta, ≥ 2× slirp4netns", num(g) + " Gbit/s", sp, ss,
			judge(gwBulk, pt, ok, map[string]func(float64) bool{
				"pasta":       func(v float64) bool { return v >= 1 },
				"slirp4netns": func(v float64) bool { return v >= 2 },
			}, "gbit_s")})
	}
	for _, pt := range r.points[gwRR] {
		g, ok := med(gwRR, pt, "gonet", "mean_us")
		_, sp := r.gwRatio(gwRR, pt, "pasta", "mean_us")
		_, ss := r.gwRatio(gwRR, pt, "slirp4netns", "mean_us")
		gs = append(gs, goal{"1-byte request-response mean, " + rrName(pt), "≤ pasta", num(g) + " µs", sp, ss,
			judge(gwRR, pt, ok, map[string]func(float64) bool{"pasta": func(v float64) bool { return v <= 1 }}, "mean_us")})
	}
	for _, pt := range r.points[gwCRR] {
		g, ok := med(gwCRR, pt, "gonet", "conns_s")
		_, sp := r.gwRatio(gwCRR, pt, "pasta", "conns_s")
		_, ss := r.gwRatio(gwCRR, pt, "slirp4netns", "conns_s")
		gs = append(gs, goal{"Connections/s, " + crrName(pt), "≥ pasta", num(g) + "/s", sp, ss,
			judge(gwCRR, pt, ok, map[string]func(float64) bool{"pasta": func(v float64) bool { return v >= 1 }}, "conns_s")})
	}
	for _, pt := range r.points[gwIdle] {
		g, ok := med(gwIdle, pt, "gonet", "rss_per_flow")
		_, sp := r.gwRatio(gwIdle, pt, "pasta", "rss_per_flow")
		_, ss := r.gwRatio(gwIdle, pt, "slirp4netns", "rss_per_flow")
		met := "n/a (GoNet failed)"
		if ok {
			met = "❌ not met"
			if g <= 32<<10 {
				met = "✅ met"
			}
		}
		gs = append(gs, goal{"Memory per idle relayed flow, " + idleName(pt), "≤ 32 KiB", fmt.Sprintf("%.1f KiB", g/1024), sp, ss, met})
	}
	r.p("### The issue's speed goals\n\n| workload | goal | GoNet | GoNet/pasta | GoNet/slirp4netns | |\n|---|---|---|---|---|---|\n")
	for _, g := range gs {
		r.p("| %s | %s | %s | %s | %s | %s |\n", g.what, g.goal, g.gonet, g.vsP, g.vsS, g.met)
	}
	r.p("\n*Ratios are GoNet's median over the peer's: above 1 is better for throughputs and rates, below 1 for latencies and memory.*\n\n")

	// Why the missed ones are missed, from this run's own figures: the
	// gateway's CPU for the same work, where it is the limit.
	var why []string
	for _, g := range gs {
		if !strings.HasPrefix(g.met, "❌") {
			continue
		}
		switch {
		case strings.HasPrefix(g.what, "Connections/s"):
			why = append(why, "connections/s")
		case strings.HasPrefix(g.what, "Bulk"):
			why = append(why, "bulk")
		case strings.HasPrefix(g.what, "1-byte"):
			why = append(why, "rr")
		}
	}
	if slices.Contains(why, "connections/s") {
		var parts []string
		for _, pt := range r.points[gwCRR] {
			_, s := r.gwRatio(gwCRR, pt, "pasta", "cpu_us_per_conn")
			parts = append(parts, fmt.Sprintf("%s: %s of pasta's", crrName(pt), s))
		}
		r.p("- **Connections/s**: GoNet's gateway spends more CPU on each connection than pasta (%s; the table below): a relayed connection is a handshake on GoNet's TCP with the guest and a host socket's connect, and its set-up and teardown hand off between goroutines, a wake-up at each, where pasta does the same work in one thread. With 1 client the rate is the round trip of that work; with 16 the CPU is the limit on 2 cores.\n", strings.Join(parts, "; "))
	}
	if slices.Contains(why, "rr") {
		var parts []string
		for _, pt := range r.points[gwRR] {
			_, mean := r.gwRatio(gwRR, pt, "pasta", "mean_us")
			_, p50 := r.gwRatio(gwRR, pt, "pasta", "p50_us")
			parts = append(parts, fmt.Sprintf("%s: mean %s, median %s of pasta's", rrName(pt), mean, p50))
		}
		r.p("- **Request-response** (%s): a 1-byte round trip through GoNet crosses its NIC, TCP and relay goroutines each way, where pasta answers in one thread; the stack comparison's rr section profiles those hand-offs.\n", strings.Join(parts, "; "))
	}
	if slices.Contains(why, "bulk") {
		r.p("- **Bulk**: the bulk table below has GoNet's CPU per GB beside the peers'; on 2 cores with the load generator and the kernel server on the same machine, several streams share the CPU the gateway's single TAP queue needs.\n")
	}
	if len(why) > 0 {
		r.p("\n")
	}
}

// gatewaySection writes the gateway family's part of the report.
func (r *report) gatewaySection(plots map[string]string, rel func(string) string) {
	if len(r.points[gwBulk])+len(r.points[gwRR])+len(r.points[gwIdle]) == 0 {
		return
	}
	gp := r.res.Plan.Gateway
	var present []string
	for _, g := range r.gateways() {
		name := g
		if g == "gonet" {
			name = "gonet gateway"
		}
		present = append(present, name)
	}
	section := 8
	if r.hasIPv6() {
		section++ // the IPv6 section is 8
	}
	r.p("## %d. Gateways: %s (issue 11)\n\n", section, strings.Join(present, ", "))
	if g := r.res.Gateway; g != nil {
		r.p("Measured by `gonet-bench run -only gateway` (or `make bench`) on %s in %s of wall time, %d repetitions, GoNet %s; ",
			g.Started.UTC().Format("2006-01-02 15:04 UTC"), (time.Duration(g.WallS) * time.Second).String(), g.Reps, g.GoNet)
		var vs []string
		for _, name := range Gateways {
			if v := g.Versions[name]; v != "" && name != "gonet" {
				vs = append(vs, fmt.Sprintf("%s: %s", name, v))
			}
		}
		r.p("peers from the distribution's packages (%s). The repetitions interleave the gateways, starting with a different one each time.\n\n", strings.Join(vs, "; "))
	}
	contended, measured := 0, 0
	for _, rec := range r.res.Records {
		if v, ok := rec.Metrics["others_cpu_frac"]; ok && slices.Contains(gatewayWorkloads, rec.Workload) {
			measured++
			if v > contendedThreshold {
				contended++
			}
		}
	}
	if contended > 0 {
		r.p("**A shared machine:** other processes used more than %.0f%% of the CPUs during %d of the family's %d timed measurements; they are in the medians, and the min–max ranges show how far they moved.\n\n",
			100*contendedThreshold, contended, measured)
	}
	r.p("Each gateway serves a **guest** namespace from a **host** namespace, as a container runtime runs it: the guest's TAP device (`tap0`, 10.0.2.100/24, default route via 10.0.2.2) → the gateway process → the host namespace's own sockets → a veth → an **internet** namespace (10.78.0.2) running the kernel server of the stack comparison (`gonet-bench server -stack kernel`: the same echo, discard, source, request-response and UDP-sink handlers). ")
	r.p("The load generators of `bench/load` run in the guest against 10.78.0.2. The host namespace (10.78.0.1) has a default route via the internet namespace so that pasta finds its interface. Fresh namespaces for each gateway at each MTU in each repetition, deleted afterwards; the idle-flow point gets a set-up of its own.\n\n")
	r.p("- **GoNet**: `gonet gateway -tap tap0 -netns GUEST -configure -mtu N -no-host-loopback -dns-upstream 10.78.0.2:53 -control none` (a DNS upstream with nothing behind it, inside the bench's namespaces), built from this tree; the TAP device with `IFF_VNET_HDR` and offloads, so the guest's TCP crosses it as 64 KiB super-segments at either MTU.\n")
	r.p("- **pasta**: `pasta --runas 0 -f -q -P PIDFILE --netns GUEST -I tap0 -4 -a 10.0.2.100 -n 24 -g 10.0.2.2 -m N --config-net --no-map-gw --no-dhcp -t none -u none -T none -U none` (no DNS: this version offers none unless given `-D`).\n")
	r.p("- **slirp4netns**: `slirp4netns --configure --mtu=N --disable-host-loopback --disable-dns --netns-type=path GUEST tap0`.\n")
	r.p("- **gvisor-tap-vsock (gvproxy)**: `gvproxy -listen-qemu unix://SOCKET -mtu N -pid-file PIDFILE`, %s. It serves VMs over QEMU's stream socket (each frame behind a 32-bit big-endian length) and has no TAP device: `gonet-bench relay` (GoNet's `link/tap` and `link/stream` back to back, no stack between them) makes the guest's `tap0` and carries its frames to that socket, as a VM's virtio-net device would; the guest is configured as gvproxy's DHCP would configure it (192.168.127.2/24, default route via 192.168.127.1). **Its CPU and memory figures include the relay's** (two reads and two writes a frame, plain frames without offloads), which a VM's hypervisor would pay instead. Its DNS server answers from `/etc/resolv.conf` and cannot be turned off: its host namespace gets one of its own (`/etc/netns/NAME/resolv.conf`) naming 10.78.0.2, where nothing listens; no workload resolves a name.\n\n",
		gvproxyVersion)
	r.p("\"Guest→internet\" is the guest writing to the discard handler (counted once the server has read everything: half-close, wait for its close); \"internet→guest\" the guest reading the source handler; %v a point. CPU per GB is the gateway process's user+system time (`/proc/PID/stat`, all its threads) per GB of payload. The request-response point is 1 byte each way on 1 connection for %v; connections/s is connect, one 1-byte request and its answer, close (netperf's TCP_CRR), for %v, a point failing if any connection failed. UDP guest→internet sends %d-byte datagrams at a paced rate for %v to the sink and counts what arrived; internet→guest is the stock iperf3 reversed (`iperf3 -c -u -R`, its server in the internet namespace), the guest opening the flow and counting what the server's datagrams brought, as a download over QUIC would (in the JSON, `host_rcvbuf_errors` and `guest_rcvbuf_errors` say where they were lost: the host namespace's UDP queues, the gateway's host sockets, or the guest's socket); \"in runs of %d\" is the same download from a server that sends as QUIC servers do, %d datagrams a send with segmentation offload (UDP_SEGMENT; `handlers.UDPSource`), the guest's client asking for the flow and counting what comes (`load.UDPDown`): across the veth a run stays whole up to the gateway's host socket, which cuts it apart unless it takes runs whole (UDP_GRO), as a NIC's receive offload gathers a real server's datagrams for such a socket. A UDP point's CPU per GB is per GB received, so that a gateway is charged for what it carried and then lost; at 100 Mbit/s a point costs a gateway only a few of `/proc`'s 10 ms ticks, so those figures are coarse, and only the 1000 Mbit/s ones compare gateways. ",
		gp.BulkDur, gp.RRDur, gp.CRRDur, gp.UDPSize, gp.UDPDur, udpSourceRun, udpSourceRun)
	r.p("Memory per idle flow: %d connections from the guest through the gateway to the echo handler, held idle; the gateway process's VmRSS growth from before the first to %v after the internet's server holds them all, over the connections it holds. GoNet's Go heap is measured the same way, as resident memory (the collector runs on its own schedule; the figure at the moment the last flow opened is in the JSON as `rss_per_flow_at_open`). Memory the kernel holds for the gateways' host sockets is not counted for any of them.\n\n",
		gp.IdleConns, gp.IdleSettle)

	r.gwGoals()

	r.p("### Bulk TCP\n\n")
	r.gwTable(gwBulk, "point", "gbit_s", "Gbit/s of payload", 1, gwPointName, true)
	r.gwTable(gwBulk, "point", "cpu_s_per_gb", "CPU seconds of the gateway process per GB moved", 1, gwPointName, true)
	r.plot(plots, "gw_bulk", "Bulk TCP through each gateway", rel)
	r.p("*Bars by guest MTU; g→i is guest→internet, i→g internet→guest, ×N the streams. A missing bar is a failed point.*\n\n")

	r.p("### Request-response and connection rate\n\n")
	r.gwTable(gwRR, "point", "mean_us", "1-byte request-response, mean round trip, µs", 1, rrName, true)
	r.gwTable(gwRR, "point", "p50_us", "median round trip, µs", 1, rrName, true)
	r.gwTable(gwRR, "point", "p99_us", "99th percentile round trip, µs", 1, rrName, true)
	r.gwTable(gwCRR, "point", "conns_s", "connections per second (connect, 1 request, close)", 1, crrName, true)
	r.gwTable(gwCRR, "point", "cpu_us_per_conn", "CPU µs of the gateway process per connection", 1, crrName, true)
	r.plot(plots, "gw_crr", "Connections per second through each gateway", rel)

	r.p("### UDP\n\n")
	r.gwTable(gwUDP, "point", "recv_mbit_s", "received Mbit/s", 1, gwPointName, true)
	r.gwTable(gwUDP, "point", "loss_pct", "loss, % of the datagrams sent", 1, gwPointName, false)
	r.gwTable(gwUDP, "point", "cpu_s_per_gb", "CPU seconds of the gateway process per GB received", 1, gwPointName, true)

	r.p("### Memory per idle relayed flow\n\n")
	r.gwTable(gwIdle, "point", "rss_per_flow", "bytes of the gateway's resident memory per idle flow", 1, idleName, true)
	r.gwTable(gwIdle, "point", "establish_s", "seconds to open them all (256 at a time)", 1, idleName, true)

	r.peerBugs()
}

// peerBugs lists what went wrong with each peer gateway in this run, by
// workload, beside the bugs of this pasta the project knows.
func (r *report) peerBugs() {
	r.p("### Failures and peers' bugs seen\n\n")
	type key struct{ st, w, pt string }
	var order []key
	fails := map[key][]string{}
	for _, rec := range r.res.Records {
		if rec.Error == "" || !slices.Contains(gatewayWorkloads, rec.Workload) {
			continue
		}
		k := key{rec.Stack, rec.Workload, rec.Point}
		if fails[k] == nil {
			order = append(order, k)
		}
		fails[k] = append(fails[k], firstLine(rec.Error))
	}
	if len(order) == 0 {
		r.p("Every measurement of every gateway succeeded in this run.\n\n")
	} else {
		r.p("| gateway | workload | point | failed repetitions | first error |\n|---|---|---|---|---|\n")
		names := map[string]func(string) string{gwRR: rrName, gwCRR: crrName, gwIdle: idleName}
		for _, k := range order {
			name := gwPointName
			if n, ok := names[k.w]; ok {
				name = n
			}
			r.p("| %s | %s | %s | %d | %s |\n", k.st, k.w, name(k.pt), len(fails[k]), strings.ReplaceAll(fails[k][0], "|", "\\|"))
		}
		r.p("\n")
	}
	// An idle-flow point fails when any flow could not be opened, but
	// the flows that were say something of the gateway's memory still.
	for _, rec := range r.res.Records {
		if rec.Workload == gwIdle && rec.Error != "" && rec.Metrics["held"] > 0 {
			r.p("- %s, %s, repetition %d: held %.0f flows of %d (the rest timed out connecting, 256 dials at a time), %s bytes of resident memory per held flow.\n",
				rec.Stack, idleName(rec.Point), rec.Rep, rec.Metrics["held"], r.res.Plan.Gateway.IdleConns, num(rec.Metrics["rss_per_flow"]))
		}
	}
	r.p("\n")
	// A point far slower than its wall time says stalls: the client's
	// seconds over the planned ones.
	var slow []string
	for _, pt := range r.points[gwBulk] {
		for _, st := range r.gateways() {
			for _, rec := range r.res.Records {
				if rec.Workload != gwBulk || rec.Point != pt || rec.Stack != st || rec.Error != "" {
					continue
				}
				var c struct {
					Seconds float64 `json:"seconds"`
				}
				if jsonInto(rec.Client, &c) && c.Seconds > 2*r.res.Plan.Gateway.BulkDur.Seconds()+1 {
					slow = append(slow, fmt.Sprintf("%s %s (rep %d: %.1f s for %v)", st, gwPointName(pt), rec.Rep, c.Seconds, r.res.Plan.Gateway.BulkDur))
				}
			}
		}
	}
	if len(slow) > 0 {
		r.p("Transfers that took far longer than their %v to finish (the server reading what was sent, then closing): %s. Their Gbit/s count that time.\n\n",
			r.res.Plan.Gateway.BulkDur, strings.Join(slow, "; "))
	}
	r.p("Known bugs of this pasta (2023), reported beside its figures rather than worked around: guest-to-host bulk transfers stall; a half-close is resent and corrupted; a refused connect is answered by a bare RST. ")
	for _, k := range order {
		if k.st == "pasta" && k.w == gwBulk {
			r.p("Its guest→internet failures above are the upload's end: the guest half-closes and waits for the server's close, and gets a reset instead. ")
			break
		}
	}
	r.p("On memory: pasta keeps its connections in a table allocated when it starts, so its resident memory grows only by the pages that flows touch. No figure counts the kernel's memory for the host sockets, which every gateway holds one of per flow.\n\n")
}

// writeGatewayPlots draws the gateway family's figures into out.
func (r *report) writeGatewayPlots(path func(string) string, add func(string, error)) {
	if len(r.points[gwBulk]) > 0 {
		add("gw_bulk", r.gwBars("Bulk TCP through each gateway", "Gbit/s", []string{gwBulk}, "gbit_s", path("gw_bulk")))
	}
	if len(r.points[gwCRR]) > 0 {
		add("gw_crr", r.gwBars("Connections per second through each gateway", "connections/s", []string{gwCRR}, "conns_s", path("gw_crr")))
	}
}

// gwBars is a bar per gateway for each point of the workloads.
func (r *report) gwBars(title, ylabel string, workloads []string, metric, path string) (err error) {
	type pw struct{ w, pt string }
	var pts []pw
	for _, w := range workloads {
		for _, pt := range r.points[w] {
			pts = append(pts, pw{w, pt})
		}
	}
	if len(pts) == 0 {
		return errors.New("no data")
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("plot: %v", v)
		}
	}()
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	w := vg.Points(9)
	var top float64
	gws := r.gateways()
	for i, st := range gws {
		vals := make(plotter.Values, len(pts))
		for j, x := range pts {
			if s, ok := r.get(x.w, x.pt, st, metric); ok {
				vals[j] = s.Med
				top = math.Max(top, s.Med)
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color = gatewayColor[st]
		b.LineStyle.Width = 0
		b.Offset = w * (vg.Length(i) - vg.Length(len(gws)-1)/2)
		p.Add(b)
		p.Legend.Add(gatewayTitle[st], b)
	}
	names := make([]string, len(pts))
	for i, x := range pts {
		mtu, rest := splitMTU(x.pt)
		rest = strings.NewReplacer("up/", "g→i ×", "down/", "i→g ×", "n=", "×").Replace(rest)
		names[i] = mtu + "\n" + rest
	}
	p.NominalX(names...)
	p.X.Tick.Label.Font.Size = vg.Points(7)
	p.Y.Min, p.Y.Max = 0, top*1.35
	return p.Save(20*vg.Centimeter, 10*vg.Centimeter, path)
}

// jsonInto decodes raw into v, reporting whether it could.
func jsonInto(raw []byte, v any) bool {
	return len(raw) > 0 && json.Unmarshal(raw, v) == nil
}
