package integration

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// GoNet's DHCP client against dnsmasq, the DHCP server of many home
// routers and of libvirt, on the kernel's side of a TAP device in a
// namespace: the lease and its options, a NAK, RELEASE, and gonet up
// -addr dhcp. Renewal, rebinding and expiry are tested at dnsmasq's
// two-minute minimum lease (TestDHCPLeaseLifeWithDnsmasq), at a T1 and T2
// of seconds beside ISC dhclient (dhcp_dhclient_test.go), and closer
// still against the package's own server on a virtual clock
// (dhcp/client_test.go).

// The pool dnsmasq leases from, and what it gives with a lease.
var (
	dhcpFirst  = netip.MustParseAddr("10.99.0.50")
	dhcpLast   = netip.MustParseAddr("10.99.0.60")
	dhcpMTU    = 1400
	dhcpSearch = "gonet.test"
	wwwAddr    = netip.MustParseAddr("10.99.0.7") // www.gonet.test in dnsmasq's DNS
)

// inPool reports whether a is one of dnsmasq's addresses.
func inPool(a netip.Addr) bool { return dhcpFirst.Compare(a) <= 0 && a.Compare(dhcpLast) <= 0 }

// startDHCPServer runs dnsmasq as DHCP and DNS server on dev, the kernel
// side of the TAP at kernelAddr, until the test ends; it returns the lease
// file dnsmasq keeps. extra are more of dnsmasq's arguments.
func startDHCPServer(t *testing.T, ns *netns.NS, dev string, extra ...string) string {
	t.Helper()
	leases, _ := startDHCPServerStoppable(t, ns, dev, extra...)
	return leases
}

// startDHCPServerStoppable is startDHCPServer with a function that stops
// dnsmasq before the test ends: a server that vanishes.
func startDHCPServerStoppable(t *testing.T, ns *netns.NS, dev string, extra ...string) (leases string, stop func()) {
	t.Helper()
	netnstest.RequireTool(t, "dnsmasq")
	leases = filepath.Join(t.TempDir(), "dnsmasq.leases")
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	// DNS too, for www.gonet.test alone: no upstream, no /etc/hosts.
	args := append([]string{"--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--local=/" + dhcpSearch + "/", "--address=/www." + dhcpSearch + "/" + wwwAddr.String(),
		"--interface=" + dev, "--bind-interfaces", "--user=root", "--pid-file=", "--log-facility=-", "--log-dhcp",
		"--dhcp-authoritative", "--dhcp-leasefile=" + leases,
		"--dhcp-range=" + dhcpFirst.String() + "," + dhcpLast.String() + ",255.255.255.0,2m",
		"--dhcp-option=option:router," + kernelAddr.Addr().String(),
		"--dhcp-option=option:dns-server," + kernelAddr.Addr().String(),
		"--dhcp-option=option:domain-search," + dhcpSearch,
		"--dhcp-option=26,1400"}, extra...)
	cmd := ns.Command(ctx, "dnsmasq", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start dnsmasq: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			cmd.Wait()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("dnsmasq:\n%s", out.String())
		}
	})
	return leases, stop
}

// dhcpLink is a TAP in a namespace with dnsmasq on its kernel side, and a
// stack on it with no IPv4 address.
type dhcpLink struct {
	ns     *netns.NS
	dev    string
	stack  *stack.Stack
	leases string // dnsmasq's lease file
}

func newDHCPLink(t *testing.T, dnsmasqArgs ...string) *dhcpLink {
	t.Helper()
	return newDHCPLinkWith(t, func(ns *netns.NS, dev string) string { return startDHCPServer(t, ns, dev, dnsmasqArgs...) })
}

