package suite

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gonetstack/gonet/bench/load"
	"github.com/gonetstack/gonet/bench/server"
)

// gatewayFamily names the gateway family's groups, for -only gateway.
const gatewayFamily = "gateway"

// The gateway family's workloads, as records name them.
const (
	gwBulk = "gw-bulk"
	gwRR   = "gw-rr"
	gwCRR  = "gw-crr"
	gwUDP  = "gw-udp"
	gwIdle = "gw-idle"
)

// gatewayWorkloads are the family's workloads in report order.
var gatewayWorkloads = []string{gwBulk, gwRR, gwCRR, gwUDP, gwIdle}

// mtuPoint names a point of the family at the guest MTU mtu.
func mtuPoint(mtu int, rest string) string { return fmt.Sprintf("mtu=%d/%s", mtu, rest) }

// gatewayGroups are the family's groups: at each MTU, one set-up per
// gateway for the traffic workloads, and a fresh one for the idle flows,
// whose memory figure must not inherit the buffers a bulk transfer left.
func (s *Suite) gatewayGroups() []group {
	p := s.Plan.Gateway
	var gs []group
	for _, mtu := range p.MTUs {
		setup := func(ctx context.Context, gateway string) (*Env, error) {
			return SetupGateway(ctx, s.Bin, gatewayBins{gonet: s.GoNetBin, gvproxy: s.GvproxyBin}, gateway, gatewayMTU(gateway, mtu))
		}
		g := group{workload: gatewayFamily, family: gatewayFamily, stacks: s.gateways(), setup: setup}
		for _, dir := range []string{"up", "down"} {
			for _, n := range p.BulkStreams {
				g.points = append(g.points, point{
					workload: gwBulk,
					name:     mtuPoint(mtu, fmt.Sprintf("%s/%d", dir, n)),
					label:    fmt.Sprintf("MTU %d, %s, %d stream(s)", mtu, map[string]string{"up": "guest→internet", "down": "internet→guest"}[dir], n),
					run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
						return withMTU(e, mtu)(runBulk(ctx, e, dir, n, p.BulkDur))
					},
				})
			}
		}
		g.points = append(g.points, point{
			workload: gwRR,
			name:     mtuPoint(mtu, "n=1"),
			label:    fmt.Sprintf("MTU %d, 1 connection", mtu),
			run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
				return withMTU(e, mtu)(runRR(ctx, e, 1, p.RRDur))
			},
		})
		for _, n := range p.CRRClients {
			g.points = append(g.points, point{
				workload: gwCRR,
				name:     mtuPoint(mtu, fmt.Sprintf("n=%d", n)),
				label:    fmt.Sprintf("MTU %d, %d client(s)", mtu, n),
				run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
					return withMTU(e, mtu)(runCRR(ctx, e, n, p.CRRDur))
				},
			})
		}
		for _, dir := range []string{"up", "down"} {
			prefix, d, run := "", "guest→internet", runUDPUp
			if dir == "down" {
				prefix, d, run = "down/", "internet→guest", runUDPDown
			}
			for _, rate := range p.UDPRates {
				r := strconv.FormatFloat(rate, 'f', -1, 64)
				g.points = append(g.points, point{
					workload: gwUDP,
					name:     mtuPoint(mtu, fmt.Sprintf("%ssize=%d,rate=%s", prefix, p.UDPSize, r)),
					label:    fmt.Sprintf("MTU %d, %s, %d B at %s Mbit/s", mtu, d, p.UDPSize, r),
					run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
						return withMTU(e, mtu)(run(ctx, e, p.UDPSize, rate, p.UDPDur))
					},
				})
			}
		}
		gs = append(gs, g)
		gs = append(gs, group{workload: gwIdle, family: gatewayFamily, stacks: s.gateways(), setup: setup, points: []point{{
			name:  mtuPoint(mtu, fmt.Sprintf("n=%d", p.IdleConns)),
			label: fmt.Sprintf("MTU %d, %d idle flows", mtu, p.IdleConns),
			run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
				return withMTU(e, mtu)(runIdle(ctx, e, p.IdleConns, p.IdleSettle))
			},
		}}})
	}
	return gs
}

// gateways are the gateways this run compares: -gateways, or all.
func (s *Suite) gateways() []string {
	if len(s.Gateways) > 0 {
		return s.Gateways
	}
	return Gateways
}

// withMTU adds to a point's metrics the MTU the gateway actually ran at
// (its maximum when the point's is larger).
func withMTU(e *Env, mtu int) func(map[string]float64, []byte, error) (map[string]float64, []byte, error) {
	return func(m map[string]float64, out []byte, err error) (map[string]float64, []byte, error) {
		if m != nil {
			m["mtu"] = float64(gatewayMTU(e.Stack, mtu))
		}
		return m, out, err
	}
}

// runCRR measures connections per second: connect, one 1-byte request and
// its answer, close.
func runCRR(ctx context.Context, e *Env, n int, d time.Duration) (map[string]float64, []byte, error) {
	var r load.CRRResult
	w, out, err := measureInto(ctx, e, &r, d+time.Minute, "crr", "-addr", e.Addr, "-n", strconv.Itoa(n), "-dur", dur(d))
	if err != nil {
		return nil, out, err
	}
	if r.Conns == 0 {
		return nil, out, fmt.Errorf("no connection completed (%d errors: %s)", r.Errors, r.FirstErr)
	}
	m := map[string]float64{
		"conns_s":      r.ConnsPerS,
		"conns":        float64(r.Conns),
		"errors":       float64(r.Errors),
		"mean_us":      r.Latency.MeanUS,
		"p50_us":       r.Latency.P50US,
		"p99_us":       r.Latency.P99US,
		"server_cpu_s": w.serverCPU(),
	}
	if w.gw {
		m["cpu_us_per_conn"] = w.stackCPU(e.Stack) / float64(r.Conns) * 1e6
	}
	w.counters(m)
	if r.Errors > 0 {
		// A rate bought by dropping connections is no rate.
		return m, out, fmt.Errorf("%d of %d connections failed: %s", r.Errors, r.Errors+r.Conns, r.FirstErr)
	}
	return m, out, nil
}

