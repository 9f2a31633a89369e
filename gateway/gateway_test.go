package gateway

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// gatewayRig is a guest namespace whose TAP a gateway serves from this
// process. The tests reach only the gateway's own address, which stands for
// this process's loopback, and addresses the gateway refuses or finds
// nothing at without opening a host socket: nothing leaves the machine.
type gatewayRig struct {
	guest  *netns.NS
	guest6 netip.Addr // the guest's SLAAC address, in newGatewayRig6's rig
	tap    *tap.Endpoint
	s      *stack.Stack
	gw     *Gateway
	net    Network
}

func newGatewayRig(t testing.TB, cfg Config) *gatewayRig {
	t.Helper()
	return newGatewayRigOn(t, cfg, tap.Options{MTU: 1500})
}

// newGatewayRigOn is newGatewayRig on a TAP device opened with opts.
func newGatewayRigOn(t testing.TB, cfg Config, opts tap.Options) *gatewayRig {
	t.Helper()
	return newGatewayRigWith(t, cfg, opts, stack.Config{})
}

// newGatewayRigWith is newGatewayRigOn with the stack configured by scfg.
func newGatewayRigWith(t testing.TB, cfg Config, opts tap.Options, scfg stack.Config) *gatewayRig {
	t.Helper()
	guest := netnstest.New(t)
	n, err := NewNetwork(DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := OpenTAP(guest.Path(), "tap0", opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := ConfigureGuest(guest.Path(), "tap0", n, ep.MTU()); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	s := stack.New(scfg)
	t.Cleanup(func() { stacktest.Closed(t, s) })
	if err := s.AddNIC("tap0", ep); err != nil {
		t.Fatal(err)
	}
	cfg.Network = n
	gw, err := New(s, "tap0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return &gatewayRig{guest: guest, tap: ep, s: s, gw: gw, net: n}
}

// dial connects from the guest's namespace to addr.
func (r *gatewayRig) dial(addr string) (net.Conn, error) {
	var c net.Conn
	err := r.guest.Do(func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, 5*time.Second)
		return err
	})
	return c, err
}

// echoServer serves TCP echo on this process's IPv4 loopback and returns
// its port.
func echoServer(t *testing.T) int {
	return loopbackServer(t, func(c net.Conn) { io.Copy(c, c) })
}

// echoServer6 is echoServer on the IPv6 loopback, ::1.
func echoServer6(t *testing.T) int {
	return loopbackServerOn(t, "tcp6", "[::1]:0", func(c net.Conn) { io.Copy(c, c) })
}

// loopbackServer serves each connection to a port on this process's IPv4
// loopback with serve, in a goroutine of its own, and returns the port;
// serve's connection is closed when it returns.
func loopbackServer(tb testing.TB, serve func(net.Conn)) int {
	return loopbackServerOn(tb, "tcp4", "127.0.0.1:0", serve)
}

// loopbackServerOn is loopbackServer listening on network's address.
func loopbackServerOn(tb testing.TB, network, address string, serve func(net.Conn)) int {
	tb.Helper()
	l, err := net.Listen(network, address)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// echoesToTheFIN writes data on c, a connection to an echo server, then
// half-closes it, and checks that all of it comes back before the echo's
// FIN.
func echoesToTheFIN(t *testing.T, c net.Conn, data []byte, within time.Duration) {
	t.Helper()
	go func() {
		c.Write(data)
		c.(*net.TCPConn).CloseWrite()
	}()
	c.SetDeadline(time.Now().Add(within))
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("echoed %d of %d bytes, equal %v: %v", len(got), len(data), bytes.Equal(got, data), err)
	}
}

// closedPort is a port on this process's loopback (network's address)
// that nothing listens on: one that was listened on and closed.
func closedPort(t *testing.T, network, address string) uint16 {
	t.Helper()
	l, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	return port
}

func TestGatewayTCP(t *testing.T) {
	r := newGatewayRig(t, Config{Deny: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	port := echoServer(t)
	gwAddr := func(p int) string { return netip.AddrPortFrom(r.net.Gateway, uint16(p)).String() }

	t.Run("the gateway's address reaches the host's loopback, both ways, to the FIN", func(t *testing.T) {
		c, err := r.dial(gwAddr(port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		echoesToTheFIN(t, c, bytes.Repeat([]byte("gonet gateway "), 100_000), 20*time.Second)
	})
	t.Run("a refused host connect is ECONNREFUSED in the guest", func(t *testing.T) {
		_, err := r.dial(gwAddr(int(closedPort(t, "tcp4", "127.0.0.1:0"))))
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial: %v, want ECONNREFUSED", err)
		}
	})
	t.Run("a port the DNS address does not serve is ECONNREFUSED", func(t *testing.T) {
		before := r.gw.Stats.TCPConnects.Load()
		_, err := r.dial(netip.AddrPortFrom(r.net.DNS, 80).String())
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial: %v, want ECONNREFUSED", err)
		}
		if n := r.gw.Stats.TCPConnects.Load(); n != before {
			t.Fatalf("%d host connects for the DNS address", n-before)
		}
	})
	t.Run("a denied network is refused without a host connect", func(t *testing.T) {
		before := r.gw.Stats.TCPConnects.Load()
		_, err := r.dial("192.0.2.1:80")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial: %v, want ECONNREFUSED", err)
		}
		if n := r.gw.Stats.TCPConnects.Load(); n != before {
			t.Fatalf("%d host connects for a denied destination", n-before)
		}
		if r.gw.Stats.Denied.Load() == 0 {
			t.Fatal("not counted in Denied")
		}
	})
}

// At slirp4netns's MTU of 65520, the largest a TAP frame in GoNet's buffers
// leaves room for (the virtio-net header lies in the headroom), a kernel
// guest's bulk transfer crosses the gateway both ways intact, with the
// TAP's offloads on (super-segments both ways) and off (every frame at
// the MTU), and no frame is refused either way.
func TestGatewayCarriesBothWaysAtMTU65520(t *testing.T) {
	for _, offload := range []bool{true, false} {
		t.Run(fmt.Sprintf("offloads %v", offload), func(t *testing.T) {
			r := newGatewayRigOn(t, Config{}, tap.Options{MTU: 65520, Offload: offload})
			c, err := r.dial(netip.AddrPortFrom(r.net.Gateway, uint16(echoServer(t))).String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			data := make([]byte, 16<<20)
			rand.Read(data)
			echoesToTheFIN(t, c, data, 30*time.Second)
			m := r.s.Counters()
			for _, name := range []string{"NIC.tap0.RxLinkErrors", "NIC.tap0.TxLinkErrors"} {
				if m[name] != 0 {
					t.Errorf("%s = %d", name, m[name])
				}
			}
			tst := r.tap.Stats()
			if tst.RxErrors.Load() != 0 || tst.TxErrors.Load() != 0 {
				t.Errorf("the TAP endpoint refused frames: RxErrors %d, TxErrors %d", tst.RxErrors.Load(), tst.TxErrors.Load())
			}
			// The data went in frames of about the MTU, not cut smaller.
			in, out := tst.RxBytes.Load()/max(tst.RxFrames.Load(), 1), tst.TxBytes.Load()/max(tst.TxFrames.Load(), 1)
			t.Logf("%d frames in (%d super-segments), %d bytes on average; %d out (%d super-segments), %d bytes on average",
				tst.RxFrames.Load(), tst.RxGSO.Load(), in, tst.TxFrames.Load(), tst.TxGSO.Load(), out)
			if in < 32<<10 || out < 32<<10 {
				t.Errorf("frames of %d bytes in and %d out on average: the transfer did not use the MTU", in, out)
			}
		})
	}
}

func TestGatewayNoHostLoopbackRefuses(t *testing.T) {
	r := newGatewayRig(t, Config{NoHostLoopback: true})
	port := echoServer(t)
	_, err := r.dial(netip.AddrPortFrom(r.net.Gateway, uint16(port)).String())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial: %v, want ECONNREFUSED", err)
	}
}

func TestGatewayFlowLimitRefusesTheExcess(t *testing.T) {
	r := newGatewayRig(t, Config{MaxFlows: 2})
	addr := netip.AddrPortFrom(r.net.Gateway, uint16(echoServer(t))).String()
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := range 2 {
		c, err := r.dial(addr)
		if err != nil {
			t.Fatalf("flow %d: %v", i, err)
		}
		open = append(open, c)
	}
	if _, err := r.dial(addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a third flow: %v, want ECONNREFUSED", err)
	}
	if r.gw.Stats.FlowLimit.Load() != 1 {
		t.Fatalf("FlowLimit = %d, want 1", r.gw.Stats.FlowLimit.Load())
	}
	// The flows that were admitted still work.
	c := open[0]
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("an admitted flow: %q, %v", b, err)
	}
}

func TestGatewayUDP(t *testing.T) {
	r := newGatewayRig(t, Config{UDPTimeout: 500 * time.Millisecond})
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
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
	port := srv.LocalAddr().(*net.UDPAddr).Port
	c, err := r.guest.DialUDP(netip.AddrPortFrom(r.net.Gateway, uint16(port)).String())
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
		if err != nil || string(b[:n]) != string(bytes.ToUpper([]byte(msg))) {
			t.Fatalf("answer to %q: %q, %v", msg, b[:n], err)
		}
	}
	if n := r.gw.Stats.UDPFlows.Load(); n != 1 {
		t.Fatalf("UDPFlows = %d for one 4-tuple, want 1", n)
	}
}

