package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/tcp"
)

// runArgs runs gonet with args and returns the exit code and what it wrote.
func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// checkUsageError checks that a bad command line exits 2 with exactly one
// line on stderr, mentioning want, and nothing on stdout.
func checkUsageError(t *testing.T, args []string, want string) {
	t.Helper()
	code, stdout, stderr := runArgs(t, args...)
	if code != exitUsage {
		t.Errorf("gonet %s: exit code %d, want %d", strings.Join(args, " "), code, exitUsage)
	}
	if stdout != "" {
		t.Errorf("gonet %s: wrote %q on stdout, want nothing", strings.Join(args, " "), stdout)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("gonet %s: stderr %q is not one line", strings.Join(args, " "), stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("gonet %s: stderr %q does not mention %q", strings.Join(args, " "), stderr, want)
	}
}

func TestParseUpAcceptsGoodFlags(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, c *upConfig)
	}{
		{"optimistic DAD", []string{"-tap", "tap0", "-optimistic-dad"},
			func(t *testing.T, c *upConfig) {
				cfg, err := c.link.ndpConfig()
				if err != nil || !cfg.OptimisticDAD {
					t.Errorf("ndp config %+v (%v), want OptimisticDAD", cfg, err)
				}
			}},
		{"the TAP's queues and their length", []string{"-tap", "tap0", "-tap-queues", "4", "-tap-txqueuelen", "32768"},
			func(t *testing.T, c *upConfig) {
				if c.link.tapQueues != 4 || c.link.tapTxQueueLen != 32768 {
					t.Errorf("-tap-queues %d -tap-txqueuelen %d, want 4 and 32768", c.link.tapQueues, c.link.tapTxQueueLen)
				}
			}},
		{"the least: a TAP and an address", []string{"-tap", "tap0", "-addr", "10.0.0.2/24"},
			func(t *testing.T, c *upConfig) {
				if c.link.tap != "tap0" || !slices.Equal(c.link.addrs, []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")}) {
					t.Errorf("tap %q addr %v, want tap0 10.0.0.2/24", c.link.tap, c.link.addrs)
				}
				if c.link.noIPv6 || !c.link.slaac || c.link.stableKey != "" {
					t.Errorf("IPv6 defaults: -no-ipv6 %v -slaac %v -stable-iid %q, want IPv6 on with SLAAC and EUI-64 identifiers",
						c.link.noIPv6, c.link.slaac, c.link.stableKey)
				}
				if c.link.ecn != tcp.ECNPassive {
					t.Errorf("default ecn %v, want ECNPassive, as Linux", c.link.ecn)
				}
				if c.link.mtu != 1500 || c.link.mac != nil || len(c.link.gws) != 0 || c.link.memory != 0 {
					t.Errorf("defaults: mtu %d mac %v gw %v memory %d, want 1500, none, none, 0",
						c.link.mtu, c.link.mac, c.link.gws, c.link.memory)
				}
				if len(c.services) != 0 || c.http {
					t.Errorf("services %v, want none by default", c.services)
				}
			}},
		{"every flag", []string{"-tap", "tap0", "-addr", "192.168.7.2/24", "-gw", "192.168.7.1",
			"-mac", "02:00:5e:10:00:01", "-mtu", "9000", "-serve", "echo,daytime", "-memory", "16M",
			"-pcap", filepath.Join(root, "x.pcap")},
			func(t *testing.T, c *upConfig) {
				if !slices.Equal(c.link.gws, []netip.Addr{netip.MustParseAddr("192.168.7.1")}) {
					t.Errorf("gw %v, want 192.168.7.1", c.link.gws)
				}
				if c.link.mac.String() != "02:00:5e:10:00:01" {
					t.Errorf("mac %v, want 02:00:5e:10:00:01", c.link.mac)
				}
				if c.link.mtu != 9000 || c.link.memory != 16<<20 {
					t.Errorf("mtu %d memory %d, want 9000 and %d", c.link.mtu, c.link.memory, 16<<20)
				}
				if got := serviceNames(c); !slices.Equal(got, []string{"echo", "daytime"}) {
					t.Errorf("services %v, want echo, daytime", got)
				}
				if c.link.pcap == "" {
					t.Error("-pcap lost")
				}
			}},
		{"a VM's socket instead of a TAP, at passt's MTU", []string{"-socket", "/run/vm.sock", "-addr", "10.0.2.2/24", "-mtu", "65520"},
			func(t *testing.T, c *upConfig) {
				if c.link.socket != "/run/vm.sock" || c.link.tap != "" || c.link.mtu != 65520 {
					t.Errorf("socket %q tap %q mtu %d, want /run/vm.sock, none, 65520", c.link.socket, c.link.tap, c.link.mtu)
				}
			}},
		{"a ring to another GoNet process instead of a TAP", []string{"-ring", "/run/ring.sock", "-addr", "10.0.0.2/24", "-mtu", "9000"},
			func(t *testing.T, c *upConfig) {
				if c.link.ring != "/run/ring.sock" || c.link.nicName() != "ring0" || c.link.mtu != 9000 {
					t.Errorf("ring %q NIC %q mtu %d, want /run/ring.sock, ring0, 9000", c.link.ring, c.link.nicName(), c.link.mtu)
				}
			}},
		{"a listened-for ring of 64 descriptors", []string{"-ring-listen", "/run/ring.sock", "-addr", "10.0.0.2/24", "-ring-size", "64"},
			func(t *testing.T, c *upConfig) {
				if c.link.ringListen != "/run/ring.sock" || c.link.ringSize != 64 {
					t.Errorf("ring-listen %q ring size %d, want /run/ring.sock, 64", c.link.ringListen, c.link.ringSize)
				}
			}},
		{"the MTU's bounds", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-mtu", "68"},
			func(t *testing.T, c *upConfig) {
				if c.link.mtu != 68 {
					t.Errorf("mtu %d, want 68", c.link.mtu)
				}
			}},
		{"the MTU's upper bound", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-mtu", "65535"},
			func(t *testing.T, c *upConfig) {
				if c.link.mtu != 65535 {
					t.Errorf("mtu %d, want 65535", c.link.mtu)
				}
			}},
		{"a TAP name pattern for the kernel to fill", []string{"-tap", "gn%d", "-addr", "10.0.0.2/24"},
			func(t *testing.T, c *upConfig) {
				if c.link.tap != "gn%d" {
					t.Errorf("tap %q, want gn%%d", c.link.tap)
				}
			}},
		{"a /32 host address", []string{"-tap", "t", "-addr", "10.0.0.2/32"},
			func(t *testing.T, c *upConfig) {
				if c.link.addrs[0].Bits() != 32 {
					t.Errorf("addr %v, want /32", c.link.addrs)
				}
			}},
		{"http with a root directory", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-serve", "http,echo", "-http-root", root},
			func(t *testing.T, c *upConfig) {
				if !c.http || c.httpRoot != root {
					t.Errorf("http %v root %q, want true %q", c.http, c.httpRoot, root)
				}
			}},
		{"http with no root serves the status page", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-serve", "http"},
			func(t *testing.T, c *upConfig) {
				if !c.http {
					t.Error("http not noted")
				}
			}},
		{"an impaired link", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-impair", "loss=0.05,delay=1ms,seed=7"},
			func(t *testing.T, c *upConfig) {
				if c.link.fault.Loss != 0.05 || c.link.fault.Delay != time.Millisecond || c.link.fault.Seed != 7 {
					t.Errorf("-impair parsed as %+v, want loss 0.05, delay 1ms, seed 7", c.link.fault)
				}
			}},
		{"ECN asked for on our SYNs too", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-ecn", "on"},
			func(t *testing.T, c *upConfig) {
				if c.link.ecn != tcp.ECNOn {
					t.Errorf("ecn %v, want ECNOn", c.link.ecn)
				}
			}},
		{"ECN off", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-ecn", "OFF"},
			func(t *testing.T, c *upConfig) {
				if c.link.ecn != tcp.ECNOff {
					t.Errorf("ecn %v, want ECNOff", c.link.ecn)
				}
			}},
		{"memory as a plain byte count", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-memory", "1048576"},
			func(t *testing.T, c *upConfig) {
				if c.link.memory != 1<<20 {
					t.Errorf("memory %d, want %d", c.link.memory, 1<<20)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseUp(tt.args)
			if err != nil {
				t.Fatalf("parseUp(%q): %v", tt.args, err)
			}
			tt.check(t, c)
		})
	}
}