// runIdle opens n connections from the guest through the gateway and holds
// them idle, and divides the gateway process's resident-memory growth by
// the flows the internet's server holds: once all are established, and
// again after settle (a Go gateway's collector has run by then; its RSS
// is what the kernel charges, heap returned to the OS or not).
func runIdle(ctx context.Context, e *Env, n int, settle time.Duration) (map[string]float64, []byte, error) {
	before, err := e.serverIdle()
	if err != nil {
		return nil, nil, err
	}
	gwBefore, err := e.gatewayStat()
	if err != nil {
		return nil, nil, err
	}
	h, err := holdConns(ctx, e, n)
	if err != nil {
		return nil, nil, err
	}
	defer h.close()
	at, err := h.waitServed(e, before)
	if err != nil {
		return nil, h.first, err
	}
	gwAt, err := e.gatewayStat()
	if err != nil {
		return nil, h.first, err
	}
	time.Sleep(settle)
	gwSettled, err := e.gatewayStat()
	if err != nil {
		return nil, h.first, err
	}
	r, last, err := h.release()
	if err != nil {
		return nil, last, err
	}
	served := at.Active - before.Active
	if served <= 0 {
		return nil, last, fmt.Errorf("the internet's server holds no connection (%d failed: %s)", r.Failed, r.FirstFailure)
	}
	m := map[string]float64{
		"establish_s":          r.EstablishS,
		"conns_s":              r.ConnsPerS,
		"use_s":                r.UseS,
		"held":                 float64(served),
		"failed":               float64(r.Failed),
		"rss_per_flow":         float64(gwSettled.rss-gwBefore.rss) / float64(served),
		"rss_per_flow_at_open": float64(gwAt.rss-gwBefore.rss) / float64(served),
		"rss_before":           float64(gwBefore.rss),
	}
	if r.Failed > 0 {
		return m, last, fmt.Errorf("%d of %d flows failed: %s", r.Failed, n, r.FirstFailure)
	}
	return m, last, nil
}

// serverIdle waits (up to 5 s) until the internet's server holds no
// connection (the set-up's probe has gone through the gateway's close),
// so that its count of held connections is the workload's alone.
func (e *Env) serverIdle() (server.Snapshot, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := e.Stats()
		if err != nil || s.Active == 0 || time.Now().After(deadline) {
			return s, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runUDPUp measures UDP from the guest to the internet as the stack
// comparison's runUDP does, with the gateway's CPU per GB received.
func runUDPUp(ctx context.Context, e *Env, size int, rate float64, d time.Duration) (map[string]float64, []byte, error) {
	before, err := e.gatewayStat()
	if err != nil {
		return nil, nil, err
	}
	m, out, err := runUDP(ctx, e, size, rate, d)
	if m == nil {
		return m, out, err
	}
	after, serr := e.gatewayStat()
	if serr != nil {
		return m, out, errors.Join(err, serr)
	}
	gatewayCPUPerGB(m, after.cpu-before.cpu, d)
	return m, out, err
}

// gatewayCPUPerGB adds to a UDP point's metrics the gateway's CPU seconds
// per GB received, cpu the seconds it spent in the point's d.
func gatewayCPUPerGB(m map[string]float64, cpu float64, d time.Duration) {
	if gb := m["recv_mbit_s"] * d.Seconds() / 8e3; gb > 0 {
		m["cpu_s_per_gb"] = cpu / gb
	}
}

// runUDPDown measures UDP from the internet to the guest: the stock
// iperf3 in the guest against the one in the internet's namespace,
// reversed (-R), so that the guest opens the flow (iperf3's first
// datagram) and the server's datagrams come back through it, as a
// download over QUIC does. The guest's iperf3 receives and counts.
func runUDPDown(ctx context.Context, e *Env, size int, rate float64, d time.Duration) (map[string]float64, []byte, error) {
	b := mkMaxRate
	if rate > 0 {
		b = strconv.FormatFloat(rate, 'f', 1, 64) + "M"
	}
	gwBefore, err := e.gatewayStat()
	if err != nil {
		return nil, nil, err
	}
	guestBefore, hostBefore := kernelCounters(e.C), kernelCounters(e.H)
	raw, err := e.iperf3Test(ctx, "", nil, d, "-u", "-R", "-b", b, "-l", strconv.Itoa(size))
	if err != nil {
		return nil, raw, err
	}
	gwAfter, err := e.gatewayStat()
	if err != nil {
		return nil, raw, err
	}
	m, err := udpMetrics(raw)
	if m == nil {
		return nil, raw, err
	}
	m["offered_mbit_s"] = rate
	if rate == 0 {
		m["offered_mbit_s"] = m["sent_mbit_s"]
	}
	// Where the datagrams were lost: the gateway's host sockets (the
	// host namespace's UDP queues) or the guest's socket.
	guest, host := kernelCounters(e.C), kernelCounters(e.H)
	m["host_rcvbuf_errors"] = float64(host["Udp.RcvbufErrors"] - hostBefore["Udp.RcvbufErrors"])
	m["guest_rcvbuf_errors"] = float64(guest["Udp.RcvbufErrors"] - guestBefore["Udp.RcvbufErrors"])
	gatewayCPUPerGB(m, gwAfter.cpu-gwBefore.cpu, d)
	return m, raw, err
}
