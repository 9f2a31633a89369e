package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
)

// The rest of issue 11's list at the daemon's level, on the world of
// gateway_daemon_test.go: the guest's own sockets (Go code in the guest's
// namespace, netns.Do) against servers in the internet namespace and on
// the host's loopback, through one daemon at its defaults: big transfers,
// many connections at once, UDP, the errors a connect meets, half-closes,
// and a guest that sends garbage or floods SYNs.

// serveTCP runs handle on every connection to addr (a literal ip:port,
// port 0 for any) in ns until the test ends, and returns the address it
// listens on. The connections still open then are closed.
func serveTCP(t *testing.T, ns *netns.NS, addr string, handle func(*net.TCPConn)) string {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c.(*net.TCPConn))
			})
		}
	})
	return ln.Addr().String()
}

// guestDial connects from the guest's namespace to addr, a literal
// ip:port; the socket stays there.
func (w *gwWorld) guestDial(network, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := w.guest.Do(func() (err error) { c, err = net.DialTimeout(network, addr, timeout); return err })
	return c, err
}

func (w *gwWorld) mustGuestDial(t *testing.T, network, addr string) net.Conn {
	t.Helper()
	c, err := w.guestDial(network, addr, 10*time.Second)
	if err != nil {
		t.Fatalf("guest: dial %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echoServer is a TCP echo server in the internet namespace that counts
// the connections it holds open at once.
type echoServer struct {
	addr       string
	open, peak atomic.Int64
}

func (w *gwWorld) serveEcho(t *testing.T) *echoServer {
	t.Helper()
	e := &echoServer{}
	e.addr = serveTCP(t, w.inet, inetAddr+":0", func(c *net.TCPConn) {
		n := e.open.Add(1)
		defer e.open.Add(-1)
		// Raise the peak to n unless another connection raised it past.
		for p := e.peak.Load(); n > p && !e.peak.CompareAndSwap(p, n); p = e.peak.Load() {
		}
		io.Copy(c, c)
	})
	return e
}

// TestGatewayDaemonGuestSockets runs its subtests against one daemon, in
// order: the SYN flood last, since its connects hold every host connect
// slot until they time out, and then a second daemon for
// -no-host-loopback.
func TestGatewayDaemonGuestSockets(t *testing.T) {
	bin := buildGonet(t)
	w := newGWWorld(t, bin)
	// Defaults but the control socket's path: the MTU of 65512 with the
	// TAP's offloads, -max-flows 4096, the host's loopback at 10.0.2.2.
	d := w.start(t, "-configure")
	echo := w.serveEcho(t)
	loopback := serveTCP(t, w.host, "127.0.0.1:0", func(c *net.TCPConn) {
		io.WriteString(c, "from the host's loopback\n")
	})
	_, loopbackPort, _ := net.SplitHostPort(loopback)

	t.Run("100 MiB down and up, SHA-256 checked", func(t *testing.T) {
		const size = 100 << 20
		want := streamSHA256(size)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		down := sha256.New()
		get := w.guest.Command(ctx, "curl", "-sSf", fmt.Sprintf("http://%s/stream/%d", inetHTTP, size))
		var stderr strings.Builder
		get.Stdout, get.Stderr = down, &stderr
		if err := get.Run(); err != nil {
			t.Fatalf("guest: curl /stream/%d: %v\n%s", size, err, stderr.String())
		}
		if got := hex.EncodeToString(down.Sum(nil)); got != want {
			t.Errorf("downloaded 100 MiB's SHA-256 %s, served %s", got, want)
		}
		// -T - sends curl's stdin as it comes, chunked, not read whole
		// first as --data-binary @- would.
		put := w.guest.Command(ctx, "curl", "-sSf", "-X", "POST", "-T", "-", "http://"+inetHTTP+"/upload")
		put.Stdin = payload(streamSeed, size)
		out, err := put.CombinedOutput()
		if err != nil {
			t.Fatalf("guest: curl -T - /upload: %v\n%s", err, out)
		}
		if string(out) != want {
			t.Errorf("uploaded 100 MiB's SHA-256 at the server %q, sent %s", out, want)
		}
	})

	t.Run("1000 connections held open at once", func(t *testing.T) {
		const conns, dialers = 1000, 50
		before := d.counters(t)
		cs := make([]net.Conn, conns)
		t.Cleanup(func() {
			for _, c := range cs {
				if c != nil {
					c.Close()
				}
			}
		})
		// Each dialer's thread joins the guest's namespace for its share.
		// Fewer connects at once than the gateway's 256 host connects in
		// progress (Config.MaxConnecting), past which it refuses.
		errs := make(chan error, dialers)
		for i := range dialers {
			go func() {
				errs <- w.guest.Do(func() error {
					for j := i; j < conns; j += dialers {
						c, err := net.DialTimeout("tcp4", echo.addr, 10*time.Second)
						if err != nil {
							return fmt.Errorf("connection %d: %w", j, err)
						}
						cs[j] = c
					}
					return nil
				})
			}()
		}
		var dialErr error
		for range dialers {
			dialErr = cmp.Or(dialErr, <-errs)
		}
		if dialErr != nil {
			t.Fatalf("guest: dial %s: %v", echo.addr, dialErr)
		}
		// Every connection carries an exchange while all are open.
		var wg sync.WaitGroup
		failed := make(chan error, conns)
		for i, c := range cs {
			wg.Go(func() {
				msg := fmt.Sprintf("connection %d of %d\n", i, conns)
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.WriteString(c, msg); err != nil {
					failed <- fmt.Errorf("connection %d: write: %w", i, err)
					return
				}
				back, err := bufio.NewReader(c).ReadString('\n')
				if err != nil || back != msg {
					failed <- fmt.Errorf("connection %d: echo %q, %v; want %q", i, back, err, msg)
				}
			})
		}
		wg.Wait()
		close(failed)
		for err := range failed {
			t.Error(err)
		}
		if n := echo.peak.Load(); n != conns {
			t.Errorf("the server held %d connections at once, want %d", n, conns)
		}
		during := d.counters(t)
		if n := during["Gateway.Relay.TCPActive"]; n != conns {
			t.Errorf("Gateway.Relay.TCPActive %d with %d connections open", n, conns)
		}
		for _, name := range []string{"Gateway.FlowLimit", "Gateway.ConnectLimit", "Gateway.TCPRefused"} {
			if n := during[name] - before[name]; n != 0 {
				t.Errorf("%s went up by %d", name, n)
			}
		}
		// Idle, the flows hold no relay buffer (relay.go): the last
		// echoes' buffers go back as their Writes return.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			n := d.counters(t)["Gateway.Relay.BuffersHeld"]
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%d relay buffers held by %d idle flows", n, conns)
				break
			}
		}
		for _, c := range cs {
			c.Close()
		}
		// Every flow ends once the guest has closed it: nothing is held.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			m := d.counters(t)
			if m["Gateway.Relay.TCPActive"] == 0 && echo.open.Load() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("20 s after the guest closed them: %d flows relayed, %d connections at the server",
					m["Gateway.Relay.TCPActive"], echo.open.Load())
			}
		}
	})

	t.Run("UDP echo, and a refused port as ECONNREFUSED", func(t *testing.T) {
		srv, err := w.inet.ListenUDP(inetAddr + ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		go func() {
			buf := make([]byte, 65536)
			for {
				n, from, err := srv.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				srv.WriteToUDPAddrPort(buf[:n], from)
			}
		}()
		c := w.mustGuestDial(t, "udp4", srv.LocalAddr().String())
		// Up to the largest datagram IPv4 carries, 65507 bytes: past the
		// guest link's MTU of 65512 once headed, it crosses in
		// fragments both ways, and the veth's 1500 fragments it again.
		for _, size := range []int{1, 1472, 1473, 9000, 65507} {
			msg, _ := io.ReadAll(payload(uint64(size), int64(size)))
			if err := udpExchange(c, msg, func(b []byte) bool { return bytes.Equal(b, msg) }); err != nil {
				t.Fatalf("guest: echo of %d bytes: %v", size, err)
			}
		}

		// Nothing listens on the internet's UDP port 9: its ICMP port
		// unreachable reaches the host's socket, and the gateway passes
		// it on, so the guest's connected socket reports ECONNREFUSED
		// on its next receive, as the kernel reports it.
		refused := w.mustGuestDial(t, "udp4", inetAddr+":9")
		err = udpExchange(refused, []byte("anyone?"), func([]byte) bool { return false })
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("guest: receive after sending to a closed UDP port: %v, want ECONNREFUSED", err)
		}
	})

	t.Run("connect errors as the kernel reports them", func(t *testing.T) {
		for _, tt := range []struct {
			name, addr string
			want       syscall.Errno
		}{
			// The host's connect is refused: a reset.
			{"closed port", inetAddr + ":9", syscall.ECONNREFUSED},
			// The gateway's own addresses serve only their ports.
			{"DNS forwarder's closed port", "10.0.2.3:80", syscall.ECONNREFUSED},
			// Port 1 of the host's loopback, where nothing listens.
			{"host loopback's closed port", "10.0.2.2:1", syscall.ECONNREFUSED},
			// No one answers ARP for 10.77.0.9 on the internet's
			// network: the host's connect fails with EHOSTUNREACH
			// after ~3 s, and the guest hears ICMP host unreachable.
			{"absent host", "10.77.0.9:80", syscall.EHOSTUNREACH},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				c, err := w.guestDial("tcp4", tt.addr, 15*time.Second)
				if err == nil {
					c.Close()
				}
				if !errors.Is(err, tt.want) {
					t.Errorf("guest: connect to %s: %v, want %v", tt.addr, err, tt.want)
				}
			})
		}
	})

	t.Run("half-close both ways", func(t *testing.T) {
		// A MiB each way, so that the FIN follows data still in flight.
		const size = 1 << 20
		data, _ := io.ReadAll(payload(1, size))
		for _, tt := range []struct {
			name string
			// serve and guest are the two ends of one connection;
			// serve returns what it received.
			serve func(c *net.TCPConn) []byte
			guest func(c *net.TCPConn) error
		}{
			{
				name: "guest shuts its write side, then reads the reply",
				serve: func(c *net.TCPConn) []byte {
					b, _ := io.ReadAll(c)
					c.Write(b) // after the guest's FIN
					return b
				},
				guest: func(c *net.TCPConn) error {
					if _, err := c.Write(data); err != nil {
						return err
					}
					if err := c.CloseWrite(); err != nil {
						return err
					}
					if b, err := io.ReadAll(c); err != nil || !bytes.Equal(b, data) {
						return fmt.Errorf("reply after its FIN: %d bytes, %v; want the %d sent back", len(b), err, len(data))
					}
					return nil
				},
			},
			{
				name: "server shuts its write side, then reads the guest's",
				serve: func(c *net.TCPConn) []byte {
					c.Write(data)
					c.CloseWrite()
					b, _ := io.ReadAll(c)
					return b
				},
				guest: func(c *net.TCPConn) error {
					if b, err := io.ReadAll(c); err != nil || !bytes.Equal(b, data) {
						return fmt.Errorf("read to the server's FIN: %d bytes, %v; want %d", len(b), err, len(data))
					}
					if _, err := c.Write(data); err != nil {
						return fmt.Errorf("write after the server's FIN: %w", err)
					}
					return c.CloseWrite()
				},
			},
		} {
			t.Run(tt.name, func(t *testing.T) {
				got := make(chan []byte, 1)
				addr := serveTCP(t, w.inet, inetAddr+":0", func(c *net.TCPConn) {
					c.SetDeadline(time.Now().Add(10 * time.Second))
					got <- tt.serve(c)
				})
				c := w.mustGuestDial(t, "tcp4", addr).(*net.TCPConn)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tt.guest(c); err != nil {
					t.Errorf("guest: %v", err)
				}
				select {
				case b := <-got:
					if !bytes.Equal(b, data) {
						t.Errorf("the server received %d bytes to the guest's FIN, want the %d sent", len(b), len(data))
					}
				case <-time.After(10 * time.Second):
					t.Errorf("the server did not see the guest's FIN")
				}
			})
		}
	})

	t.Run("host loopback at the gateway's address", func(t *testing.T) {
		c := w.mustGuestDial(t, "tcp4", "10.0.2.2:"+loopbackPort)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if b, err := io.ReadAll(c); err != nil || string(b) != "from the host's loopback\n" {
			t.Errorf("guest: from 10.0.2.2:%s: %q, %v", loopbackPort, b, err)
		}
	})

	t.Run("malformed frames from the guest", func(t *testing.T) {
		w.malformedFrames(t, d)
	})

	// Last on this daemon: the flood's connects hold every host connect
	// slot until they time out (30 s), refusing new flows meanwhile.
	flooded := false
	t.Run("SYN flood to random addresses", func(t *testing.T) {
		flooded = true
		w.synFlood(t, d, echo)
	})

	counters := d.stop(t)
	if flooded && !strings.Contains(counters, "Gateway.ConnectLimit") {
		t.Errorf("counters after the flood lack Gateway.ConnectLimit:\n%s", counters)
	}
	w.tapGone(t)

	t.Run("no host loopback with -no-host-loopback", func(t *testing.T) {
		d := w.start(t, "-configure", "-no-host-loopback")
		c, err := w.guestDial("tcp4", "10.0.2.2:"+loopbackPort, 10*time.Second)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("guest: connect to the host's loopback at 10.0.2.2:%s: %v, want ECONNREFUSED", loopbackPort, err)
		}
		if counters := d.stop(t); !strings.Contains(counters, "Gateway.Denied 1\n") || strings.Contains(counters, "Gateway.TCPConnects") {
			t.Errorf("counters after a connect to the host's loopback, denied:\n%s", counters)
		}
		w.tapGone(t)
	})
}

