package suite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/bench/load"
	"github.com/gonetstack/gonet/internal/netns"
)

// The multikernel family (issue 13, "Measure") runs the experiments of the
// co-kernel systems GoNet descends from, each partition a network stack of
// its own, between two processes:
//
//   - ring: two GoNet processes on one shared-memory ring (link/shm),
//     `gonet up -ring-listen` serving and `gonet iperf3 -ring` measuring;
//   - bridge: the same two attached as ring ports of `gonet bridge`;
//   - tapbr: the same two on two TAP devices joined by a Linux bridge;
//   - veth: the kernel at both ends of a veth pair between two
//     namespaces, the reference, with the stock iperf3.
//
// Everything runs in namespaces the set-up creates; the GoNet set-ups'
// traffic never meets a kernel socket (the TAPs' frames cross the
// namespace's Linux bridge, nothing else).
const multikernelFamily = "multikernel"

// The family's workloads, as records name them.
const (
	mkTCP  = "mk-tcp"  // iperf3 TCP, client to server
	mkRR   = "mk-rr"   // 1-byte request-response
	mkUDP  = "mk-udp"  // iperf3 UDP at an offered rate
	mkRing = "mk-ring" // UDP loss against the direct ring's size
)

// multikernelWorkloads are the family's workloads in report order.
var multikernelWorkloads = []string{mkTCP, mkRR, mkUDP, mkRing}

// The set-ups, as records name them in their Stack field.
const (
	setupRing   = "ring"
	setupBridge = "bridge"
	setupTAPs   = "tapbr"
	setupVeth   = "veth"
)

// MultikernelSetups are the family's set-ups, in the order the first
// repetition runs them.
var MultikernelSetups = []string{setupRing, setupBridge, setupTAPs, setupVeth}

// The two ends' addresses and, for the GoNet ends, fixed MACs: a client
// process started afresh for each test keeps its station address, so that
// neither the bridges' tables nor the server's ARP cache hold a stale one.
// They exist only inside the set-up's namespaces (and on its rings).
var (
	mkClientAddr = netip.MustParsePrefix("10.79.0.1/24")
	mkServerAddr = netip.MustParsePrefix("10.79.0.2/24")
)

const (
	mkClientMAC = "02:00:5e:4d:00:01"
	mkServerMAC = "02:00:5e:4d:00:02"
	// The tapbr set-up's devices, in its own namespace.
	mkTAPServer = "gnmk0"
	mkTAPClient = "gnmk1"
	mkLinuxBr   = "gnmkbr0"
	// mkEchoPort is GoNet's echo service (RFC 862), the request-response
	// server of the GoNet set-ups.
	mkEchoPort = 7
	// mkMaxRate is the "unpaced" rate: neither GoNet's client nor
	// iperf3's can offer 100 Gbit/s here, so the sender runs as fast as
	// it can, and both read -b the same way (GoNet's takes 0 as 1M).
	mkMaxRate = "100G"
)

// MultikernelRun is when and with what the multikernel family was
// measured.
type MultikernelRun struct {
	Started time.Time `json:"started"`
	WallS   float64   `json:"wall_s"`
	Reps    int       `json:"reps"`
	GoNet   string    `json:"gonet"`
	Iperf3  string    `json:"iperf3"` // the stock iperf3's --version
}

// prepareMultikernel builds GoNet's daemon unless given one, and notes what
// the family runs with.
func (s *Suite) prepareMultikernel(ctx context.Context) error {
	if err := s.buildGoNet(ctx); err != nil {
		return fmt.Errorf("multikernel family: %w", err)
	}
	v := "not installed (Debian package iperf3)"
	if out, err := exec.Command("iperf3", "--version").Output(); err == nil {
		v, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	}
	s.res.Multikernel = &MultikernelRun{Started: time.Now(), Reps: s.repsOf(group{family: multikernelFamily}), GoNet: s.res.Machine.GoNet, Iperf3: v}
	return nil
}

