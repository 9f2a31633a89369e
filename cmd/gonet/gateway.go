package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/dns"
	"github.com/gonetstack/gonet/gateway"
	"github.com/gonetstack/gonet/internal/rtnl"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stats"
	"golang.org/x/sys/unix"
)

// gonet gateway: the daemon of issue 11, user-mode networking for a guest
// (a container's network namespace, a VM on a TAP device) on slirp4netns's
// layout. The pieces are the packages': gateway relays the guest's flows
// through host sockets, dns forwards its queries, dhcp leases it its
// address; this file puts them on one stack and runs them as gonet up runs
// its services.

var gatewayCommand = &command{
	name:    "gateway",
	summary: "give a guest's TAP device its network through host sockets, as slirp4netns does",
	usage: "gonet gateway {-tap NAME [-netns PID|PATH] [-configure] | -socket PATH} [-mtu N] [-tap-spin DURATION] [-subnet CIDR] [-ipv6-prefix CIDR] [-no-ipv6] " +
		"[-forward PROTO:[HOSTADDR:]HOSTPORT:[GUESTADDR:]GUESTPORT]... [-deny CIDR]... [-no-host-loopback] " +
		"[-dns-upstream ADDR:PORT] [-max-flows N] [-pcap FILE] [-impair SPEC] [-control PATH] [-metrics [HOST]:PORT] [-pprof [HOST]:PORT] " +
		"[-log-level LEVEL] [-log-format text|json]",
	about: `Serves a guest on a TAP device as its router: GoNet terminates every TCP
connection, UDP flow and ping of the guest and relays each through this
process's own sockets, so the guest reaches what the host reaches without
any privilege on the host's network. The layout is slirp4netns's: network
10.0.2.0/24 (-subnet), the gateway at .2 (which also reaches the host's
loopback, unless -no-host-loopback), a DNS forwarder at .3 (to
-dns-upstream, else the resolvers of /etc/resolv.conf), and a DHCP server
leasing the guest .100. IPv6 too, as slirp4netns --enable-ipv6: the
gateway is the guest link's router, advertising the /64 fd00::/64
(-ipv6-prefix) so that the guest forms its address by SLAAC and routes
through the gateway, with the DNS forwarder at ::3 named in the
advertisements (RDNSS); ::2 is the gateway, which reaches the host's ::1
unless -no-host-loopback. -no-ipv6 leaves the guest IPv4-only.

With -netns the TAP device is created inside that network namespace (a
process ID, or a path such as /run/netns/NAME) and served from this one;
-configure also brings it up there with the guest's address, the MTU and a
default route via the gateway. With -socket PATH instead of -tap the guest
is a VM: the gateway listens on that UNIX socket for QEMU's -netdev stream
(or passt's) frames, each behind its 32-bit big-endian length, one VM at a
time, and the NIC is ` + socketNIC + `; the VM takes its address from DHCP.
-forward listens on the host (0.0.0.0 unless HOSTADDR says otherwise, an
IPv6 one in brackets, each address in its own family alone) and carries
each connection (tcp) or flow (udp) to the guest's port at its IPv4
address, or at GUESTADDR, one of the guest's subnet or IPv6 prefix, from
the gateway's address in that family.

When ready it prints one line, "gonet: gateway up TAP GATEWAY/PREFIX MAC",
on stdout, and logs on stderr how it relays pings. Its log is one event a
line, as key=value text or, with -log-format json, JSON, at -log-level and
above; a limit reached per packet is one warning, then one per 10 s with
the count suppressed. On SIGINT or SIGTERM it
shuts down, prints the counters of the stack, the gateway, the DNS
forwarder and the DHCP server, and exits 0. The control socket (-control,
by default /run/gonet/TAP.sock) serves them to gonet ss and gonet stats;
-metrics serves them to Prometheus at http://[HOST]:PORT/metrics on the
host's own network (127.0.0.1 unless HOST says otherwise), with the kernel's
own counters of the TAP device (its drops of frames for GoNet among them).`,
	flags: func() *flag.FlagSet { fs, _ := gatewayFlags("gateway"); return fs },
	run:   runGateway,
}

// gatewayMTU is the gateway's default MTU, slirp4netns's 65520: with the
// TAP's offloads on, the guest's TCP segments cross as 64 KiB
// super-segments.
const gatewayMTU = maxTAPMTU

// maxTAPMTU is the largest MTU gonet gateway and gonet run accept,
// slirp4netns's, within the TAP device's own limit (tap.MaxMTU, 65521).
const maxTAPMTU = 65520