func serviceNames(c *upConfig) []string {
	var names []string
	for _, s := range c.services {
		names = append(names, s.Name)
	}
	return names
}

func TestUpRejectsBadFlagsWithExitCode2(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := []string{"-tap", "tap0", "-addr", "10.0.0.2/24"}
	with := func(extra ...string) []string { return append(slices.Clone(ok), extra...) }
	tests := []struct {
		name string
		args []string
		want string // in the error line
	}{
		{"no flags", nil, "-tap or -socket is required"},
		{"a TAP and a socket", with("-socket", "/tmp/vm.sock"), "-tap and -socket are two links: give one"},
		{"a TAP and a ring", with("-ring", "/tmp/ring.sock"), "-tap and -ring are 2 links: give one"},
		{"both ends of a ring", []string{"-ring", "/tmp/a.sock", "-ring-listen", "/tmp/b.sock", "-addr", "10.0.0.2/24"}, "-ring and -ring-listen are 2 links"},
		{"ring MTU over a buffer", []string{"-ring", "/tmp/ring.sock", "-addr", "10.0.0.2/24", "-mtu", "65535"}, "-mtu 65535 is over 65522, the most a ring link carries"},
		{"ring size on the dialling end", []string{"-ring", "/tmp/ring.sock", "-addr", "10.0.0.2/24", "-ring-size", "64"}, "-ring-size sizes the rings of -ring-listen"},
		{"ring size on a TAP", with("-ring-size", "64"), "-ring-size sizes the rings of -ring-listen"},
		{"ring size not a power of two", []string{"-ring-listen", "/tmp/ring.sock", "-addr", "10.0.0.2/24", "-ring-size", "1000"}, "-ring-size 1000 is not a power of two in 8..32768"},
		{"ring size below the least", []string{"-ring-listen", "/tmp/ring.sock", "-addr", "10.0.0.2/24", "-ring-size", "4"}, "-ring-size 4 is not a power of two in 8..32768"},
		{"socket MTU over a buffer", []string{"-socket", "/tmp/vm.sock", "-addr", "10.0.0.2/24", "-mtu", "65535"}, "-mtu 65535 is over 65522"},
		{"no address, IPv4 only", []string{"-tap", "tap0", "-no-ipv6"}, "-addr is required with -no-ipv6"},
		{"address without prefix", []string{"-tap", "t", "-addr", "10.0.0.2"}, "needs a prefix length"},
		{"address that does not parse", []string{"-tap", "t", "-addr", "10.0.0.300/24"}, `invalid value "10.0.0.300/24" for flag -addr`},
		{"unspecified address", []string{"-tap", "t", "-addr", "0.0.0.0/24"}, "not a host address"},
		{"multicast address", []string{"-tap", "t", "-addr", "224.0.0.9/4"}, "multicast"},
		{"a /0 prefix", []string{"-tap", "t", "-addr", "10.0.0.2/0"}, "/0"},
		{"unknown service", with("-serve", "echo,telnet"), `unknown service "telnet"`},
		{"two unknown services", with("-serve", "ftp,gopher"), `"ftp", "gopher"`},
		{"MAC that does not parse", with("-mac", "zz:zz"), "-mac"},
		{"multicast MAC", with("-mac", "01:00:5e:00:00:01"), "multicast"},
		{"all-zero MAC", with("-mac", "00:00:00:00:00:00"), "all-zero"},
		{"EUI-64 is not Ethernet", with("-mac", "02:00:5e:10:00:00:00:01"), "8 bytes"},
		{"MTU below 68", with("-mtu", "67"), "-mtu 67 is outside 68..65535"},
		{"MTU above 65535", with("-mtu", "65536"), "-mtu 65536 is outside 68..65535"},
		{"TAP queues over the kernel's 256", with("-tap-queues", "257"), "-tap-queues 257 is outside 0..256"},
		{"negative TAP queues", with("-tap-queues", "-1"), "-tap-queues -1 is outside 0..256"},
		{"negative TAP queue length", with("-tap-txqueuelen", "-5"), "-tap-txqueuelen -5 is negative"},
		{"negative MTU", with("-mtu", "-1"), "outside 68..65535"},
		{"MTU not a number", with("-mtu", "big"), "-mtu"},
		{"gateway off the network", with("-gw", "10.0.1.1"), "not on -addr's network 10.0.0.0/24"},
		{"gateway is our own address", with("-gw", "10.0.0.2"), "GoNet's own address"},
		{"gateway by a name no -host gives", with("-gw", "router"), "-gw router is a name no -host or -hosts gives"},
		{"gateway by something not a name", with("-gw", "router!"), "not an IP address, as in 10.0.0.1 or fd00::1, nor a host name"},
		{"gateway IPv6 with no IPv6 -addr", with("-gw", "fd00::1"), "not on the network of an IPv6 -addr"},
		{"http root missing", with("-serve", "http", "-http-root", filepath.Join(t.TempDir(), "nope")), "-http-root"},
		{"http root is a file", with("-http-root", file), "not a directory"},
		{"impairment that is not a probability", with("-impair", "loss=2"), "not a probability"},
		{"impairment of an unknown kind", with("-impair", "jitter=1ms"), `unknown key "jitter"`},
		{"memory not a number", with("-memory", "lots"), "-memory"},
		{"memory zero", with("-memory", "0"), "must be positive"},
		{"ECN mode unknown", with("-ecn", "yes"), "not an ECN mode: passive, on or off"},
		{"TAP name too long", []string{"-tap", "a-very-long-tap-name", "-addr", "10.0.0.2/24"}, "at most 15"},
		{"TAP name with a slash", []string{"-tap", "a/b", "-addr", "10.0.0.2/24"}, "not a valid interface name"},
		{"positional argument", with("tap1"), `unexpected argument "tap1"`},
		{"unknown flag", with("-verbose"), "flag provided but not defined: -verbose"},
		{"flag without its value", []string{"-tap"}, "flag needs an argument: -tap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"up"}, tt.args...), tt.want)
		})
	}
}