// multikernelGroups are the family's groups: one set-up per set-up and
// repetition for TCP, request-response and UDP, and one more of the
// direct ring for loss against its size.
func (s *Suite) multikernelGroups() []group {
	p := s.Plan.Multikernel
	setup := func(ctx context.Context, name string) (*Env, error) {
		return SetupMultikernel(ctx, s.Bin, s.GoNetBin, name)
	}
	// mkPoint is a point whose metrics have the machine's CPU use during
	// it.
	mkPoint := func(workload, name, label string, run func(ctx context.Context, e *Env) (map[string]float64, []byte, error)) point {
		return pointT{workload, name, label, run}.measured()
	}
	g := group{workload: multikernelFamily, family: multikernelFamily, stacks: MultikernelSetups, setup: setup}
	for _, n := range p.TCPStreams {
		g.points = append(g.points, mkPoint(mkTCP, fmt.Sprintf("P=%d", n), fmt.Sprintf("TCP, %d stream(s)", n),
			func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
				return runMKTCP(ctx, e, s.GoNetBin, n, p.TCPDur)
			}))
	}
	if p.RRDur > 0 {
		g.points = append(g.points, mkPoint(mkRR, "n=1", "1-byte request-response",
			func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
				return runMKRR(ctx, e, s.GoNetBin, p.RRDur)
			}))
	}
	// sat holds each set-up's saturation at each size in the current
	// repetition ("ring/1472": received Mbit/s with the sender
	// unpaced), measured first, so that the points after it can be
	// placed against it. The points of one set-up run in order on it.
	sat := map[string]float64{}
	for _, size := range p.UDPSizes {
		key := func(e *Env) string { return fmt.Sprintf("%s/%d", e.Stack, size) }
		if p.UDPSaturation {
			g.points = append(g.points, mkPoint(mkUDP, fmt.Sprintf("size=%d,rate=max", size), fmt.Sprintf("UDP %d B unpaced", size),
				func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
					delete(sat, key(e))
					m, raw, err := runMKUDP(ctx, e, s.GoNetBin, size, 0, 0, p.UDPDur)
					if err == nil {
						sat[key(e)] = m["recv_mbit_s"]
					}
					return m, raw, err
				}))
		}
		for _, rate := range p.UDPRates {
			r := strconv.FormatFloat(rate, 'f', -1, 64)
			g.points = append(g.points, mkPoint(mkUDP, fmt.Sprintf("size=%d,rate=%s", size, r), fmt.Sprintf("UDP %d B at %s Mbit/s", size, r),
				func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
					return runMKUDP(ctx, e, s.GoNetBin, size, rate, 0, p.UDPDur)
				}))
		}
		if p.UDPSaturation {
			g.points = append(g.points, mkPoint(mkUDP, fmt.Sprintf("size=%d,rate=0.8sat", size), fmt.Sprintf("UDP %d B at 80%% of saturation", size),
				func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
					v := sat[key(e)]
					if v <= 0 {
						return nil, nil, errors.New("no saturation measured on this set-up in this repetition")
					}
					m, raw, err := runMKUDP(ctx, e, s.GoNetBin, size, 0.8*v, 0, p.UDPDur)
					if m != nil {
						m["sat_mbit_s"] = v
					}
					return m, raw, err
				}))
		}
	}
	gs := []group{g}
	if len(p.RingSizes) > 0 {
		rg := group{workload: mkRing, family: multikernelFamily, stacks: []string{setupRing}, setup: setup}
		for _, n := range p.RingSizes {
			rg.points = append(rg.points, mkPoint("", fmt.Sprintf("ring=%d", n), fmt.Sprintf("UDP 1472 B, ring of %d", n),
				func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
					// 80% of the default ring's saturation at 1472
					// bytes in this repetition: what the goal allows
					// no loss at, so what a smaller ring costs shows.
					rate := p.RingRate
					if v := sat[setupRing+"/1472"]; v > 0 {
						rate = 0.8 * v
					}
					m, raw, err := runMKUDP(ctx, e, s.GoNetBin, 1472, rate, n, p.UDPDur)
					if m != nil {
						m["ring_size"] = float64(n)
					}
					return m, raw, err
				}))
		}
		gs = append(gs, rg)
	}
	return gs
}

// pointT is a point's parts, for measured.
type pointT struct {
	workload, name, label string
	run                   func(ctx context.Context, e *Env) (map[string]float64, []byte, error)
}

// measured is the point, its metrics with the share of the machine's CPUs
// busy while it ran ("machine_cpu_frac"): both ends and whatever joins
// them are on the same two cores, so a set-up limited by CPU shows near 1.
func (p pointT) measured() point {
	return point{workload: p.workload, name: p.name, label: p.label,
		run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
			t, a := time.Now(), readSysStat()
			m, raw, err := p.run(ctx, e)
			b := readSysStat()
			if m != nil {
				m["machine_cpu_frac"] = (b.busy - a.busy) / (time.Since(t).Seconds() * float64(runtime.NumCPU()))
			}
			return m, raw, err
		}}
}

