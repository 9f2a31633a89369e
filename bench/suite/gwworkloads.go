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
		for _, dir := range udpDirections {
			for _, rate := range p.UDPRates {
				r := strconv.FormatFloat(rate, 'f', -1, 64)
				g.points = append(g.points, point{
					workload: gwUDP,
					name:     mtuPoint(mtu, fmt.Sprintf("%ssize=%d,rate=%s", dir.prefix, p.UDPSize, r)),
					label:    fmt.Sprintf("MTU %d, %s, %d B at %s Mbit/s", mtu, dir.label, p.UDPSize, r),
					run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
						return withMTU(e, mtu)(dir.run(ctx, e, p.UDPSize, rate, p.UDPDur))
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

// udpDirections are gw-udp's kinds of point: the guest sending (the stack
// comparison's runUDP, to the internet's sink), the guest downloading from
// the stock iperf3 (a datagram a send), and from a server that sends in
// runs with segmentation offload, as QUIC servers do.
var udpDirections = []struct {
	prefix, label string
	run           func(ctx context.Context, e *Env, size int, rate float64, d time.Duration) (map[string]float64, []byte, error)
}{
	{"", "guest→internet", runUDP},
	{"down/", "internet→guest", runUDPDown},
	{"down-runs/", fmt.Sprintf("internet→guest in runs of %d", udpSourceRun), runUDPDownRuns},
}

// udpSourceRun is the datagrams a send of the internet's UDP source in
// gw-udp's down-runs points.
const udpSourceRun = 16

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

// runUDPDownRuns measures UDP from the internet to the guest as a QUIC
// download would come: the guest's client asks the internet server's UDP
// source (handlers.UDPSource) for a flow, which it sends in runs of
// udpSourceRun datagrams, one send each with UDP_SEGMENT. Across the veth
// a run stays whole up to the receiving socket, which cuts it apart
// unless it takes runs whole (UDP_GRO), as a NIC's receive offload would
// gather a real server's datagrams for such a socket.
func runUDPDownRuns(ctx context.Context, e *Env, size int, rate float64, d time.Duration) (map[string]float64, []byte, error) {
	if rate == 0 {
		return nil, nil, errors.New("the UDP source sends at a rate asked for, not 0")
	}
	var r load.UDPDownResult
	hostBefore := kernelCounters(e.H)
	w, out, err := measureInto(ctx, e, &r, d+time.Minute, "udpdown", "-addr", e.Addr, "-size", strconv.Itoa(size),
		"-rate", strconv.FormatFloat(rate, 'f', -1, 64), "-run", strconv.Itoa(udpSourceRun), "-dur", dur(d))
	if err != nil {
		return nil, out, err
	}
	m := map[string]float64{
		"offered_mbit_s": rate,
		"recv_mbit_s":    r.RecvMbps,
		"loss_pct":       r.LossPct,
		"sent":           float64(r.Sent),
		"received":       float64(r.Received),
		"reordered":      float64(r.Reordered),
	}
	if !r.EndSeen {
		m["end_lost"] = 1
	}
	host := kernelCounters(e.H)
	m["host_rcvbuf_errors"] = float64(host["Udp.RcvbufErrors"] - hostBefore["Udp.RcvbufErrors"])
	m["guest_rcvbuf_errors"] = float64(w.cAfter["Udp.RcvbufErrors"] - w.cBefore["Udp.RcvbufErrors"])
	gatewayCPUPerGB(m, w.gwAfter.cpu-w.gwBefore.cpu, d)
	return m, out, nil
}