// A relayed UDP flow's host socket queues 1 MiB (udpRelayReadBuffer), as
// its endpoint in GoNet does, so that a burst from the internet waits
// there while the relay waits for a CPU instead of overflowing the
// default 212992 bytes; Linux caps the request at net.core.rmem_max and
// reports twice what it grants.
func TestGatewayUDPFlowsHostSocketQueuesAMegabyte(t *testing.T) {
	r := newGatewayRig(t, Config{})
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := r.guest.DialUDP(netip.AddrPortFrom(r.net.Gateway, uint16(srv.LocalAddr().(*net.UDPAddr).Port)).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("open")); err != nil {
		t.Fatal(err)
	}
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := srv.ReadFromUDP(make([]byte, 64)); err != nil {
		t.Fatalf("the flow's first datagram: %v", err)
	}
	var host *net.UDPConn
	r.gw.tableMu.Lock()
	for rec := range r.gw.table {
		if rec.info.Proto == UDP {
			host, _ = rec.host.(*net.UDPConn)
		}
	}
	r.gw.tableMu.Unlock()
	if host == nil {
		t.Fatal("no UDP flow in the table")
	}
	rc, err := host.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	rc.Control(func(fd uintptr) { got, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF) })
	if gerr != nil {
		t.Fatal(gerr)
	}
	want := 2 * udpRelayReadBuffer
	if b, err := os.ReadFile("/proc/sys/net/core/rmem_max"); err == nil {
		if limit, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			want = min(want, 2*limit)
		}
	}
	if got < want {
		t.Errorf("the host socket's SO_RCVBUF is %d, want %d", got, want)
	}
}

