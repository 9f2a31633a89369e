package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gonetstack/gonet/iperf3"
	"github.com/gonetstack/gonet/ipv4ll"
	"github.com/gonetstack/gonet/mdns"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stats"
)

var upCommand = &command{
	name:    "up",
	summary: "bring up a GoNet host on a TAP device or a VM's socket and serve until interrupted",
	usage:   "gonet up {-tap NAME | -socket PATH | -ring PATH | -ring-listen PATH [-ring-size N]} [-addr ADDR/NN | -addr dhcp | -addr ipv4ll]... [-dhcp-lease FILE] [-ipv4ll-file FILE] [-gw ADDR|NAME]... [-host NAME=ADDR]... [-hosts FILE] [-no-ipv6] [-slaac=false] [-dhcpv6=false] [-temp-addr] [-optimistic-dad] [-stable-iid FILE] [-mac MAC] [-mtu N] [-serve LIST] [-http-root DIR] [-control PATH] [-metrics [HOST]:PORT] [-pprof [HOST]:PORT] [-pcap FILE] [-impair SPEC] [-memory BYTES] [-log-level LEVEL] [-log-format text|json]",
	about: `Opens the TAP device (creating it when absent), starts a GoNet stack on it
with the given addresses, and runs the services named by -serve on their
well-known ports, over UDP and TCP alike and on both families; http (TCP
port 80) serves the files under -http-root, or without it a page of the
stack's counters and connections. Whatever the root, the status is also at /.gonet/
(/.gonet/status.json, /.gonet/status.txt, /.gonet/ss, and /.gonet/metrics
for Prometheus).

It also serves that status on a Unix socket, -control (by default
/run/gonet/TAP.sock, removed on exit), which gonet ss, stats, addr and
neigh read, and with -metrics serves /metrics alone on a TCP socket of
the host's own network for Prometheus to scrape (on 127.0.0.1 unless HOST
says otherwise).

The stack runs IPv4 and IPv6 (unless -no-ipv6): -addr takes addresses of
either family and repeats (-addr 10.0.0.2/24 -addr fd00::2/64); the NIC
always has its link-local address, and forms more from the prefixes
routers advertise (SLAAC, unless -slaac=false), each used once duplicate
address detection finds no other node with it; -gw repeats, once per
family. With IPv6, -addr is optional: the link-local address and SLAAC
need none. Where routers set the Managed or Other flag, DHCPv6 leases
addresses or gives DNS servers (-dhcpv6=false does not ask); -temp-addr
adds an RFC 8981 temporary address beside each SLAAC one.

-addr dhcp asks a DHCP server on the link for the IPv4 address (RFC 2131),
and applies what the lease carries: the subnet mask, the default route
through the first router (or the classless static routes), the interface
MTU, and the DNS servers and search domains for the stack's resolver. The client renews the lease at T1,
rebinds at T2, gives the address up when the lease expires or a server
refuses it, and gives it back (DHCPRELEASE) on SIGINT or SIGTERM. Each
new address is probed for first (RFC 5227, 4 to 7 s), declined if
another host holds it, and defended once when in use.
-dhcp-lease FILE keeps the lease across restarts, to ask for the same
address first. GoNet waits up to a minute for its first lease.

-addr ipv4ll claims an IPv4 link-local address of 169.254/16 (RFC 3927),
alone or beside -addr dhcp for when no server answers; -ipv4ll-file FILE
keeps it across restarts, to probe for it first. With the link-local
address alone, IPv4 destinations are reached straight on the link, never
through a router (RFC 3927 section 2.6.2).

Names are resolved over GoNet, from a static table first (-host NAME=ADDR,
-hosts FILE in /etc/hosts's format; empty by default), then from the DNS
servers of -dns, or else those of the lease and those routers advertise
(RFC 8106's RDNSS and DNSSL options, the lease's first); never from the
machine's /etc/hosts, which names its neighbours, not GoNet's. A flag that names
a peer takes a name where it can be resolved when needed: -gw from the
static table alone (DNS servers off the link are reached through the
gateway), gonet ping's DEST and gonet iperf3's -c from either; -dns takes
addresses only, since it is what names are resolved with.

When ready, its IPv6 addresses through duplicate address detection, it
prints one line, "gonet: up TAP ADDR/PREFIX MAC [ADDR/PREFIX]...", on
stdout: the first -addr (or the link-local address), the MAC, then the
other -addr; with -addr dhcp, the lease's address first and "(dhcp from
SERVER)" last. The addresses SLAAC forms later are in the log. On SIGINT or
SIGTERM it shuts down, prints the stack's counters and exits 0. It logs
its events on stderr, one a line, as text or JSON (-log-format) at
-log-level and above. The kernel's side of the TAP device is left for you
to configure.

With -socket PATH instead of -tap, the link is a UNIX socket that GoNet
listens on for a VM, each frame behind its length as 32 bits big-endian:
QEMU's -netdev stream,id=n0,server=off,addr.type=unix,addr.path=PATH
connects to it. One VM is served at a time; when it leaves, the next that
connects (or the same, restarted). The NIC, in the ready line and the
default control socket, is ` + socketNIC + `.

With -ring-listen PATH, or -ring PATH, instead, the link is a shared-memory
ring to another GoNet process: the one with -ring-listen listens on the
UNIX socket PATH and waits for one peer before it comes up; the one with
-ring attaches to it. Frames cross in batches without a system call each,
with checksums and 64 KiB TCP segments left whole (unless -impair); both
sides need the same -mtu. When the peer exits, the link goes down and
stays down. The NIC is ` + ringNIC + ` on both sides, so give each its own
-control. The ring's counters are under Ring.` + ringNIC + `.`,
	flags: func() *flag.FlagSet { fs, _ := upFlags(); return fs },
	run:   runUp,
}