// SetupMultikernel brings up one set-up of the family in fresh namespaces,
// with its long-lived daemons; the direct ring's pair is started afresh
// by each point (a ring has two ends, and -ring-listen takes one peer).
func SetupMultikernel(ctx context.Context, bin, gonet, name string) (e *Env, err error) {
	e = &Env{Stack: name, Addr: mkServerAddr.Addr().String(), bin: bin, stderr: &limitedBuffer{max: 64 << 10}}
	register(e, true)
	defer func() {
		if err != nil {
			err = fmt.Errorf("set up %s: %w%s%s", name, err, e.procsLog(), e.serverLog())
			e.Close()
		}
	}()
	if e.C, err = netns.New(nsPrefix); err != nil {
		return e, err
	}
	if e.tmp, err = os.MkdirTemp("", "gnbench-mk-"); err != nil {
		return e, err
	}
	switch name {
	case setupRing:
		return e, nil
	case setupBridge:
		// The bridge's ring ports offer no offloads (as gonet bridge
		// opens them): frames through it are at most the MTU.
		if err := e.startProc(e.C, "gonet bridge", "gonet: bridge up", gonet, "bridge", "-ring-listen", e.bridgeRing()); err != nil {
			return e, err
		}
		return e, e.startProc(e.C, "gonet up", "gonet: up ", gonet, append([]string{"up", "-ring", e.bridgeRing()}, mkServerArgs()...)...)
	case setupTAPs:
		for _, args := range [][]string{
			{"link", "add", mkLinuxBr, "type", "bridge"},
			{"tuntap", "add", "dev", mkTAPServer, "mode", "tap"},
			{"tuntap", "add", "dev", mkTAPClient, "mode", "tap"},
			{"link", "set", mkTAPServer, "master", mkLinuxBr, "up"},
			{"link", "set", mkTAPClient, "master", mkLinuxBr, "up"},
			{"link", "set", mkLinuxBr, "up"},
		} {
			if _, err := e.C.IP(ctx, args...); err != nil {
				return e, err
			}
		}
		return e, e.startProc(e.C, "gonet up", "gonet: up ", gonet, append([]string{"up", "-tap", mkTAPServer}, mkServerArgs()...)...)
	case setupVeth:
		if _, err := exec.LookPath("iperf3"); err != nil {
			return e, fmt.Errorf("the stock iperf3 is not installed (Debian package iperf3): %w", err)
		}
		if e.S, err = netns.New(nsPrefix); err != nil {
			return e, err
		}
		for _, s := range serverSysctls {
			if err := sysctl(e.S, s[0], s[1]); err != nil {
				return e, err
			}
		}
		dev, peer := netns.DeviceName(), netns.DeviceName()
		if err := e.C.AddVeth(dev, e.S, peer); err != nil {
			return e, err
		}
		if err := e.C.ConfigureLink(dev, mkClientAddr, mtu); err != nil {
			return e, err
		}
		if err := e.S.ConfigureLink(peer, mkServerAddr, mtu); err != nil {
			return e, err
		}
		// The suite's kernel server answers request-response; iperf3's
		// own server the tests.
		if err := e.startServer(e.S, []string{"server", "-stack", "kernel", "-addr", mkServerAddr.String()}); err != nil {
			return e, err
		}
		return e, e.startProc(e.S, "iperf3 -s", "Server listening", "iperf3", "-s", "--forceflush")
	}
	return e, fmt.Errorf("unknown set-up %q: %s", name, strings.Join(MultikernelSetups, ", "))
}

// mkServerArgs are the serving GoNet's flags beside its link: IPv4 only
// (the kernel's end of a veth has IPv6 too, but no test uses it), no mDNS
// or control socket, iperf3 and the echo service.
func mkServerArgs() []string {
	return []string{"-addr", mkServerAddr.String(), "-mac", mkServerMAC, "-no-ipv6", "-mdns=false",
		"-serve", "iperf3,echo", "-control", "none", "-log-level", "warn"}
}

// mkClientArgs are the client GoNet's flags beside its link.
func mkClientArgs() []string {
	return []string{"-addr", mkClientAddr.String(), "-mac", mkClientMAC, "-no-ipv6"}
}

// bridgeRing is the socket gonet bridge takes ring ports on.
func (e *Env) bridgeRing() string { return filepath.Join(e.tmp, "bridge.sock") }

