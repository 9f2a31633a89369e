package integration

import (
	"context"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/ipv4ll"
	"github.com/gonetstack/gonet/stack"
)

// TestIPv4LinkLocalAgainstKernel: GoNet claims an IPv4 link-local address
// (RFC 3927) on a link where the kernel holds the first address GoNet's
// MAC draws, so that GoNet's probe finds it taken and moves on to the
// next; the kernel then reaches GoNet there, and GoNet the kernel.
func TestIPv4LinkLocalAgainstKernel(t *testing.T) {
	// RFC 5227's timers shortened: a probe of 3 in about a second.
	acd := arp.ACDConfig{ProbeWait: 100 * time.Millisecond, ProbeMin: 200 * time.Millisecond, ProbeMax: 300 * time.Millisecond, AnnounceWait: 300 * time.Millisecond}
	h := newHost(t, options{stack: stack.Config{ARP: arp.Config{ACD: acd}}})
	next := ipv4ll.Candidates(h.tap.MAC())
	taken, want := next(), next()
	h.run(t, 5*time.Second, "ip", "addr", "add", taken.String()+"/16", "dev", h.dev)
	c, got := claimIPv4LL(t, h)
	if got != want {
		t.Fatalf("GoNet claimed %v, want %v: the kernel holds %v", got, want, taken)
	}
	if c.Stats.InUse.Load() != 1 {
		t.Errorf("IPv4LL InUse = %d, want 1 (the kernel's %v)", c.Stats.InUse.Load(), taken)
	}
	h.run(t, 10*time.Second, "ping", "-c", "2", "-i", "0.2", "-W", "2", got.String())
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer pcancel()
	if _, err := h.stack.Ping(pctx, taken, 56); err != nil {
		t.Errorf("GoNet pings the kernel's link-local %v: %v", taken, err)
	}
}

// TestDaemonClaimsAnIPv4LinkLocalAddress: `gonet up -addr ipv4ll`, on a TAP
// whose kernel side comes up only after the daemon is ready, claims a
// link-local address (its probes went nowhere), probes for it again when
// the link comes up (RFC 5227 section 2.1), and the kernel, with an
// address of 169.254/16 of its own, reaches it.
func TestDaemonClaimsAnIPv4LinkLocalAddress(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "up.sock")
	d := startDaemon(t, ctx, ns, "gonet: up "+dev+" 169.254.", bin, "up", "-tap", dev, "-addr", "ipv4ll", "-no-ipv6", "-control", sock)
	f := strings.Fields(d.lines.Text())
	addr, err := netip.ParsePrefix(f[3])
	if err != nil || !ipv4ll.IsLinkLocal(addr.Addr()) || addr.Bits() != 16 {
		t.Fatalf("ready line %q: address %v (%v), want one of 169.254/16", d.lines.Text(), addr, err)
	}
	kernel := netip.MustParsePrefix("169.254.0.1/16") // reserved, so never GoNet's
	if err := ns.ConfigureLink(dev, kernel, 1500); err != nil {
		t.Fatal(err)
	}
	h := &host{ns: ns, dev: dev}
	waitFor(t, "GoNet to probe again for its address as the link came up", 20*time.Second, func() bool {
		out, err := exec.CommandContext(ctx, bin, "stats", "-control", sock).Output()
		return err == nil && strings.Contains(string(out), "ARP."+dev+".Verifications 1\n")
	})
	h.run(t, 15*time.Second, "ping", "-c", "2", "-i", "0.2", "-W", "3", addr.Addr().String())
	out, err := exec.CommandContext(ctx, bin, "addr", "-control", sock).Output()
	if err != nil || !strings.Contains(string(out), "inet "+addr.String()) {
		t.Errorf("gonet addr (%v) does not show %v:\n%s", err, addr, out)
	}
}

// llACD is RFC 5227's timers shortened: a probe of 3 in about a second.
var llACD = arp.ACDConfig{ProbeWait: 100 * time.Millisecond, ProbeMin: 200 * time.Millisecond, ProbeMax: 300 * time.Millisecond, AnnounceWait: 300 * time.Millisecond}

