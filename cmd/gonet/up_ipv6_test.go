package main

import (
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
)

// awaitPreferred waits until addr on s's nic has passed duplicate address
// detection.
func awaitPreferred(t *testing.T, s *stack.Stack, nic string, addr netip.Addr) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		list, err := s.Addresses6(nic)
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := addrState(list, addr); ok && st == ndp.Preferred {
			return
		}
	}
	t.Fatalf("%v on %s still not preferred after 10s", addr, nic)
}

// TestUpServesBothFamilies runs gonet up with an address of each family on
// a VM's socket: the ready line keeps IPv4's fields first and adds the IPv6
// address after the MAC, and a VM reaches the echo service over IPv6 and
// IPv4 alike, on one dual-stack listener.
func TestUpServesBothFamilies(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "vm.sock")
	up := startInProcess(t, "up", "-socket", path, "-addr", "10.0.2.2/24", "-addr", "fd00:2::2/64", "-serve", "echo", "-control", noControl)
	if line := up.readyLine(t); !regexp.MustCompile(`^gonet: up vm0 10\.0\.2\.2/24 ([0-9a-f]{2}:){5}[0-9a-f]{2} fd00:2::2/64$`).MatchString(line) {
		t.Fatalf("ready line %q, want the IPv4 address, the MAC, then the IPv6 address", line)
	}

	ep, err := stream.Dial(path, stream.Options{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	vm := peerStack(t, ep, stack.Config{}, "10.0.2.100/24", "fd00:2::100/64")
	defer vm.Close()
	awaitPreferred(t, vm, "eth0", netip.MustParseAddr("fd00:2::100"))
	for _, dst := range []string{"[fd00:2::2]:7", "10.0.2.2:7"} {
		t.Run(dst, func(t *testing.T) {
			echoed(t, vm, dst, strings.Repeat("both families, one listener. ", 2000))
		})
	}
	up.stop(t)
}

// TestUpRefusesAnIPv6AddressAnotherNodeHolds pins down that an -addr that
// duplicate address detection finds in use fails the start, saying so,
// rather than leaving a daemon that does not answer on it.
func TestUpRefusesAnIPv6AddressAnotherNodeHolds(t *testing.T) {
	macA := net.HardwareAddr{0x02, 0x00, 0x00, 0x99, 0x06, 0x01}
	macB := net.HardwareAddr{0x02, 0x00, 0x00, 0x99, 0x06, 0x02}
	epA, epB := pipe.New(1500, macA, macB)
	other := stack.New(stack.Config{})
	defer other.Close()
	if err := other.AddNIC("a0", epA); err != nil {
		t.Fatal(err)
	}
	taken := netip.MustParsePrefix("fd00:6::2/64")
	if err := other.AddAddress("a0", taken); err != nil {
		t.Fatal(err)
	}
	awaitPreferred(t, other, "a0", taken.Addr())

	c, err := parseUp([]string{"-tap", "b0", "-addr", taken.String()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := bringUpOn(&c.link, epB, "b0", slog.New(slog.DiscardHandler))
	if err == nil {
		h.Close()
		t.Fatalf("bringUpOn with %v, which another node holds: no error", taken)
	}
	if !strings.Contains(err.Error(), "already in use") {
		t.Errorf("error %q, want one saying the address is already in use", err)
	}
}

// TestUpWithoutAddressShowsItsLinkLocalAddress pins down gonet up with IPv6
// and no -addr: it is up once its link-local address is, and shows that.
func TestUpWithoutAddressShowsItsLinkLocalAddress(t *testing.T) {
	epA, epB := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0x99, 7, 1}, net.HardwareAddr{0x02, 0, 0, 0x99, 7, 2})
	defer epA.Close()
	c, err := parseUp([]string{"-tap", "b0"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := bringUpOn(&c.link, epB, "b0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// EUI-64 of 02:00:00:99:07:02 (RFC 4291 appendix A).
	want := "gonet: up b0 fe80::ff:fe99:702/64 02:00:00:99:07:02"
	if got := readyLine(h); got != want {
		t.Errorf("ready line %q, want %q", got, want)
	}
}

// TestStableIIDKeepsTheLinkLocalAddressAcrossRestarts pins down
// -stable-iid: the link-local address is RFC 7217's, not the MAC's
// EUI-64, and the same on each start with the same key file.
func TestStableIIDKeepsTheLinkLocalAddressAcrossRestarts(t *testing.T) {
	key := filepath.Join(t.TempDir(), "iid.key")
	mac := net.HardwareAddr{0x02, 0, 0, 0x99, 9, 2}
	var seen []string
	for range 2 {
		epA, epB := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0x99, 9, 1}, mac)
		c, err := parseUp([]string{"-tap", "b0", "-stable-iid", key})
		if err != nil {
			t.Fatal(err)
		}
		h, err := bringUpOn(&c.link, epB, "b0", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, h.addrs[0].String())
		h.Close()
		epA.Close()
	}
	if seen[0] == "fe80::ff:fe99:902/64" || !strings.HasPrefix(seen[0], "fe80::") {
		t.Errorf("link-local address %s, want a stable opaque one in fe80::/64, not the EUI-64", seen[0])
	}
	if seen[0] != seen[1] {
		t.Errorf("link-local addresses %s then %s: not stable across restarts with one key", seen[0], seen[1])
	}
}

// TestUpRoutesThroughAGatewayPerFamily pins down -gw of each family: a
// default route of each, ::/0 through an IPv6 router known by its
// link-local address.
func TestUpRoutesThroughAGatewayPerFamily(t *testing.T) {
	epA, epB := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0x99, 10, 1}, net.HardwareAddr{0x02, 0, 0, 0x99, 10, 2})
	defer epA.Close()
	c, err := parseUp([]string{"-tap", "b0", "-addr", "10.0.10.2/24", "-addr", "fd00:10::2/64", "-gw", "fe80::1", "-gw", "10.0.10.1"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := bringUpOn(&c.link, epB, "b0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var v4, v6 []string
	for _, r := range h.stack.Routes() {
		if r.Dst.Bits() == 0 {
			v4 = append(v4, r.Gateway.String())
		}
	}
	for _, r := range h.stack.Routes6() {
		if r.Dst.Bits() == 0 {
			v6 = append(v6, r.Gateway.String())
		}
	}
	if len(v4) != 1 || v4[0] != "10.0.10.1" || len(v6) != 1 || v6[0] != "fe80::1" {
		t.Errorf("default routes: IPv4 via %v, IPv6 via %v; want 10.0.10.1 and fe80::1", v4, v6)
	}
}