// newDHCPLinkWith is newDHCPLink with the server started by start, which
// returns its lease file.
func newDHCPLinkWith(t *testing.T, start func(ns *netns.NS, dev string) string) *dhcpLink {
	t.Helper()
	netnstest.RequireTool(t, "dnsmasq")
	ns := netnstest.New(t)
	l := &dhcpLink{ns: ns, dev: netns.DeviceName()}
	var ep *tap.Endpoint
	if err := ns.Do(func() (err error) {
		ep, err = tap.Open(l.dev, tap.Options{MTU: 1500})
		return err
	}); err != nil {
		t.Fatalf("open TAP in %s: %v", ns, err)
	}
	if err := ns.ConfigureLink(l.dev, kernelAddr, 1500); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	l.leases = start(ns, l.dev)
	// The client probes each address (RFC 5227) before it takes it; the
	// kernel answers a probe at once, so the timers are short.
	fast := arp.ACDConfig{ProbeWait: 50 * time.Millisecond, ProbeMin: 50 * time.Millisecond, ProbeMax: 100 * time.Millisecond,
		AnnounceWait: 50 * time.Millisecond, AnnounceInterval: 50 * time.Millisecond}
	l.stack = stack.New(stack.Config{NoIPv6: true, ARP: arp.Config{ACD: fast}})
	t.Cleanup(func() { stacktest.Closed(t, l.stack) })
	if err := l.stack.AddNIC(l.dev, ep); err != nil {
		t.Fatal(err)
	}
	return l
}

// start starts a client and waits for its first lease.
func (l *dhcpLink) start(t *testing.T, cfg dhcp.ClientConfig) (*dhcp.Client, dhcp.ClientLease) {
	t.Helper()
	bound := make(chan dhcp.ClientLease, 4)
	cfg.Notify = func(e dhcp.Event) {
		if e.Kind == dhcp.LeaseBound {
			bound <- e.Lease
		}
	}
	c, err := dhcp.StartOn(context.Background(), l.stack, l.dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	select {
	case lease := <-bound:
		return c, lease
	case <-time.After(30 * time.Second):
		t.Fatalf("no lease from dnsmasq in 30 s: %d DISCOVERs, %d OFFERs, %d REQUESTs, %d ACKs, %d NAKs",
			c.Stats.OutDiscovers.Load(), c.Stats.InOffers.Load(), c.Stats.OutRequests.Load(), c.Stats.InAcks.Load(), c.Stats.InNaks.Load())
	}
	return nil, dhcp.ClientLease{}
}

// dnsmasqHolds reports whether dnsmasq's lease file names a.
func (l *dhcpLink) dnsmasqHolds(a netip.Addr) bool {
	b, _ := os.ReadFile(l.leases)
	return slices.Contains(strings.Fields(string(b)), a.String())
}

func TestDHCPLeaseFromDnsmasq(t *testing.T) {
	l := newDHCPLink(t)
	c, lease := l.start(t, dhcp.ClientConfig{Hostname: "gonet"})
	a := lease.Addr.Addr()
	router := kernelAddr.Addr()
	if !inPool(a) || lease.Addr.Bits() != 24 || lease.Server != router {
		t.Errorf("lease of %v from %v, want one of %v-%v/24 from %v", lease.Addr, lease.Server, dhcpFirst, dhcpLast, router)
	}
	if !slices.Equal(lease.Routers, []netip.Addr{router}) || !slices.Equal(lease.DNS, []netip.Addr{router}) ||
		!slices.Equal(lease.Search, []string{dhcpSearch}) || lease.MTU != dhcpMTU {
		t.Errorf("options: routers %v, DNS %v, search %v, MTU %d; want %v, %v, [%s], %d", lease.Routers, lease.DNS,
			lease.Search, lease.MTU, router, router, dhcpSearch, dhcpMTU)
	}
	if lease.LeaseTime != 2*time.Minute || lease.T1 != time.Minute || lease.T2 != 105*time.Second {
		t.Errorf("times: lease %v, T1 %v, T2 %v; want 2m, 1m, 1m45s", lease.LeaseTime, lease.T1, lease.T2)
	}
	// Applied: the default route through the router, the MTU.
	if !slices.ContainsFunc(l.stack.Routes(), func(r ipv4.Route) bool { return r.Dst.Bits() == 0 && r.Gateway == router }) {
		t.Errorf("no default route via %v: %v", router, l.stack.Routes())
	}
	if ifc, _ := l.stack.IPv4().Interface(l.dev); ifc.MTU() != dhcpMTU {
		t.Errorf("IPv4 MTU %d, want the lease's %d", ifc.MTU(), dhcpMTU)
	}
	// The resolver asks the lease's name server: dnsmasq.
	if dns := l.stack.DNS(); !slices.Equal(dns.Servers, []netip.AddrPort{netip.AddrPortFrom(router, 53)}) ||
		!slices.Equal(dns.Search, []string{dhcpSearch}) {
		t.Errorf("stack DNS %+v, want the lease's", dns)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if got, err := l.stack.Resolver().LookupNetIP(rctx, "ip4", "www."+dhcpSearch+"."); err != nil || !slices.Equal(got, []netip.Addr{wwwAddr}) {
		t.Errorf("www.%s through the lease's DNS server: %v, %v; want %v", dhcpSearch, got, err, wwwAddr)
	}
	// The kernel reaches GoNet on its leased address.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := l.ns.Run(ctx, "ping", "-c", "2", "-i", "0.2", "-W", "2", a.String()); err != nil {
		t.Errorf("kernel pings %v: %v\n%s", a, err, out)
	}
	if !l.dnsmasqHolds(a) {
		t.Errorf("dnsmasq's lease file lacks %v", a)
	}
	// RELEASE: dnsmasq drops the lease, and the address leaves the NIC.
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); l.dnsmasqHolds(a); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq keeps the lease of %v after RELEASE", a)
		}
	}
	if l.stack.IPv4().IsLocal(a) || len(l.stack.Routes()) != 0 || len(l.stack.DNS().Servers) != 0 {
		t.Errorf("after RELEASE: %v local %v, routes %v, DNS %v", a, l.stack.IPv4().IsLocal(a), l.stack.Routes(), l.stack.DNS())
	}
}

