package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/wire"
)

// The guest's IPv6 (ipv6.go): a kernel guest configures itself from the
// gateway's router advertisements, and its IPv6 flows are relayed. The
// gateway's ::2 stands for this process's ::1; the denied prefix is the
// documentation one, refused without a host socket.

var denied6 = netip.MustParsePrefix("2001:db8::/32")

// newGatewayRig6 is newGatewayRig once the guest has formed its address in
// the gateway's prefix by SLAAC (guest6) and passed its DAD, and the
// gateway's own addresses have passed theirs.
func newGatewayRig6(t *testing.T, cfg Config) *gatewayRig {
	t.Helper()
	netnstest.RequireTool(t, "ip")
	if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback here for the gateway to relay to: %v", err)
	} else {
		l.Close()
	}
	r := newGatewayRig(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.gw.WaitIPv6(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := r.slaacAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.guest6 = a
	return r
}

// slaacAddr waits for the guest's global address in the gateway's prefix
// to leave DAD, and returns it.
func (r *gatewayRig) slaacAddr(ctx context.Context) (netip.Addr, error) {
	prefix := r.gw.cfg.Network6.Prefix
	for {
		out, err := r.guest.IP(ctx, "-o", "-6", "addr", "show", "dev", "tap0", "scope", "global")
		if err != nil {
			return netip.Addr{}, err
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 || f[2] != "inet6" || strings.Contains(line, "tentative") {
				continue
			}
			if p, err := netip.ParsePrefix(f[3]); err == nil && prefix.Contains(p.Addr()) {
				return p.Addr(), nil
			}
		}
		select {
		case <-ctx.Done():
			return netip.Addr{}, errors.New("the guest formed no address in " + prefix.String() + " by SLAAC: " + string(out))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// dial6 connects from the guest to addr over IPv6.
func (r *gatewayRig) dial6(addr string) (net.Conn, error) {
	var c net.Conn
	err := r.guest.Do(func() (err error) {
		c, err = net.DialTimeout("tcp6", addr, 5*time.Second)
		return err
	})
	return c, err
}

func TestGatewayAdvertisementsConfigureAKernelGuest(t *testing.T) {
	r := newGatewayRig6(t, Config{})
	n := r.gw.cfg.Network6
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr, err := r.slaacAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// RFC 4862 section 5.5.3 d: the prefix, with an interface
	// identifier of the guest's choosing (EUI-64, or RFC 7217's).
	if !n.Prefix.Contains(addr) || addr == n.Gateway || addr == n.DNS {
		t.Errorf("guest address %v: want one of its own in %v", addr, n.Prefix)
	}
	out, err := r.guest.IP(ctx, "-6", "route", "show", "default")
	if err != nil {
		t.Fatal(err)
	}
	ll := ""
	for _, a := range r.s.IPv6().Addresses() {
		if a.Prefix.Addr().IsLinkLocalUnicast() {
			ll = a.Prefix.Addr().WithZone("").String()
		}
	}
	if !strings.Contains(string(out), "via "+ll+" dev tap0") || !strings.Contains(string(out), "proto ra") {
		t.Errorf("guest's default route %q; want via the gateway's link-local %s, from an RA", out, ll)
	}
}

func TestGatewayAdvertisementAsGopacketDecodesIt(t *testing.T) {
	r := newGatewayRig6(t, Config{})
	n := r.gw.cfg.Network6
	// A raw ICMPv6 socket in the guest's namespace sees the
	// advertisements the kernel gets; a solicitation from it brings one.
	var c net.PacketConn
	err := r.guest.Do(func() (err error) {
		c, err = net.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rs := make([]byte, wire.RouterSolicitationLen)
	wire.EncodeRouterSolicitation(rs)
	p := c.(*net.IPConn)
	if err := setHopLimit255(p); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteTo(rs, &net.IPAddr{IP: net.ParseIP("ff02::2"), Zone: "tap0"}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1500)
	for {
		m, _, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		pk := gopacket.NewPacket(buf[:m], layers.LayerTypeICMPv6, gopacket.Default)
		ra, ok := pk.Layer(layers.LayerTypeICMPv6RouterAdvertisement).(*layers.ICMPv6RouterAdvertisement)
		if !ok {
			continue
		}
		if ra.RouterLifetime != 1800 || ra.HopLimit != 64 {
			t.Errorf("router lifetime %d, hop limit %d; want 1800, 64", ra.RouterLifetime, ra.HopLimit)
		}
		var gotPrefix, gotMTU, gotDNS bool
		for _, o := range ra.Options {
			switch o.Type {
			case layers.ICMPv6OptPrefixInfo:
				p := netip.PrefixFrom(netip.AddrFrom16([16]byte(o.Data[14:30])), int(o.Data[0]))
				gotPrefix = p == n.Prefix && o.Data[1]&0xc0 == 0xc0
			case layers.ICMPv6OptMTU:
				gotMTU = binary.BigEndian.Uint32(o.Data[2:]) == uint32(r.tap.MTU())
			case wire.NDOptRDNSS:
				gotDNS = len(o.Data) == 22 && netip.AddrFrom16([16]byte(o.Data[6:22])) == n.DNS
			}
		}
		if !gotPrefix || !gotMTU || !gotDNS {
			t.Errorf("RA options %v: prefix %v on-link and autonomous %v, MTU %d %v, RDNSS %v %v", ra.Options, n.Prefix, gotPrefix, r.tap.MTU(), gotMTU, n.DNS, gotDNS)
		}
		return
	}
}

// setHopLimit255 makes c's multicast datagrams go with hop limit 255, as
// RFC 4861 section 4.1 requires of a solicitation.
func setHopLimit255(c *net.IPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_MULTICAST_HOPS, 255)
	})
	return errors.Join(err, serr)
}

func TestGatewayIPv6TCP(t *testing.T) {
	r := newGatewayRig6(t, Config{Deny: []netip.Prefix{denied6}})
	n := r.gw.cfg.Network6
	port := uint16(echoServer6(t))
	t.Run("the gateway's ::2 reaches the host's ::1, both ways, to the FIN", func(t *testing.T) {
		c, err := r.dial6(netip.AddrPortFrom(n.Gateway, port).String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		echoesToTheFIN(t, c, bytes.Repeat([]byte("gonet gateway over IPv6 "), 50_000), 20*time.Second)
	})
	t.Run("a refused host connect is ECONNREFUSED in the guest", func(t *testing.T) {
		closed := closedPort(t, "tcp6", "[::1]:0")
		if _, err := r.dial6(netip.AddrPortFrom(n.Gateway, closed).String()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial: %v, want ECONNREFUSED", err)
		}
	})
	t.Run("a denied prefix is refused without a host connect", func(t *testing.T) {
		before := r.gw.Stats.TCPConnects.Load()
		if _, err := r.dial6("[2001:db8::1]:80"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial: %v, want ECONNREFUSED", err)
		}
		if n := r.gw.Stats.TCPConnects.Load(); n != before {
			t.Fatalf("%d host connects for a denied destination", n-before)
		}
	})
	t.Run("a port the DNS address does not serve is ECONNREFUSED", func(t *testing.T) {
		if _, err := r.dial6(netip.AddrPortFrom(n.DNS, 80).String()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial: %v, want ECONNREFUSED", err)
		}
	})
}

func TestGatewayIPv6NoHostLoopbackRefuses(t *testing.T) {
	r := newGatewayRig6(t, Config{NoHostLoopback: true})
	dst := netip.AddrPortFrom(r.gw.cfg.Network6.Gateway, uint16(echoServer6(t)))
	if _, err := r.dial6(dst.String()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial: %v, want ECONNREFUSED", err)
	}
}

func TestGatewayIPv6UDP(t *testing.T) {
	r := newGatewayRig6(t, Config{Deny: []netip.Prefix{denied6}})
	srv, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDP(b)
			if err != nil {
				return
			}
			srv.WriteToUDP(bytes.ToUpper(b[:n]), from)
		}
	}()
	port := uint16(srv.LocalAddr().(*net.UDPAddr).Port)
	c, err := r.guest.DialUDP(netip.AddrPortFrom(r.gw.cfg.Network6.Gateway, port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, msg := range []string{"first", "second"} {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 64)
		n, err := c.Read(b)
		if err != nil || string(b[:n]) != strings.ToUpper(msg) {
			t.Fatalf("answer to %q: %q, %v", msg, b[:n], err)
		}
	}
	t.Run("a denied prefix answers administratively prohibited", func(t *testing.T) {
		d, err := r.guest.DialUDP("[2001:db8::1]:53")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		d.SetDeadline(time.Now().Add(5 * time.Second))
		d.Write([]byte("x"))
		// Linux reports ICMPv6 code 1 on a connected socket as EACCES
		// (icmpv6_err_convert).
		if _, err := d.Read(make([]byte, 8)); !errors.Is(err, syscall.EACCES) {
			t.Fatalf("read: %v, want EACCES from ICMPv6 administratively prohibited", err)
		}
	})
}

// The gateway's own addresses answer echo themselves, as 10.0.2.2 does;
// an echo to a foreign address goes to the forwarder hook, which refuses a
// denied one with ICMPv6 administratively prohibited, and relays the
// others through the host (TestHostPinger6; the integration test relays
// one to a namespace behind the gateway's).
func TestGatewayIPv6Ping(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	r := newGatewayRig6(t, Config{Deny: []netip.Prefix{denied6}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gw := r.gw.cfg.Network6.Gateway.String()
	if out, err := r.guest.Run(ctx, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "5", "-s", "1000", gw); err != nil {
		t.Fatalf("ping -6 %s: %v\n%s", gw, err, out)
	}
	out, err := r.guest.Run(ctx, "ping", "-6", "-c", "1", "-W", "5", "2001:db8::1")
	if err == nil || !strings.Contains(string(out), "Administratively prohibited") {
		t.Errorf("ping -6 to a denied prefix: %v\n%s\nwant administratively prohibited", err, out)
	}
	if n := r.s.Counters()["ICMPv6.EchoForwarded"]; n != 1 {
		t.Errorf("ICMPv6.EchoForwarded = %d, want the denied echo only", n)
	}
}

func TestHostPinger6(t *testing.T) {
	for _, tt := range []struct {
		pingSockets bool
		kind        string
	}{
		{true, "ping socket"},
		{false, "raw socket"},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			ns := pingNS(t, tt.pingSockets)
			var p hostPinger
			if err := ns.Do(func() (err error) { p, err = newHostPinger(pingIPv6); return err }); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.close() })
			if p.kind() != tt.kind {
				t.Fatalf("pinger is a %s, want a %s", p.kind(), tt.kind)
			}
			t.Run("an answered echo returns the reply's data", func(t *testing.T) {
				data := []byte("gonet ping6 data")
				a, err := echoIn(ns, p, 5*time.Second, "::1", 7, data)
				if err != nil || a.isError || !bytes.Equal(a.data, data) {
					t.Fatalf("echo = %+v, %v; want the reply with %q", a, err, data)
				}
			})
			t.Run("no route is ICMPv6 no route to destination", func(t *testing.T) {
				a, err := echoIn(ns, p, 5*time.Second, "2001:db8::1", 1, nil)
				if err != nil || !a.isError || a.errType != wire.ICMPv6DestUnreach || a.errCode != wire.ICMPv6CodeNoRoute {
					t.Fatalf("echo = %+v, %v; want destination unreachable, no route", a, err)
				}
			})
		})
	}
}
