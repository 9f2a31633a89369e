package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// The gateway's IPv6 (issue 12) at the daemon's level, on the world of
// gateway_daemon_test.go with IPv6 added: the veth between the host and
// internet namespaces carries fd77::/64 too, and a second dnsmasq in the
// internet namespace answers on fd77::2 with an AAAA record. The guest is
// the kernel, configured by nothing but the gateway's router
// advertisements: SLAAC for its address, the gateway's link-local address
// for its default route.

var (
	hostVeth6 = "fd77::1/64"
	inet6     = "fd77::2"
)

// withIPv6 adds IPv6 to the world's veth (without DAD: the test's own
// link) and starts the dnsmasq that answers for www.gonet.test on fd77::2
// with both families' addresses.
func (w *gwWorld) withIPv6(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.host.IP(ctx, "-6", "addr", "add", hostVeth6, "dev", "veth0", "nodad"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.inet.IP(ctx, "-6", "addr", "add", inet6+"/64", "dev", "veth1", "nodad"); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithCancel(context.Background())
	dnsmasq := w.inet.Command(dctx, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
		"--no-resolv", "--no-hosts", "--listen-address="+inet6, "--bind-interfaces",
		"--pid-file=", "--log-facility=-", "--local=/test/",
		"--address=/www.gonet.test/"+inetAddr, "--address=/www.gonet.test/"+inet6)
	if err := dnsmasq.Start(); err != nil {
		dcancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { dcancel(); dnsmasq.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := w.inet.Run(context.Background(), "dig", "+short", "+tries=1", "+time=1", "@"+inet6, "AAAA", "www.gonet.test")
		if strings.TrimSpace(string(out)) == inet6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq on %s in %s does not answer: %s", inet6, w.inet, out)
		}
	}
}

// serveStream6 serves /stream/N (payload(streamSeed, N)) over HTTP on
// addr, an IPv6 literal with port 0, in ns, and returns where.
func serveStream6(t *testing.T, do func(func() error) error, addr string) string {
	t.Helper()
	var ln net.Listener
	if err := do(func() (err error) { ln, err = net.Listen("tcp6", addr); return err }); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream/{size}", func(rw http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("size"), 10, 64)
		if err != nil || n < 0 {
			http.Error(rw, "size: not a byte count", http.StatusBadRequest)
			return
		}
		rw.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		io.Copy(rw, payload(streamSeed, n))
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// guestSLAAC waits for the guest to form an address in prefix by SLAAC and
// finish its DAD, and returns it.
func (w *gwWorld) guestSLAAC(t *testing.T, prefix netip.Prefix) netip.Addr {
	t.Helper()
	var out []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		out, err = w.guest.IP(context.Background(), "-o", "-6", "addr", "show", "dev", gwGuestTAP, "scope", "global")
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(out)) {
			f := strings.Fields(l)
			if len(f) < 4 || f[2] != "inet6" || strings.Contains(l, "tentative") {
				continue
			}
			if p, err := netip.ParsePrefix(f[3]); err == nil && prefix.Contains(p.Addr()) {
				return p.Addr()
			}
		}
	}
	t.Fatalf("the guest formed no address in %v by SLAAC from the gateway's advertisements: %s", prefix, out)
	return netip.Addr{}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestGatewayDaemonIPv6(t *testing.T) {
	netnstest.RequireTool(t, "sysctl")
	bin := buildGonet(t)
	w := newGWWorld(t, bin)
	w.withIPv6(t)
	prefix := netip.MustParsePrefix("fd00::/64")
	d := w.start(t, "-configure", "-mtu", "1500", "-dns-upstream", "["+inet6+"]:53", "-deny", "2001:db8::/32")
	addr := w.guestSLAAC(t, prefix)
	t.Logf("the guest's address by SLAAC: %v", addr)

	t.Run("the guest routes through the gateway's link-local address, as advertised", func(t *testing.T) {
		out := w.mustGuest(t, 5*time.Second, "ip", "-6", "route", "show", "default")
		if !strings.Contains(out, "via fe80::") || !strings.Contains(out, "dev "+gwGuestTAP) || !strings.Contains(out, "proto ra") {
			t.Errorf("guest's default route %q; want one via a link-local address on %s from a router advertisement", out, gwGuestTAP)
		}
		// The advertised MTU option sets the link's IPv6 MTU.
		mtu := strings.TrimSpace(w.mustGuest(t, 5*time.Second, "sysctl", "-n", "net.ipv6.conf."+gwGuestTAP+".mtu"))
		if mtu != "1500" {
			t.Errorf("guest's IPv6 MTU on %s %s, want the advertised 1500", gwGuestTAP, mtu)
		}
	})
	t.Run("ping -6 the gateway and, relayed, the internet", func(t *testing.T) {
		w.mustGuest(t, 10*time.Second, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "3", "fd00::2")
		w.mustGuest(t, 10*time.Second, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "3", "-s", "1200", inet6)
		out, err := w.guestRun(10*time.Second, "ping", "-6", "-c", "1", "-W", "3", "2001:db8::1")
		if err == nil || !strings.Contains(out, "Administratively prohibited") {
			t.Errorf("ping -6 to a denied network: %v\n%s\nwant administratively prohibited", err, out)
		}
	})
	t.Run("curl -6 through fd00::2 to the host's ::1 and to the internet, SHA-256 checked", func(t *testing.T) {
		const n = 32 << 20
		local := serveStream6(t, w.host.Do, "[::1]:0")
		_, port, _ := net.SplitHostPort(local)
		remote := serveStream6(t, w.inet.Do, "["+inet6+"]:0")
		for _, url := range []string{"http://[fd00::2]:" + port, "http://" + remote} {
			got := filepath.Join(w.dir, "got6")
			w.mustGuest(t, 60*time.Second, "curl", "-6", "-sSf", "-o", got, fmt.Sprintf("%s/stream/%d", url, n))
			if a, b := sha256File(t, got), streamSHA256(n); a != b {
				t.Errorf("curl -6 %s: SHA-256 %s, served %s", url, a, b)
			}
		}
	})
	t.Run("no route on the host is ICMPv6 no route in the guest", func(t *testing.T) {
		// 3fff::/20 (RFC 9637, documentation): the host namespace has no
		// route to it, so the host's connect fails at once, and nothing
		// leaves the test's namespaces.
		_, err := w.guestDial("tcp6", "[3fff::1]:80", 10*time.Second)
		if !errors.Is(err, syscall.ENETUNREACH) {
			t.Errorf("guest's connect: %v, want ENETUNREACH from ICMPv6 destination unreachable, no route", err)
		}
	})
	t.Run("a UDP exchange with the internet", func(t *testing.T) {
		var srv net.PacketConn
		if err := w.inet.Do(func() (err error) { srv, err = net.ListenPacket("udp6", "["+inet6+"]:0"); return err }); err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		go func() {
			b := make([]byte, 65536)
			for {
				n, from, err := srv.ReadFrom(b)
				if err != nil {
					return
				}
				srv.WriteTo([]byte(strings.ToUpper(string(b[:n]))), from)
			}
		}()
		c := w.mustGuestDial(t, "udp6", srv.LocalAddr().String())
		for _, size := range []int{1, 1400, 30000} {
			msg := []byte(strings.Repeat("g", size))
			want := strings.ToUpper(string(msg))
			if err := udpExchange(c, msg, func(b []byte) bool { return string(b) == want }); err != nil {
				t.Errorf("%d-byte datagram: %v", size, err)
			}
		}
	})
	t.Run("dig AAAA and A through fd00::3, over UDP and TCP", func(t *testing.T) {
		for _, proto := range []string{"+notcp", "+tcp"} {
			for typ, want := range map[string]string{"AAAA": inet6, "A": inetAddr} {
				a := w.mustGuest(t, 10*time.Second, "dig", proto, "+short", "+tries=2", "+time=2", "@fd00::3", typ, "www.gonet.test")
				if strings.TrimSpace(a) != want {
					t.Errorf("dig %s @fd00::3 %s www.gonet.test answered %q, want %s", proto, typ, a, want)
				}
			}
		}
	})
	c := d.counters(t)
	for _, name := range []string{"IPv6.InForeign", "IPv6.OutForeign", "NDP." + gwGuestTAP + ".OutRouterAdvertisements", "Gateway.PingReplies", "Gateway.UDPFlows", "DNS.Queries"} {
		if c[name] == 0 {
			t.Errorf("%s = 0", name)
		}
	}
	d.stop(t)
}