func TestGatewayFlowsListsBothSides(t *testing.T) {
	r := newGatewayRig(t, Config{})
	port := echoServer(t)
	peer := netip.AddrPortFrom(r.net.Gateway, uint16(port))
	c, err := r.dial(peer.String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("hello"))
	b := make([]byte, 5)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	// The relay counts the bytes it wrote either way once the Write
	// returns, which may be after they were echoed and read.
	var fl []FlowInfo
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		fl = r.gw.Flows()
		if len(fl) != 1 || fl[0].ToHost == 5 && fl[0].ToGuest == 5 || time.Now().After(deadline) {
			break
		}
	}
	if len(fl) != 1 {
		t.Fatalf("Flows = %+v, want one", fl)
	}
	f := fl[0]
	guest := c.LocalAddr().(*net.TCPAddr).AddrPort()
	if f.Proto != TCP || f.Inbound || f.Guest != guest || f.Peer != peer ||
		f.HostRemote != netip.MustParseAddrPort("127.0.0.1:"+fmt.Sprint(port)) || !f.HostLocal.Addr().Is4() || f.ToHost != 5 || f.ToGuest != 5 {
		t.Fatalf("flow = %+v; want TCP from %v to %v, host side to 127.0.0.1:%d, 5 bytes each way", f, guest, peer, port)
	}
	if !f.LastActive.After(f.Since) {
		t.Errorf("LastActive %v is not after Since %v, though the flow carried bytes", f.LastActive, f.Since)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(r.gw.Flows()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Flows after the close: %+v", r.gw.Flows())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGatewayUDPRefusedOnTheHostIsRefusedInTheGuest(t *testing.T) {
	r := newGatewayRig(t, Config{})
	closed := freePort(t, UDP)
	c, err := r.guest.DialUDP(netip.AddrPortFrom(r.net.Gateway, closed).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("anyone?")); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 64))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("read: %v, want ECONNREFUSED from the host's port unreachable", err)
	}
}

