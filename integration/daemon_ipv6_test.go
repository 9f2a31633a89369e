package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// The daemon's IPv6 test networks: documentation-style ULA prefixes of
// this test's own, inside its namespace.
var (
	daemon6GoNet  = netip.MustParsePrefix("fd00:99:6::2/64")
	daemon6Kernel = netip.MustParsePrefix("fd00:99:6::1/64")
	daemon4GoNet  = netip.MustParsePrefix("10.99.6.2/24")
	daemon4Kernel = netip.MustParsePrefix("10.99.6.1/24")
	ping6GoNet    = netip.MustParsePrefix("fd00:99:7::2/64")
	ping6Kernel   = netip.MustParsePrefix("fd00:99:7::1/64")
)

// addKernelIPv6 gives the kernel's side of dev an IPv6 address without
// duplicate address detection, so that it is usable at once.
func addKernelIPv6(t *testing.T, ns *netns.NS, dev string, p netip.Prefix) {
	t.Helper()
	if out, err := ns.IP(context.Background(), "-6", "addr", "add", p.String(), "dev", dev, "nodad"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// TestDaemonServesIPv6 runs `gonet up` with an address of each family on a
// TAP device in a namespace: the kernel pings it over IPv6 (fragmented
// too) and fetches its status page with curl -6; gonet ss, neigh and stats
// show the IPv6 listener, the kernel as a neighbour and the ICMPv6
// counters. Then `gonet ping`, on a TAP of its own, pings the kernel's
// IPv6 addresses, a global one and a link-local one with its zone.
func TestDaemonServesIPv6(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	netnstest.RequireTool(t, "curl")
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "up.sock")
	cmd := ns.Command(ctx, bin, "up", "-tap", dev, "-addr", daemon4GoNet.String(), "-addr", daemon6GoNet.String(),
		"-serve", "echo,http", "-control", sock)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("gonet up printed nothing; stderr: %s", stderr.String())
	}
	// The IPv4 fields first, where scripts read them; the IPv6 address
	// after the MAC, printed once duplicate address detection is over.
	ready := lines.Text()
	if f := strings.Fields(ready); len(f) != 6 || f[0] != "gonet:" || f[1] != "up" || f[2] != dev ||
		f[3] != daemon4GoNet.String() || f[5] != daemon6GoNet.String() {
		t.Fatalf("ready line %q, want \"gonet: up %s %s <mac> %s\"", ready, dev, daemon4GoNet, daemon6GoNet)
	}
	if err := ns.ConfigureLink(dev, daemon4Kernel, 1500); err != nil {
		t.Fatal(err)
	}
	addKernelIPv6(t, ns, dev, daemon6Kernel)
	h := &host{ns: ns, dev: dev}
	gonet6 := daemon6GoNet.Addr().String()

	h.run(t, 15*time.Second, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "3", gonet6)
	h.run(t, 15*time.Second, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "3", "-s", "4000", gonet6)
	body := h.run(t, 15*time.Second, "curl", "-6", "-sSf", "-g", "http://["+gonet6+"]/.gonet/status.json")
	var status struct {
		Counters map[string]int64 `json:"counters"`
	}
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatalf("status page over IPv6: %v\n%s", err, body)
	}
	if status.Counters["ICMPv6.OutEchoReplies"] < 4 || status.Counters["IPv6.ReasmOKs"] < 2 {
		t.Errorf("status over IPv6: ICMPv6.OutEchoReplies %d, IPv6.ReasmOKs %d; want at least 4 and 2",
			status.Counters["ICMPv6.OutEchoReplies"], status.Counters["IPv6.ReasmOKs"])
	}
	// IPv4 still reaches the same services.
	h.run(t, 15*time.Second, "curl", "-4", "-sSf", "-o", "/dev/null", "http://"+daemon4GoNet.Addr().String()+"/.gonet/status.txt")

	gonetCmd := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("gonet %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if ss := gonetCmd("ss", "-control", sock); !regexp.MustCompile(`(?m)^LISTEN +0 +0 +\[::\]:80 +\[::\]:\*`).MatchString(ss) {
		t.Errorf("gonet ss shows no dual-stack listener on port 80:\n%s", ss)
	}
	if neigh := gonetCmd("neigh", "-control", sock); !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(daemon6Kernel.Addr().String()) + ` dev ` + dev + ` lladdr `).MatchString(neigh) {
		t.Errorf("gonet neigh does not show the kernel's IPv6 address resolved:\n%s", neigh)
	}
	if addr := gonetCmd("addr", "-control", sock); !strings.Contains(addr, "inet6 "+daemon6GoNet.String()+" scope global preferred") {
		t.Errorf("gonet addr does not show %v preferred:\n%s", daemon6GoNet, addr)
	}
	// The ready line waits for -addr's duplicate address detection, not
	// the link-local address's, which may take a second longer (each
	// starts after its own random delay).
	var counters map[string]int64
	waitFor(t, "both DADs to succeed", 5*time.Second, func() bool {
		if err := json.Unmarshal([]byte(gonetCmd("stats", "-json", "-control", sock)), &counters); err != nil {
			t.Fatal(err)
		}
		return counters["NDP."+dev+".DADSucceeded"] >= 2
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gonet up after SIGTERM: %v; stderr: %s", err, stderr.String())
	}
	if t.Failed() {
		t.Logf("gonet up's log:\n%s", stderr.String())
	}

	t.Run("gonet ping", func(t *testing.T) {
		// The TAP device is made and configured first, so that the
		// kernel's side is ready when gonet ping opens it.
		dev2 := netns.DeviceName()
		if out, err := ns.IP(context.Background(), "tuntap", "add", "dev", dev2, "mode", "tap"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if _, err := ns.IP(context.Background(), "link", "set", "dev", dev2, "up"); err != nil {
			t.Fatal(err)
		}
		addKernelIPv6(t, ns, dev2, ping6Kernel)
		addKernelIPv6(t, ns, dev2, netip.MustParsePrefix("fe80::99:1/64"))
		for _, args := range [][]string{
			{"-addr", ping6GoNet.String(), ping6Kernel.Addr().String()},
			{"fe80::99:1%" + dev2},
		} {
			args = append([]string{"ping", "-tap", dev2, "-c", "3", "-i", "0.2", "-W", "3"}, args...)
			out, err := ns.Run(ctx, bin, args...)
			if err != nil {
				t.Fatalf("gonet %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if !regexp.MustCompile(`(?m)^3 packets transmitted, [23] received`).Match(out) {
				t.Errorf("gonet %s:\n%s", strings.Join(args, " "), out)
			}
		}
	})
}

// TestDaemonBySLAACServesTheKernel is issue 12's end to end: `gonet up`
// with no address at all on a link where the kernel's radvd advertises a
// prefix configures itself by SLAAC, and the kernel's user then reaches it
// as any IPv6 host: ping -6 (56 bytes and fragmented), curl -6 of its
// status page, and an interactive TCP session (socat to the echo service,
// as ssh -6 would hold one: a line out, the same line back, twice).
func TestDaemonBySLAACServesTheKernel(t *testing.T) {
	for _, tool := range []string{"ping", "curl", "socat"} {
		netnstest.RequireTool(t, tool)
	}
	bin := buildGonet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "up.sock")
	h, _ := upBesideRadvd(t, ctx, bin, "-serve", "echo,http", "-control", sock)

	// The address GoNet forms: the prefix and its EUI-64 identifier,
	// shown by gonet addr once its duplicate address detection is over.
	var addr netip.Addr
	waitFor(t, "GoNet's SLAAC address, preferred", 20*time.Second, func() bool {
		out, err := exec.CommandContext(ctx, bin, "addr", "-control", sock).Output()
		if err != nil {
			return false
		}
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == "inet6" && f[2] == "scope" && !strings.Contains(line, "tentative") {
				if p, err := netip.ParsePrefix(f[1]); err == nil && slaacPrefix.Contains(p.Addr()) {
					addr = p.Addr()
					return true
				}
			}
		}
		return false
	})
	a := addr.String()
	h.run(t, 15*time.Second, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "3", a)
	h.run(t, 15*time.Second, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "3", "-s", "4000", a)
	body := h.run(t, 15*time.Second, "curl", "-6", "-sSf", "-g", "http://["+a+"]/.gonet/status.json")
	if !strings.Contains(body, `"ICMPv6.OutEchoReplies"`) {
		t.Errorf("status page over IPv6 without ICMPv6's counters:\n%.300s", body)
	}
	// An interactive session: each line sent is echoed before the next.
	session := h.ns.Command(ctx, "socat", "-t", "3", "STDIO", "TCP6:["+a+"]:7")
	in, err := session.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := session.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for _, line := range []string{"uname -a", "exit"} {
		if _, err := in.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() || lines.Text() != line {
			t.Fatalf("the echo of %q over TCP6: %q (%v)", line, lines.Text(), lines.Err())
		}
	}
	in.Close()
	if err := session.Wait(); err != nil {
		t.Errorf("socat: %v", err)
	}
}