// A compile-time check that the TAP endpoint takes maxTAPMTU.
const _ = uint(tap.MaxMTU - maxTAPMTU)

// gatewayConfig is gonet gateway's command line, parsed; gonet run's too,
// without -netns and -configure.
type gatewayConfig struct {
	link           linkConfig // -tap, -mtu, -pcap, -impair
	netns          string
	configure      bool
	loopback       bool // bring the namespace's lo up too (gonet run)
	subnet         netip.Prefix
	prefix6        netip.Prefix // -ipv6-prefix
	noIPv6         bool         // -no-ipv6
	forwards       []gateway.Forward
	deny           []netip.Prefix
	noHostLoopback bool
	dnsUpstream    netip.AddrPort // invalid: /etc/resolv.conf's
	maxFlows       int
	control        string // empty: the default; noControl: none
	metrics        metricsConfig
	log            logConfig
}

// gatewayFlags returns the flags of gonet gateway, or of gonet run when
// name is "run": there the namespace is gonet's own making.
func gatewayFlags(name string) (*flag.FlagSet, *gatewayConfig) {
	c := &gatewayConfig{subnet: gateway.DefaultSubnet, prefix6: gateway.DefaultPrefix6}
	fs := newFlagSet(name)
	if name == "run" {
		fs.StringVar(&c.link.tap, "tap", "tap0", "the guest's TAP device `NAME` in the new namespace")
	} else {
		fs.StringVar(&c.link.tap, "tap", "", "the guest's TAP device `NAME` (created when absent; at most 15 bytes)")
		fs.StringVar(&c.netns, "netns", "", "create the TAP device in the network namespace of process `PID`, or at PATH (as /run/netns/NAME)")
		fs.BoolVar(&c.configure, "configure", false, "bring the guest's side of the TAP device up: address, MTU, default route")
		c.link.registerSocket(fs)
	}
	c.link.registerSpin(fs)
	fs.IntVar(&c.link.mtu, "mtu", gatewayMTU, "the guest link's MTU `N`, "+strconv.Itoa(minMTU)+".."+strconv.Itoa(maxTAPMTU))
	fs.Func("subnet", "the guest's network `CIDR`, /25 or larger: gateway .2, DNS .3, guest .100 (default "+gateway.DefaultSubnet.String()+")",
		func(s string) error {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return errors.New("not a network, as in 10.0.2.0/24")
			}
			if _, err := gateway.NewNetwork(p); err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "gateway: "))
			}
			c.subnet = p.Masked()
			return nil
		})
	fs.Func("ipv6-prefix", "the guest's IPv6 network `CIDR`, a /64 it forms its address in by SLAAC: gateway ::2, DNS ::3 (default "+gateway.DefaultPrefix6.String()+")",
		func(s string) error {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return errors.New("not an IPv6 network, as in fd00::/64")
			}
			if _, err := gateway.NewNetwork6(p); err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "gateway: "))
			}
			c.prefix6 = p.Masked()
			return nil
		})
	fs.BoolVar(&c.noIPv6, "no-ipv6", false, "give the guest IPv4 only: no router advertisements, its IPv6 not relayed")
	fs.Func("forward", "forward the host's port to the guest's as `PROTO:[HOSTADDR:]HOSTPORT:[GUESTADDR:]GUESTPORT`, as in tcp:8080:80 or tcp:[::1]:8080:80 (repeatable)",
		func(s string) error {
			f, err := gateway.ParseForward(s)
			if err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "gateway: "))
			}
			c.forwards = append(c.forwards, f)
			return nil
		})
	fs.Func("deny", "refuse the guest's flows to the network `CIDR`, IPv4 or IPv6 (repeatable)",
		func(s string) error {
			p, err := netip.ParsePrefix(s)
			if err != nil || p.Addr().Is4In6() {
				return errors.New("not a network, as in 192.168.0.0/16 or 2001:db8::/32")
			}
			c.deny = append(c.deny, p.Masked())
			return nil
		})
	fs.BoolVar(&c.noHostLoopback, "no-host-loopback", false, "refuse the guest's flows to the gateway's address instead of relaying them to the host's loopback")
	fs.Func("dns-upstream", "forward the guest's DNS queries to `ADDR:PORT` (default: the nameservers of /etc/resolv.conf)",
		func(s string) error {
			up, err := dns.ParseUpstream(s)
			if err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "dns: "))
			}
			c.dnsUpstream = up
			return nil
		})
	fs.IntVar(&c.maxFlows, "max-flows", 4096, "relay at most `N` TCP and UDP flows at once; more are refused and counted")
	c.link.registerCapture(fs)
	fs.StringVar(&c.control, "control", "", "serve the counters for gonet ss and stats on the Unix socket `PATH`, or on none with -control "+noControl+
		" (default: "+filepath.Join(controlDir, "TAP.sock")+")")
	c.metrics.register(fs)
	// gonet run's log shares stderr with the command's own: its
	// default keeps out all but what went wrong.
	level := slog.LevelInfo
	if name == "run" {
		level = slog.LevelWarn
	}
	c.log.register(fs, level)
	return fs, c
}