// udpExchange sends msg on c until a datagram that want accepts comes
// back, and returns nil then, or the first error other than a timeout: a
// datagram or its answer may be lost, and one that comes late is skipped.
func udpExchange(c net.Conn, msg []byte, want func([]byte) bool) error {
	buf := make([]byte, 65536)
	for range 5 {
		if _, err := c.Write(msg); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, err := c.Read(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break // send again
			}
			if err != nil {
				return err
			}
			if want(buf[:n]) {
				return nil
			}
		}
	}
	return errors.New("no answer to 5 datagrams, a second apart")
}

// synFlood sends thousands of SYNs from the guest to random addresses and
// ports while a connection made before keeps echoing. The host namespace
// is given a default route into the internet namespace, which forwards
// nothing: the gateway's connects to those addresses go unanswered there,
// and never leave the test's namespaces.
func (w *gwWorld) synFlood(t *testing.T, d *gwDaemon, echo *echoServer) {
	if _, err := w.host.IP(context.Background(), "route", "add", "default", "via", inetAddr); err != nil {
		t.Fatal(err)
	}
	if out, err := w.inet.Run(context.Background(), "cat", "/proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Fatalf("the internet namespace forwards (%v, %q): the flood could leave it", err, out)
	}
	established := w.mustGuestDial(t, "tcp4", echo.addr)
	echoes(t, established, 1)
	// The flood starts with every host connect slot free: the gateway is
	// deciding no SYN. One may still be pending from before, such as a
	// SYN the guest retransmitted to an absent host just as the first
	// was answered (connect errors), waiting out its own ARP.
	var before map[string]int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if before = d.counters(t); before["TCP.ForwardPending"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway is still deciding %d SYNs after 10 s", before["TCP.ForwardPending"])
		}
	}

	const syns = 5000
	fd := rawSocket(t, w.guest)
	guest := netip.MustParseAddr("10.0.2.100")
	rng := rand.New(rand.NewPCG(11, 8))
	var sent, lost int
	for i := range syns {
		// Unicast addresses outside 0/8, 10/8 and 127/8: routed by the
		// guest to the gateway, and by the host to the internet.
		var dst netip.Addr
		for {
			b := [4]byte{byte(1 + rng.IntN(223)), byte(rng.Uint32()), byte(rng.Uint32()), byte(1 + rng.IntN(254))}
			if b[0] != 10 && b[0] != 127 {
				dst = netip.AddrFrom4(b)
				break
			}
		}
		pkt := tcpSYN(t, netip.AddrPortFrom(guest, uint16(1024+rng.IntN(60000))), netip.AddrPortFrom(dst, uint16(1+rng.IntN(65535))), rng.Uint32())
		// ENOBUFS: the TAP's queue is full and the SYN lost, as on a
		// saturated link.
		if err := syscall.Sendto(fd, pkt, 0, &syscall.SockaddrInet4{Addr: dst.As4()}); err != nil {
			lost++
		} else {
			sent++
		}
		if i%100 == 99 {
			// The established flow goes on during the flood.
			echoes(t, established, 1)
			time.Sleep(5 * time.Millisecond)
		}
	}
	if sent < syns/2 {
		t.Fatalf("only %d of %d SYNs sent (%d lost)", sent, syns, lost)
	}
	echoes(t, established, 10)
	d.alive(t)

	after := d.counters(t)
	delta := func(name string) int64 { return after[name] - before[name] }
	// The host connects in progress stop at Config.MaxConnecting's 256,
	// each waiting out its 30 s unless a SYN a second younger evicts it;
	// the SYNs beyond are left unanswered and counted (those the gateway
	// did not read off a full TAP queue are not).
	connects, limited, evicted := delta("Gateway.TCPConnects"), delta("Gateway.ConnectLimit"), delta("Gateway.ConnectEvicted")
	if connects < 256 || connects-evicted > 256 {
		t.Errorf("Gateway.TCPConnects went up by %d and Gateway.ConnectEvicted by %d: want 256 connects in progress at most, and all taken", connects, evicted)
	}
	if limited < int64(sent)/2 || connects+limited > int64(sent) {
		t.Errorf("Gateway.ConnectLimit went up by %d for %d SYNs sent, %d connected", limited, sent, connects)
	}
	t.Logf("%d SYNs sent (%d lost): Gateway.TCPConnects +%d, Gateway.ConnectLimit +%d, Gateway.ConnectEvicted +%d, Gateway.TCPUnreachable +%d",
		sent, lost, connects, limited, evicted, delta("Gateway.TCPUnreachable"))
	if n := after["Gateway.Relay.TCPActive"]; n != 1 {
		t.Errorf("Gateway.Relay.TCPActive %d during the flood, want the established flow alone", n)
	}
	// Every slot is held by a connect to nowhere for 30 s, yet a new
	// connection is not starved: its SYN, or its retransmission a second
	// later, makes the oldest give way.
	start := time.Now()
	fresh := w.mustGuestDial(t, "tcp4", echo.addr)
	echoes(t, fresh, 1)
	fresh.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a connection right after the flood took %v", took)
	}
}

