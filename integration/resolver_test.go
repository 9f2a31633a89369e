package integration

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/stack"
)

// manyAddrs is how many addresses many.lan has: 16 bytes of answer each,
// more than the 1232 bytes Go's resolver asks UDP answers to fit (EDNS0).
const manyAddrs = 100

// startNamespaceDnsmasq runs dnsmasq in h's namespace on the kernel's side
// of the TAP, as the DNS server of the network GoNet is on: it knows
// host.lan (GoNet's own address), kernel.lan (the kernel's), many.lan (manyAddrs addresses: an answer
// truncated over UDP) and nothing else, and asks no one else.
func startNamespaceDnsmasq(t *testing.T, h *host) {
	t.Helper()
	records := []string{"--local=/lan/",
		"--host-record=host.lan," + gonetAddr.Addr().String(), "--host-record=kernel.lan," + kernelAddr.Addr().String(), "--srv-host=_echo._tcp.lan,host.lan,7"}
	for i := range manyAddrs {
		records = append(records, "--host-record=many.lan,10.98.0."+strconv.Itoa(i+1))
	}
	startDnsmasqIn(t, h, kernelAddr.Addr(), "host.lan.", records...)
}

// startDnsmasqIn runs dnsmasq in h's namespace on the address listen, with
// the records of args, until the test ends; it asks no one else. It
// returns once dnsmasq answers for probe.
func startDnsmasqIn(t *testing.T, h *host, listen netip.Addr, probe string, args ...string) {
	t.Helper()
	args = append([]string{"--keep-in-foreground", "--conf-file=/dev/null",
		"--no-resolv", "--no-hosts", "--listen-address=" + listen.String(), "--bind-interfaces",
		"--pid-file=", "--log-facility=-", "--log-queries"}, args...)
	var out bytes.Buffer
	cmd := h.ns.Command(context.Background(), "dnsmasq", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dnsmasq: %v", err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("dnsmasq:\n%s", out.String())
		}
	})
	// Ready when it answers; its output is read only once it has exited.
	q := new(mdns.Msg)
	q.SetQuestion(probe, mdns.TypeA)
	raw, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := h.ns.DialUDP(net.JoinHostPort(listen.String(), "53"))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write(raw)
		n, err := c.Read(make([]byte, 512))
		c.Close()
		if err == nil && n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq does not answer on %v:53: %v", listen, err)
		}
	}
}