// check validates what the flags alone cannot.
func (c *gatewayConfig) check() error {
	if err := c.checkLink(); err != nil {
		return err
	}
	if c.link.mtu < minMTU || c.link.mtu > maxTAPMTU {
		return usagef("-mtu %d is outside %d..%d", c.link.mtu, minMTU, maxTAPMTU)
	}
	if c.maxFlows < 1 {
		return usagef("-max-flows %d: must be at least 1", c.maxFlows)
	}
	if c.configure && c.netns == "" {
		return usagef("-configure needs -netns: it configures the guest's namespace, not this one")
	}
	return c.link.checkImpair()
}

// checkLink checks that exactly one guest link is named: a TAP device, or
// a VM's socket, which has no namespace to make it in or to configure.
func (c *gatewayConfig) checkLink() error {
	switch {
	case c.link.tap != "" && c.link.socket != "":
		return usagef("-tap and -socket are two links: give one")
	case c.link.socket != "" && c.netns != "":
		return usagef("-netns is for a TAP device: a VM's -socket lives in this namespace")
	case c.link.socket != "" && c.configure:
		return usagef("-configure is for a TAP device: a VM on -socket takes its address from DHCP")
	case c.link.socket != "":
		return nil
	case c.link.tap == "" && c.link.socketFlag:
		return usagef("-tap or -socket is required: the guest's TAP device, or the UNIX socket its VM connects to")
	case c.link.tap == "":
		return usagef("-tap is required: the guest's TAP device")
	}
	if err := checkTapName(c.link.tap); err != nil {
		return err
	}
	if strings.Contains(c.link.tap, "%") {
		// The name is the guest's interface: -configure and the ready
		// line need it known.
		return usagef("-tap %q: give the device's name, not a pattern", c.link.tap)
	}
	return nil
}