// tcpSYN returns an IPv4 datagram carrying a SYN from src to dst, as Linux
// sends one (MSS, SACK, timestamps, window scale).
func tcpSYN(t *testing.T, src, dst netip.AddrPort, seq uint32) []byte {
	t.Helper()
	seg := rawtest.TCPSegment{Src: src, Dst: dst, Seq: seq, Flags: rawtest.SYN, Window: 64240,
		Opts: rawtest.TCPOpts{MSS: 1460, SACKPermitted: true, HasTimestamp: true, TSVal: seq, HasWScale: true, WScale: 7}}
	ip := rawtest.IPv4Header(src.Addr(), dst.Addr(), layers.IPProtocolTCP)
	return rawtest.Serialize(t, ip, rawtest.Payload(rawtest.TCPBytes(t, seg)))
}

// malformedFrames writes broken frames to the gateway on a packet socket
// on the guest's side of the TAP, each kind of damage a row, and then
// checks that the daemon still relays the guest's flows and counted what
// it dropped. The frames are addressed to the gateway's MAC: a packet
// socket bypasses the guest's routes, so nothing else sees them.
func (w *gwWorld) malformedFrames(t *testing.T, d *gwDaemon) {
	gwMAC, err := net.ParseMAC(strings.Fields(d.ready)[5])
	if err != nil {
		t.Fatalf("ready line %q: %v", d.ready, err)
	}
	var fd int
	var guestMAC net.HardwareAddr
	err = w.guest.Do(func() error {
		ifi, err := net.InterfaceByName(gwGuestTAP)
		if err != nil {
			return err
		}
		guestMAC = ifi.HardwareAddr
		if fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_ALL))); err != nil {
			return err
		}
		return syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("packet socket on %s in the guest: %v", gwGuestTAP, err)
	}
	defer syscall.Close(fd)

	guest, gateway, inet := netip.MustParseAddr("10.0.2.100"), netip.MustParseAddr("10.0.2.2"), netip.MustParseAddr(inetAddr)
	// ipv4 returns a datagram with the right lengths and checksums, for a
	// row to break.
	ipv4 := func(dst netip.Addr, proto layers.IPProtocol, body []byte) []byte {
		return rawtest.Serialize(t, rawtest.IPv4Header(guest, dst, proto), rawtest.Payload(body))
	}
	tcp := ipv4(inet, layers.IPProtocolTCP, rawtest.TCPBytes(t, rawtest.TCPSegment{
		Src: netip.AddrPortFrom(guest, 40000), Dst: netip.AddrPortFrom(inet, 8080), Seq: 1, Flags: rawtest.SYN, Window: 64240}))
	udp := ipv4(inet, layers.IPProtocolUDP, rawtest.UDPBytes(t, netip.AddrPortFrom(guest, 40000), netip.AddrPortFrom(inet, 7), []byte("datagram")))
	echo := ipv4(gateway, layers.IPProtocolICMPv4, rawtest.EchoBytes(t, 8, 1, 1, []byte("ping")))
	// change returns a copy of b changed by fn.
	change := func(b []byte, fn func(b []byte)) []byte { b = append([]byte(nil), b...); fn(b); return b }
	setU16 := func(b []byte, v int) { b[0], b[1] = byte(v>>8), byte(v) }

	rng := rand.New(rand.NewPCG(11, 9))
	for _, tt := range []struct {
		name  string
		typ   uint16 // EtherType
		body  []byte
		count string // the counter that goes up
	}{
		{"truncated IPv4 header", 0x0800, tcp[:12], "IPv4.InTruncated"},
		{"IPv4 header length below 20", 0x0800, change(tcp, func(b []byte) { b[0] = 0x44; fixIPv4Checksum(b) }), "IPv4.InBadHeaderLen"},
		{"IPv4 header length past the datagram", 0x0800, change(tcp, func(b []byte) { b[0] = 0x4f; fixIPv4Checksum(b) }), "IPv4.InBadHeaderLen"},
		{"IPv4 total length past the frame", 0x0800, change(tcp, func(b []byte) { setU16(b[2:], len(b)+100); fixIPv4Checksum(b) }), "IPv4.InBadTotalLen"},
		{"IPv4 total length below the header", 0x0800, change(tcp, func(b []byte) { setU16(b[2:], 12); fixIPv4Checksum(b) }), "IPv4.InBadTotalLen"},
		{"bad IPv4 header checksum", 0x0800, change(tcp, func(b []byte) { b[10] ^= 0xff }), "IPv4.InCsumErrors"},
		{"IPv6 version in an IPv4 frame", 0x0800, change(tcp, func(b []byte) { b[0] = 0x65; fixIPv4Checksum(b) }), "IPv4.InBadVersion"},
		{"TCP data offset below 5", 0x0800, change(tcp, func(b []byte) { b[20+12] = 4 << 4; fixTCPChecksum(b) }), "TCP.InErrs"},
		{"TCP data offset past the segment", 0x0800, change(tcp, func(b []byte) { b[20+12] = 15 << 4; fixTCPChecksum(b) }), "TCP.InErrs"},
		{"bad TCP checksum", 0x0800, change(tcp, func(b []byte) { b[20+16] ^= 0xff }), "TCP.InCsumErrors"},
		{"TCP header cut short", 0x0800, change(tcp[:30], func(b []byte) { setU16(b[2:], 30); fixIPv4Checksum(b) }), "TCP.InErrs"},
		{"UDP length past the datagram", 0x0800, change(udp, func(b []byte) { setU16(b[20+4:], 200); setU16(b[20+6:], 0) }), "UDP.InErrors"},
		{"UDP length below its header", 0x0800, change(udp, func(b []byte) { setU16(b[20+4:], 4); setU16(b[20+6:], 0) }), "UDP.InErrors"},
		{"bad UDP checksum", 0x0800, change(udp, func(b []byte) { b[20+6] ^= 0xff }), "UDP.InCsumErrors"},
		{"bad ICMP checksum", 0x0800, change(echo, func(b []byte) { b[20+2] ^= 0xff }), "ICMP.InCsumErrors"},
		{"ICMP message cut short", 0x0800, ipv4(gateway, layers.IPProtocolICMPv4, []byte{8, 0, 0}), "ICMP.InErrors"},
		{"unknown IP protocol", 0x0800, ipv4(gateway, 253, []byte("what is this")), "IPv4.InUnknownProtos"},
		{"fragment past 64 KiB", 0x0800, change(udp, func(b []byte) { setU16(b[6:], 0x1fff); fixIPv4Checksum(b) }), "IPv4.ReasmOversize"},
		{"TCP option of length 0", 0x0800, tcpWithOptions(t, []byte{2, 0, 5, 0xb4}), "TCP.InErrs"},
		{"TCP option past the header", 0x0800, tcpWithOptions(t, []byte{1, 1, 3, 9}), "TCP.InErrs"},
		{"ICMP error quoting a cut header", 0x0800, ipv4(gateway, layers.IPProtocolICMPv4, rawtest.ICMPBytes(t, 3, 3, 0, []byte{0x45, 0, 0})), "ICMP.InErrors"},
		{"truncated ARP", 0x0806, []byte{0, 1, 8, 0, 6, 4, 0, 1}, ""},
		{"unknown EtherType", 0x88b5, []byte("local experimental"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := d.counters(t)
			frame := append(append(append([]byte(nil), gwMAC...), guestMAC...), byte(tt.typ>>8), byte(tt.typ))
			if _, err := syscall.Write(fd, append(frame, tt.body...)); err != nil {
				t.Fatalf("write on the packet socket: %v", err)
			}
			if tt.count == "" {
				return
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if d.counters(t)[tt.count] > before[tt.count] {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s stayed at %d", tt.count, before[tt.count])
				}
			}
		})
	}
	// Then random bytes: as IPv4, ARP, or anything.
	for i := range 2000 {
		body := make([]byte, rng.IntN(1500))
		for j := range body {
			body[j] = byte(rng.Uint32())
		}
		typ := []uint16{0x0800, 0x0806, uint16(rng.Uint32())}[i%3]
		if i%3 == 0 && len(body) > 0 {
			body[0] = 0x45 // past the version check, into the header's fields
		}
		frame := append(append(append([]byte(nil), gwMAC...), guestMAC...), byte(typ>>8), byte(typ))
		syscall.Write(fd, append(frame, body...)) // ENOBUFS: lost, as on a wire
		if i%100 == 99 {
			time.Sleep(time.Millisecond)
		}
	}

	d.alive(t)
	w.mustGuest(t, 10*time.Second, "ping", "-c", "1", "-W", "3", inetAddr)
	if out := w.mustGuest(t, 10*time.Second, "curl", "-sSf", "http://"+inetHTTP+"/hello"); out != "hello from the internet\n" {
		t.Errorf("guest: curl /hello after the garbage: %q", out)
	}
}

