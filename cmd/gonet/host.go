package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/gonetstack/gonet/internal/rtnl"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/link/pcap"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/tcp"
)

// Limits on -mtu. RFC 791: "Every internet module must be able to forward a
// datagram of 68 octets without further fragmentation"; the IPv4 total
// length field caps a datagram at 65535.
const (
	minMTU     = 68
	maxMTU     = 65535
	defaultMTU = 1500 // Ethernet's (RFC 894)
)

// ifNameMax is the longest Linux interface name: IFNAMSIZ (16) less the
// terminating NUL.
const ifNameMax = 15

// linkConfig is what up and ping share: a GoNet host on a TAP device, or
// for up on a UNIX socket a VM connects to.
type linkConfig struct {
	tap    string
	socket string // -socket: the UNIX socket instead of a TAP; up only
	// socketFlag is set when -socket is registered, for check's message.
	socketFlag bool
	addr       netip.Prefix
	gw         netip.Addr       // invalid: no default route
	mac        net.HardwareAddr // nil: a random locally administered one
	mtu        int
	pcap       string // capture file; empty: no capture
	impair     string // fault.ParseSpec syntax; empty: a perfect link
	fault      fault.Config
	memory     int64 // stack's memory limit; 0: the stack's default
	ecn        tcp.ECNMode
	// noIPv6 leaves the stack IPv4-only: the gateway's, until it
	// relays IPv6 (issue 12), so that it does not solicit routers from
	// its guest.
	noIPv6 bool
}

// register adds the TAP and host flags to fs, writing into c.
func (c *linkConfig) register(fs *flag.FlagSet) {
	c.mtu = defaultMTU
	fs.StringVar(&c.tap, "tap", "", "TAP device `NAME` (created when absent; at most 15 bytes)")
	fs.Var((*ipv4PrefixFlag)(&c.addr), "addr", "GoNet's IPv4 address and prefix `A.B.C.D/NN`, as in 10.0.0.2/24")
	fs.Var((*ipv4AddrFlag)(&c.gw), "gw", "route everything off-link through the gateway at `A.B.C.D`, on -addr's network (default: no gateway)")
	fs.Var((*macFlag)(&c.mac), "mac", "GoNet's Ethernet address `MAC`, as in 02:00:5e:10:00:01 (default: a random locally administered one)")
	fs.IntVar(&c.mtu, "mtu", defaultMTU, "the link's MTU `N`, 68..65535")
	c.registerCapture(fs)
	fs.Var((*bytesFlag)(&c.memory), "memory", "bound the memory the stack holds for others to `BYTES`, as in 16M (default 512M); the process's GOMEMLIMIT is this plus 64M, with GOGC off, unless the environment sets them")
	fs.Var((*ecnFlag)(&c.ecn), "ecn", "use ECN on TCP as `MODE` says: passive (answer a peer that asks, as Linux's tcp_ecn=2), on (ask too), off")
}

// registerCapture adds -pcap and -impair, what gonet does to a link's
// frames whatever the link, to fs.
func (c *linkConfig) registerCapture(fs *flag.FlagSet) {
	fs.StringVar(&c.pcap, "pcap", "", "write every frame GoNet sends and receives to pcap `FILE`")
	fs.StringVar(&c.impair, "impair", "", "impair the link as `SPEC` says, as in loss=0.05,dup=0.01,reorder=0.02,corrupt=0.001,delay=1ms,seed=7 (default seed: random, printed)")
}

// registerSocket adds -socket, the stream link for a VM, to fs.
func (c *linkConfig) registerSocket(fs *flag.FlagSet) {
	c.socketFlag = true
	fs.StringVar(&c.socket, "socket", "", "instead of a TAP device, listen on the UNIX socket `PATH` for a VM's frames, each behind its 32-bit length as QEMU's -netdev stream and passt send them (the NIC is then "+socketNIC+")")
}

// nicName is the name the NIC will have: the TAP device's, or socketNIC.
func (c *linkConfig) nicName() string {
	if c.socket != "" {
		return socketNIC
	}
	return c.tap
}