// parseGateway parses gonet gateway's arguments.
func parseGateway(args []string) (*gatewayConfig, error) {
	fs, c := gatewayFlags("gateway")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: gateway takes only flags", fs.Arg(0))
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

func runGateway(ctx context.Context, cmd *command, out *output, args []string) int {
	c, err := parseGateway(args)
	if err != nil {
		return reportParseError(out, cmd, err)
	}
	log := c.log.logger(out.stderr)
	nsPath := ""
	if c.netns != "" {
		if nsPath, err = gateway.NetnsPath(c.netns); err != nil {
			log.Error("-netns: "+strings.TrimPrefix(err.Error(), "gateway: "), "netns", c.netns)
			return exitFail
		}
	}
	d, err := startGateway(ctx, log, c, nsPath)
	if err != nil {
		log.Error("starting the gateway", "nic", c.link.nicName(), "err", err)
		return exitFail
	}
	fmt.Fprintf(out.stdout, "gonet: gateway up %s %v %v\n", d.host.nic,
		netip.PrefixFrom(d.net.Gateway, d.net.Subnet.Bits()), d.host.mac)

	code := exitOK
	select {
	case <-ctx.Done():
	case <-d.svc.Failed():
		code = exitFail
	}
	if err := d.stop(); err != nil {
		logErrors(log, "shutting down", err)
		code = exitFail
	}
	if err := stats.Write(out.stdout, d.Counters(), false); err != nil {
		log.Error("writing the counters", "err", err)
		code = exitFail
	}
	return code
}

// gatewayDaemon is a running gateway: the stack on the guest's TAP device,
// the gateway relaying the guest's flows, and the gateway's own services.
type gatewayDaemon struct {
	host *host
	net  gateway.Network
	gw   *gateway.Gateway
	dns  *dns.Forwarder
	dhcp *dhcp.Server
	svc  *serviceGroup // the DNS forwarder, the DHCP server, the control socket, -metrics
	// metricsAddr is where -metrics serves; nil without it.
	metricsAddr net.Addr
}

// startGateway brings the gateway up on the guest's TAP device, made in the
// namespace at nsPath (this one when empty) and there configured with
// c.configure, logging its events on log. On error nothing is left
// running.
func startGateway(ctx context.Context, log *slog.Logger, c *gatewayConfig, nsPath string) (_ *gatewayDaemon, err error) {
	n, err := gateway.NewNetwork(c.subnet)
	if err != nil {
		return nil, err
	}
	var n6 gateway.Network6
	if !c.noIPv6 {
		if n6, err = gateway.NewNetwork6(c.prefix6); err != nil {
			return nil, err
		}
	}
	// The DNS forwarder's upstreams are read first: a host with no
	// resolver is an error before anything is made.
	dcfg := dns.Config{ResolvConf: "/etc/resolv.conf", Logger: log}
	if c.dnsUpstream.IsValid() {
		dcfg.Upstreams = []netip.AddrPort{c.dnsUpstream}
	}
	fwd, err := dns.New(dcfg)
	if err != nil {
		return nil, fmt.Errorf("DNS forwarder: %w", err)
	}
	dcp := dhcp.ConfigFor(n.Subnet)
	dcp.MTU = c.link.mtu
	dcp.Logger = log
	srv, err := dhcp.NewServer(dcp)
	if err != nil {
		return nil, fmt.Errorf("DHCP server: %w", err)
	}

	ep, nic, kernel, err := openGuestLink(nsPath, c, n)
	if err != nil {
		return nil, err
	}
	// The gateway's stack runs IPv6 as the guest's router: it solicits
	// no routers and forms no addresses from advertisements.
	c.link.noIPv6, c.link.router = c.noIPv6, true
	h, err := bringUpOn(&c.link, ep, nic, log)
	if err != nil {
		kernel.Close()
		return nil, err
	}
	h.kernel = kernel
	d := &gatewayDaemon{host: h, net: n, dns: fwd, dhcp: srv}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.stop())
		}
	}()
	c.link.logImpairment(log)
	d.gw, err = gateway.New(h.stack, h.nic, gateway.Config{
		Network:        n,
		Network6:       n6,
		NoIPv6:         c.noIPv6,
		NoHostLoopback: c.noHostLoopback,
		Deny:           c.deny,
		MaxFlows:       c.maxFlows,
	})
	if err != nil {
		return nil, err
	}
	log.Info("relaying pings", "nic", h.nic, "through", d.gw.PingMode())
	log.Info("forwarding DNS", "nic", h.nic, "upstreams", fwd.Upstreams())
	for _, f := range c.forwards {
		if err := d.gw.AddForward(f); err != nil {
			return nil, err
		}
	}

	d.svc = newServiceGroup(ctx)
	if err := serveDNS(d.svc, h, fwd, netip.AddrPortFrom(n.DNS, dns.Port)); err != nil {
		return nil, err
	}
	if !c.noIPv6 {
		// The DNS forwarder's IPv6 address is usable, and can be bound,
		// once its duplicate address detection is over.
		wctx, cancel := context.WithTimeout(ctx, dadTimeout)
		err := d.gw.WaitIPv6(wctx)
		cancel()
		if err != nil {
			return nil, err
		}
		if err := serveDNS(d.svc, h, fwd, netip.AddrPortFrom(n6.DNS, dns.Port)); err != nil {
			return nil, err
		}
		log.Info("advertising IPv6", "nic", h.nic, "prefix", n6.Prefix.String(), "gateway", n6.Gateway.String(), "dns", n6.DNS.String())
	}

	dhcpAddr := netip.AddrPortFrom(netip.IPv4Unspecified(), 67)
	conn, err := h.stack.ListenUDP(dhcpAddr)
	if err != nil {
		return nil, fmt.Errorf("DHCP server: binding UDP %v: %w", dhcpAddr, err)
	}
	d.svc.run(func(ctx context.Context) error {
		// Serve returns nil once its socket is closed.
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		defer stop()
		defer conn.Close()
		return srv.Serve(conn)
	})

	if c.control != noControl {
		path := c.control
		if path == "" {
			path = defaultControlPath(h.nic)
		}
		ln, lerr := listenControl(path)
		switch {
		case lerr == nil:
			d.svc.run(func(ctx context.Context) error {
				defer ln.Close()
				return serveControlHandler(ctx, ln, flowsHandler(d.gw, forwardsHandler(d.gw, services.HTTPHandler("", d))))
			})
		case c.control == "":
			log.Warn("no control socket: gonet ss and stats will not reach this daemon (give -control PATH)", "nic", h.nic, "err", lerr)
		default:
			return nil, lerr
		}
	}
	if d.metricsAddr, err = c.metrics.start(d.svc, log, d.Metrics); err != nil {
		return nil, err
	}
	return d, nil
}