// tcpWithOptions returns a SYN from the guest to the internet's HTTP server
// whose options are opts (a multiple of 4 bytes), as they are.
func tcpWithOptions(t *testing.T, opts []byte) []byte {
	guest, inet := netip.MustParseAddr("10.0.2.100"), netip.MustParseAddr(inetAddr)
	seg := rawtest.TCPBytes(t, rawtest.TCPSegment{
		Src: netip.AddrPortFrom(guest, 40001), Dst: netip.AddrPortFrom(inet, 8080), Seq: 1, Flags: rawtest.SYN, Window: 64240})
	seg = append(seg[:20:20], opts...)
	seg[12] = byte(len(seg)/4) << 4
	b := rawtest.Serialize(t, rawtest.IPv4Header(guest, inet, layers.IPProtocolTCP), rawtest.Payload(seg))
	fixTCPChecksum(b)
	return b
}

// htons puts a 16-bit value in network order, as the packet socket's
// protocol field wants it.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// checksum is the Internet checksum (RFC 1071) of b, with sum added.
func checksum(b []byte, sum uint32) uint16 {
	for ; len(b) > 1; b = b[2:] {
		sum += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// fixIPv4Checksum sets the checksum of b's IPv4 header, as long as its
// header length field says (within b), at least 20 bytes.
func fixIPv4Checksum(b []byte) {
	n := min(max(int(b[0]&0x0f)*4, 20), len(b))
	b[10], b[11] = 0, 0
	c := checksum(b[:n], 0)
	b[10], b[11] = byte(c>>8), byte(c)
}

// fixTCPChecksum sets the checksum of the TCP segment after b's 20-byte
// IPv4 header, over the pseudo-header (RFC 9293 section 3.1).
func fixTCPChecksum(b []byte) {
	seg := b[20:]
	seg[16], seg[17] = 0, 0
	var sum uint32
	for i := 12; i < 20; i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	sum += 6 + uint32(len(seg))
	c := checksum(seg, sum)
	seg[16], seg[17] = byte(c>>8), byte(c)
}