// startProc starts a daemon of the set-up in ns and, unless ready is
// empty, waits (up to 30 s) for a line on its stdout starting with ready.
// Close stops it.
func (e *Env) startProc(ns *netns.NS, name, ready, prog string, args ...string) error {
	_, err := e.startProcess(ns, name, ready, prog, args...)
	return err
}

// startProcess is startProc, returning the process.
func (e *Env) startProcess(ns *netns.NS, name, ready, prog string, args ...string) (*gatewayProc, error) {
	g := &gatewayProc{name: name, out: &limitedBuffer{max: 32 << 10}, exited: make(chan struct{})}
	g.cmd = ns.Command(context.Background(), prog, args...)
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g.cmd.Stderr = g.out
	stdout, err := g.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := g.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	g.pid = g.cmd.Process.Pid
	e.procs = append(e.procs, g)
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			fmt.Fprintln(g.out, sc.Text())
			if !said && ready != "" && strings.HasPrefix(strings.TrimSpace(sc.Text()), ready) {
				said = true
				close(up)
			}
		}
	}()
	go func() {
		g.err = g.cmd.Wait()
		close(g.exited)
	}()
	if ready == "" {
		return g, nil
	}
	select {
	case <-up:
		return g, nil
	case <-g.exited:
		return g, fmt.Errorf("%s exited before it was up: %v", name, g.err)
	case <-time.After(30 * time.Second):
		return g, fmt.Errorf("%s did not say %q within 30 s", name, ready)
	}
}

// procsLog is what the set-up's daemons said, for an error.
func (e *Env) procsLog() string {
	var b strings.Builder
	for _, p := range e.procs {
		if s := strings.TrimSpace(p.out.String()); s != "" {
			fmt.Fprintf(&b, "\n%s said:\n%s", p.name, s)
		}
	}
	return b.String()
}

// ringPairs numbers the direct ring's sockets, one per pair.
var ringPairs atomic.Int64

// withRingServer runs client against a serving GoNet process started
// afresh on a direct ring of ringSize descriptors (0: the default): the
// server listens, client attaches to the socket it is given. The server
// comes up once the client has attached, so the client's first
// connection may find its services not yet listening; a failed point is
// tried once more on a fresh pair.
func (e *Env) withRingServer(ctx context.Context, gonet string, ringSize int, client func(ring string) (map[string]float64, []byte, error)) (map[string]float64, []byte, error) {
	var errs []error
	for attempt := 1; attempt <= 2; attempt++ {
		path := filepath.Join(e.tmp, fmt.Sprintf("ring%d.sock", ringPairs.Add(1)))
		args := append([]string{"up", "-ring-listen", path}, mkServerArgs()...)
		if ringSize > 0 {
			args = append(args, "-ring-size", strconv.Itoa(ringSize))
		}
		p, err := e.startProcess(e.C, "gonet up -ring-listen", "", gonet, args...)
		if err != nil {
			return nil, nil, err
		}
		err = waitFile(path, p.exited, 10*time.Second)
		var m map[string]float64
		var raw []byte
		if err == nil {
			m, raw, err = client(path)
		}
		serr := p.stop()
		e.procs = e.procs[:len(e.procs)-1]
		if err == nil {
			if m != nil {
				m["attempts"] = float64(attempt)
				serverCounters(m, p.out.String())
			}
			return m, raw, serr
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w%s", attempt, err, procLog(p)))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, nil, errors.Join(errs...)
}

// serverCounters adds to m the counters a serving GoNet printed as it
// exited ("NAME VALUE" lines on stdout), as "c:server.NAME", and what they
// say of the point: where UDP datagrams were lost (its socket's queue
// full, UDP.RcvbufErrors, or before its stack), and what a transaction
// cost the ring (eventfd wake-ups sent, sleeps of the reader). A pair of
// the direct ring serves one point, so its counters are the point's.
func serverCounters(m map[string]float64, out string) {
	c := map[string]float64{}
	for l := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || !strings.Contains(f[0], ".") {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			c[f[0]] = float64(v)
			m["c:server."+f[0]] = float64(v)
		}
	}
	if _, udp := m["packets"]; udp {
		m["server_rcvbuf_drops"] = c["UDP.RcvbufErrors"]
		m["server_udp_in"] = c["UDP.InDatagrams"]
	}
	if tx := m["transactions"]; tx > 0 {
		m["server_wakeups_per_transaction"] = c["Ring."+ringNIC+".WakeupsSent"] / tx
		m["server_sleeps_per_transaction"] = c["Ring."+ringNIC+".Sleeps"] / tx
	}
}

// ringNIC is the NIC gonet up names a ring link.
const ringNIC = "ring0"

func procLog(p *gatewayProc) string {
	if s := strings.TrimSpace(p.out.String()); s != "" {
		return "\n" + p.name + " said:\n" + s
	}
	return ""
}

// waitFile waits until path exists, the process whose exit closes exited
// ends, or d passes.
func waitFile(path string, exited <-chan struct{}, d time.Duration) error {
	for deadline := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the server exited before listening on %s", path)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no socket at %s within %v", path, d)
		}
	}
}