// upConfig is gonet up's command line, parsed.
type upConfig struct {
	link     linkConfig
	services []services.Service
	http     bool   // http was in -serve
	httpRoot string // directory http serves; empty: the status page
	control  string // control socket; empty: the default; noControl: none
	metrics  metricsConfig
	log      logConfig
	// mdns answers multicast DNS for hostname.local (-mdns, -hostname;
	// empty hostname: gonet- and the MAC's last three bytes).
	mdns     bool
	hostname string
}

func upFlags() (*flag.FlagSet, *upConfig) {
	c := &upConfig{}
	fs := newFlagSet("up")
	c.link.register(fs)
	c.link.registerSocket(fs)
	c.link.registerRing(fs)
	fs.Func("serve", "serve the comma-separated services in `LIST` on UDP and TCP: "+strings.Join(services.KnownNames(), ", ")+" (default: none)",
		func(s string) error {
			list, err := services.Lookup(s)
			if err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "services: "))
			}
			c.services = list
			return nil
		})
	fs.StringVar(&c.httpRoot, "http-root", "", "serve the files under `DIR` over http (default: the stack's status page)")
	fs.StringVar(&c.control, "control", "", "serve the status for gonet ss, stats, addr and neigh on the Unix socket `PATH`, or on none with -control "+noControl+
		" (default: "+filepath.Join(controlDir, "TAP.sock")+")")
	fs.BoolVar(&c.mdns, "mdns", true, "claim -hostname.local on the link by multicast DNS (RFC 6762: probed for, the next free NAME-2.local... if another host holds it) and answer its queries with the NIC's addresses, over IPv4 and IPv6, advertising http in -serve as _http._tcp (DNS-SD, RFC 6763); -mdns=false does not")
	fs.StringVar(&c.hostname, "hostname", "", "the host's `NAME`, one label: answered as NAME.local over mDNS, and sent to a DHCP server (default: gonet- and the MAC's last three bytes, as gonet-5e1001)")
	c.metrics.register(fs)
	c.log.register(fs, slog.LevelInfo)
	return fs, c
}

// parseUp parses gonet up's arguments.
func parseUp(args []string) (*upConfig, error) {
	fs, c := upFlags()
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: up takes only flags", fs.Arg(0))
	}
	if err := c.link.check(); err != nil {
		return nil, err
	}
	if c.hostname != "" && !validHostName(c.hostname) || strings.Contains(c.hostname, ".") {
		return nil, usagef("-hostname %q is not one label of letters, digits and hyphens", c.hostname)
	}
	c.link.hostname = c.hostname
	for _, s := range c.services {
		if s.Name == "http" {
			c.http = true
		}
	}
	if c.httpRoot != "" {
		fi, err := os.Stat(c.httpRoot)
		if err != nil {
			return nil, usagef("-http-root: %v", err)
		}
		if !fi.IsDir() {
			return nil, usagef("-http-root %s is not a directory", c.httpRoot)
		}
	}
	return c, nil
}

