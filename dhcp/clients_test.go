package dhcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// The real clients: the kernel side of a TAP in a test namespace plays the
// guest, and ISC dhclient, busybox udhcpc and dhcpcd each get a lease from
// the server on the GoNet side (slirp4netns's addresses: GoNet is
// 10.0.2.2), configure the interface from it with testdata/client-script.sh,
// and then the kernel pings GoNet. Every client runs in the foreground with
// its configuration, leases and pid files in a temporary directory, so
// nothing of the machine's own network configuration is read or touched.

const (
	// clientMTU is the MTU the server gives, below the link's 1500, so
	// that the test sees the client apply it.
	clientMTU    = 1400
	clientWait   = 40 * time.Second
	gatewayLease = "10.0.2.100"
)

var gatewayAddr = netip.MustParsePrefix("10.0.2.2/24")

// guest is a GoNet stack serving DHCP on a TAP whose kernel side, in ns,
// has no address yet.
type guest struct {
	ns  *netns.NS
	dev string
	srv *dhcp.Server
	dir string // the client's state, and the script's records
}

// newGuest sets up a guest; a zero lease is the server's default.
func newGuest(t *testing.T, offload bool, lease time.Duration) *guest {
	t.Helper()
	ns := netnstest.New(t)
	g := &guest{ns: ns, dev: netns.DeviceName(), dir: t.TempDir()}
	var ep *tap.Endpoint
	err := ns.Do(func() error {
		var err error
		ep, err = tap.Open(g.dev, tap.Options{MTU: 1500, Offload: offload})
		return err
	})
	if err != nil {
		t.Fatalf("open TAP in %s: %v", ns, err)
	}
	if _, err := ns.IP(context.Background(), "link", "set", "dev", g.dev, "up"); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	s := stack.New(stack.Config{})
	t.Cleanup(func() { stacktest.Closed(t, s) })
	if err := s.AddNIC(g.dev, ep); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAddress(g.dev, gatewayAddr); err != nil {
		t.Fatal(err)
	}
	g.srv, err = dhcp.NewServer(dhcp.Config{MTU: clientMTU, LeaseTime: lease})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), dhcp.ServerPort))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.srv.Serve(c) }()
	t.Cleanup(func() {
		c.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return g
}

// testdata returns the absolute path of a file in testdata.
func testdata(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// proc is a client running in the namespace.
type proc struct {
	name string
	done chan struct{} // closed when it exited, with err set
	err  error
}

// start runs a client in the namespace, killed when the test ends.
func (g *guest) start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientWait)
	cmd := g.ns.Command(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := os.Create(filepath.Join(g.dir, "output"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(g.dir, "output"))
			t.Logf("%s said:\n%s", name, b)
		}
	})
	return p
}

