package main

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gonetstack/gonet/gateway"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/stack"
)

// The daemon itself runs in integration/gateway_daemon_test.go, against
// the kernel in namespaces; these pin down its command lines.

func TestGatewayFlagsTakeSlirp4netnsDefaults(t *testing.T) {
	c, err := parseGateway([]string{"-tap", "tap0"})
	if err != nil {
		t.Fatal(err)
	}
	if c.subnet != gateway.DefaultSubnet || c.prefix6 != gateway.DefaultPrefix6 || c.noIPv6 || c.link.mtu != gatewayMTU || c.maxFlows != 4096 ||
		c.configure || c.netns != "" || c.noHostLoopback || c.dnsUpstream.IsValid() || c.link.impair != "" {
		t.Errorf("defaults: %+v", c)
	}
}

func TestGatewayFlagsParse(t *testing.T) {
	c, err := parseGateway([]string{"-tap", "gn0", "-netns", "/run/netns/guest", "-configure", "-mtu", "1500",
		"-subnet", "10.8.0.0/16", "-forward", "tcp:8080:80", "-forward", "udp:127.0.0.1:5353:53",
		"-deny", "192.168.1.7/16", "-deny", "10.1.0.0/24", "-deny", "2001:db8::1/32", "-no-host-loopback",
		"-ipv6-prefix", "fd12:3456::7/64",
		"-dns-upstream", "10.1.2.3:5300", "-max-flows", "100", "-tap-spin", "20us"})
	if err != nil {
		t.Fatal(err)
	}
	wantFwd := []gateway.Forward{
		{Proto: gateway.TCP, Host: netip.MustParseAddrPort("0.0.0.0:8080"), GuestPort: 80},
		{Proto: gateway.UDP, Host: netip.MustParseAddrPort("127.0.0.1:5353"), GuestPort: 53},
	}
	wantDeny := []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("10.1.0.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	switch {
	case c.link.tap != "gn0" || c.netns != "/run/netns/guest" || !c.configure || c.link.mtu != 1500 || c.link.tapSpin != 20*time.Microsecond:
		t.Errorf("link flags: %+v", c)
	case c.subnet != netip.MustParsePrefix("10.8.0.0/16"):
		t.Errorf("-subnet: %v", c.subnet)
	case c.prefix6 != netip.MustParsePrefix("fd12:3456::/64") || c.noIPv6:
		t.Errorf("-ipv6-prefix: %v (masked), -no-ipv6 %v", c.prefix6, c.noIPv6)
	case !slices.Equal(c.forwards, wantFwd):
		t.Errorf("-forward: %v, want %v", c.forwards, wantFwd)
	case !slices.Equal(c.deny, wantDeny):
		t.Errorf("-deny: %v, want %v (masked)", c.deny, wantDeny)
	case !c.noHostLoopback || c.dnsUpstream != netip.MustParseAddrPort("10.1.2.3:5300") || c.maxFlows != 100:
		t.Errorf("flags: %+v", c)
	}
}