// TestDHCPClasslessRoutesFromDnsmasq: dnsmasq's option 121 (RFC 3442)
// replaces its Router option; both its routes are installed.
func TestDHCPClasslessRoutesFromDnsmasq(t *testing.T) {
	other := netip.MustParseAddr("10.99.0.3")
	l := newDHCPLink(t, "--dhcp-option=option:classless-static-route,0.0.0.0/0,"+kernelAddr.Addr().String()+",172.16.0.0/12,"+other.String())
	_, lease := l.start(t, dhcp.ClientConfig{})
	want := []dhcp.Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: kernelAddr.Addr()},
		{Dst: netip.MustParsePrefix("172.16.0.0/12"), Gateway: other},
	}
	if !slices.Equal(lease.Routes, want) {
		t.Errorf("lease routes %v, want %v", lease.Routes, want)
	}
	for _, r := range want {
		if !slices.ContainsFunc(l.stack.Routes(), func(o ipv4.Route) bool { return o.Dst == r.Dst && o.Gateway == r.Gateway }) {
			t.Errorf("no route %v via %v: %v", r.Dst, r.Gateway, l.stack.Routes())
		}
	}
}

// TestDHCPDeclinesAnAddressTheKernelHolds: the kernel holds the first
// address of dnsmasq's pool, which dnsmasq offers (sequentially, without
// its own ping check); the client's probe finds it in use, the client
// declines it, and ten seconds later takes the next.
func TestDHCPDeclinesAnAddressTheKernelHolds(t *testing.T) {
	l := newDHCPLink(t, "--dhcp-sequential-ip", "--no-ping")
	if _, err := l.ns.IP(context.Background(), "addr", "add", netip.PrefixFrom(dhcpFirst, 24).String(), "dev", l.dev); err != nil {
		t.Fatal(err)
	}
	c, lease := l.start(t, dhcp.ClientConfig{})
	if lease.Addr.Addr() == dhcpFirst || !inPool(lease.Addr.Addr()) {
		t.Errorf("lease of %v, want one of the pool other than the kernel's %v", lease.Addr, dhcpFirst)
	}
	if c.Stats.Conflicts.Load() != 1 || c.Stats.OutDeclines.Load() != 1 {
		t.Errorf("Conflicts = %d, OutDeclines = %d; want 1 and 1", c.Stats.Conflicts.Load(), c.Stats.OutDeclines.Load())
	}
	if m := l.stack.Metrics()["ARP."+l.dev+".ProbeConflicts"]; m.Value != 1 {
		t.Errorf("ARP.%s.ProbeConflicts = %d, want 1", l.dev, m.Value)
	}
}

