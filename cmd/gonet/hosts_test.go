package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gonetstack/gonet/stack"
)

// -host and -hosts make the static table, the file's entries first; -gw
// takes a name from it, one gateway per family the host routes itself.
func TestUpTakesStaticHostsAndAGatewayByName(t *testing.T) {
	a := netip.MustParseAddr
	file := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(file, []byte("# the lab\n10.0.0.1 router gw.lab\nfe80::1 router\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		behaviour string
		args      []string
		static    []stack.HostEntry
		gws       []netip.Addr
	}{
		{"-host entries, a name twice", []string{"-addr", "10.0.0.2/24", "-host", "www=10.0.0.7", "-host", "www=fd00::7", "-host", "ntp.=10.0.0.8"},
			[]stack.HostEntry{{Name: "www", Addrs: []netip.Addr{a("10.0.0.7")}}, {Name: "www", Addrs: []netip.Addr{a("fd00::7")}}, {Name: "ntp", Addrs: []netip.Addr{a("10.0.0.8")}}}, nil},
		{"-gw by a -host name", []string{"-addr", "10.0.0.2/24", "-gw", "router", "-host", "router=10.0.0.1"},
			[]stack.HostEntry{{Name: "router", Addrs: []netip.Addr{a("10.0.0.1")}}}, []netip.Addr{a("10.0.0.1")}},
		{"-gw by a -hosts name of both families", []string{"-addr", "10.0.0.2/24", "-hosts", file, "-gw", "ROUTER."},
			[]stack.HostEntry{{Name: "router", Addrs: []netip.Addr{a("10.0.0.1"), a("fe80::1")}}, {Name: "gw.lab", Addrs: []netip.Addr{a("10.0.0.1")}}},
			[]netip.Addr{a("10.0.0.1"), a("fe80::1")}},
		{"-gw by name with -no-ipv6 takes IPv4's", []string{"-no-ipv6", "-addr", "10.0.0.2/24", "-hosts", file, "-gw", "router"},
			nil, []netip.Addr{a("10.0.0.1")}},
		{"-gw by name with -addr dhcp takes IPv6's", []string{"-addr", "dhcp", "-hosts", file, "-gw", "router"},
			nil, []netip.Addr{a("fe80::1")}},
	}
	for _, tt := range tests {
		t.Run(tt.behaviour, func(t *testing.T) {
			c, err := parseUp(append([]string{"-tap", "tap0"}, tt.args...))
			if err != nil {
				t.Fatalf("parseUp(%q): %v", tt.args, err)
			}
			same := func(x, y stack.HostEntry) bool { return x.Name == y.Name && slices.Equal(x.Addrs, y.Addrs) }
			if tt.static != nil && !slices.EqualFunc(c.link.static, tt.static, same) {
				t.Errorf("static table %v, want %v", c.link.static, tt.static)
			}
			if !slices.Equal(c.link.gws, tt.gws) {
				t.Errorf("gateways %v, want %v", c.link.gws, tt.gws)
			}
		})
	}
}

func TestUpRejectsBadStaticHosts(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("10.0.0.1 router\n10.0.0.300 www\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	twoV4 := filepath.Join(dir, "two")
	if err := os.WriteFile(twoV4, []byte("10.0.0.1 router\n10.0.0.3 router\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		behaviour string
		args      []string
		want      string
	}{
		{"-host without =", []string{"-host", "router"}, "not NAME=ADDR"},
		{"-host with a bad name", []string{"-host", "a b=10.0.0.1"}, "is not a host name"},
		{"-host with a bad address", []string{"-host", "router=10.0.0.300"}, "not an IP address"},
		{"-hosts missing", []string{"-hosts", filepath.Join(dir, "none")}, "-hosts: open"},
		{"-hosts with a bad line", []string{"-hosts", bad}, "-hosts " + bad + ": line 2"},
		{"-gw by a name of two IPv4 addresses", []string{"-addr", "10.0.0.2/24", "-hosts", twoV4, "-gw", "router"}, "-gw router: a second IPv4 gateway"},
		{"-gw by a name off the network", []string{"-addr", "10.0.1.2/24", "-host", "router=10.0.0.1", "-gw", "router"}, "-gw 10.0.0.1 is not on -addr's network"},
		{"-gw by a name of IPv4 alone with -addr dhcp", []string{"-addr", "dhcp", "-host", "router=10.0.0.1", "-gw", "router"}, "of no family GoNet routes itself"},
	}
	for _, tt := range tests {
		t.Run(tt.behaviour, func(t *testing.T) {
			checkUsageError(t, append([]string{"up", "-tap", "tap0"}, tt.args...), tt.want)
		})
	}
}

// A name gonet ping or gonet iperf3 -c is given needs no -dns when the
// static table has it.
func TestPingAndIperf3TakeAStaticName(t *testing.T) {
	link := []string{"-tap", "tap0", "-addr", "10.0.0.2/24", "-host", "peer=10.0.0.1"}
	if c, err := parsePing(append(slices.Clone(link), "peer")); err != nil || c.name != "peer" {
		t.Errorf("gonet ping peer with -host peer=ADDR: %+v, %v", c, err)
	}
	if _, err := parseIperf3(append(slices.Clone(link), "-c", "peer")); err != nil {
		t.Errorf("gonet iperf3 -c peer with -host peer=ADDR: %v", err)
	}
	checkUsageError(t, []string{"ping", "-tap", "tap0", "-addr", "10.0.0.2/24", "other"}, "-host other=ADDR")
}