// socketNIC names the NIC of a -socket link: in the ready line, and in the
// default control socket's name.
const socketNIC = "vm0"

// check validates what the flags alone cannot, and parses -impair.
func (c *linkConfig) check() error {
	switch {
	case c.tap != "" && c.socket != "":
		return usagef("-tap and -socket are two links: give one")
	case c.socket != "":
		if c.mtu > stream.MaxMTU {
			return usagef("-mtu %d is over %d, the most a -socket link carries", c.mtu, stream.MaxMTU)
		}
	case c.tap == "" && c.socketFlag:
		return usagef("-tap or -socket is required: the TAP device GoNet uses, or the UNIX socket a VM connects to")
	case c.tap == "":
		return usagef("-tap is required: the TAP device GoNet uses")
	default:
		if err := checkTapName(c.tap); err != nil {
			return err
		}
	}
	switch {
	case !c.addr.IsValid():
		return usagef("-addr is required: GoNet's address and prefix, as in 10.0.0.2/24")
	case c.mtu < minMTU || c.mtu > maxMTU:
		return usagef("-mtu %d is outside %d..%d", c.mtu, minMTU, maxMTU)
	}
	if c.gw.IsValid() {
		// The stack reaches its gateway on-link, through the route
		// AddAddress made for -addr's network.
		if !c.addr.Contains(c.gw) {
			return usagef("-gw %v is not on -addr's network %v", c.gw, c.addr.Masked())
		}
		if c.gw == c.addr.Addr() {
			return usagef("-gw %v is GoNet's own address", c.gw)
		}
	}
	return c.checkImpair()
}

// checkImpair parses -impair, choosing the seed when the spec does not.
func (c *linkConfig) checkImpair() error {
	if c.impair != "" {
		cfg, err := fault.ParseSpec(c.impair)
		if err != nil {
			return usagef("-impair %q: %s", c.impair, strings.TrimPrefix(err.Error(), "fault: "))
		}
		if !specHasSeed(c.impair) {
			// A random run, replayable: the seed is printed with
			// the rest of the impairment when the link comes up.
			cfg.Seed = rand.Uint64()
		}
		c.fault = cfg
	}
	return nil
}

// checkTapName refuses a -tap the kernel could not take as an interface
// name.
func checkTapName(name string) error {
	switch {
	case len(name) > ifNameMax:
		return usagef("-tap %q is %d bytes; a Linux interface name holds at most %d", name, len(name), ifNameMax)
	case strings.ContainsAny(name, "/: \t\n\x00") || name == "." || name == "..":
		return usagef("-tap %q is not a valid interface name", name)
	}
	return nil
}

// specHasSeed reports whether an -impair spec sets the seed itself.
func specHasSeed(spec string) bool {
	for field := range strings.SplitSeq(spec, ",") {
		if key, _, _ := strings.Cut(field, "="); strings.TrimSpace(key) == "seed" {
			return true
		}
	}
	return false
}

// describeImpairment returns the line up and ping print on stderr when
// -impair is in force, so that the run can be replayed; empty when not.
func (c *linkConfig) describeImpairment(cmd string) string {
	if c.impair == "" {
		return ""
	}
	return fmt.Sprintf("gonet %s: impairing the link with -impair %s (give the same to replay this run)", cmd, c.fault)
}

// logImpairment is describeImpairment for the daemons, as an event with
// the -impair to give to replay the run (the seed included).
func (c *linkConfig) logImpairment(log *slog.Logger) {
	if c.impair != "" {
		log.Info("impairing the link: give the same -impair to replay this run", "impair", c.fault.String())
	}
}

// host is a GoNet stack up on a TAP device or a stream socket.
type host struct {
	stack *stack.Stack
	nic   string           // the NIC's name in the stack: the TAP device's, or socketNIC
	mac   net.HardwareAddr // GoNet's address on the link
	// capture is the -pcap endpoint; nil without -pcap.
	capture *pcap.Endpoint
	// kernel reads the kernel's counters of the TAP device; nil on a
	// VM's socket, which the kernel does not count.
	kernel *kernelCounters
}

