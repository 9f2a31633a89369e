package integration

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/icmp"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/udp"
	"github.com/gonetstack/gonet/wire"
)

// Forwarding (ipv4/forward.go and the transports' forwarders): the kernel
// in the namespace plays a guest whose default route is GoNet, and its own
// tools reach documentation addresses (RFC 5737) that GoNet terminates and
// the test's hooks relay to services on the test process's loopback, as a
// gateway relays to the host's sockets. No packet leaves the namespace
// but through the TAP to GoNet, and none leaves the test process but to
// 127.0.0.1.

var (
	relayed     = netip.MustParseAddr("192.0.2.1") // relayed to loopback services
	hostUnrch   = netip.MustParseAddr("192.0.2.2") // answered host unreachable
	netUnrch    = netip.MustParseAddr("192.0.2.3") // answered net unreachable
	prohibited  = netip.MustParseAddr("192.0.2.4") // answered administratively prohibited
	unreachable = map[netip.Addr]ip.ErrorKind{
		hostUnrch:  ip.HostUnreachable,
		netUnrch:   ip.NetUnreachable,
		prohibited: ip.AdminProhibited,
	}
)

// gateway is the test's relay: the three forwarder hooks of a stack whose
// NIC forwards, relaying TCP and UDP to loopback addresses by the guest's
// destination, and answering pings to relayed itself.
type gateway struct {
	t     *testing.T
	h     *host
	tcpTo map[netip.AddrPort]string // the host address a guest destination is relayed to
	udpTo map[netip.AddrPort]string

	done chan struct{}
	wg   sync.WaitGroup // relaying goroutines
}

// newGateway relays the guest destinations in tcpTo and udpTo to the
// loopback addresses they map to; the maps are the hooks' from then on.
func newGateway(t *testing.T, tcpTo, udpTo map[netip.AddrPort]string) *gateway {
	t.Helper()
	h := newHost(t, options{})
	g := &gateway{t: t, h: h, tcpTo: tcpTo, udpTo: udpTo, done: make(chan struct{})}
	if err := h.stack.SetForwarding(h.dev, true); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ns.IP(context.Background(), "route", "add", "default", "via", gonetAddr.Addr().String()); err != nil {
		t.Fatal(err)
	}
	h.stack.SetTCPForwarder(g.forwardTCP)
	h.stack.SetUDPForwarder(g.forwardUDP)
	h.stack.SetEchoForwarder(g.forwardEcho)
	// Runs before the stack's close (cleanups run last first): relays end
	// on their own once the guest's tools are done; this bounds the wait.
	t.Cleanup(func() {
		close(g.done)
		waited := make(chan struct{})
		go func() { g.wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			t.Error("relays still running 10 s after the test")
		}
	})
	return g
}

// forwardTCP decides a guest's SYN as a gateway does: connect on the host
// first, then answer the guest with what that connect got.
func (g *gateway) forwardTCP(r *tcp.ForwardRequest) {
	if code, ok := unreachable[r.LocalAddr().Addr()]; ok {
		r.Unreachable(code)
		return
	}
	target, ok := g.tcpTo[r.LocalAddr()]
	if !ok {
		r.Drop()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hc, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		r.Refuse()
		return
	case err != nil:
		r.Drop()
		return
	}
	gc, err := r.Accept(ctx)
	if err != nil {
		hc.Close()
		return
	}
	g.wg.Add(1)
	defer g.wg.Done()
	splice(gc, hc.(*net.TCPConn))
}

// splice copies both ways, carrying each side's FIN to the other as a
// half-close, and closes both once both directions ended.
func splice(gc *tcp.Conn, hc *net.TCPConn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		io.Copy(hc, gc)
		hc.CloseWrite()
	}()
	go func() {
		defer wg.Done()
		io.Copy(gc, hc)
		gc.CloseWrite()
	}()
	wg.Wait()
	gc.Close()
	hc.Close()
}

// forwardUDP opens the flow's endpoint and relays it to the host address
// its destination maps to, until it idles for two seconds. Unmapped
// destinations are left undecided: port unreachable.
func (g *gateway) forwardUDP(r *udp.ForwardRequest) {
	target, ok := g.udpTo[r.LocalAddr()]
	if !ok {
		return
	}
	gc, err := r.Open()
	if err != nil {
		g.t.Errorf("open the UDP flow %v -> %v: %v", r.RemoteAddr(), r.LocalAddr(), err)
		return
	}
	g.wg.Add(1)
	go func() { // the hook runs in the IPv4 dealer: relay elsewhere
		defer g.wg.Done()
		defer gc.Close()
		hc, err := net.Dial("udp", target)
		if err != nil {
			g.t.Errorf("dial %s: %v", target, err)
			return
		}
		defer hc.Close()
		go func() {
			buf := make([]byte, 65536)
			for {
				hc.SetReadDeadline(time.Now().Add(2 * time.Second))
				n, err := hc.Read(buf)
				if err != nil {
					return
				}
				gc.Write(buf[:n])
			}
		}()
		buf := make([]byte, 65536)
		for {
			gc.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, err := gc.Read(buf)
			if err != nil {
				return
			}
			hc.Write(buf[:n])
		}
	}()
}

