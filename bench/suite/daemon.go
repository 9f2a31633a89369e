package suite

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/bench/load"
	"github.com/gonetstack/gonet/internal/netns"
)

// Issue 16's daemon: GoNet as a user runs it, `gonet up -serve
// echo,discard,chargen` on a TAP device in the client namespace, measured
// through its own services (discard as the sink, chargen and echo as
// sources) by the same load generators as the library, beside the
// library's figures of the same run.

const (
	daemonWorkload = "daemon" // the group, as -only names it
	daemonBulk     = "daemon-bulk"
	daemonRR       = "daemon-rr"
)

// The daemon's services on their well-known ports (package services).
const (
	daemonEchoPort    = 7  // RFC 862
	daemonDiscardPort = 9  // RFC 863
	daemonChargenPort = 19 // RFC 864
)

// daemonReady starts the line gonet up prints once it serves.
const daemonReady = "gonet: up "

// daemonGroup is bulk to the daemon's discard and from its chargen on each
// of p.DaemonStreams, and request-response through its echo on each of
// p.DaemonRRConns, on one set-up of the daemon. It is GoNet's alone; its
// peers are the bulk and rr workloads' figures.
func (s *Suite) daemonGroup() group {
	p := s.Plan
	g := group{
		workload: daemonWorkload,
		stacks:   []string{"gonet"},
		setup: func(ctx context.Context, _ string) (*Env, error) {
			return SetupDaemon(ctx, s.Bin, s.GoNetBin)
		},
	}
	for _, dir := range []string{"up", "down"} {
		for _, n := range p.DaemonStreams {
			g.points = append(g.points, point{
				name:     fmt.Sprintf("%s/%d", dir, n),
				workload: daemonBulk,
				label:    fmt.Sprintf("%s, %d stream(s)", map[string]string{"up": "to discard", "down": "from chargen"}[dir], n),
				run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
					return runDaemonBulk(ctx, e, s.GoNetBin, dir, n, p.BulkDur)
				},
			})
		}
	}
	for _, n := range p.DaemonRRConns {
		g.points = append(g.points, point{
			name:     fmt.Sprintf("n=%d", n),
			workload: daemonRR,
			label:    fmt.Sprintf("echo, %d connection(s)", n),
			run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
				return runDaemonRR(ctx, e, s.GoNetBin, n, p.RRDur)
			},
		})
	}
	return g
}

// SetupDaemon runs gonet up in a client namespace as the gonet set-up runs
// the library's server: a fresh TAP device with offloads (the daemon's
// default), 10.77.0.2/24, MTU 1500, IPv6 beside IPv4; no mDNS, which would
// only add traffic. It returns once the client reaches it.
func SetupDaemon(ctx context.Context, bin, gonet string) (e *Env, err error) {
	e = &Env{Stack: "gonet", Addr: serverAddr.Addr().String(), bin: bin, stderr: &limitedBuffer{max: 64 << 10}}
	register(e, true)
	defer func() {
		if err != nil {
			err = fmt.Errorf("set up gonet up: %w%s", err, e.gatewayLog())
			e.Close()
		}
	}()
	if gonet == "" {
		return e, errors.New("no GoNet daemon built")
	}
	if e.C, err = netns.New(nsPrefix); err != nil {
		return e, err
	}
	for _, s := range clientSysctls {
		if err := sysctl(e.C, s[0], s[1]); err != nil {
			return e, err
		}
	}
	// The control socket, a path on the host's file system whatever the
	// namespace, is where the suite reads the daemon's counters
	// (daemonCounters); Close removes the directory.
	if e.tmp, err = os.MkdirTemp("", "gnbench-daemon-"); err != nil {
		return e, err
	}
	dev := netns.DeviceName()
	g := &gatewayProc{name: "gonet up", out: &limitedBuffer{max: 64 << 10}, exited: make(chan struct{})}
	g.cmd = e.C.Command(context.Background(), gonet, "up", "-tap", dev, "-addr", serverAddr.String(),
		"-mtu", strconv.Itoa(mtu), "-serve", "echo,discard,chargen", "-control", daemonControl(e), "-mdns=false", "-log-level", "warn")
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g.cmd.Stderr = g.out
	stdout, err := g.cmd.StdoutPipe()
	if err != nil {
		return e, err
	}
	if err := g.cmd.Start(); err != nil {
		return e, fmt.Errorf("start %s: %w", gonet, err)
	}
	e.gw = g
	g.pid = g.cmd.Process.Pid
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			fmt.Fprintln(g.out, sc.Text())
			if !said && strings.HasPrefix(sc.Text(), daemonReady) {
				said = true
				close(up)
			}
		}
	}()
	go func() {
		g.err = g.cmd.Wait()
		close(g.exited)
	}()
	select {
	case <-up:
	case <-g.exited:
		return e, fmt.Errorf("gonet up exited before it was up: %v", g.err)
	case <-time.After(30 * time.Second):
		return e, fmt.Errorf("gonet up did not say %q within 30 s", strings.TrimSpace(daemonReady))
	}
	if err := e.C.ConfigureLink(dev, clientAddr, mtu); err != nil {
		return e, err
	}
	return e, e.waitReachable(ctx)
}