// TestParseUpTakesAddressesOfBothFamilies pins down -addr and -gw: each
// repeats, of either family, a gateway per family on an -addr's network
// (or an IPv6 router's link-local address), and IPv6 optional.
func TestParseUpTakesAddressesOfBothFamilies(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	tests := []struct {
		behaviour string
		args      []string
		addrs     []netip.Prefix
		gws       []netip.Addr
	}{
		{"no -addr: link-local and SLAAC alone", nil, nil, nil},
		{"one IPv6 address", []string{"-addr", "fd00::2/64"}, []netip.Prefix{p("fd00::2/64")}, nil},
		{"both families, in the order given", []string{"-addr", "fd00::2/64", "-addr", "10.0.0.2/24"},
			[]netip.Prefix{p("fd00::2/64"), p("10.0.0.2/24")}, nil},
		{"two of one family", []string{"-addr", "10.0.0.2/24", "-addr", "10.9.0.2/16"},
			[]netip.Prefix{p("10.0.0.2/24"), p("10.9.0.2/16")}, nil},
		{"a gateway per family", []string{"-addr", "10.0.0.2/24", "-addr", "fd00::2/64", "-gw", "fd00::1", "-gw", "10.0.0.1"},
			[]netip.Prefix{p("10.0.0.2/24"), p("fd00::2/64")}, []netip.Addr{a("fd00::1"), a("10.0.0.1")}},
		{"an IPv6 router by its link-local address", []string{"-addr", "fd00::2/64", "-gw", "fe80::1"},
			[]netip.Prefix{p("fd00::2/64")}, []netip.Addr{a("fe80::1")}},
		{"a link-local router without any -addr", []string{"-gw", "fe80::1%tap0"}, nil, []netip.Addr{a("fe80::1")}},
		{"an IPv6 /128", []string{"-addr", "fd00::2/128"}, []netip.Prefix{p("fd00::2/128")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.behaviour, func(t *testing.T) {
			c, err := parseUp(append([]string{"-tap", "tap0"}, tt.args...))
			if err != nil {
				t.Fatalf("parseUp(%q): %v", tt.args, err)
			}
			if !slices.Equal(c.link.addrs, tt.addrs) || !slices.Equal(c.link.gws, tt.gws) {
				t.Errorf("parseUp(%q): addrs %v gws %v, want %v and %v", tt.args, c.link.addrs, c.link.gws, tt.addrs, tt.gws)
			}
		})
	}
}

func TestParseUpTakesIPv4LinkLocal(t *testing.T) {
	tests := []struct {
		behaviour string
		args      []string
		dhcp      bool
	}{
		{"ipv4ll alone, IPv4 only", []string{"-no-ipv6", "-addr", "ipv4ll"}, false},
		{"ipv4ll beside dhcp, for when no server answers", []string{"-addr", "dhcp", "-addr", "ipv4ll"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.behaviour, func(t *testing.T) {
			c, err := parseUp(append([]string{"-tap", "tap0"}, tt.args...))
			if err != nil {
				t.Fatalf("parseUp(%q): %v", tt.args, err)
			}
			if !c.link.ipv4ll || c.link.dhcp != tt.dhcp || len(c.link.addrs) != 0 {
				t.Errorf("parseUp(%q): ipv4ll %v dhcp %v addrs %v", tt.args, c.link.ipv4ll, c.link.dhcp, c.link.addrs)
			}
		})
	}
	if _, err := parsePing([]string{"-tap", "tap0", "-addr", "ipv4ll", "169.254.3.4"}); err != nil {
		t.Errorf("ping -addr ipv4ll to an IPv4 DEST: %v", err)
	}
}

func TestParseUpTakesDHCP(t *testing.T) {
	tests := []struct {
		behaviour string
		args      []string
		addrs     int
	}{
		{"dhcp alone", []string{"-addr", "dhcp"}, 0},
		{"dhcp in capitals, IPv4 only", []string{"-no-ipv6", "-addr", "DHCP"}, 0},
		{"dhcp beside an IPv6 address and router", []string{"-addr", "fd00::2/64", "-addr", "dhcp", "-gw", "fd00::1"}, 1},
		{"dhcp with a lease file", []string{"-addr", "dhcp", "-dhcp-lease", "/tmp/lease.json"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.behaviour, func(t *testing.T) {
			c, err := parseUp(append([]string{"-tap", "tap0"}, tt.args...))
			if err != nil {
				t.Fatalf("parseUp(%q): %v", tt.args, err)
			}
			if !c.link.dhcp || len(c.link.addrs) != tt.addrs {
				t.Errorf("parseUp(%q): dhcp %v, addrs %v", tt.args, c.link.dhcp, c.link.addrs)
			}
		})
	}
	if _, err := parsePing([]string{"-tap", "tap0", "-addr", "dhcp", "10.0.0.1"}); err != nil {
		t.Errorf("ping -addr dhcp to an IPv4 DEST: %v", err)
	}
}

func TestUpRejectsBadAddressMixes(t *testing.T) {
	tests := []struct {
		behaviour string
		args      []string
		want      string
	}{
		{"an address twice", []string{"-addr", "fd00::2/64", "-addr", "fd00::2/48"}, "fd00::2 is given twice"},
		{"IPv6 with -no-ipv6", []string{"-no-ipv6", "-addr", "10.0.0.2/24", "-addr", "fd00::2/64"}, "-addr fd00::2/64 is IPv6, and -no-ipv6 turns IPv6 off"},
		{"an IPv6 gateway with -no-ipv6", []string{"-no-ipv6", "-addr", "10.0.0.2/24", "-gw", "fe80::1"}, "-no-ipv6 turns IPv6 off"},
		{"a stable-iid key with -no-ipv6", []string{"-no-ipv6", "-addr", "10.0.0.2/24", "-stable-iid", "/tmp/k"}, "-no-ipv6"},
		{"optimistic DAD with -no-ipv6", []string{"-no-ipv6", "-addr", "10.0.0.2/24", "-optimistic-dad"}, "-optimistic-dad is IPv6's, and -no-ipv6 turns IPv6 off"},
		{"two IPv4 gateways", []string{"-addr", "10.0.0.2/24", "-gw", "10.0.0.1", "-gw", "10.0.0.3"}, "a second IPv4 gateway (10.0.0.1 already)"},
		{"two IPv6 gateways", []string{"-gw", "fe80::1", "-gw", "fe80::2"}, "a second IPv6 gateway"},
		{"an IPv6 gateway off every IPv6 network", []string{"-addr", "fd00::2/64", "-gw", "fd01::1"}, "not on -addr's network fd00::/64"},
		{"an IPv4 gateway with only IPv6 addresses", []string{"-addr", "fd00::2/64", "-gw", "10.0.0.1"}, "not on the network of an IPv4 -addr"},
		{"an IPv6 gateway that is our own address", []string{"-addr", "fd00::2/64", "-gw", "fd00::2"}, "GoNet's own address"},
		{"an IPv6 address without prefix", []string{"-addr", "fd00::2"}, "needs a prefix length"},
		{"the IPv6 unspecified address", []string{"-addr", "::/64"}, ":: is not a host address"},
		{"an IPv6 multicast address", []string{"-addr", "ff02::1/64"}, "multicast"},
		{"the IPv6 loopback", []string{"-addr", "::1/128"}, "loopback"},
		{"an IPv4-mapped address", []string{"-addr", "::ffff:10.0.0.2/120"}, "give the IPv4 address 10.0.0.2 itself"},
		{"an IPv6 /0", []string{"-addr", "fd00::2/0"}, "/0"},
		{"slaac is no address", []string{"-addr", "slaac"}, "SLAAC needs no -addr"},
		{"a zone on a global gateway", []string{"-addr", "fd00::2/64", "-gw", "fd00::1%tap0"}, "a zone is for link-local"},
		{"dhcp beside an IPv4 address", []string{"-addr", "dhcp", "-addr", "10.0.0.2/24"}, "the DHCP server gives the IPv4 address"},
		{"dhcp twice", []string{"-addr", "dhcp", "-addr", "DHCP"}, "dhcp is given twice"},
		{"ipv4ll twice", []string{"-addr", "ipv4ll", "-addr", "IPv4LL"}, "ipv4ll is given twice"},
		{"an IPv4 gateway with dhcp", []string{"-addr", "dhcp", "-gw", "10.0.0.1"}, "the DHCP server gives the IPv4 router"},
		{"a lease file without dhcp", []string{"-addr", "10.0.0.2/24", "-dhcp-lease", "/tmp/l"}, "there is none without -addr dhcp"},
	}
	for _, tt := range tests {
		t.Run(tt.behaviour, func(t *testing.T) {
			checkUsageError(t, append([]string{"up", "-tap", "tap0"}, tt.args...), tt.want)
		})
	}
}

func TestLoadSecretKeyMakesAKeyOnceAndKeepsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "iid.key")
	first, err := loadSecretKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600: it is a secret", fi.Mode().Perm())
	}
	if len(first) < 16 {
		t.Errorf("key of %d bytes, want at least 16 (RFC 7217 section 5)", len(first))
	}
	again, err := loadSecretKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first, again) {
		t.Errorf("the key changed across loads: the addresses would not be stable")
	}
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("tiny"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSecretKey(short); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a 4-byte key: error %v, want one saying a key has at least 16 bytes", err)
	}
}