// forwardEcho answers pings to relayed from relayed, and to the
// unreachable addresses with host unreachable, from a goroutine of its
// own as a relay through a host ping socket would.
func (g *gateway) forwardEcho(r *icmp.EchoRequest) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if r.Dst == relayed {
			r.Reply()
			return
		}
		if _, ok := unreachable[r.Dst]; ok {
			r.Error(wire.ICMPDestUnreach, wire.ICMPCodeHostUnrch)
		}
	}()
}

// run runs a tool in the guest's namespace, returning its output and error.
func (g *gateway) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := g.h.ns.Run(ctx, name, args...)
	return string(out), err
}

// loopbackPort returns a port on 127.0.0.1 that refuses connections: one a
// listener just let go of.
func loopbackPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestForwardedTCPWithCurlAndNetcat(t *testing.T) {
	netnstest.RequireTool(t, "curl")
	netnstest.RequireTool(t, "nc")
	body := strings.Repeat("relayed by the forwarder hook\n", 50000) // 1.5 MB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	g := newGateway(t, map[netip.AddrPort]string{
		netip.AddrPortFrom(relayed, 80): srv.Listener.Addr().String(),
		netip.AddrPortFrom(relayed, 81): loopbackPort(t),
	}, nil)

	t.Run("accepted", func(t *testing.T) {
		out, err := g.run("curl", "-sS", "--max-time", "20", "http://192.0.2.1/")
		if err != nil {
			t.Fatalf("curl: %v", err)
		}
		if out != body {
			t.Errorf("curl got %d bytes, want the %d the host's server sent", len(out), len(body))
		}
	})
	for _, tc := range []struct {
		name, addr, port, want string
	}{
		{"refused", "192.0.2.1", "81", "Connection refused"},
		{"host unreachable", hostUnrch.String(), "80", "No route to host"},
		{"net unreachable", netUnrch.String(), "80", "Network is unreachable"},
		// Linux reports "communication administratively prohibited" as
		// EHOSTUNREACH too (icmp_err_convert).
		{"administratively prohibited", prohibited.String(), "80", "No route to host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, err := g.run("nc", "-v", "-z", "-w", "10", tc.addr, tc.port)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("nc %s %s: %v, %q; want it to fail with %q", tc.addr, tc.port, err, out, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("nc took %v: the answer should be immediate, not a timeout", d)
			}
		})
	}
	t.Run("dropped", func(t *testing.T) {
		// No mapping: the hook drops the SYN, and nc's connect times out.
		out, err := g.run("nc", "-v", "-z", "-w", "2", relayed.String(), "99")
		if err == nil || !strings.Contains(out, "timed out") {
			t.Errorf("nc to a dropped port: %v, %q; want a timeout", err, out)
		}
	})
	c := g.h.stack.Counters()
	for _, name := range []string{"TCP.ForwardAccepted", "TCP.ForwardRefused", "TCP.ForwardUnreachable", "TCP.ForwardDropped"} {
		if c[name] == 0 {
			t.Errorf("%s = 0", name)
		}
	}
}

func TestForwardedUDPWithSocat(t *testing.T) {
	netnstest.RequireTool(t, "socat")
	echo, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			echo.WriteTo(append([]byte("echo:"), buf[:n]...), from)
		}
	}()
	g := newGateway(t, nil, map[netip.AddrPort]string{netip.AddrPortFrom(relayed, 7): echo.LocalAddr().String()})

	t.Run("relayed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := g.h.ns.Command(ctx, "socat", "-t", "1", "-T", "5", "STDIO", "UDP:192.0.2.1:7")
		cmd.Stdin = strings.NewReader("ping")
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != "echo:ping" {
			t.Errorf("socat: %v, %q; want \"echo:ping\" back from 192.0.2.1", err, out)
		}
	})
	t.Run("refused port", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := g.h.ns.Command(ctx, "socat", "-t", "1", "-T", "5", "STDIO", "UDP:192.0.2.1:9")
		cmd.Stdin = strings.NewReader("ping")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Connection refused") {
			t.Errorf("socat to an unrelayed port: %v, %q; want \"Connection refused\" (ICMP port unreachable)", err, out)
		}
	})
	if n := g.h.stack.Counters()["UDP.ForwardOpened"]; n != 1 {
		t.Errorf("UDP.ForwardOpened = %d, want 1", n)
	}
}

func TestForwardedPing(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	g := newGateway(t, nil, nil)
	out, err := g.run("ping", "-c", "1", "-W", "5", relayed.String())
	if err != nil {
		t.Fatalf("ping %v: %v", relayed, err)
	}
	if !strings.Contains(out, "1 received") {
		t.Errorf("ping %v: %s", relayed, out)
	}
	out, err = g.run("ping", "-c", "1", "-W", "5", hostUnrch.String())
	if err == nil || !strings.Contains(out, "Destination Host Unreachable") {
		t.Errorf("ping %v: %v, %s; want Destination Host Unreachable", hostUnrch, err, out)
	}
	if n := g.h.stack.Counters()["ICMP.EchoForwarded"]; n != 2 {
		t.Errorf("ICMP.EchoForwarded = %d, want 2", n)
	}
}