// onClientLink runs client with the link flags of the set-up's client end
// (a ring's socket, or the client's TAP device); on the direct ring, with
// a serving GoNet started for it.
func (e *Env) onClientLink(ctx context.Context, gonet string, ringSize int, client func(link []string) (map[string]float64, []byte, error)) (map[string]float64, []byte, error) {
	switch e.Stack {
	case setupRing:
		return e.withRingServer(ctx, gonet, ringSize, func(ring string) (map[string]float64, []byte, error) {
			return client([]string{"-ring", ring})
		})
	case setupBridge:
		return client([]string{"-ring", e.bridgeRing()})
	case setupTAPs:
		return client([]string{"-tap", mkTAPClient})
	}
	return client(nil)
}

// iperf3Test runs one iperf3 test from the client end with the test's
// flags (-t, -P, -u, -b, -l) and returns the JSON iperf3 -J prints: the
// stock iperf3 over the veth, gonet iperf3 elsewhere.
func (e *Env) iperf3Test(ctx context.Context, gonet string, link []string, d time.Duration, test ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	test = append([]string{"-c", e.Addr, "-J", "-t", strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))}, test...)
	var cmd *exec.Cmd
	if gonet == "" || e.Stack == setupVeth {
		cmd = e.C.Command(ctx, "iperf3", test...)
	} else {
		args := append(append(append([]string{"iperf3"}, link...), mkClientArgs()...), test...)
		cmd = e.C.Command(ctx, gonet, args...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		// iperf3 -J says why in its JSON's "error".
		var j iperf3JSON
		if json.Unmarshal(out.Bytes(), &j) == nil && j.Error != "" {
			return out.Bytes(), fmt.Errorf("iperf3 %s: %s", strings.Join(test, " "), j.Error)
		}
		return out.Bytes(), fmt.Errorf("iperf3 %s: %w: %s", strings.Join(test, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// iperf3JSON is what the family reads of iperf3 -J's output, the stock
// tool's and gonet iperf3's alike.
type iperf3JSON struct {
	End struct {
		SumSent     *iperf3Sum `json:"sum_sent"`
		SumReceived *iperf3Sum `json:"sum_received"`
		Sum         *iperf3Sum `json:"sum"` // UDP: the loss and jitter
	} `json:"end"`
	Error string `json:"error"`
}

type iperf3Sum struct {
	Seconds       float64  `json:"seconds"`
	Bytes         float64  `json:"bytes"`
	BitsPerSecond float64  `json:"bits_per_second"`
	JitterMs      *float64 `json:"jitter_ms"`
	LostPackets   *float64 `json:"lost_packets"`
	Packets       *float64 `json:"packets"`
	LostPercent   *float64 `json:"lost_percent"`
}

// tcpMetrics reads a TCP test: the receiver's rate.
func tcpMetrics(raw []byte) (map[string]float64, error) {
	var j iperf3JSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("iperf3's JSON: %w", err)
	}
	if j.End.SumReceived == nil || j.End.SumReceived.Bytes == 0 {
		return nil, errors.New("iperf3's JSON has no bytes received")
	}
	m := map[string]float64{
		"gbit_s":     j.End.SumReceived.BitsPerSecond / 1e9,
		"bytes":      j.End.SumReceived.Bytes,
		"receiver_s": j.End.SumReceived.Seconds,
	}
	if j.End.SumSent != nil {
		m["sent_gbit_s"] = j.End.SumSent.BitsPerSecond / 1e9
	}
	return m, nil
}

// udpMetrics reads a UDP test: what the sender offered, what arrived, the
// loss and the receiver's jitter (RFC 3550's, as iperf3 computes it).
func udpMetrics(raw []byte) (map[string]float64, error) {
	var j iperf3JSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("iperf3's JSON: %w", err)
	}
	sum := j.End.Sum
	if sum == nil {
		sum = j.End.SumReceived
	}
	if sum == nil || sum.LostPercent == nil || sum.Packets == nil {
		return nil, errors.New("iperf3's JSON has no UDP sum")
	}
	m := map[string]float64{
		"loss_pct": *sum.LostPercent,
		"packets":  *sum.Packets,
	}
	if sum.LostPackets != nil {
		m["lost"] = *sum.LostPackets
	}
	if sum.JitterMs != nil {
		m["jitter_us"] = *sum.JitterMs * 1000
	}
	sent := sum.BitsPerSecond
	if j.End.SumSent != nil {
		sent = j.End.SumSent.BitsPerSecond
	}
	m["sent_mbit_s"] = sent / 1e6
	if r := j.End.SumReceived; r != nil && r.Bytes > 0 && r.Seconds > 0 {
		m["recv_mbit_s"] = r.BitsPerSecond / 1e6
	} else {
		m["recv_mbit_s"] = sent / 1e6 * (1 - *sum.LostPercent/100)
	}
	return m, nil
}

// runMKTCP measures TCP from the client end to the server, n streams.
func runMKTCP(ctx context.Context, e *Env, gonet string, n int, d time.Duration) (map[string]float64, []byte, error) {
	return e.onClientLink(ctx, gonet, 0, func(link []string) (map[string]float64, []byte, error) {
		raw, err := e.iperf3Test(ctx, gonet, link, d, "-P", strconv.Itoa(n))
		if err != nil {
			return nil, raw, err
		}
		m, err := tcpMetrics(raw)
		return m, raw, err
	})
}

// runMKUDP offers rate Mbit/s (0: unpaced) of size-byte datagrams from the
// client end to the server for d; ringSize sizes the direct ring (0: its
// default).
func runMKUDP(ctx context.Context, e *Env, gonet string, size int, rate float64, ringSize int, d time.Duration) (map[string]float64, []byte, error) {
	b := mkMaxRate
	if rate > 0 {
		b = strconv.FormatFloat(rate, 'f', 1, 64) + "M"
	}
	return e.onClientLink(ctx, gonet, ringSize, func(link []string) (map[string]float64, []byte, error) {
		raw, err := e.iperf3Test(ctx, gonet, link, d, "-u", "-b", b, "-l", strconv.Itoa(size))
		if err != nil {
			return nil, raw, err
		}
		m, err := udpMetrics(raw)
		if m != nil {
			m["offered_mbit_s"] = rate
			if rate == 0 {
				m["offered_mbit_s"] = m["sent_mbit_s"]
			}
		}
		return m, raw, err
	})
}

// runMKRR measures 1-byte request-response on one connection: over the
// veth, the suite's load generator against the kernel server's RR
// handler; elsewhere the same generator in a GoNet process of its own
// (gonet-bench gnclient) against the serving GoNet's echo service.
func runMKRR(ctx context.Context, e *Env, gonet string, d time.Duration) (map[string]float64, []byte, error) {
	return e.onClientLink(ctx, gonet, 0, func(link []string) (map[string]float64, []byte, error) {
		var out []byte
		var err error
		if e.Stack == setupVeth {
			out, err = e.Client(ctx, d+time.Minute, "rr", "-addr", e.Addr, "-n", "1", "-dur", dur(d))
		} else {
			args := append(append([]string{"gnclient", "rr"}, link...), "-addr", mkClientAddr.String(), "-mac", mkClientMAC,
				"-server", net.JoinHostPort(e.Addr, strconv.Itoa(mkEchoPort)), "-n", "1", "-dur", dur(d))
			cctx, cancel := context.WithTimeout(ctx, d+time.Minute)
			defer cancel()
			cmd := e.C.Command(cctx, e.bin, args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			out, err = cmd.Output()
			if err != nil {
				err = fmt.Errorf("gnclient rr: %w: %s", err, strings.TrimSpace(errb.String()))
			}
		}
		if err != nil {
			return nil, out, err
		}
		var r load.RRResult
		if err := json.Unmarshal(out, &r); err != nil {
			return nil, out, err
		}
		if r.Transactions == 0 {
			return nil, out, errors.New("no transaction completed")
		}
		return map[string]float64{
			"mean_us":        r.Latency.MeanUS,
			"p50_us":         r.Latency.P50US,
			"p99_us":         r.Latency.P99US,
			"transactions_s": r.PerSecond,
			"transactions":   float64(r.Transactions),
		}, out, nil
	})
}