func TestParsePingAcceptsGoodFlags(t *testing.T) {
	link := []string{"-tap", "tap0", "-addr", "10.0.0.2/24"}
	tests := []struct {
		name string
		args []string
		want pingConfig // link not compared
	}{
		{"defaults as the kernel's ping", append(slices.Clone(link), "10.0.0.1"),
			pingConfig{dest: netip.MustParseAddr("10.0.0.1"), count: 0, size: 56, interval: time.Second, timeout: 2 * time.Second}},
		{"every ping flag", append(slices.Clone(link), "-c", "3", "-s", "1472", "-i", "0.2", "-W", "500ms", "10.0.0.1"),
			pingConfig{dest: netip.MustParseAddr("10.0.0.1"), count: 3, size: 1472, interval: 200 * time.Millisecond, timeout: 500 * time.Millisecond}},
		{"flags after DEST", []string{"10.0.0.9", "-tap", "t", "-addr", "10.0.0.2/24", "-c", "1", "-W", "3"},
			pingConfig{dest: netip.MustParseAddr("10.0.0.9"), count: 1, size: 56, interval: time.Second, timeout: 3 * time.Second}},
		{"DEST after --", append(slices.Clone(link), "-c", "2", "--", "10.0.0.1"),
			pingConfig{dest: netip.MustParseAddr("10.0.0.1"), count: 2, size: 56, interval: time.Second, timeout: 2 * time.Second}},
		{"the largest payload", append(slices.Clone(link), "-s", "65507", "10.0.0.1"),
			pingConfig{dest: netip.MustParseAddr("10.0.0.1"), size: 65507, interval: time.Second, timeout: 2 * time.Second}},
		{"an empty payload and no wait", append(slices.Clone(link), "-s", "0", "-i", "0", "10.0.0.1"),
			pingConfig{dest: netip.MustParseAddr("10.0.0.1"), size: 0, interval: 0, timeout: 2 * time.Second}},
		{"a destination through the gateway", append(slices.Clone(link), "-gw", "10.0.0.1", "192.0.2.7"),
			pingConfig{dest: netip.MustParseAddr("192.0.2.7"), size: 56, interval: time.Second, timeout: 2 * time.Second}},
		{"an IPv6 destination", append(slices.Clone(link), "-addr", "fd00::2/64", "fd00::1"),
			pingConfig{dest: netip.MustParseAddr("fd00::1"), size: 56, interval: time.Second, timeout: 2 * time.Second}},
		{"a link-local destination with its zone", append(slices.Clone(link), "fe80::1%tap0"),
			pingConfig{dest: netip.MustParseAddr("fe80::1%tap0"), size: 56, interval: time.Second, timeout: 2 * time.Second}},
		{"the largest IPv6 payload", append(slices.Clone(link), "-s", "65527", "fd00::1"),
			pingConfig{dest: netip.MustParseAddr("fd00::1"), size: 65527, interval: time.Second, timeout: 2 * time.Second}},
		{"a destination by name, and its DNS server", append(slices.Clone(link), "-dns", "10.0.0.1", "-dns", "[fd00::1]:5353", "-search", "lan", "printer"),
			pingConfig{name: "printer", size: 56, interval: time.Second, timeout: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parsePing(tt.args)
			if err != nil {
				t.Fatalf("parsePing(%q): %v", tt.args, err)
			}
			if c.dest != tt.want.dest || c.name != tt.want.name || c.count != tt.want.count || c.size != tt.want.size ||
				c.interval != tt.want.interval || c.timeout != tt.want.timeout {
				t.Errorf("parsePing(%q) = dest %v -c %d -s %d -i %v -W %v; want dest %v -c %d -s %d -i %v -W %v",
					tt.args, c.dest, c.count, c.size, c.interval, c.timeout,
					tt.want.dest, tt.want.count, tt.want.size, tt.want.interval, tt.want.timeout)
			}
			if c.link.tap == "" || len(c.link.addrs) == 0 {
				t.Errorf("parsePing(%q) lost the link flags: %+v", tt.args, c.link)
			}
		})
	}
}