func runUp(ctx context.Context, cmd *command, out *output, args []string) int {
	c, err := parseUp(args)
	if err != nil {
		return reportParseError(out, cmd, err)
	}
	log := c.log.logger(out.stderr)
	if c.httpRoot != "" && !c.http {
		log.Warn("-http-root does nothing without http in -serve", "http_root", c.httpRoot)
	}
	h, err := bringUp(ctx, &c.link, log)
	if err != nil {
		log.Error("bringing the link up", "err", err)
		return exitFail
	}
	c.link.logImpairment(log)

	svc, err := startUpServices(ctx, log, c, h)
	if err != nil {
		log.Error("starting the services", "nic", h.nic, "err", err)
		h.Close()
		return exitFail
	}

	if c.mdns {
		// What gonet up serves over HTTP is found by browsing for it
		// (DNS-SD, RFC 6763), under the host's name.
		var sd []mdns.Service
		if c.http {
			sd = append(sd, mdns.Service{Type: "_http._tcp", Port: 80})
		}
		r, err := mdns.Start(h.stack, h.nic, h.hostname(), sd...)
		if err != nil {
			log.Error("starting the mDNS responder", "nic", h.nic, "err", err)
			svc.Stop()
			h.Close()
			return exitFail
		}
		defer r.Close()
		log.Info("mDNS responder probing", "nic", h.nic, "name", r.Name())
		go func() {
			// Claimed in a second unless another host holds the name,
			// when it moves to the next free one: worth a warning.
			name, err := r.WaitClaimed(ctx)
			switch {
			case err != nil:
			case name != h.hostname()+".local.":
				log.Warn("mDNS name taken by another host, claimed the next", "nic", h.nic, "wanted", h.hostname()+".local", "name", name)
			default:
				log.Info("mDNS name claimed", "nic", h.nic, "name", name)
			}
		}()
	}

	fmt.Fprintln(out.stdout, readyLine(h))

	code := exitOK
	select {
	case <-ctx.Done():
	case <-svc.Failed():
		// A service that stops on its own leaves a daemon that no
		// longer does what it said it would: shut down and say so.
		code = exitFail
	}
	if err := svc.Stop(); err != nil {
		logErrors(log, "a service failed", err)
		code = exitFail
	}
	if err := h.Close(); err != nil {
		log.Error("shutting down", "nic", h.nic, "err", err)
		code = exitFail
	}
	counters := h.stack.Counters()
	if h.ring != nil {
		stats.Walk("Ring."+h.nic, h.ring.Stats(), func(n string, v int64) { counters[n] = v })
	}
	if h.iperf3 != nil {
		stats.Walk("Iperf3", h.iperf3, func(n string, v int64) { counters[n] = v })
	}
	if err := stats.Write(out.stdout, counters, false); err != nil {
		log.Error("writing the counters", "err", err)
		code = exitFail
	}
	return code
}

// readyLine is what gonet up prints on stdout when it is up: "gonet: up
// NIC ADDR/NN MAC", the first address (-addr's first, or without -addr
// the link-local address), then any further addresses, so that a script
// that reads the first four fields reads them as it did when GoNet had
// one IPv4 address.
//
// With -addr dhcp the first address is the lease's, and the line ends
// with "(dhcp from SERVER)"; with -addr ipv4ll the link-local address
// comes next, or first while no server has given a lease.
func readyLine(h *host) string {
	f := []string{"gonet: up", h.nic, "", h.mac.String()}
	addrs := h.addrs
	if h.ll != nil {
		addrs = append([]netip.Prefix{netip.PrefixFrom(h.llAddr, ipv4ll.Prefix.Bits())}, addrs...)
	}
	leased := h.dhcp != nil && h.lease.Addr.IsValid() // none yet beside -addr ipv4ll
	if leased {
		addrs = append([]netip.Prefix{h.lease.Addr}, addrs...)
	}
	if len(addrs) > 0 {
		f[2] = addrs[0].String()
		for _, p := range addrs[1:] {
			f = append(f, p.String())
		}
	}
	if leased {
		f = append(f, "(dhcp from "+h.lease.Server.String()+")")
	}
	return strings.Join(f, " ")
}

// startUpServices starts what gonet up serves on h: the -serve services on
// UDP and TCP, http with -http-root or the stack's status, and the control
// socket. On error nothing is left running.
func startUpServices(ctx context.Context, log *slog.Logger, c *upConfig, h *host) (*serviceGroup, error) {
	status := stackStatus{h}
	list := slices.Clone(c.services)
	for i := range list {
		switch list[i].Name {
		case "http":
			handler := services.HTTPHandler(c.httpRoot, status)
			list[i].ServeTCP = func(ctx context.Context, ln net.Listener) error {
				return services.ServeHTTP(ctx, ln, handler)
			}
		case "iperf3":
			// The daemon's log gets a line per test.
			srv := &iperf3.Server{Logger: log}
			h.iperf3 = &srv.Stats
			list[i].ServeBoth = srv.Serve
		}
	}
	g := newServiceGroup(ctx)
	err := g.startUDP(h.stack, list)
	if err == nil {
		err = g.startTCP(h.stack, list)
	}
	if err == nil && c.control != noControl {
		path := c.control
		if path == "" {
			path = defaultControlPath(h.nic)
		}
		ln, lerr := listenControl(path)
		switch {
		case lerr == nil:
			g.run(func(ctx context.Context) error {
				defer ln.Close()
				return serveControlHandler(ctx, ln, linkHandler(h, services.HTTPHandler("", status)))
			})
		case c.control == "":
			// The default place may not be writable (gonet up run
			// by a user who owns the TAP device): the daemon is
			// still worth running without ss.
			log.Warn("no control socket: gonet ss and stats will not reach this daemon (give -control PATH)", "err", lerr)
		default:
			err = lerr
		}
	}
	if err == nil {
		_, err = c.metrics.start(g, log, status.Metrics)
	}
	if err != nil {
		return nil, errors.Join(err, g.Stop())
	}
	return g, nil
}