// GoNet resolves names through the network's DNS server, the kernel's
// dnsmasq, over UDP, and over TCP for an answer truncated over UDP;
// LookupSRV works as on the host; DialContext takes a name and completes
// one with no dot in the search domain.
func TestResolverAgainstDnsmasq(t *testing.T) {
	h := newHost(t, options{})
	startNamespaceDnsmasq(t, h)
	if err := h.stack.SetDNS(stack.DNSConfig{
		Servers: []netip.AddrPort{netip.AddrPortFrom(kernelAddr.Addr(), 53)},
		Search:  []string{"lan"},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := h.stack.Resolver()

	addrs, err := r.LookupNetIP(ctx, "ip4", "host.lan.")
	if err != nil || !slices.Equal(addrs, []netip.Addr{gonetAddr.Addr()}) {
		t.Fatalf("host.lan: %v, %v; want %v", addrs, err, gonetAddr.Addr())
	}
	many, err := r.LookupNetIP(ctx, "ip4", "many.lan.")
	if err != nil || len(many) != manyAddrs {
		t.Fatalf("many.lan: %d addresses, %v; want %d (the answer over TCP)", len(many), err, manyAddrs)
	}
	if tcp := h.stack.Counters()["TCP.ActiveOpens"]; tcp == 0 {
		t.Errorf("many.lan answered with TCP.ActiveOpens %d: the truncated answer was not asked again over TCP", tcp)
	}
	_, srvs, err := r.LookupSRV(ctx, "echo", "tcp", "lan.")
	if err != nil || len(srvs) != 1 || srvs[0].Target != "host.lan." || srvs[0].Port != 7 {
		t.Fatalf("_echo._tcp.lan: %v, %v; want host.lan. port 7", srvs, err)
	}
	if _, err := r.LookupNetIP(ctx, "ip4", "nowhere.lan."); err == nil {
		t.Fatal("nowhere.lan resolved")
	} else if de, ok := err.(*net.DNSError); !ok || !de.IsNotFound {
		t.Fatalf("nowhere.lan: %v, want not found", err)
	}

	// A name with no dot, completed in the search domain, dialled:
	// the kernel listens on the address dnsmasq gives kernel.lan.
	var ln net.Listener
	if err := h.ns.Do(func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(kernelAddr.Addr().String(), "8053"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from the kernel"))
			c.Close()
		}
	}()
	c, err := h.stack.DialContext(ctx, "tcp", "kernel:8053")
	if err != nil {
		t.Fatalf("dial kernel:8053: %v", err)
	}
	defer c.Close()
	if got := c.RemoteAddr().String(); got != net.JoinHostPort(kernelAddr.Addr().String(), "8053") {
		t.Errorf("kernel:8053 connected to %s", got)
	}
	b := make([]byte, 64)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, _ := c.Read(b); string(b[:n]) != "hello from the kernel" {
		t.Errorf("read %q from kernel:8053", b[:n])
	}
}

// gonet ping takes a name, resolved over GoNet through the DNS server -dns
// names and completed in -search's domain, and pings the address it has.
func TestGonetPingResolvesItsDestination(t *testing.T) {
	netnstest.RequireTool(t, "dnsmasq")
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The TAP is made and addressed first, so that dnsmasq can bind to
	// the kernel's address before gonet ping opens the device.
	if out, err := ns.IP(ctx, "tuntap", "add", "dev", dev, "mode", "tap"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := ns.ConfigureLink(dev, kernelAddr, 1500); err != nil {
		t.Fatal(err)
	}
	startNamespaceDnsmasq(t, &host{ns: ns, dev: dev})
	args := []string{"ping", "-tap", dev, "-addr", gonetAddr.String(), "-dns", kernelAddr.Addr().String(), "-search", "lan",
		"-c", "2", "-i", "0.2", "-W", "3", "kernel"}
	out, err := ns.Run(ctx, bin, args...)
	if err != nil {
		t.Fatalf("gonet %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !strings.HasPrefix(string(out), "PING kernel ("+kernelAddr.Addr().String()+")") ||
		!strings.Contains(string(out), "2 packets transmitted, 2 received") {
		t.Errorf("gonet %s:\n%s", strings.Join(args, " "), out)
	}
}

// gonet ping with no DNS server at all: -hosts names the router and a host
// beyond it, -gw takes the router by its name, and DEST is the far host's
// name, both answered from the static table.
func TestGonetPingByStaticNames(t *testing.T) {
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := ns.IP(ctx, "tuntap", "add", "dev", dev, "mode", "tap"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := ns.ConfigureLink(dev, kernelAddr, 1500); err != nil {
		t.Fatal(err)
	}
	// The far host is the kernel's too, off GoNet's network: reached
	// only through the gateway.
	far := netip.MustParseAddr("10.98.0.1")
	if _, err := ns.IP(ctx, "addr", "add", netip.PrefixFrom(far, 32).String(), "dev", "lo"); err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	text := "# GoNet's names, not the machine's\n" + kernelAddr.Addr().String() + " router\n" + far.String() + " far.lab far\n"
	if err := os.WriteFile(hosts, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"ping", "-tap", dev, "-no-ipv6", "-addr", gonetAddr.String(), "-hosts", hosts, "-gw", "router",
		"-c", "2", "-i", "0.2", "-W", "3", "far"}
	out, err := ns.Run(ctx, bin, args...)
	if err != nil {
		t.Fatalf("gonet %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !strings.HasPrefix(string(out), "PING far ("+far.String()+")") ||
		!strings.Contains(string(out), "2 packets transmitted, 2 received") {
		t.Errorf("gonet %s:\n%s", strings.Join(args, " "), out)
	}
}