func TestPingRejectsBadFlagsWithExitCode2(t *testing.T) {
	link := []string{"-tap", "tap0", "-addr", "10.0.0.2/24"}
	with := func(extra ...string) []string { return append(slices.Clone(link), extra...) }
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no DEST", link, "missing DEST"},
		{"two DESTs", with("10.0.0.1", "10.0.0.3"), `unexpected argument "10.0.0.3"`},
		{"DEST by name without a DNS server", with("printer.lan"), "give -dns, the DNS server to ask, -addr dhcp, or -host printer.lan=ADDR"},
		{"DEST neither an address nor a name", with("printer lan"), "nor a host name"},
		{"a DNS server that is no address", with("-dns", "dns.lan", "10.0.0.1"), `invalid value "dns.lan" for flag -dns`},
		{"a multicast DNS server", with("-dns", "224.0.0.251", "10.0.0.1"), "multicast"},
		{"DEST the IPv6 loopback", with("::1"), "loopback"},
		{"DEST IPv6 without IPv6", with("-no-ipv6", "fd00::1"), "-no-ipv6 turns IPv6 off"},
		{"DEST with a zone not link-local", with("fd00::1%tap0"), "a zone is for link-local"},
		{"IPv6 size beyond one datagram", with("-s", "65528", "fd00::1"), "-s 65528 is outside 0..65527"},
		{"DEST broadcast", with("255.255.255.255"), "limited broadcast"},
		{"no TAP", []string{"-addr", "10.0.0.2/24", "10.0.0.1"}, "-tap is required"},
		{"no address, IPv4 only", []string{"-tap", "t", "-no-ipv6", "10.0.0.1"}, "-addr is required"},
		{"an IPv4 DEST with IPv6 addresses only", []string{"-tap", "t", "-addr", "fd00::2/64", "10.0.0.1"}, "-addr is required for an IPv4 DEST"},
		{"negative count", with("-c", "-1", "10.0.0.1"), "-c -1 is negative"},
		{"negative size", with("-s", "-1", "10.0.0.1"), "-s -1 is outside 0..65507"},
		{"size beyond one datagram", with("-s", "65508", "10.0.0.1"), "-s 65508 is outside 0..65507"},
		{"zero timeout", with("-W", "0", "10.0.0.1"), "-W 0"},
		{"negative interval", with("-i", "-1", "10.0.0.1"), "must not be negative"},
		{"interval not a duration", with("-i", "often", "10.0.0.1"), "not a duration"},
		{"bad MTU", with("-mtu", "40", "10.0.0.1"), "-mtu 40"},
		{"unknown flag", with("-f", "10.0.0.1"), "flag provided but not defined: -f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"ping"}, tt.args...), tt.want)
		})
	}
}

