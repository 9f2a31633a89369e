package integration

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/gonetstack/gonet/dns"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
)

// The gateway's addresses by slirp4netns's defaults: the kernel side of the
// TAP plays the guest.
var (
	guestAddr   = netip.MustParsePrefix("10.0.2.100/24")
	gatewayAddr = netip.MustParsePrefix("10.0.2.2/24")
	dnsAddr     = netip.MustParsePrefix("10.0.2.3/24")
)

// bigTXT are the strings of big.test's TXT record: 1000 bytes, more than
// a UDP answer without EDNS0 carries (RFC 1035 4.2.1).
var bigTXT = func() []string {
	var txt []string
	for i := range 5 {
		txt = append(txt, strings.Repeat(string(rune('a'+i)), 200))
	}
	return txt
}()

// startDnsmasq runs dnsmasq on 127.0.0.1 at a free port as the upstream
// resolver: it knows gonet.test (192.0.2.7), answers NXDOMAIN for every
// other name under test., and asks no one else (--no-resolv: never the
// machine's resolvers). It is stopped when the test ends.
func startDnsmasq(t *testing.T) netip.AddrPort {
	t.Helper()
	netnstest.RequireTool(t, "dnsmasq")
	port := freeLoopbackPort(t)
	var out bytes.Buffer
	cmd := exec.Command("dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
		"--no-resolv", "--no-hosts", "--listen-address=127.0.0.1", "--bind-interfaces",
		"--port="+strconv.Itoa(int(port.Port())), "--pid-file=", "--log-facility=-", "--log-queries",
		"--local=/test/", "--address=/gonet.test/192.0.2.7",
		"--txt-record=big.test,"+strings.Join(bigTXT, ","))
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group: dnsmasq forks a child per TCP connection,
	// and the group is stopped with it.
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
	// Ready when it answers.
	q := new(mdns.Msg)
	q.SetQuestion("gonet.test.", mdns.TypeA)
	raw, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(port))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write(raw)
		n, err := c.Read(make([]byte, 512))
		c.Close()
		if err == nil && n > 0 {
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq on %v does not answer: %v\n%s", port, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeLoopbackPort returns a port on 127.0.0.1 free for both UDP and TCP
// a moment ago.
func freeLoopbackPort(t *testing.T) netip.AddrPort {
	t.Helper()
	for range 20 {
		pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		ap := pc.LocalAddr().(*net.UDPAddr).AddrPort()
		l, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(ap))
		pc.Close()
		if err == nil {
			l.Close()
			return ap
		}
	}
	t.Fatal("no port on 127.0.0.1 free for UDP and TCP")
	return netip.AddrPort{}
}

// TestDNSForwarderAnswersDig runs the forwarder on GoNet's 10.0.2.3 with
// dnsmasq on the host's loopback as its upstream, and asks it from the
// guest's namespace with dig over UDP and TCP.
func TestDNSForwarderAnswersDig(t *testing.T) {
	netnstest.RequireTool(t, "dig")
	ns := netnstest.New(t)
	upstream := startDnsmasq(t)
	dev := netns.DeviceName()
	var ep *tap.Endpoint
	if err := ns.Do(func() (err error) {
		ep, err = tap.Open(dev, tap.Options{MTU: 1500, Offload: true})
		return err
	}); err != nil {
		t.Fatalf("open TAP in %s: %v", ns, err)
	}
	if err := ns.ConfigureLink(dev, guestAddr, 1500); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	s := stack.New(stack.Config{})
	t.Cleanup(func() { stacktest.Closed(t, s) })
	if err := s.AddNIC(dev, ep); err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.Prefix{gatewayAddr, dnsAddr} {
		if err := s.AddAddress(dev, a); err != nil {
			t.Fatal(err)
		}
	}

	f, err := dns.New(dns.Config{Upstreams: []netip.AddrPort{upstream}})
	if err != nil {
		t.Fatal(err)
	}
	laddr := netip.AddrPortFrom(dnsAddr.Addr(), dns.Port)
	pc, err := s.ListenUDP(laddr)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.ListenTCP(laddr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.Serve(ctx, pc, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	h := &host{ns: ns, dev: dev, tap: ep, stack: s}
	dig := func(args ...string) string {
		return h.run(t, 20*time.Second, "dig", append([]string{"@" + dnsAddr.Addr().String(), "+time=3", "+tries=2"}, args...)...)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"UDP", nil},
		{"TCP", []string{"+tcp"}},
		{"UDP without EDNS0", []string{"+noedns"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := dig(append(tc.args, "+short", "gonet.test", "A")...)
			if got := strings.TrimSpace(out); got != "192.0.2.7" {
				t.Errorf("dig %s gonet.test: %q, want 192.0.2.7", strings.Join(tc.args, " "), got)
			}
		})
	}
	// Too big for UDP without EDNS0: the guest sees TC, and dig, as any
	// resolver, asks again over TCP and gets it whole (RFC 7766 section 5).
	out := dig("+noedns", "+ignore", "big.test", "TXT")
	if !strings.Contains(out, " tc") {
		t.Errorf("dig +noedns +ignore big.test: want the answer truncated, flag tc:\n%s", out)
	}
	out = dig("+noedns", "+short", "big.test", "TXT")
	for _, s := range bigTXT {
		if !strings.Contains(out, s) {
			t.Errorf("dig +noedns big.test: no %.10s... after the retry over TCP:\n%s", s, out)
		}
	}
	for _, proto := range []string{"+notcp", "+tcp"} {
		out := dig(proto, "missing.test", "A")
		if !strings.Contains(out, "status: NXDOMAIN") {
			t.Errorf("dig %s missing.test: want status NXDOMAIN as dnsmasq said:\n%s", proto, out)
		}
	}
	c := map[string]int64{}
	stats.Walk("", &f.Stats, func(n string, v int64) { c[n] = v })
	if c["Queries"] < 8 || c["Answers"] != c["Queries"] || c["ServFails"] != 0 || c["Malformed"] != 0 {
		t.Errorf("counters %v: want every query answered", c)
	}
}