// stalledListener listens on loopback with a backlog of 0 and never
// accepts: once its queue holds a connection, the kernel drops further
// SYNs, so a connect to it hangs until its timeout.
func stalledListener(t *testing.T) uint16 {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(sa.(*syscall.SockaddrInet4).Port)
}

// A guest that opens connections faster than the host completes them
// meets the bound on connects in progress: the excess goes unanswered and
// counted, a flow already established keeps working, and a connection
// opened after the flood is not starved by the stalled connects: the
// oldest of them gives way (connecting.go).
func TestGatewayConnectFloodIsBoundedAndSparesEstablishedFlows(t *testing.T) {
	r := newGatewayRig(t, Config{MaxConnecting: 4, ConnectTimeout: 20 * time.Second})
	echo := netip.AddrPortFrom(r.net.Gateway, uint16(echoServer(t))).String()
	est, err := r.dial(echo)
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	stalled := netip.AddrPortFrom(r.net.Gateway, stalledListener(t)).String()
	const flood = 40
	errs := make(chan error, flood)
	for range flood {
		go func() {
			var c net.Conn
			err := r.guest.Do(func() (err error) {
				c, err = net.DialTimeout("tcp4", stalled, 500*time.Millisecond)
				return err
			})
			if c != nil {
				c.Close()
			}
			errs <- err
		}()
	}
	for range flood {
		<-errs
	}
	if limit := r.gw.Stats.ConnectLimit.Load(); limit == 0 {
		t.Fatalf("ConnectLimit = 0 after %d connects to a stalled host: the bound of 4 was not applied", flood)
	}
	est.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := est.Write([]byte("still here")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 10)
	if _, err := io.ReadFull(est, b); err != nil || string(b) != "still here" {
		t.Fatalf("the established flow: %q, %v", b, err)
	}
	// The four stalled connects hold every slot for 20 s; a new one
	// waits for its own SYN's retransmission after a second, when the
	// oldest may give way.
	start := time.Now()
	c, err := r.dial(echo)
	if err != nil {
		t.Fatalf("a connection after the flood, with every slot stalled: %v", err)
	}
	c.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the connection after the flood took %v", took)
	}
	if r.gw.Stats.ConnectEvicted.Load() == 0 {
		t.Errorf("ConnectEvicted = 0: the connection after the flood found a free slot, which the test meant to hold")
	}
	t.Logf("ConnectLimit %d, ConnectEvicted %d, connect after the flood in %v",
		r.gw.Stats.ConnectLimit.Load(), r.gw.Stats.ConnectEvicted.Load(), time.Since(start))
}
