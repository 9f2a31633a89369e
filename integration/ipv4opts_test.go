package integration

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// The kernel's ping -R and ping -T against GoNet: the Record Route and
// Timestamp options come back in the echo reply with GoNet's entries (RFC
// 1122 section 3.2.2.6), as ping prints them.
func TestKernelPingRecordsGoNetInTheOptions(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost(t, options{})
	gonet, kernel := gonetAddr.Addr().String(), kernelAddr.Addr().String()
	tests := []struct {
		name string
		args []string
		want []string // in ping's output, in order
	}{
		// The kernel's entry as the request left, GoNet's as it
		// arrived and as the reply left, the kernel's as it arrived.
		{"record route", []string{"-R"}, []string{"RR:", kernel, gonet, gonet, kernel}},
		{"timestamps with addresses", []string{"-T", "tsandaddr"}, []string{"TS:", kernel, gonet, gonet, kernel}},
		{"timestamps only", []string{"-T", "tsonly"}, []string{"TS:"}},
	}
	// entries counts the lines of the option ping prints after its tag:
	// one an entry, up to the blank line.
	entries := func(out, tag string) int {
		_, after, _ := strings.Cut(out, tag)
		block, _, _ := strings.Cut(after, "\n\n")
		return len(strings.Split(strings.TrimSpace(block), "\n"))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := h.run(t, 10*time.Second, "ping", append(tt.args, "-c", "1", "-W", "5", gonet)...)
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("ping %v: no %q where expected in:\n%s", tt.args, w, out)
				}
				rest = rest[i+len(w):]
			}
			if n := entries(out, tt.want[0]); n != 4 {
				t.Fatalf("ping %v printed %d entries, want 4:\n%s", tt.args, n, out)
			}
			if sent, recv := pingCounts(t, out); recv != sent {
				t.Fatalf("ping %v: %d of %d answered:\n%s", tt.args, recv, sent, out)
			}
		})
	}
}

// The kernel as GoNet's default router, forwarding a datagram back out of
// the link it came in on towards a router beside GoNet, sends GoNet an
// ICMP Redirect (its send_redirects); GoNet takes it as a host route
// through that router (RFC 1122 section 3.2.2.2). The far network exists
// only in the test's namespace: its router, 10.99.0.3, is a permanent
// neighbour entry there, and what the kernel forwards to it comes back to
// GoNet's TAP, addressed to another MAC.
func TestKernelRedirectsGoNetToABetterRouter(t *testing.T) {
	netnstest.RequireTool(t, "sysctl")
	h := newHost(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	far, router := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("10.99.0.3")
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "neigh", "add", router.String(), "lladdr", "02:00:00:99:00:03", "dev", h.dev, "nud", "permanent"},
		{"ip", "route", "add", "198.51.100.0/24", "via", router.String(), "dev", h.dev},
	} {
		if out, err := h.ns.Run(ctx, args[0], args[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	if err := h.stack.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), kernelAddr.Addr(), h.dev); err != nil {
		t.Fatal(err)
	}
	c, err := h.stack.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	taken := func() bool {
		for _, r := range h.stack.Routes() {
			if r.Dst == netip.PrefixFrom(far, 32) && r.Gateway == router {
				return true
			}
		}
		return false
	}
	waitFor(t, "GoNet's host route through the router the kernel named", 10*time.Second, func() bool {
		c.WriteToUDPAddrPort([]byte("redirect me"), netip.AddrPortFrom(far, 9))
		return taken()
	})
	if n := h.stack.Counters()["IPv4.RedirectsTaken"]; n != 1 {
		t.Errorf("IPv4.RedirectsTaken = %d, want 1", n)
	}
}

// The same over IPv6: the kernel, forwarding, sends GoNet a Redirect (RFC
// 4861 section 8.2) naming the router beside GoNet by its link-local
// address, and GoNet's neighbour discovery takes it as a host route.
func TestKernelRedirectsGoNetToABetterRouterOverIPv6(t *testing.T) {
	netnstest.RequireTool(t, "sysctl")
	h := newHost6(t, options{}, true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	far, router := netip.MustParseAddr("fd00:77::7"), netip.MustParseAddr("fe80::33")
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
		{"ip", "-6", "neigh", "add", router.String(), "lladdr", "02:00:00:99:00:33", "dev", h.dev, "nud", "permanent"},
		{"ip", "-6", "route", "add", "fd00:77::/64", "via", router.String(), "dev", h.dev},
	} {
		if out, err := h.ns.Run(ctx, args[0], args[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	if err := h.stack.AddRoute(netip.MustParsePrefix("::/0"), h.kernelLL, h.dev); err != nil {
		t.Fatal(err)
	}
	c, err := h.stack.ListenUDP(netip.AddrPortFrom(netip.IPv6Unspecified(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	taken := func() bool {
		for _, r := range h.stack.Routes6() {
			if r.Dst == netip.PrefixFrom(far, 128) && r.Gateway == router {
				return true
			}
		}
		return false
	}
	defer func() {
		if t.Failed() {
			t.Logf("NDP: %d redirects in, %d refused; routes %v", h.ndpCounter("InRedirects"), h.ndpCounter("RedirectsRefused"), h.stack.Routes6())
		}
	}()
	waitFor(t, "GoNet's host route through the router the kernel named", 10*time.Second, func() bool {
		c.WriteToUDPAddrPort([]byte("redirect me"), netip.AddrPortFrom(far, 9))
		return taken()
	})
}