// TestDaemonOptimisticDAD: `gonet up -optimistic-dad` uses the address it
// forms by SLAAC from the kernel's radvd while the address's DAD runs
// (RFC 4429): its log says the address was added optimistic, and the
// kernel reaches it.
func TestDaemonOptimisticDAD(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	bin := buildGonet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, stderr := upBesideRadvd(t, ctx, bin, "-optimistic-dad")
	var addr netip.Addr
	waitFor(t, "the log of GoNet's SLAAC address added optimistic", 20*time.Second, func() bool {
		for line := range strings.Lines(stderr.String()) {
			if !strings.Contains(line, `msg="address added"`) || !strings.Contains(line, "dad=optimistic") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if p, err := netip.ParsePrefix(strings.TrimPrefix(f, "addr=")); err == nil && slaacPrefix.Contains(p.Addr()) {
					addr = p.Addr()
					return true
				}
			}
		}
		return false
	})
	h.run(t, 15*time.Second, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "3", addr.String())
}

// upBesideRadvd runs `gonet up -tap DEV args...` in a namespace of its
// own, brings the kernel's side of its TAP up and starts radvd there,
// advertising slaacPrefix, until the test ends; it returns the kernel's
// host and the daemon's log, which the daemon writes as the test reads.
func upBesideRadvd(t *testing.T, ctx context.Context, bin string, args ...string) (*host, *syncBuffer) {
	t.Helper()
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	cmd := ns.Command(ctx, bin, append([]string{"up", "-tap", dev}, args...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("gonet up's log:\n%s", stderr.String())
		}
	})
	h := &host{ns: ns, dev: dev}
	waitFor(t, "the daemon's TAP", 10*time.Second, func() bool {
		_, err := ns.IP(ctx, "link", "show", dev)
		return err == nil
	})
	h.run(t, 5*time.Second, "ip", "link", "set", dev, "up")
	startRadvd(t, h, false)
	return h, stderr
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