func TestDemoFlags(t *testing.T) {
	c, err := parseDemo([]string{"-mem"})
	if err != nil || !c.mem {
		t.Errorf("parseDemo(-mem) = %+v, %v; want mem", c, err)
	}
	c, err = parseDemo(nil)
	if err != nil || c.mem {
		t.Errorf("parseDemo() = %+v, %v; want the namespace demo", c, err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"positional argument", []string{"now"}, `unexpected argument "now"`},
		{"unknown flag", []string{"-fast"}, "flag provided but not defined: -fast"},
		{"-mem with a bad value", []string{"-mem=maybe"}, "-mem"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"demo"}, tt.args...), tt.want)
		})
	}
}

func TestBytesFlagParsesMemorySizes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true},
		{"67108864", 64 << 20, true},
		{"64K", 64 << 10, true},
		{"64k", 64 << 10, true},
		{"64M", 64 << 20, true},
		{"64MiB", 64 << 20, true},
		{"2G", 2 << 30, true},
		{"2GiB", 2 << 30, true},
		{"100B", 100, true},
		{"0", 0, false},
		{"-1M", 0, false},
		{"M", 0, false},
		{"1.5M", 0, false},
		{"9999999999G", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		var f bytesFlag
		err := f.Set(tt.in)
		if (err == nil) != tt.ok || (tt.ok && int64(f) != tt.want) {
			t.Errorf("bytesFlag.Set(%q) = %d, %v; want %d, ok %v", tt.in, f, err, tt.want, tt.ok)
		}
	}
}