// TestDHCPNakFromDnsmasq: a remembered address from another network is
// asked for (INIT-REBOOT), dnsmasq says NAK, and the client starts over
// and gets one of the pool's.
func TestDHCPNakFromDnsmasq(t *testing.T) {
	l := newDHCPLink(t)
	wrong := netip.MustParsePrefix("10.98.0.7/24")
	c, lease := l.start(t, dhcp.ClientConfig{Remembered: &dhcp.ClientLease{Addr: wrong}})
	if !inPool(lease.Addr.Addr()) {
		t.Errorf("lease of %v after the NAK, want one of %v-%v", lease.Addr, dhcpFirst, dhcpLast)
	}
	if n := c.Stats.InNaks.Load(); n != 1 {
		t.Errorf("InNaks = %d, want 1", n)
	}
}

// TestDHCPInitRebootKeepsTheAddress: a client that remembers its lease
// asks for it again and dnsmasq grants it without a DISCOVER.
func TestDHCPInitRebootKeepsTheAddress(t *testing.T) {
	l := newDHCPLink(t)
	c, first := l.start(t, dhcp.ClientConfig{})
	c.Close() // the address stays, as when a host restarts without releasing
	if err := l.stack.IPv4().RemoveAddress(first.Addr.Addr()); err != nil {
		t.Fatal(err)
	}
	c2, again := l.start(t, dhcp.ClientConfig{Remembered: &first})
	if again.Addr != first.Addr {
		t.Errorf("INIT-REBOOT got %v, want the remembered %v", again.Addr, first.Addr)
	}
	if n := c2.Stats.OutDiscovers.Load(); n != 0 {
		t.Errorf("%d DISCOVERs after INIT-REBOOT, want none", n)
	}
}

// newDHCPTap makes a namespace with a TAP device whose kernel side runs
// dnsmasq, for gonet to open: the TAP exists before gonet does, so that
// dnsmasq serves it from the first DISCOVER.
func newDHCPTap(t *testing.T) (*netns.NS, string, string) {
	t.Helper()
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	if _, err := ns.IP(context.Background(), "tuntap", "add", "dev", dev, "mode", "tap"); err != nil {
		t.Fatal(err)
	}
	if err := ns.ConfigureLink(dev, kernelAddr, 1500); err != nil {
		t.Fatal(err)
	}
	return ns, dev, startDHCPServer(t, ns, dev)
}