// Metrics returns the stack's counters and gauges with the kernel's
// counters of the TAP device (TAP.<nic>.).
func (h *host) Metrics() stats.Snapshot {
	m := h.stack.Metrics()
	h.kernel.addTo(m, h.nic)
	return m
}

// openLink opens the link the flags name and returns it with its NIC's
// name.
func openLink(c *linkConfig) (link.Endpoint, string, error) {
	if c.socket != "" {
		ep, err := stream.Listen(c.socket, stream.Options{MTU: c.mtu, MAC: c.mac})
		if err != nil {
			return nil, "", fmt.Errorf("listening for a VM: %w", err)
		}
		return ep, socketNIC, nil
	}
	// With no -mac, tap picks a random locally administered address, so
	// that GoNet's station never collides with a manufacturer's address
	// or with the kernel's side of the TAP.
	// Offloads (checksums and 64 KiB TCP super-segments across the TAP)
	// unless -impair: its losses and corruption are meant for the frames
	// a wire carries.
	dev, err := tap.Open(c.tap, tap.Options{MTU: c.mtu, MAC: c.mac, Offload: c.impair == ""})
	if err != nil {
		return nil, "", fmt.Errorf("opening TAP device %s: %w", c.tap, err)
	}
	// The kernel names the device when -tap is a pattern ("gn%d").
	return dev, dev.Name(), nil
}

// bringUp opens the link, wraps it as the flags ask, and starts a stack on
// it with its address and default route. On error it leaves nothing open.
func bringUp(c *linkConfig, log *slog.Logger) (*host, error) {
	ep, nic, err := openLink(c)
	if err != nil {
		return nil, err
	}
	h, err := bringUpOn(c, ep, nic, log)
	if err != nil || c.socket != "" {
		return h, err
	}
	// The TAP device is in this namespace: read its counters from here.
	conn, err := rtnl.Dial()
	if err != nil {
		h.Close()
		return nil, err
	}
	h.kernel = &kernelCounters{conn: conn, dev: nic}
	return h, nil
}

// bringUpOn wraps ep as the flags ask and starts a stack on it as NIC nic,
// with -addr when given and the default route. It takes ep: on error
// nothing is left open.
func bringUpOn(c *linkConfig, ep link.Endpoint, nic string, log *slog.Logger) (*host, error) {
	var capture *pcap.Endpoint

	// The order is stack ← pcap ← fault ← tap. The capture sits next to
	// the stack, so it holds exactly the frames the stack sent and
	// received: a frame -impair drops on the way in is not in it (the
	// stack never saw it), and one it drops on the way out is (the stack
	// sent it, and will retransmit it). Read that way a capture explains
	// the stack's behaviour and agrees with its counters; the wire's
	// view is what tcpdump on the TAP shows.
	if c.impair != "" {
		ep = fault.New(ep, c.fault)
	}
	if c.pcap != "" {
		p, err := pcap.Create(ep, c.pcap)
		if err != nil {
			ep.Close()
			return nil, fmt.Errorf("creating capture file %s: %w", c.pcap, err)
		}
		ep, capture = p, p
	}

	gc := stack.TuneGC(c.memory)
	log.Info("collector set", "gogc", gcPercent(gc.Percent), "gogc_from_env", gc.PercentFromEnv,
		"gomemlimit", gc.Limit, "gomemlimit_from_env", gc.LimitFromEnv)
	s := stack.New(stack.Config{MemoryLimit: c.memory, TCP: tcp.Config{ECN: c.ecn}, Logger: log, NoIPv6: c.noIPv6})
	h := &host{stack: s, nic: nic, mac: ep.MAC(), capture: capture}
	if err := s.AddNIC(h.nic, ep); err != nil {
		s.Close()
		ep.Close()
		return nil, fmt.Errorf("attaching %s to the stack: %w", h.nic, err)
	}
	// From here the stack owns the endpoint, and closes it (flushing the
	// capture) when it closes.
	if c.addr.IsValid() {
		if err := s.AddAddress(h.nic, c.addr); err != nil {
			s.Close()
			return nil, fmt.Errorf("assigning %v to %s: %w", c.addr, h.nic, err)
		}
	}
	if c.gw.IsValid() {
		if err := s.SetDefaultGateway(c.gw, h.nic); err != nil {
			s.Close()
			return nil, fmt.Errorf("setting default gateway %v on %s: %w", c.gw, h.nic, err)
		}
	}
	return h, nil
}