func TestSecondsFlagTakesSecondsOrGoDurations(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1", time.Second, true},
		{"0.2", 200 * time.Millisecond, true},
		{"0", 0, true},
		{"250ms", 250 * time.Millisecond, true},
		{"1m", time.Minute, true},
		{"-1", 0, false},
		{"-5ms", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		var f secondsFlag
		err := f.Set(tt.in)
		if (err == nil) != tt.ok || (tt.ok && time.Duration(f) != tt.want) {
			t.Errorf("secondsFlag.Set(%q) = %v, %v; want %v, ok %v", tt.in, time.Duration(f), err, tt.want, tt.ok)
		}
	}
}

func TestMACFlagKeepsTheAddress(t *testing.T) {
	var f macFlag
	if err := f.Set("02:00:5E:10:00:01"); err != nil {
		t.Fatal(err)
	}
	if want := (net.HardwareAddr{2, 0, 0x5e, 0x10, 0, 1}); net.HardwareAddr(f).String() != want.String() {
		t.Errorf("macFlag = %v, want %v", net.HardwareAddr(f), want)
	}
}

func TestParseInterspersedSeparatesFlagsFromArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		pos  []string
		c    int
	}{
		{"flags first", []string{"-c", "3", "a"}, []string{"a"}, 3},
		{"flags last", []string{"a", "-c", "3"}, []string{"a"}, 3},
		{"flags between", []string{"a", "-c", "3", "b"}, []string{"a", "b"}, 3},
		{"after -- everything is an argument", []string{"a", "--", "-c", "3"}, []string{"a", "-c", "3"}, 0},
		{"nothing", nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFlagSet("test")
			c := fs.Int("c", 0, "")
			pos, err := parseInterspersed(fs, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pos, tt.pos) || *c != tt.c {
				t.Errorf("parseInterspersed(%q) = %q with -c %d, want %q with -c %d", tt.args, pos, *c, tt.pos, tt.c)
			}
		})
	}
}

func TestImpairWithoutSeedGetsARandomSeedItReports(t *testing.T) {
	seeds := map[uint64]bool{}
	for range 3 {
		c, err := parseUp([]string{"-tap", "t", "-addr", "10.0.0.2/24", "-impair", "loss=0.1"})
		if err != nil {
			t.Fatal(err)
		}
		seeds[c.link.fault.Seed] = true
		line := c.link.describeImpairment("up")
		if want := fmt.Sprintf("seed=%d", c.link.fault.Seed); !strings.Contains(line, want) || !strings.Contains(line, "loss=0.1") {
			t.Errorf("impairment line %q does not give loss=0.1 and %s", line, want)
		}
	}
	if len(seeds) < 2 {
		t.Errorf("three runs without a seed all used seed %v", seeds)
	}
}