// TestPingWithDHCP: gonet ping takes up's -addr dhcp, and pings the
// router the lease names once the lease is bound, and a name, resolved
// through the lease's DNS server and completed in its search domain.
func TestPingWithDHCP(t *testing.T) {
	netnstest.RequireTool(t, "dnsmasq")
	bin := buildGonet(t)
	ns, dev, _ := newDHCPTap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := ns.Run(ctx, bin, "ping", "-tap", dev, "-addr", "dhcp", "-no-ipv6", "-c", "2", "-i", "0.2", kernelAddr.Addr().String())
	if err != nil {
		t.Fatalf("gonet ping -addr dhcp: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "2 received") {
		t.Errorf("gonet ping -addr dhcp:\n%s", out)
	}
	// www.gonet.test is the kernel's too.
	if _, err := ns.IP(ctx, "addr", "add", netip.PrefixFrom(wwwAddr, 24).String(), "dev", dev); err != nil {
		t.Fatal(err)
	}
	out, err = ns.Run(ctx, bin, "ping", "-tap", dev, "-addr", "dhcp", "-no-ipv6", "-c", "2", "-i", "0.2", "www")
	if err != nil {
		t.Fatalf("gonet ping -addr dhcp www: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "PING www ("+wwwAddr.String()+")") || !strings.Contains(string(out), "2 received") {
		t.Errorf("gonet ping -addr dhcp www:\n%s", out)
	}
}

// dhcpDaemon is a running `gonet up -addr dhcp`.
type dhcpDaemon struct {
	cmd     *exec.Cmd
	lines   *bufio.Scanner
	stderr  bytes.Buffer
	addr    netip.Prefix     // the ready line's
	mac     net.HardwareAddr // the ready line's
	control string           // its control socket
}

// startDHCPDaemon runs gonet up -addr dhcp on dev with the lease file and
// checks its ready line: "gonet: up DEV ADDR MAC (dhcp from SERVER)".
func startDHCPDaemon(t *testing.T, ctx context.Context, bin string, ns *netns.NS, dev, leaseFile string) *dhcpDaemon {
	t.Helper()
	d := &dhcpDaemon{control: filepath.Join(t.TempDir(), "up.sock")}
	d.cmd = ns.Command(ctx, bin, "up", "-tap", dev, "-addr", "dhcp", "-dhcp-lease", leaseFile, "-control", d.control)
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = &d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cmd.Process.Kill() })
	d.lines = bufio.NewScanner(stdout)
	if !d.lines.Scan() {
		t.Fatalf("gonet up printed nothing; stderr: %s", d.stderr.String())
	}
	ready := d.lines.Text()
	f := strings.Fields(ready)
	server := "(dhcp from " + kernelAddr.Addr().String() + ")"
	if len(f) != 8 || strings.Join(f[:3], " ") != "gonet: up "+dev || strings.Join(f[5:], " ") != server {
		t.Fatalf("ready line %q, want %q", ready, "gonet: up "+dev+" ADDR MAC "+server)
	}
	if d.addr, err = netip.ParsePrefix(f[3]); err != nil || !inPool(d.addr.Addr()) {
		t.Fatalf("ready line's address %q is not one of dnsmasq's: %v", f[3], err)
	}
	if d.mac, err = net.ParseMAC(f[4]); err != nil {
		t.Fatalf("ready line's MAC %q: %v", f[4], err)
	}
	return d
}

// stop sends SIGTERM and returns the counters gonet up prints as it exits.
func (d *dhcpDaemon) stop(t *testing.T) string {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var counters strings.Builder
	for d.lines.Scan() {
		counters.WriteString(d.lines.Text() + "\n")
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("gonet up after SIGTERM: %v; stderr: %s", err, d.stderr.String())
	}
	return counters.String()
}

