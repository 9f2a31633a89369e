package integration

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/wire"
)

// Path MTU discovery (RFC 1191) through a kernel router: GoNet's namespace
// forwards, over a veth whose MTU is 1280, to a second namespace. The far
// host announces MSS 1460 (the route's advmss), so GoNet's full-sized
// segments, sent with DF, meet the narrow link, and only the router's ICMP
// "fragmentation needed" tells GoNet to send smaller ones.

var (
	routerVeth = netip.MustParsePrefix("10.97.0.1/24")
	farAddr    = netip.MustParsePrefix("10.97.0.2/24")
)

// routedHost is newHost with a second namespace behind the first, reached
// through the first's kernel over a link of MTU linkMTU.
func routedHost(t *testing.T, linkMTU int) (*host, *netns.NS) {
	t.Helper()
	h := newHost(t, options{})
	far := netnstest.New(t)
	if err := h.ns.AddVeth("vrouter", far, "vfar"); err != nil {
		t.Fatal(err)
	}
	if err := h.ns.ConfigureLink("vrouter", routerVeth, linkMTU); err != nil {
		t.Fatal(err)
	}
	if err := far.ConfigureLink("vfar", farAddr, linkMTU); err != nil {
		t.Fatal(err)
	}
	h.run(t, 5*time.Second, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// advmss: the far host announces a larger MSS than its link carries,
	// as a host on a wide LAN behind a narrow tunnel does.
	if _, err := far.IP(ctx, "route", "add", kernelAddr.Masked().String(), "via", routerVeth.Addr().String(), "advmss", "1460"); err != nil {
		t.Fatal(err)
	}
	if err := h.stack.AddRoute(farAddr.Masked(), kernelAddr.Addr(), h.dev); err != nil {
		t.Fatal(err)
	}
	return h, far
}

func TestPathMTUDiscoveryThroughKernelRouter(t *testing.T) {
	lookPath(t, "socat")
	checkGoroutines(t)
	h, far := routedHost(t, 1280)
	defer h.logCounters(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := sendThroughRouter(ctx, t, h.stack, far, "TCP4-LISTEN:5001,reuseaddr", netip.AddrPortFrom(farAddr.Addr(), 5001))
	defer c.Close()
	ri, err := h.stack.IPv4().Route(farAddr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	checkPathMTU(t, h.stack, c, ri.MTU, wire.IPv4MinHeaderLen, "IPv4.PMTUUpdates", "TCP.PMTUReductions", "TCP.PMTURetransmits")
	counters := h.stack.Counters()
	t.Logf("TCP.Timeouts %d, TCP.RetransSegs %d", counters["TCP.Timeouts"], counters["TCP.RetransSegs"])
}

// sendThroughRouter starts socat listening (listen) in far, dials it at
// raddr from stack s through its kernel neighbour, a router onto a narrower link, and
// sends 4 MiB, checking that the far host received every byte. It returns
// the connection, whose state then tells what path MTU discovery learnt.
func sendThroughRouter(ctx context.Context, t *testing.T, s *stack.Stack, far *netns.NS, listen string, raddr netip.AddrPort) *tcp.Conn {
	t.Helper()
	const size = 4 << 20
	cmd := far.Command(ctx, "socat", "-u", listen, "STDOUT")
	got := newDigest()
	cmd.Stdout = got
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var c *tcp.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		c, err = s.DialTCP(dctx, raddr)
		dcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GoNet dials %v through the router: %v", raddr, err)
		}
		time.Sleep(20 * time.Millisecond) // socat is not listening yet
	}
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	sent := newDigest()
	start := time.Now()
	if err := sendAll(c, 7, size, sent); err != nil {
		c.Close()
		t.Fatalf("GoNet: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		c.Close()
		t.Fatalf("socat: %v: %s", err, stderr.String())
	}
	if got.n != size || got.sum() != sent.sum() {
		c.Close()
		t.Fatalf("GoNet sent %d bytes (sha256 %s), the far host received %d (sha256 %s)", int64(size), sent.sum(), got.n, got.sum())
	}
	logRate(t, "GoNet through the router", size, time.Since(start))
	return c
}

// checkPathMTU checks what c and its route learnt behind a 1280-byte link on s:
// the route's MTU routeMTU is the link's, the connection's MSS fits it
// under a network header of hdrLen bytes and TCP's 20, each of counters
// moved, and no genuine report was taken for a forgery.
func checkPathMTU(t *testing.T, s *stack.Stack, c *tcp.Conn, routeMTU, hdrLen int, counters ...string) {
	t.Helper()
	ci := c.Info()
	t.Logf("connection MSS %d, route MTU %d", ci.MSS, routeMTU)
	if routeMTU != 1280 {
		t.Errorf("route MTU %d, want the narrow link's 1280", routeMTU)
	}
	if ci.MSS > 1280-hdrLen-wire.TCPMinHeaderLen {
		t.Errorf("MSS %d does not fit the path MTU 1280", ci.MSS)
	}
	got := s.Counters()
	for _, name := range counters {
		if got[name] < 1 {
			t.Errorf("%s = %d, want at least 1", name, got[name])
		}
		t.Logf("%s %d", name, got[name])
	}
	if n := got["TCP.OutOfWindowIcmps"]; n != 0 {
		t.Errorf("TCP.OutOfWindowIcmps = %d: the router's genuine reports were rejected", n)
	}
}
