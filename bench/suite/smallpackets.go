package suite

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gonetstack/gonet/bench/load"
)

// Issue 16's small packets: ping at a faster pace than the ping workload's
// and in a closed loop, and request-response over UDP, with the packets
// each stack moves per second of its CPU.

const (
	pacedPingWorkload = "ping-pace"
	udpRRWorkload     = "udprr"
)

// pacedPingGroup is ping at p.PacedInterval and in a closed loop (each
// pinger sending as its reply arrives), at each of p.PacedPingers.
func pacedPingGroup(p Plan) group {
	g := group{workload: pacedPingWorkload}
	for _, n := range p.PacedPingers {
		for _, interval := range []time.Duration{p.PacedInterval, 0} {
			g.points = append(g.points, point{
				name:  fmt.Sprintf("n=%d/%s", n, paceName(interval)),
				label: fmt.Sprintf("%d pingers, %s", n, paceLabel(interval)),
				run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
					return runPing(ctx, e, n, interval, p.PingDur)
				},
			})
		}
	}
	return g
}

// paceName is a pinger's interval as a point names it: "10ms", or
// "closed" for a closed loop.
func paceName(interval time.Duration) string {
	if interval == 0 {
		return "closed"
	}
	return interval.String()
}

func paceLabel(interval time.Duration) string {
	if interval == 0 {
		return "closed loop"
	}
	return interval.String() + " pace"
}

// udpRRGroup is UDP request-response on each of p.UDPRRSockets.
func udpRRGroup(p Plan) group {
	g := group{workload: udpRRWorkload}
	for _, n := range p.UDPRRSockets {
		g.points = append(g.points, point{
			name:  fmt.Sprintf("n=%d", n),
			label: fmt.Sprintf("%d socket(s)", n),
			run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
				return runUDPRR(ctx, e, n, p.RRDur)
			},
		})
	}
	return g
}

func runUDPRR(ctx context.Context, e *Env, n int, d time.Duration) (map[string]float64, []byte, error) {
	var r load.UDPRRResult
	w, out, err := measureInto(ctx, e, &r, d+time.Minute, "udprr", "-addr", e.Addr, "-n", strconv.Itoa(n), "-dur", dur(d))
	if err != nil {
		return nil, out, err
	}
	if r.Transactions == 0 {
		return nil, out, fmt.Errorf("no request answered (%d lost: %s)", r.Lost, r.FirstErr)
	}
	m := map[string]float64{
		"mean_us":        r.Latency.MeanUS,
		"p50_us":         r.Latency.P50US,
		"p99_us":         r.Latency.P99US,
		"transactions_s": r.PerSecond,
		"lost":           float64(r.Lost),
		"server_cpu_s":   w.serverCPU(),
	}
	w.packetRate(m, e.Stack)
	w.counters(m)
	return m, out, nil
}

// packetRate adds to m the IPv4 packets that crossed the link during the
// window ("pkts": what the client namespace's kernel received and sent,
// Ip.InReceives and Ip.OutRequests, a count the same for all three
// stacks) and those per second of the stack's CPU: "pkts_per_cpu_s" over
// stackCPU (the server process, and for the kernel the machine's softirq
// time too, as CPU per GB is measured), "pkts_per_server_cpu_s" over the
// server process's time alone. On the small-packet paths, where a packet
// is a request or an answer, it is the rate one core sustains.
func (w window) packetRate(m map[string]float64, stack string) {
	d := map[string]float64{}
	counterDelta("", w.cBefore, w.cAfter, d)
	pkts := d["Ip.InReceives"] + d["Ip.OutRequests"]
	if pkts <= 0 {
		return // an IPv6 window: the client's Ip6 counters are not read
	}
	m["pkts"] = pkts
	if c := w.stackCPU(stack); c > 0 {
		m["pkts_per_cpu_s"] = pkts / c
	}
	if c := w.serverCPU(); c > 0 && !w.gw {
		m["pkts_per_server_cpu_s"] = pkts / c
	}
}