// daemonControl is the daemon's control socket.
func daemonControl(e *Env) string { return filepath.Join(e.tmp, "control.sock") }

// daemonCounters asks the daemon for its stack's counters as gonet stats
// -json prints them (gonet is the daemon's binary): by the names the
// library's server reports ("TCP.RetransSegs", "NIC.<name>.TxLinkErrors").
func daemonCounters(ctx context.Context, e *Env, gonet string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, gonet, "stats", "-json", "-control", daemonControl(e)).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("gonet stats: %w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("gonet stats: %w", err)
	}
	m := map[string]int64{}
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("gonet stats -json: %w", err)
	}
	return m, nil
}

// measureDaemon runs a load generator against the daemon between two
// samples of its process (CPU time from /proc, as the gateway family's),
// of its counters, and of the client namespace's kernel, and decodes what
// it printed into r.
func measureDaemon(ctx context.Context, e *Env, gonet string, r any, timeout time.Duration, args ...string) (window, []byte, error) {
	w := window{gw: true}
	var err error
	if w.sBefore, err = daemonCounters(ctx, e, gonet); err != nil {
		return w, nil, err
	}
	if w.gwBefore, err = e.gatewayStat(); err != nil {
		return w, nil, err
	}
	w.before.Time = time.Now()
	w.cBefore = kernelCounters(e.C)
	w.sysBefore = readSysStat()
	out, err := e.Client(ctx, timeout, args...)
	w.sysAfter = readSysStat()
	w.after.Time = time.Now()
	w.clientCPU = e.lastClientCPU
	if err != nil {
		return w, out, err
	}
	if w.gwAfter, err = e.gatewayStat(); err != nil {
		return w, out, err
	}
	w.cAfter = kernelCounters(e.C)
	if w.sAfter, err = daemonCounters(ctx, e, gonet); err != nil {
		return w, out, err
	}
	return w, out, json.Unmarshal(out, r)
}

func runDaemonBulk(ctx context.Context, e *Env, gonet, dir string, n int, d time.Duration) (map[string]float64, []byte, error) {
	port := daemonDiscardPort
	if dir == "down" {
		port = daemonChargenPort
	}
	var r load.BulkResult
	w, out, err := measureDaemon(ctx, e, gonet, &r, d+time.Minute, "bulk", "-addr", e.Addr, "-dir", dir, "-n", strconv.Itoa(n),
		"-port", strconv.Itoa(port), "-dur", dur(d))
	if err != nil {
		return nil, out, err
	}
	gb := float64(r.Bytes) / 1e9
	m := map[string]float64{
		"gbit_s":           r.Gbps,
		"bytes":            float64(r.Bytes),
		"daemon_cpu_s":     w.stackCPU(e.Stack),
		"cpu_s_per_gb":     w.stackCPU(e.Stack) / gb,
		"sys_cpu_s_per_gb": (w.sysAfter.busy - w.sysBefore.busy) / gb,
	}
	if v, ok := w.retransPct(dir); ok {
		m["retrans_pct"] = v
	}
	if dir == "up" {
		m["link_drops"] = float64(w.cAfter["Dev.TxDropped"] - w.cBefore["Dev.TxDropped"])
		m["stack_queue_drops"] = float64(w.sAfter["TCP.InQueueDrops"] - w.sBefore["TCP.InQueueDrops"])
	}
	w.counters(m)
	return m, out, nil
}

func runDaemonRR(ctx context.Context, e *Env, gonet string, n int, d time.Duration) (map[string]float64, []byte, error) {
	var r load.RRResult
	w, out, err := measureDaemon(ctx, e, gonet, &r, d+time.Minute, "rr", "-addr", e.Addr, "-n", strconv.Itoa(n),
		"-port", strconv.Itoa(daemonEchoPort), "-dur", dur(d))
	if err != nil {
		return nil, out, err
	}
	m := map[string]float64{
		"mean_us":        r.Latency.MeanUS,
		"p50_us":         r.Latency.P50US,
		"p99_us":         r.Latency.P99US,
		"transactions_s": r.PerSecond,
		"daemon_cpu_s":   w.stackCPU(e.Stack),
	}
	if r.Transactions > 0 {
		m["cpu_us_per_transaction"] = w.stackCPU(e.Stack) / float64(r.Transactions) * 1e6
	}
	w.packetRate(m, e.Stack)
	w.counters(m)
	return m, out, nil
}