func TestGatewayFlagsRefuse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"-tap", "gn%d"}, "not a pattern"},
		{[]string{"-tap", "a-name-far-too-long"}, "at most 15"},
		{[]string{"-tap", "gn0", "-mtu", "65535"}, "outside 68..65520"},
		{[]string{"-tap", "gn0", "-subnet", "10.0.2.0/26"}, "too small"},
		{[]string{"-tap", "gn0", "-subnet", "fd00::/64"}, "not IPv4"},
		{[]string{"-tap", "gn0", "-forward", "tcp:80"}, "wrong number of fields"},
		{[]string{"-tap", "gn0", "-deny", "10.0.0.1"}, "not a network"},
		{[]string{"-tap", "gn0", "-ipv6-prefix", "fd00::/48"}, "not a /64"},
		{[]string{"-tap", "gn0", "-ipv6-prefix", "fe80::/64"}, "not a unicast prefix a router advertises"},
		{[]string{"-tap", "gn0", "-ipv6-prefix", "10.0.2.0/24"}, "not IPv6"},
		{[]string{"-tap", "gn0", "-dns-upstream", "10.0.0.1:x"}, "not a port"},
		{[]string{"-tap", "gn0", "-max-flows", "0"}, "at least 1"},
		{[]string{"-tap", "gn0", "-configure"}, "needs -netns"},
		{[]string{"-tap", "gn0", "-impair", "loss=2"}, "-impair"},
		{[]string{"-tap", "gn0", "extra"}, "unexpected argument"},
	} {
		_, err := parseGateway(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gonet gateway %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

func TestRunTakesTheCommandAfterDashes(t *testing.T) {
	c, argv, err := parseRun([]string{"-mtu", "1500", "--", "curl", "-s", "http://example.org/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.link.tap != "tap0" || c.link.mtu != 1500 || !slices.Equal(argv, []string{"curl", "-s", "http://example.org/"}) {
		t.Errorf("gonet run: %+v, %q", c, argv)
	}
	for _, args := range [][]string{{"curl"}, {"--"}, {}, {"-netns", "1", "--", "true"}, {"-configure", "--", "true"}} {
		if _, _, err := parseRun(args); err == nil {
			t.Errorf("gonet run %q: no error", args)
		}
	}
}

func TestRunExitStatusIsTheCommands(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   int
	}{{"exit 0", 0}, {"exit 3", 3}, {"kill -TERM $$", 128 + 15}} {
		if got := exitStatus(exec.Command("sh", "-c", tc.script).Run()); got != tc.want {
			t.Errorf("sh -c %q: status %d, want %d", tc.script, got, tc.want)
		}
	}
}

func TestForwardSpecForRemoveNeedsNoGuestPort(t *testing.T) {
	for _, tc := range []struct{ spec, host string }{
		{"tcp:127.0.0.1:8022", "127.0.0.1:8022"},
		{"tcp:[::1]:8022", "[::1]:8022"},
		{"tcp:8022", "0.0.0.0:8022"},
	} {
		f, err := parseForwardSpec(tc.spec, true)
		if err != nil || f.Proto != gateway.TCP || f.Host != netip.MustParseAddrPort(tc.host) {
			t.Errorf("remove %s: %v, %v", tc.spec, f, err)
		}
		if _, err := parseForwardSpec(tc.spec, false); err == nil {
			t.Errorf("add %s (no guest port): no error", tc.spec)
		}
	}
}

func TestGatewaySocketFlags(t *testing.T) {
	c, err := parseGateway([]string{"-socket", "/tmp/vm.sock", "-mtu", "1500"})
	if err != nil {
		t.Fatal(err)
	}
	if c.link.socket != "/tmp/vm.sock" || c.link.tap != "" || c.link.mtu != 1500 {
		t.Errorf("gonet gateway -socket: %+v", c.link)
	}
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{}, "-tap or -socket is required"},
		{[]string{"-tap", "gn0", "-socket", "/tmp/vm.sock"}, "two links"},
		{[]string{"-socket", "/tmp/vm.sock", "-netns", "1"}, "-netns is for a TAP device"},
		{[]string{"-socket", "/tmp/vm.sock", "-configure"}, "-configure is for a TAP device"},
	} {
		if _, err := parseGateway(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gonet gateway %v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if _, _, err := parseRun([]string{"-socket", "/tmp/vm.sock", "--", "true"}); err == nil {
		t.Error("gonet run -socket: no error (run makes its own TAP device)")
	}
}

// A VM on -socket (here a GoNet stack on the stream link's other end, as
// QEMU would connect) reaches the host through the gateway: its TCP
// connection to the gateway's address is relayed to the host's loopback.
// No privilege is needed.
func TestGatewayServesAVMOnASocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vm.sock")
	c, err := parseGateway([]string{"-socket", path, "-mtu", "1500", "-control", noControl,
		"-dns-upstream", "127.0.0.1:1", // never asked: nothing here resolves a name
		"-metrics", ":0"})
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	d, err := startGateway(context.Background(), c.log.logger(&stderr), c, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.stop(); err != nil {
			t.Errorf("stopping the gateway: %v", err)
		}
	}()
	if d.host.nic != socketNIC {
		t.Errorf("the NIC is %q, want %q", d.host.nic, socketNIC)
	}

	hostLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	go func() {
		for {
			conn, err := hostLn.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				io.Copy(conn, conn)
			}()
		}
	}()

	ep, err := stream.Dial(path, stream.Options{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	vm := stack.New(stack.Config{})
	defer vm.Close()
	if err := vm.AddNIC("eth0", ep); err != nil {
		t.Fatal(err)
	}
	if err := vm.AddAddress("eth0", netip.MustParsePrefix("10.0.2.100/24")); err != nil {
		t.Fatal(err)
	}
	if err := vm.SetDefaultGateway(d.net.Gateway, "eth0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	port := hostLn.Addr().(*net.TCPAddr).Port
	conn, err := vm.DialContext(ctx, "tcp", netip.AddrPortFrom(d.net.Gateway, uint16(port)).String())
	if err != nil {
		t.Fatalf("the VM dials the host's loopback through the gateway: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	msg := strings.Repeat("relayed for a VM on a socket. ", 10000)
	go io.WriteString(conn, msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != msg {
		t.Fatalf("echo of %d bytes through the gateway: %v", len(msg), err)
	}
	if n := d.gw.Stats.Relay.TCPFlows.Load(); n != 1 {
		t.Errorf("Gateway.Relay.TCPFlows = %d, want 1", n)
	}

	// Prometheus on the host scrapes -metrics, on the loopback.
	if !strings.HasPrefix(d.metricsAddr.String(), "127.0.0.1:") {
		t.Fatalf("-metrics :0 listens on %v, want the loopback", d.metricsAddr)
	}
	if want := `msg="serving Prometheus metrics" url=http://` + d.metricsAddr.String() + "/metrics\n"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not say %q", stderr.String(), want)
	}
	// The relay counts what it wrote to the host once the write returns,
	// which may be after the echo came back.
	for deadline := time.Now().Add(5 * time.Second); d.gw.Stats.Relay.BytesToHost.Load() < uint64(len(msg)) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	fams := scrape(t, "http://"+d.metricsAddr.String()+"/metrics")
	for _, tt := range []struct {
		name string
		typ  dto.MetricType
		nic  string
		min  float64
	}{
		{"gonet_gateway_relay_tcp_flows_total", dto.MetricType_COUNTER, "", 1},
		{"gonet_gateway_relay_to_host_bytes_total", dto.MetricType_COUNTER, "", float64(len(msg))},
		{"gonet_gateway_relay_tcp_active", dto.MetricType_GAUGE, "", 0},
		{"gonet_dns_queries_total", dto.MetricType_COUNTER, "", 0},
		{"gonet_dhcp_out_acks_total", dto.MetricType_COUNTER, "", 0},
		{"gonet_tcp_passive_opens_total", dto.MetricType_COUNTER, "", 1},
		{"gonet_nic_rx_frames_total", dto.MetricType_COUNTER, socketNIC, 1},
		{"gonet_memory_used_bytes", dto.MetricType_GAUGE, "", 0},
	} {
		f := fams[tt.name]
		if f == nil {
			t.Errorf("no %s in the scrape", tt.name)
			continue
		}
		if f.GetType() != tt.typ {
			t.Errorf("%s is a %v, want a %v", tt.name, f.GetType(), tt.typ)
		}
		m := f.GetMetric()[0]
		var nic string
		for _, l := range m.GetLabel() {
			nic = l.GetValue()
		}
		if v := m.GetCounter().GetValue() + m.GetGauge().GetValue(); nic != tt.nic || v < tt.min {
			t.Errorf("%s{nic=%q} = %v, want {nic=%q} at least %v", tt.name, nic, v, tt.nic, tt.min)
		}
	}
}
