package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gonetstack/gonet/bench/pathemu"
	"github.com/gonetstack/gonet/internal/netns"
)

// The real-world paths family (issue 16, "TCP on real-world paths") puts
// a wide-area path between the stack under test and its peer, the kernel:
//
//	stack (TAP, or the kernel behind a veth) ─ bridge ─ TAP ═ pathemu ═ TAP ─ peer (kernel)
//	└──────────────── namespace A ─────────────────┘          └─ namespace B ─┘
//
// pathemu (bench/pathemu, `gonet-bench pathemu`) moves frames between its
// two TAP devices through link/fault: a delay line, a token-bucket rate, a
// bounded drop-tail queue and seeded random loss, each direction. Every
// stack's frames cross the same bridge and the same program; the kernel
// under test sits in a namespace of its own behind a veth on the bridge, as
// GoNet's and gVisor's TAP devices sit on it. These addresses exist only
// inside the namespaces the family creates.
var (
	pathPeerAddr  = netip.MustParsePrefix("10.79.0.1/24") // the kernel peer, in B
	pathStackAddr = netip.MustParsePrefix("10.79.0.2/24") // the stack under test
	pathRivalAddr = netip.MustParsePrefix("10.79.0.3/24") // the kernel's competing flow (sharing)
)

// pathsFamily names the family's groups, for -only paths.
const pathsFamily = "paths"

// The family's workloads, as records name them.
const (
	pathCal   = "path-cal"   // the path reproduces its RTT and rate, kernel to kernel
	pathShort = "path-1mb"   // time to complete a short transfer (1 MB)
	pathLong  = "path-long"  // goodput: a long transfer (100 MB) or a timed flow
	pathShare = "path-share" // a stack's flow and the kernel's CUBIC flow on one bottleneck
)

// pathWorkloads are the family's workloads in report order.
var pathWorkloads = []string{pathCal, pathShort, pathLong, pathShare}

// PathsPlan is what the paths family measures on each path.
type PathsPlan struct {
	// Reps bounds the family's repetitions (0: the plan's). Seeded loss
	// gives every stack the same pattern of losses within a repetition.
	Reps  int        `json:"reps,omitempty"`
	Paths []PathSpec `json:"paths"`
	// Dirs are the directions measured: "down" the stack sends, "up"
	// the stack receives (the peer sends).
	Dirs []string `json:"dirs"`
	// Short is the short transfer's size, timed ShortCount times in a
	// row (the median is the point's), each aborted after ShortCap.
	Short      int64         `json:"short_bytes"`
	ShortCount int           `json:"short_count"`
	ShortCap   time.Duration `json:"short_cap"`
	// LongDur is the timed flow of a path whose Long is 0; LongCap
	// aborts a long transfer that takes longer. Zero: no long points.
	LongDur time.Duration `json:"long_dur"`
	LongCap time.Duration `json:"long_cap"`
	// CalDur is the calibration's bulk transfer, CalStreams flows at
	// once (its second half is measured); CalPing its ping. Zero: no
	// calibration.
	CalDur     time.Duration `json:"cal_dur"`
	CalStreams int           `json:"cal_streams"`
	CalPing    time.Duration `json:"cal_ping"`
	// Share names the path the sharing point runs on ("": none): the
	// stack's flow alone for ShareGap, then with the kernel's CUBIC
	// flow for ShareDur.
	Share    string        `json:"share,omitempty"`
	ShareGap time.Duration `json:"share_gap"`
	ShareDur time.Duration `json:"share_dur"`
}

// PathSpec is one emulated path.
type PathSpec struct {
	Name     string        `json:"name"`
	RateMbit float64       `json:"rate_mbit_s"` // the bottleneck, each direction
	RTT      time.Duration `json:"rtt"`         // twice the delay line's
	Loss     float64       `json:"loss"`        // random loss, each direction
	// QueueBDP is the bottleneck's drop-tail buffer in bandwidth-delay
	// products.
	QueueBDP float64 `json:"queue_bdp"`
	// Long is the long transfer's size; 0: a flow of LongDur measures
	// the path's goodput instead (a loss-limited flow would not finish
	// 100 MB within the family's budget).
	Long int64 `json:"long_bytes,omitempty"`
}