// TestIPv4LinkLocalOnlyReachesARoutableNeighbour pins RFC 3927 section
// 2.6.2 against the kernel: GoNet, holding its link-local address alone,
// pings the kernel's routable 10.99.0.1 on the same link, which no route
// of GoNet's covers: it ARPs for it and sends straight to it from
// 169.254/16. The kernel, with a route to 169.254/16 through the TAP (as
// a host that has a routable address keeps for its link-local
// neighbours), pings GoNet back, GoNet's replies taking the same way.
func TestIPv4LinkLocalOnlyReachesARoutableNeighbour(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost(t, options{stack: stack.Config{NoIPv6: true, ARP: arp.Config{ACD: llACD}}})
	if err := h.stack.RemoveAddress(h.dev, gonetAddr.Addr()); err != nil {
		t.Fatal(err)
	}
	_, ll := claimIPv4LL(t, h)
	kernel := kernelAddr.Addr()
	ri, err := h.stack.IPv4().Route(kernel)
	if err != nil || ri.Src != ll || ri.NextHop != kernel {
		t.Fatalf("GoNet's route to %v: %+v, %v; want from %v, the kernel itself the next hop", kernel, ri, err, ll)
	}
	h.run(t, 5*time.Second, "ip", "route", "add", ipv4ll.Prefix.String(), "dev", h.dev)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.stack.Ping(ctx, kernel, 56); err != nil {
		t.Errorf("GoNet from %v pings the kernel's %v: %v", ll, kernel, err)
	}
	// The kernel learnt GoNet's MAC from GoNet's ARP, from ll.
	if out := h.run(t, 5*time.Second, "ip", "neigh", "show", ll.String(), "dev", h.dev); !strings.Contains(out, "lladdr "+h.tap.MAC().String()) {
		t.Errorf("the kernel's neighbour %v: %q, want GoNet's MAC %v", ll, out, h.tap.MAC())
	}
	h.run(t, 10*time.Second, "ping", "-c", "2", "-i", "0.2", "-W", "2", ll.String())
}

// claimIPv4LL starts the link-local client on h's TAP, closed at the end
// of the test, and returns it and the address it claims within 15 s.
func claimIPv4LL(t *testing.T, h *host) (*ipv4ll.Client, netip.Addr) {
	t.Helper()
	c, err := ipv4ll.Start(h.stack, h.dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	a, err := c.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c, a
}

// TestRoutableHostReachesALinkLocalNeighbour pins RFC 3927 section 2.6.2
// for a host with a routable address alone: GoNet, holding 10.99.0.2/24
// and a default route through 10.99.0.254, which nobody holds, pings the
// kernel's 169.254.77.1 on the same link. It ARPs for the destination
// itself and sends from its routable address (section 2.6.1), so the
// kernel's answer arrives; through the router it would get none.
func TestRoutableHostReachesALinkLocalNeighbour(t *testing.T) {
	h := newHost(t, options{stack: stack.Config{NoIPv6: true}})
	if err := h.stack.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("10.99.0.254"), h.dev); err != nil {
		t.Fatal(err)
	}
	neighbour := netip.MustParseAddr("169.254.77.1")
	h.run(t, 5*time.Second, "ip", "addr", "add", netip.PrefixFrom(neighbour, ipv4ll.Prefix.Bits()).String(), "dev", h.dev)
	ri, err := h.stack.IPv4().Route(neighbour)
	if err != nil || ri.Src != gonetAddr.Addr() || ri.NextHop != neighbour {
		t.Errorf("GoNet's route to %v: %+v, %v; want from %v, the neighbour itself the next hop", neighbour, ri, err, gonetAddr.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.stack.Ping(ctx, neighbour, 56); err != nil {
		t.Errorf("GoNet from %v pings the kernel's %v: %v", gonetAddr.Addr(), neighbour, err)
	}
}