// Close stops the stack, which closes the link under it and the capture
// file if there is one. A capture cut short by a write error (a full disk)
// is reported here, since the frames themselves flowed on regardless.
func (h *host) Close() error {
	err := errors.Join(h.stack.Close(), h.kernel.Close())
	if h.capture != nil {
		if cerr := h.capture.Err(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("capture file incomplete: %w", cerr))
		}
	}
	return err
}

// serviceGroup is a set of services running on a stack, each on its own
// goroutine, until Stop.
type serviceGroup struct {
	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	errs []error // of the services that stopped on their own
	// failed is closed when the first service stops on its own.
	failed   chan struct{}
	failOnce sync.Once
}

func newServiceGroup(ctx context.Context) *serviceGroup {
	ctx, cancel := context.WithCancel(ctx)
	return &serviceGroup{ctx: ctx, cancel: cancel, failed: make(chan struct{})}
}

// run runs serve on a goroutine of its own until Stop. serve must return
// when its context is done; an error it returns before that is a failure,
// which Failed announces and Stop returns.
func (g *serviceGroup) run(serve func(ctx context.Context) error) {
	g.wg.Go(func() {
		if err := serve(g.ctx); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
			g.failOnce.Do(func() { close(g.failed) })
		}
	})
}

// startUDP binds each service with a UDP form to its well-known port on
// every address of s, and runs it until Stop. Services without one (http)
// are skipped. On error the services already started go on running: the
// caller stops them.
func (g *serviceGroup) startUDP(s *stack.Stack, list []services.Service) error {
	for _, svc := range list {
		if svc.ServeUDP == nil {
			continue
		}
		laddr := netip.AddrPortFrom(netip.IPv4Unspecified(), svc.Port)
		conn, err := s.ListenUDP(laddr)
		if err != nil {
			return fmt.Errorf("%s: binding UDP %v: %w", svc.Name, laddr, err)
		}
		g.run(func(ctx context.Context) error {
			// The service closes conn when ctx is done; this close is
			// for when it stops on an error of its own.
			defer conn.Close()
			return svc.ServeUDP(ctx, conn)
		})
	}
	return nil
}

// startTCP listens on each service's well-known TCP port on every address
// of s, and runs the service there until Stop. Services without a TCP form
// are skipped. On error the services already started go on running: the
// caller stops them.
func (g *serviceGroup) startTCP(s *stack.Stack, list []services.Service) error {
	for _, svc := range list {
		if svc.ServeTCP == nil {
			continue
		}
		laddr := netip.AddrPortFrom(netip.IPv4Unspecified(), svc.Port)
		ln, err := s.ListenTCP(laddr)
		if err != nil {
			return fmt.Errorf("%s: listening on TCP %v: %w", svc.Name, laddr, err)
		}
		g.run(func(ctx context.Context) error {
			defer ln.Close()
			return svc.ServeTCP(ctx, ln)
		})
	}
	return nil
}

// startUDPServices runs each service of list that has a UDP form on s's
// UDP, as startUDP does. On error nothing is left running.
func startUDPServices(ctx context.Context, s *stack.Stack, list []services.Service) (*serviceGroup, error) {
	g := newServiceGroup(ctx)
	if err := g.startUDP(s, list); err != nil {
		return nil, errors.Join(err, g.Stop())
	}
	return g, nil
}

// Failed is closed when a service has stopped on its own; Stop returns its
// error.
func (g *serviceGroup) Failed() <-chan struct{} { return g.failed }

// Stop stops the services, waits for them, and returns the errors of those
// that had stopped on their own.
func (g *serviceGroup) Stop() error {
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}

// gcPercent writes a GOGC value as the environment variable would.
func gcPercent(p int) string {
	if p < 0 {
		return "off"
	}
	return strconv.Itoa(p)
}
