package main

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
)

// upOn runs gonet up's host and services, with its control socket, on
// the endpoint ep with args, until the test ends, and returns the host.
func upOn(t *testing.T, ep link.Endpoint, args ...string) *host {
	t.Helper()
	c, err := parseUp(args)
	if err != nil {
		t.Fatal(err)
	}
	h, err := bringUpOn(&c.link, ep, c.link.tap, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	svc, err := startUpServices(context.Background(), slog.New(slog.DiscardHandler), c, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	return h
}

// TestAddrAndNeighShowBothFamilies runs gonet up's host and control socket
// on one end of an in-memory link, has a peer ping it over both families,
// and reads gonet addr and gonet neigh: the addresses with their states and
// lifetimes, and the peer in the ARP cache and in neighbour discovery's.
func TestAddrAndNeighShowBothFamilies(t *testing.T) {
	useControlDir(t)
	macPeer := net.HardwareAddr{0x02, 0, 0, 0x99, 8, 1}
	epPeer, epUp := pipe.New(1500, macPeer, net.HardwareAddr{0x02, 0, 0, 0x99, 8, 2})
	peer := stack.New(stack.Config{})
	defer peer.Close()
	if err := peer.AddNIC("p0", epPeer); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"10.88.0.1/24", "fd00:88::1/64"} {
		if err := peer.AddAddress("p0", netip.MustParsePrefix(p)); err != nil {
			t.Fatal(err)
		}
	}
	upOn(t, epUp, "-tap", "b0", "-addr", "10.88.0.2/24", "-addr", "fd00:88::2/64")
	awaitPreferred(t, peer, "p0", netip.MustParseAddr("fd00:88::1"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, dst := range []string{"10.88.0.2", "fd00:88::2"} {
		if _, err := peer.Ping(ctx, netip.MustParseAddr(dst), 56); err != nil {
			t.Fatalf("ping %s: %v", dst, err)
		}
	}

	code, stdout, stderr := runArgs(t, "addr", "-tap", "b0")
	if code != exitOK {
		t.Fatalf("gonet addr: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		`(?m)^b0: state UP link/ether 02:00:00:99:08:02$`,
		`(?m)^    inet 10\.88\.0\.2/24 scope global preferred\n        valid_lft forever preferred_lft forever$`,
		`(?m)^    inet6 fd00:88::2/64 scope global preferred\n        valid_lft forever preferred_lft forever$`,
		// The link-local address's DAD may still run: gonet up
		// waits for the -addr ones only.
		`(?m)^    inet6 fe80::ff:fe99:802/64 scope link (tentative|preferred)$`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("gonet addr does not match %s:\n%s", want, stdout)
		}
	}
	code, stdout, stderr = runArgs(t, "neigh", "-tap", "b0")
	if code != exitOK {
		t.Fatalf("gonet neigh: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		`(?m)^10\.88\.0\.1 dev b0 lladdr 02:00:00:99:08:01 REACHABLE$`,
		// The peer's solicitation made it STALE (RFC 4861 section
		// 7.2.3); the reply sent to it moves it on to DELAY.
		`(?m)^fd00:88::1 dev b0 lladdr 02:00:00:99:08:01 (STALE|DELAY|REACHABLE)$`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("gonet neigh does not match %s:\n%s", want, stdout)
		}
	}
}

// TestRouteShowsBothTables reads gonet route from gonet up's control
// socket: IPv4's table, then IPv6's, as ip route prints them.
func TestRouteShowsBothTables(t *testing.T) {
	useControlDir(t)
	_, epUp := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0x99, 9, 1}, net.HardwareAddr{0x02, 0, 0, 0x99, 9, 2})
	upOn(t, epUp, "-tap", "b1", "-addr", "10.89.0.2/24", "-addr", "fd00:89::2/64", "-gw", "10.89.0.1", "-gw", "fd00:89::1")
	code, stdout, stderr := runArgs(t, "route", "-tap", "b1")
	if code != exitOK {
		t.Fatalf("gonet route: exit %d, stderr %q", code, stderr)
	}
	want := []string{
		"10.89.0.0/24 dev b1",
		"default via 10.89.0.1 dev b1",
		"fd00:89::/64 dev b1",
		"default via fd00:89::1 dev b1",
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("gonet route prints no %q:\n%s", w, stdout)
		}
	}
	// IPv4's table first, each longest prefix first.
	if i, j := slices.Index(lines, want[0]), slices.Index(lines, want[2]); i < 0 || j < 0 || i > j {
		t.Errorf("IPv4's routes not before IPv6's:\n%s", stdout)
	}
	if i, j := slices.Index(lines, want[0]), slices.Index(lines, want[1]); i > j {
		t.Errorf("the default route before the subnet's:\n%s", stdout)
	}
}