// TestDaemonUpWithDHCP runs `gonet up -addr dhcp` on a TAP whose kernel
// side runs dnsmasq: the ready line shows the lease and its server, the
// kernel pings the leased address, SIGTERM gives the lease back, and a
// restart asks for the address in -dhcp-lease first (INIT-REBOOT) and gets
// it without a DISCOVER.
func TestDaemonUpWithDHCP(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	netnstest.RequireTool(t, "dnsmasq")
	bin := buildGonet(t)
	ns, dev, leases := newDHCPTap(t)
	leaseFile := filepath.Join(t.TempDir(), "gonet.lease")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d := startDHCPDaemon(t, ctx, bin, ns, dev, leaseFile)
	p := d.addr
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	if out, err := ns.Run(pctx, "ping", "-c", "2", "-i", "0.2", "-W", "2", p.Addr().String()); err != nil {
		t.Errorf("kernel pings %v: %v\n%s", p.Addr(), err, out)
	}
	// It answers multicast DNS for its name with no flag asking for it.
	if _, err := ns.IP(pctx, "route", "add", "224.0.0.0/4", "dev", dev); err != nil {
		t.Fatal(err)
	}
	name := mdnsName(d.mac)
	waitFor(t, "GoNet's mDNS answer for "+name, 10*time.Second, func() bool {
		return slices.Contains(askMDNS(t, ns, "udp4", "224.0.0.251:5353", name, mdns.TypeA), p.Addr().String())
	})
	// gonet addr shows the lease's address with the time it has left.
	out, err := ns.Run(pctx, bin, "addr", "-control", d.control)
	if err != nil || !strings.Contains(string(out), p.String()) || !strings.Contains(string(out), "sec preferred_lft") {
		t.Errorf("gonet addr: %v\n%s", err, out)
	}
	if saved, err := dhcp.LoadLease(leaseFile); err != nil || saved.Addr != p {
		t.Errorf("-dhcp-lease holds %+v, %v; want the lease of %v", saved, err, p)
	}
	counters := d.stop(t)
	if want := "DHCPClient." + dev + ".OutReleases 1"; !strings.Contains(counters, want) {
		t.Errorf("counters lack %q:\n%s", want, counters)
	}
	dl := &dhcpLink{leases: leases}
	for deadline := time.Now().Add(5 * time.Second); dl.dnsmasqHolds(p.Addr()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("dnsmasq keeps the lease of %v after SIGTERM", p.Addr())
			break
		}
	}
	if !strings.Contains(d.stderr.String(), "DHCP lease obtained") {
		t.Errorf("no \"DHCP lease obtained\" in the log:\n%s", d.stderr.String())
	}
	// With no flag but -addr dhcp, its resolver has the lease's server
	// and search domain (TestPingWithDHCP resolves through them).
	if !slices.ContainsFunc(strings.Split(d.stderr.String(), "\n"), func(line string) bool {
		return strings.Contains(line, "DNS set") && strings.Contains(line, kernelAddr.Addr().String()+":53") && strings.Contains(line, dhcpSearch)
	}) {
		t.Errorf("no \"DNS set\" with the lease's server %v and domain %s in the log:\n%s", kernelAddr.Addr(), dhcpSearch, d.stderr.String())
	}

	again := startDHCPDaemon(t, ctx, bin, ns, dev, leaseFile)
	if again.addr != p {
		t.Errorf("restarted with -dhcp-lease on %v, want the kept %v", again.addr, p)
	}
	counters = again.stop(t)
	if !strings.Contains(counters, "DHCPClient."+dev+".OutRequests") || strings.Contains(counters, "DHCPClient."+dev+".OutDiscovers") {
		t.Errorf("the restart sent DISCOVERs, want INIT-REBOOT's REQUEST alone:\n%s", counters)
	}
}