// waitBound waits for the script's record of the event that configured the
// interface, and returns the environment the client gave the script.
func (g *guest) waitBound(t *testing.T, events ...string) map[string]string {
	t.Helper()
	deadline := time.Now().Add(clientWait)
	for {
		for _, ev := range events {
			if b, err := os.ReadFile(filepath.Join(g.dir, "env."+ev)); err == nil {
				env := map[string]string{}
				for l := range strings.Lines(string(b)) {
					if k, v, ok := strings.Cut(strings.TrimSuffix(l, "\n"), "="); ok {
						env[k] = v
					}
				}
				return env
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v after %v", events, clientWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkConfigured checks the kernel side as the client left it: the
// leased address, the MTU and the default route from the reply; then that
// the kernel reaches GoNet.
func (g *guest) checkConfigured(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	// The script runs in the client's time: wait for the route, its last
	// step.
	var routes string
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := g.ns.IP(ctx, "-4", "route", "show", "default")
		if err != nil {
			t.Fatal(err)
		}
		routes = string(out)
		if strings.Contains(routes, "via 10.0.2.2") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(routes, "default via 10.0.2.2 dev "+g.dev) {
		t.Errorf("default route %q, want via 10.0.2.2 dev %s", routes, g.dev)
	}
	out, err := g.ns.IP(ctx, "-j", "addr", "show", "dev", g.dev)
	if err != nil {
		t.Fatal(err)
	}
	var links []struct {
		MTU   int `json:"mtu"`
		Addrs []struct {
			Family string `json:"family"`
			Local  string `json:"local"`
			Prefix int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j addr show: %v: %s", err, out)
	}
	var addrs []string
	for _, a := range links[0].Addrs {
		if a.Family == "inet" {
			addrs = append(addrs, fmt.Sprintf("%s/%d", a.Local, a.Prefix))
		}
	}
	if len(addrs) != 1 || addrs[0] != gatewayLease+"/24" {
		t.Errorf("addresses %v, want %s/24", addrs, gatewayLease)
	}
	if links[0].MTU != clientMTU {
		t.Errorf("MTU %d, want %d from the lease", links[0].MTU, clientMTU)
	}
	if b, err := g.ns.Run(ctx, "ping", "-c", "1", "-W", "5", "10.0.2.2"); err != nil {
		t.Errorf("the kernel cannot ping GoNet: %v: %s", err, b)
	}
	if l := g.srv.Leases(); len(l) != 1 || l[0].Addr.String() != gatewayLease {
		t.Errorf("server's leases %+v, want one of %s", l, gatewayLease)
	}
}

// checkEnv checks what the client told its script about the lease.
func checkEnv(t *testing.T, env map[string]string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if env[k] != v {
			t.Errorf("the client gave the script %s=%q, want %q", k, env[k], v)
		}
	}
}

// forEachLink runs a client's test on a TAP with the offloads a gateway
// uses (the kernel then sees partial checksums on the server's replies,
// which clients reading from packet sockets must take) and without.
func forEachLink(t *testing.T, tool string, fn func(t *testing.T, g *guest)) {
	netnstest.RequireTool(t, tool)
	for _, offload := range []bool{true, false} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			fn(t, newGuest(t, offload, 0))
		})
	}
}

// dhclient runs it in the foreground (-d), where it stays once bound, to
// renew: the test kills it. -1 makes it try once.
func (g *guest) dhclient(t *testing.T) *proc {
	t.Helper()
	return g.start(t, nil, "dhclient", "-4", "-d", "-1", "-v",
		"-sf", testdata(t, "client-script.sh"), "-e", "GONET_DHCP_DIR="+g.dir,
		"-cf", testdata(t, "dhclient.conf"),
		"-lf", filepath.Join(g.dir, "dhclient.leases"), "-pf", filepath.Join(g.dir, "dhclient.pid"),
		g.dev)
}

// udhcpc runs it in the foreground (-f); -n makes it quit if no lease
// comes, more (-q) once bound; -O mtu asks for the interface MTU besides
// the defaults.
func (g *guest) udhcpc(t *testing.T, more ...string) *proc {
	t.Helper()
	args := append([]string{"-i", g.dev, "-f", "-n", "-t", "5", "-T", "3", "-O", "mtu",
		"-s", testdata(t, "client-script.sh")}, more...)
	return g.start(t, []string{"GONET_DHCP_DIR=" + g.dir}, "udhcpc", args...)
}

// dhcpcd runs it in the foreground (-B), more (--oneshot) added.
// dhcpcd keeps its leases in /var/lib/dhcpcd and its sockets in /run,
// paths built in: inside the mount namespace `ip netns exec` gives it, they
// are bind mounts of the test's directory.
func (g *guest) dhcpcd(t *testing.T, more ...string) *proc {
	t.Helper()
	for _, d := range []string{"db", "run"} {
		if err := os.Mkdir(filepath.Join(g.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := `mount --bind "$1/db" /var/lib/dhcpcd && mount --bind "$1/run" /run && shift && exec dhcpcd "$@"`
	args := append([]string{"-c", script, "sh", g.dir,
		"--nobackground", "--ipv4only", "--timeout", "30",
		"--config", testdata(t, "dhcpcd.conf"), "--script", testdata(t, "client-script.sh"),
		"--env", "GONET_DHCP_DIR=" + g.dir}, more...)
	return g.start(t, nil, "sh", append(args, g.dev)...)
}

func TestISCDhclient(t *testing.T) {
	forEachLink(t, "dhclient", func(t *testing.T, g *guest) {
		g.dhclient(t)
		env := g.waitBound(t, "BOUND")
		checkEnv(t, env, map[string]string{
			"new_ip_address": gatewayLease, "new_subnet_mask": "255.255.255.0", "new_routers": "10.0.2.2",
			"new_domain_name_servers": "10.0.2.3", "new_interface_mtu": fmt.Sprint(clientMTU),
			"new_dhcp_server_identifier": "10.0.2.2", "new_dhcp_lease_time": "3600",
		})
		g.checkConfigured(t)
	})
}

func TestBusyboxUdhcpc(t *testing.T) {
	forEachLink(t, "udhcpc", func(t *testing.T, g *guest) {
		p := g.udhcpc(t, "-q")
		env := g.waitBound(t, "bound")
		checkEnv(t, env, map[string]string{
			"ip": gatewayLease, "subnet": "255.255.255.0", "router": "10.0.2.2", "dns": "10.0.2.3",
			"mtu": fmt.Sprint(clientMTU), "serverid": "10.0.2.2", "lease": "3600",
		})
		p.waitExit(t)
		g.checkConfigured(t)
	})
}

func TestDhcpcd(t *testing.T) {
	forEachLink(t, "dhcpcd", func(t *testing.T, g *guest) {
		p := g.dhcpcd(t, "--oneshot")
		env := g.waitBound(t, "BOUND")
		checkEnv(t, env, map[string]string{
			"new_ip_address": gatewayLease, "new_subnet_mask": "255.255.255.0", "new_routers": "10.0.2.2",
			"new_domain_name_servers": "10.0.2.3", "new_interface_mtu": fmt.Sprint(clientMTU),
			"new_dhcp_server_identifier": "10.0.2.2", "new_dhcp_lease_time": "3600",
		})
		p.waitExit(t)
		g.checkConfigured(t)
	})
}

// waitExit waits for a one-shot client to exit by itself, successfully.
func (p *proc) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s exited: %v", p.name, p.err)
		}
	case <-time.After(clientWait):
		t.Errorf("%s did not exit once bound", p.name)
	}
}

// Each client renews its lease at T1 (RFC 2131 section 4.4.5): a REQUEST
// with ciaddr unicast to the server, answered by an ACK unicast to the
// client's new address, which the client reports to its script as a
// renewal of the same address. The lease is short for the test, but long
// enough that no client raises it to a floor of its own; the clients wait
// in parallel.
func TestRealClientsRenew(t *testing.T) {
	const lease = 20 * time.Second
	for _, tt := range []struct {
		tool        string
		run         func(g *guest, t *testing.T) *proc
		bound, renw string
		addrVar     string
	}{
		{"dhclient", func(g *guest, t *testing.T) *proc { return g.dhclient(t) }, "BOUND", "RENEW", "new_ip_address"},
		{"udhcpc", func(g *guest, t *testing.T) *proc { return g.udhcpc(t) }, "bound", "renew", "ip"},
		{"dhcpcd", func(g *guest, t *testing.T) *proc { return g.dhcpcd(t) }, "BOUND", "RENEW", "new_ip_address"},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			netnstest.RequireTool(t, tt.tool)
			t.Parallel()
			g := newGuest(t, true, lease)
			tt.run(g, t)
			g.waitBound(t, tt.bound)
			first := g.srv.Leases()
			env := g.waitBound(t, tt.renw)
			if env[tt.addrVar] != gatewayLease {
				t.Errorf("renewed %s=%q, want %s", tt.addrVar, env[tt.addrVar], gatewayLease)
			}
			l := g.srv.Leases()
			if len(first) != 1 || len(l) != 1 || !l[0].Expiry.After(first[0].Expiry) {
				t.Errorf("leases %+v after the renewal, %+v before: want one, extended", l, first)
			}
			s := &g.srv.Stats
			if s.OutAcks.Load() < 2 || s.OutNaks.Load() != 0 {
				t.Errorf("%d ACKs and %d NAKs sent, want at least 2 and none", s.OutAcks.Load(), s.OutNaks.Load())
			}
			g.checkConfigured(t)
		})
	}
}