// IssuePaths are issue 16's paths: (a) 100 Mbit/s, 40 ms, without loss and
// with 1%; (b) 1 Gbit/s, 100 ms, 0.1%; (c) 10 Mbit/s, 200 ms with a buffer
// of twice the bandwidth-delay product. (a) and (b) get one BDP of buffer,
// the rule of thumb for a single flow.
var IssuePaths = []PathSpec{
	{Name: "a0", RateMbit: 100, RTT: 40 * time.Millisecond, QueueBDP: 1, Long: 100 << 20},
	{Name: "a1", RateMbit: 100, RTT: 40 * time.Millisecond, Loss: 0.01, QueueBDP: 1},
	{Name: "b", RateMbit: 1000, RTT: 100 * time.Millisecond, Loss: 0.001, QueueBDP: 1},
	{Name: "c", RateMbit: 10, RTT: 200 * time.Millisecond, QueueBDP: 2, Long: 10 << 20},
}

// BDP is the path's bandwidth-delay product in bytes.
func (p PathSpec) BDP() int64 { return int64(p.RateMbit * 1e6 / 8 * p.RTT.Seconds()) }

// Title names the path as the report does: "(a) 100 Mbit/s, 40 ms, 1% loss".
func (p PathSpec) Title() string {
	loss := "no loss"
	if p.Loss > 0 {
		loss = strconv.FormatFloat(100*p.Loss, 'g', -1, 64) + "% loss"
	}
	return fmt.Sprintf("(%s) %s Mbit/s, %v, %s, buffer %s BDP", p.Name[:1], strconv.FormatFloat(p.RateMbit, 'g', -1, 64),
		p.RTT, loss, strconv.FormatFloat(p.QueueBDP, 'g', -1, 64))
}

// impair is the path in link/fault's spec form, for pathemu -impair: each
// direction's delay is half the round trip.
func (p PathSpec) impair(seed uint64) string {
	parts := []string{
		"delay=" + (p.RTT / 2).String(),
		"rate=" + strconv.FormatInt(int64(p.RateMbit*1e6), 10),
		"queue=" + strconv.FormatInt(int64(p.QueueBDP*float64(p.BDP())), 10),
	}
	if p.Loss > 0 {
		parts = append(parts, "loss="+strconv.FormatFloat(p.Loss, 'g', -1, 64))
	}
	return strings.Join(append(parts, "seed="+strconv.FormatUint(seed, 10)), ",")
}

// pathSysctls give the kernels of the family's namespaces room for a long
// fat path (a window of two bandwidth-delay products at 1 Gbit/s and 100
// ms needs 25 MB, beyond the default 6 MB) and start every connection
// afresh, without the metrics an earlier connection to the same peer left
// (its ssthresh would decide the next one's slow start).
var pathSysctls = [][2]string{
	{"net.ipv4.tcp_rmem", "4096 131072 67108864"},
	{"net.ipv4.tcp_wmem", "4096 16384 67108864"},
	{"net.ipv4.tcp_no_metrics_save", "1"},
}

// pathQuiet keeps the kernels of the family's namespaces off IPv6, which
// the flows do not use, so that their router solicitations and
// multicast reports do not cross the path among the measured frames.
var pathQuiet = [][2]string{
	{"net.ipv6.conf.all.disable_ipv6", "1"},
	{"net.ipv6.conf.default.disable_ipv6", "1"},
}

// pathCC is the congestion control of every kernel socket in the family:
// CUBIC, the kernel's usual default and GoNet's own algorithm (this
// machine's default is BBR, which a namespace may not choose for itself:
// only the initial one sets a restricted algorithm as its default). The
// family gives it on each kernel's route to the path (ip route congctl),
// which every socket taking that route gets at connect and accept, and
// again per socket on the peer's own sockets (TCP_CONGESTION).
const pathCC = "cubic"

// pathNice is pathemu's nice value (SetupPath says why).
const pathNice = -10

// pathSet is what a paths set-up adds to its Env: the forwarder, and for
// the sharing point the kernel server of the competing flow in a
// namespace of its own.
type pathSet struct {
	spec  PathSpec
	fwd   *Env // pathemu, speaking the server's stdin protocol
	rival *Env // the competing kernel's server, or nil
	k     *netns.NS
	flows int // flows begun on the set-up, each with its own seed (reseed)
}