// TestMaddrShowsGroupsAndTheirSources reads gonet maddr: the groups every
// interface is in, and a program's source-specific ones with the filter
// IGMPv3 and MLDv2 report.
func TestMaddrShowsGroupsAndTheirSources(t *testing.T) {
	useControlDir(t)
	_, epUp := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0x99, 10, 1}, net.HardwareAddr{0x02, 0, 0, 0x99, 10, 2})
	h := upOn(t, epUp, "-tap", "b2", "-addr", "10.90.0.2/24", "-addr", "fd00:90::2/64", "-mdns=false")
	for _, j := range []struct {
		any     netip.Addr
		group   string
		sources []string
	}{
		{netip.IPv4Unspecified(), "232.1.1.1", []string{"10.90.0.7", "10.90.0.5"}},
		{netip.IPv6Unspecified(), "ff3e::8000:1", []string{"fd00:90::7"}},
	} {
		c, err := h.stack.ListenMulticastUDP(netip.AddrPortFrom(j.any, 5000))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, s := range j.sources {
			if err := c.JoinSourceGroup("b2", netip.MustParseAddr(j.group), netip.MustParseAddr(s)); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, stdout, stderr := runArgs(t, "maddr", "-tap", "b2")
	if code != exitOK {
		t.Fatalf("gonet maddr: exit %d, stderr %q", code, stderr)
	}
	want := []string{
		"b2",
		"\tinet  224.0.0.1",
		"\tinet  232.1.1.1 include 10.90.0.5 10.90.0.7",
		"\tinet6 ff02::1",
		"\tinet6 ff02::1:ff00:2", // fd00:90::2's solicited-node group
		"\tinet6 ff3e::8000:1 include fd00:90::7",
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("gonet maddr prints no %q:\n%s", w, stdout)
		}
	}
	if lines[0] != "b2" || !slices.IsSortedFunc(lines[1:], func(a, b string) int { return strings.Compare(a[:6], b[:6]) }) {
		t.Errorf("not the NIC, then IPv4's groups, then IPv6's:\n%s", stdout)
	}
}

// TestAddrShowsTheLinkDown: gonet addr tells a link down (a pipe's cable
// pulled, as a TAP's kernel side set down) as ip addr does.
func TestAddrShowsTheLinkDown(t *testing.T) {
	useControlDir(t)
	peer, epUp := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0x99, 11, 1}, net.HardwareAddr{0x02, 0, 0, 0x99, 11, 2})
	upOn(t, epUp, "-tap", "b3", "-addr", "10.91.0.2/24", "-mdns=false")
	peer.SetUp(false)
	code, stdout, stderr := runArgs(t, "addr", "-tap", "b3")
	if code != exitOK {
		t.Fatalf("gonet addr: exit %d, stderr %q", code, stderr)
	}
	if !regexp.MustCompile(`(?m)^b3: state DOWN link/ether 02:00:00:99:0b:02$`).MatchString(stdout) {
		t.Errorf("gonet addr does not show the link down:\n%s", stdout)
	}
}