// A lease's life against dnsmasq, at its shortest lease, two minutes: the
// client renews it from its server at T1 (60 s, RFC 2131 section 4.4.5);
// when the server vanishes, the renewal and the rebinding go unanswered
// and the lease expires at its end, taking the address off the NIC; and
// when the server moves to another address, the client rebinds at T2
// (105 s) by broadcast to whichever server answers. The three run in
// parallel, about two minutes in all. Timings closer than dnsmasq allows are tested
// against the package's own server on a virtual clock.
func TestDHCPLeaseLifeWithDnsmasq(t *testing.T) {
	if testing.Short() {
		t.Skip("two minutes of lease lifetime (-short)")
	}
	t.Run("renewed from its server at T1", func(t *testing.T) {
		t.Parallel()
		l, _ := newDHCPLinkStoppable(t)
		events := make(chan dhcp.Event, 8)
		c, lease := l.startEvents(t, events)
		renewed := waitEvent(t, events, dhcp.LeaseRenewed, 90*time.Second)
		if renewed.Lease.Addr != lease.Addr || renewed.Lease.Server != kernelAddr.Addr() {
			t.Errorf("renewed %v from %v, want %v from %v", renewed.Lease.Addr, renewed.Lease.Server, lease.Addr, kernelAddr.Addr())
		}
		if c.Stats.OutRequests.Load() < 2 {
			t.Errorf("OutRequests %d: no renewal REQUEST", c.Stats.OutRequests.Load())
		}
	})
	t.Run("expired when the server vanishes", func(t *testing.T) {
		t.Parallel()
		l, stop := newDHCPLinkStoppable(t)
		events := make(chan dhcp.Event, 8)
		_, lease := l.startEvents(t, events)
		stop()
		waitEvent(t, events, dhcp.LeaseLost, 150*time.Second)
		if addrs, _ := l.stack.Addresses(l.dev); slices.ContainsFunc(addrs, func(p netip.Prefix) bool { return p.Addr() == lease.Addr.Addr() }) {
			t.Errorf("the expired lease's %v is still on the NIC: %v", lease.Addr, addrs)
		}
	})
	t.Run("rebound when the server moves", func(t *testing.T) {
		t.Parallel()
		l, stop := newDHCPLinkStoppable(t)
		events := make(chan dhcp.Event, 8)
		_, lease := l.startEvents(t, events)
		// Before T1: the server goes, and comes back at another
		// address, unknown to the client, which unicasts its renewal
		// to the old one in vain until T2.
		stop()
		moved := netip.MustParsePrefix("10.99.0.9/24")
		if _, err := l.ns.IP(context.Background(), "addr", "del", kernelAddr.String(), "dev", l.dev); err != nil {
			t.Fatal(err)
		}
		if _, err := l.ns.IP(context.Background(), "addr", "add", moved.String(), "dev", l.dev); err != nil {
			t.Fatal(err)
		}
		startDHCPServer(t, l.ns, l.dev)
		rebound := waitEvent(t, events, dhcp.LeaseRenewed, 150*time.Second)
		if rebound.Lease.Addr != lease.Addr || rebound.Lease.Server != moved.Addr() {
			t.Errorf("rebound %v from %v, want %v from %v", rebound.Lease.Addr, rebound.Lease.Server, lease.Addr, moved.Addr())
		}
	})
}

// newDHCPLinkStoppable is newDHCPLink whose dnsmasq can be stopped.
func newDHCPLinkStoppable(t *testing.T) (*dhcpLink, func()) {
	t.Helper()
	var stop func()
	l := newDHCPLinkWith(t, func(ns *netns.NS, dev string) string {
		leases, s := startDHCPServerStoppable(t, ns, dev)
		stop = s
		return leases
	})
	return l, stop
}

// startEvents starts a client reporting every event on events, and waits
// for its first lease.
func (l *dhcpLink) startEvents(t *testing.T, events chan dhcp.Event) (*dhcp.Client, dhcp.ClientLease) {
	t.Helper()
	c, err := dhcp.StartOn(context.Background(), l.stack, l.dev, dhcp.ClientConfig{
		Notify: func(e dhcp.Event) {
			select {
			case events <- e:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, waitEvent(t, events, dhcp.LeaseBound, 30*time.Second).Lease
}

// waitEvent waits for an event of kind, skipping others.
func waitEvent(t *testing.T, events chan dhcp.Event, kind dhcp.EventKind, within time.Duration) dhcp.Event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e := <-events:
			if e.Kind == kind {
				return e
			}
		case <-deadline:
			t.Fatalf("no %v event within %v", kind, within)
			return dhcp.Event{}
		}
	}
}