// close stops the forwarder and the rival's server and removes the
// rival's namespace; the Env removes the others.
func (p *pathSet) close() error {
	var errs []error
	for _, e := range []*Env{p.rival, p.fwd} {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	if p.k != nil {
		errs = append(errs, p.k.Close())
	}
	return errors.Join(errs...)
}

// counters asks the forwarder for its counters.
func (p *pathSet) counters() (pathemu.Snapshot, error) {
	var s pathemu.Snapshot
	if _, err := p.fwd.in.Write([]byte("stats\n")); err != nil {
		return s, err
	}
	l, err := p.fwd.readLine(10 * time.Second)
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal([]byte(l), &s)
}

// reseed starts the path's loss generators afresh before a measured flow,
// from a seed of the repetition and of the flow's place among the set-up's
// flows, which is the same for every stack. Each stack's flow then meets
// the same losses frame by frame, in each direction; with one seed for the
// whole set-up, what crossed before a flow (the handshakes, the earlier
// flows' ACKs, whose number differs by stack) moved the losses onto other
// segments: on (b), 1 Gbit/s and 100 ms, the kernel's sender met its
// first loss within 486 segments towards GoNet, after 593 towards the
// kernel and after 2192 towards gVisor, which decided the flows' goodput
// (10.6, 15.9 and 18.0 Mbit/s).
func (p *pathSet) reseed(rep int) error {
	p.flows++
	seed := pathSeed + uint64(rep)<<32 + uint64(p.flows)
	if _, err := fmt.Fprintf(p.fwd.in, "seed %d\n", seed); err != nil {
		return fmt.Errorf("pathemu: seed: %w", err)
	}
	l, err := p.fwd.readLine(10 * time.Second)
	if err != nil {
		return fmt.Errorf("pathemu: seed: %w", err)
	}
	var got struct {
		Seed  *uint64
		Error string
	}
	if err := json.Unmarshal([]byte(l), &got); err != nil || got.Seed == nil || *got.Seed != seed {
		return fmt.Errorf("pathemu: seed %d answered %q", seed, l)
	}
	return nil
}

// SetupPath brings up stack behind the path spec: namespace A with the
// bridge, the stack (its server's TAP device on the bridge, or for the
// kernel a namespace of its own behind a veth on it), namespace B with the
// peer, pathemu between them; with rival, the competing kernel's server in
// a third namespace on the bridge too. It returns once the peer reaches
// the stack (and the rival) across the path. The Env's C is B, where the
// load runs; H is A; S is the kernel under test's.
func SetupPath(ctx context.Context, bin, stack string, spec PathSpec, seed uint64, rival bool) (e *Env, err error) {
	e = &Env{Stack: stack, Addr: pathStackAddr.Addr().String(), bin: bin, stderr: &limitedBuffer{max: 64 << 10}}
	e.path = &pathSet{spec: spec}
	register(e, true)
	defer func() {
		if err != nil {
			err = fmt.Errorf("set up %s behind path %s: %w%s%s", stack, spec.Name, err, e.serverLog(), e.path.log())
			e.Close()
		}
	}()
	if e.C, err = netns.New(nsPrefix); err != nil {
		return e, err
	}
	if e.H, err = netns.New(nsPrefix); err != nil {
		return e, err
	}
	if err := kernelSysctls(e.C, clientSysctls, pathSysctls, pathQuiet); err != nil {
		return e, err
	}
	if err := kernelSysctls(e.H, pathQuiet); err != nil {
		return e, err
	}
	br := netns.DeviceName()
	if _, err := e.H.IP(ctx, "link", "add", br, "type", "bridge"); err != nil {
		return e, err
	}
	if _, err := e.H.IP(ctx, "link", "set", "dev", br, "up"); err != nil {
		return e, err
	}

	// The path: its end A on the bridge, its end B the peer's interface.
	a, b := netns.DeviceName(), netns.DeviceName()
	// The path runs at a higher priority than the stacks and the load
	// (nice -10): the bottleneck's clock is the time pathemu reads a
	// frame, so a forwarder kept off the CPU would idle the emulated link
	// and then take the frames that queued meanwhile as one burst.
	fwd := &Env{Stack: "pathemu", bin: "nice", stderr: &limitedBuffer{max: 16 << 10}}
	e.path.fwd = fwd
	if err := fwd.startServer(e.H, []string{"-n", strconv.Itoa(pathNice), bin, "pathemu", "-a", a, "-b", b, "-b-netns", e.C.Path(),
		"-mtu", strconv.Itoa(mtu), "-impair", spec.impair(seed)}); err != nil {
		return e, fmt.Errorf("pathemu: %w%s", err, fwd.serverLog())
	}
	if err := bridgePort(ctx, e.H, a, br); err != nil {
		return e, err
	}
	if err := kernelEnd(ctx, e.C, b, pathPeerAddr); err != nil {
		return e, err
	}

	// The stack under test.
	dev := netns.DeviceName()
	// CUBIC on every stack: gVisor's default is Reno (GoNet's is CUBIC,
	// and the kernel's route gives it).
	args := []string{"server", "-stack", stack, "-addr", pathStackAddr.String(), "-mtu", strconv.Itoa(mtu), "-cc", pathCC}
	if stack == "kernel" {
		if e.S, err = kernelBehindBridge(ctx, e.H, br, pathStackAddr); err != nil {
			return e, err
		}
		if err := e.startServer(e.S, args); err != nil {
			return e, err
		}
	} else {
		if err := e.startServer(e.H, append(args, "-tap", dev)); err != nil {
			return e, err
		}
		if err := bridgePort(ctx, e.H, dev, br); err != nil {
			return e, err
		}
	}
	if rival {
		if e.path.k, err = kernelBehindBridge(ctx, e.H, br, pathRivalAddr); err != nil {
			return e, err
		}
		e.path.rival = &Env{Stack: "kernel", bin: bin, stderr: &limitedBuffer{max: 16 << 10}}
		if err := e.path.rival.startServer(e.path.k, []string{"server", "-stack", "kernel", "-addr", pathRivalAddr.String()}); err != nil {
			return e, fmt.Errorf("the rival kernel's server: %w%s", err, e.path.rival.serverLog())
		}
	}
	if err := e.waitReachable(ctx); err != nil {
		return e, err
	}
	if rival {
		r := &Env{C: e.C, Addr: pathRivalAddr.Addr().String()}
		if err := r.waitReachable(ctx); err != nil {
			return e, fmt.Errorf("the rival: %w", err)
		}
	}
	return e, nil
}

// kernelSysctls applies each list of sysctls in ns.
func kernelSysctls(ns *netns.NS, lists ...[][2]string) error {
	for _, l := range lists {
		for _, s := range l {
			if err := sysctl(ns, s[0], s[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// bridgePort puts dev, in ns, on the bridge br and brings it up.
func bridgePort(ctx context.Context, ns *netns.NS, dev, br string) error {
	if _, err := ns.IP(ctx, "link", "set", "dev", dev, "mtu", strconv.Itoa(mtu), "master", br); err != nil {
		return err
	}
	_, err := ns.IP(ctx, "link", "set", "dev", dev, "up")
	return err
}

// kernelEnd addresses dev in ns and gives the route to the path's network
// the family's congestion control.
func kernelEnd(ctx context.Context, ns *netns.NS, dev string, addr netip.Prefix) error {
	if err := ns.ConfigureLink(dev, addr, mtu); err != nil {
		return err
	}
	return routeCC(ctx, ns, dev, addr, pathCC)
}

// kernelBehindBridge makes a namespace for a kernel end at addr, joined to
// the bridge br in h by a veth.
func kernelBehindBridge(ctx context.Context, h *netns.NS, br string, addr netip.Prefix) (*netns.NS, error) {
	ns, err := netns.New(nsPrefix)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*netns.NS, error) { return nil, errors.Join(err, ns.Close()) }
	if err := kernelSysctls(ns, serverSysctls, pathSysctls, pathQuiet); err != nil {
		return fail(err)
	}
	near, far := netns.DeviceName(), netns.DeviceName()
	if err := h.AddVeth(near, ns, far); err != nil {
		return fail(err)
	}
	if err := bridgePort(ctx, h, near, br); err != nil {
		return fail(err)
	}
	if err := kernelEnd(ctx, ns, far, addr); err != nil {
		return fail(err)
	}
	return ns, nil
}

// log is the forwarder's and the rival's output, for a failed set-up.
func (p *pathSet) log() string {
	var s string
	for _, e := range []*Env{p.fwd, p.rival} {
		if e != nil {
			if l := strings.TrimSpace(e.stderr.String()); l != "" {
				s += fmt.Sprintf("\n%s stderr:\n%s", e.Stack, l)
			}
		}
	}
	return s
}