// serveDNS runs the DNS forwarder on the stack's UDP and TCP port at addr,
// in svc.
func serveDNS(svc *serviceGroup, h *host, fwd *dns.Forwarder, addr netip.AddrPort) error {
	pc, err := h.stack.ListenUDP(addr)
	if err != nil {
		return fmt.Errorf("DNS forwarder: binding UDP %v: %w", addr, err)
	}
	l, err := h.stack.ListenTCP(addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("DNS forwarder: listening on TCP %v: %w", addr, err)
	}
	svc.run(func(ctx context.Context) error { return fwd.Serve(ctx, pc, l) })
	return nil
}

// openGuestLink opens the guest's link: the UNIX socket a VM connects to
// (-socket), or else its TAP device (openGuestTAP). It returns the link
// with its NIC's name and, for a TAP device, the reader of the kernel's
// counters of it.
func openGuestLink(nsPath string, c *gatewayConfig, n gateway.Network) (link.Endpoint, string, *kernelCounters, error) {
	if c.link.socket != "" {
		// The stream link carries no offloads: the VM's frames are whole.
		ep, err := stream.Listen(c.link.socket, stream.Options{MTU: c.link.mtu})
		if err != nil {
			return nil, "", nil, fmt.Errorf("listening for a VM: %w", err)
		}
		return ep, socketNIC, nil, nil
	}
	ep, conn, err := openGuestTAP(nsPath, c, n)
	if err != nil {
		return nil, "", nil, err
	}
	return ep, ep.Name(), &kernelCounters{conn: conn, dev: ep.Name()}, nil
}

// openGuestTAP makes the guest's TAP device in the namespace at nsPath
// (this one when empty), configured there with c.configure, and returns it
// to be served from this namespace, with a netlink socket opened in that
// namespace to read the kernel's counters of it.
//
// The work is done on a thread of its own that enters the namespace and is
// never brought back: in gonet run's user namespace the thread could not
// return to the host's network namespace, which that namespace does not
// own, so it ends with its goroutine instead (runtime.LockOSThread).
func openGuestTAP(nsPath string, c *gatewayConfig, n gateway.Network) (*tap.Endpoint, *rtnl.Conn, error) {
	type result struct {
		ep   *tap.Endpoint
		conn *rtnl.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: see above
		if nsPath != "" {
			fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				done <- result{err: fmt.Errorf("netns: %w", err)}
				return
			}
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
			if err != nil {
				done <- result{err: fmt.Errorf("netns: entering %s: %w", nsPath, err)}
				return
			}
		}
		// Offloads unless -impair, as gonet up: its losses and
		// corruption are meant for the frames a wire carries.
		ep, err := gateway.OpenTAP("", c.link.tap, tap.Options{MTU: c.link.mtu, Offload: c.link.impair == "", Spin: c.link.tapSpin})
		if err == nil && c.configure {
			err = gateway.ConfigureGuest("", ep.Name(), n, c.link.mtu)
		}
		if err == nil && c.loopback {
			err = rtnl.LinkUp("lo", 0)
		}
		var conn *rtnl.Conn
		if err == nil {
			conn, err = rtnl.Dial()
		}
		if err != nil && ep != nil {
			ep.Close()
		}
		done <- result{ep, conn, err}
	}()
	r := <-done
	return r.ep, r.conn, r.err
}

// stop shuts the daemon down: the services, then the gateway's flows, then
// the stack with the TAP device.
func (d *gatewayDaemon) stop() error {
	var errs []error
	if d.svc != nil {
		errs = append(errs, d.svc.Stop())
	}
	if d.gw != nil {
		if err := d.gw.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the gateway: %w", err))
		}
	}
	if err := d.host.Close(); err != nil {
		errs = append(errs, fmt.Errorf("shutting down: %w", err))
	}
	return errors.Join(errs...)
}

// Counters returns the stack's counters with the gateway's, the DNS
// forwarder's and the DHCP server's, under Gateway., DNS. and DHCP.
func (d *gatewayDaemon) Counters() map[string]int64 { return d.Metrics().Values() }

// Metrics is Counters with each value's kind.
func (d *gatewayDaemon) Metrics() stats.Snapshot {
	m := d.host.Metrics()
	if d.gw != nil {
		m.Add("Gateway", &d.gw.Stats)
	}
	m.Add("DNS", &d.dns.Stats)
	m.Add("DHCP", &d.dhcp.Stats)
	return m
}

// Connections returns the stack's connections: the guest's side of every
// relayed TCP flow.
func (d *gatewayDaemon) Connections() []services.ConnRow {
	return stackStatus{d.host}.Connections()
}
