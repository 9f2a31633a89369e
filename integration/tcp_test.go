package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// GoNet's TCP against the kernel's: bulk transfers checked by SHA-256 in
// both directions, the kernel's tools (socat, curl) as clients, a thousand
// connections at once, every order of closing, resets and refusals, closed
// windows, keepalives, and net/http on either side.

// bulk is the size of the bulk transfers. Even under the race detector,
// which slows the stack's copies five to ten times, 50 MiB takes about two
// seconds each way on a two-core machine (20-60 MB/s against 200-500 MB/s
// without it), so the size is the same with and without -race.
const bulk = 50 << 20

// checkGoroutines fails the test if it leaves goroutines behind. Call it
// before newHost: cleanups run last-in first-out, so the check runs after
// the stack has closed.
func checkGoroutines(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// payload returns size bytes of random data, the same for the same seed.
func payload(seed uint64, size int64) io.Reader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return io.LimitReader(rand.NewChaCha8(s), size)
}

// digest counts and hashes what is written to it.
type digest struct {
	h hash.Hash
	n int64
}

func newDigest() *digest { return &digest{h: sha256.New()} }

func (d *digest) Write(b []byte) (int, error) {
	d.n += int64(len(b))
	return d.h.Write(b)
}

func (d *digest) sum() string { return fmt.Sprintf("%x", d.h.Sum(nil)) }

// halfCloser is a connection whose sending side can be shut alone: a
// *net.TCPConn or a *tcp.Conn.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// sendAll writes size random bytes from seed to c and shuts c's sending
// side, hashing what it wrote into d.
func sendAll(c halfCloser, seed uint64, size int64, d *digest) error {
	if _, err := io.Copy(c, io.TeeReader(payload(seed, size), d)); err != nil {
		return fmt.Errorf("write after %d bytes: %w", d.n, err)
	}
	return c.CloseWrite()
}

// recvAll reads c to its end, hashing what it read into d.
func recvAll(c net.Conn, d *digest) error {
	if _, err := io.Copy(d, c); err != nil {
		return fmt.Errorf("read after %d bytes: %w", d.n, err)
	}
	return nil
}

// roundTrip sends size random bytes through an echo on the other end of c,
// writing and reading at the same time, and checks the SHA-256 of what
// came back. It closes c.
func roundTrip(t *testing.T, c halfCloser, size int64, timeout time.Duration) {
	t.Helper()
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	sent, got := newDigest(), newDigest()
	werr := make(chan error, 1)
	start := time.Now()
	go func() { werr <- sendAll(c, uint64(size), size, sent) }()
	rerr := recvAll(c, got)
	if rerr != nil {
		c.Close() // ends the writer
	}
	if err := errors.Join(<-werr, rerr); err != nil {
		t.Fatalf("echo of %d bytes: %v", size, err)
	}
	if got.n != size || got.sum() != sent.sum() {
		t.Fatalf("echo of %d bytes (sha256 %s) came back as %d bytes (sha256 %s)", size, sent.sum(), got.n, got.sum())
	}
	logRate(t, "echo", size, time.Since(start))
}

func logRate(t *testing.T, what string, size int64, d time.Duration) {
	t.Helper()
	t.Logf("%s: %d bytes in %v (%.1f MB/s)", what, size, d.Round(time.Millisecond), float64(size)/d.Seconds()/1e6)
}

// gonetTCPAddr is GoNet's address and port as "ip:port".
func gonetTCPAddr(port int) string {
	return net.JoinHostPort(gonetAddr.Addr().String(), strconv.Itoa(port))
}

// kernelTCPAddr is the kernel's address and port as "ip:port".
func kernelTCPAddr(port int) string {
	return net.JoinHostPort(kernelAddr.Addr().String(), strconv.Itoa(port))
}

// dialKernel opens a kernel TCP connection from inside the namespace with
// d (its Control runs there too), closed when the test ends.
func (h *host) dialKernel(t *testing.T, d net.Dialer, addr string) (*net.TCPConn, error) {
	t.Helper()
	if d.Timeout == 0 {
		d.Timeout = 10 * time.Second
	}
	var c net.Conn
	err := h.ns.Do(func() error {
		var err error
		c, err = d.Dial("tcp4", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn), nil
}

// kernelConn is dialKernel that fails the test on error.
func (h *host) kernelConn(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := h.dialKernel(t, net.Dialer{}, addr)
	if err != nil {
		t.Fatalf("kernel dials %s: %v", addr, err)
	}
	return c
}

// kernelListener opens a kernel TCP listener inside the namespace, closed
// when the test ends.
func (h *host) kernelListener(t *testing.T, addr string) *net.TCPListener {
	t.Helper()
	var l net.Listener
	err := h.ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		t.Fatalf("kernel listens on %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	return l.(*net.TCPListener)
}

// kernelServe runs handle on each connection to a kernel listener on the
// kernel's address and port, until the test ends; cleanup closes the
// listener and every connection and waits for the handlers.
func (h *host) kernelServe(t *testing.T, port int, handle func(*net.TCPConn)) {
	t.Helper()
	l := h.kernelListener(t, kernelTCPAddr(port))
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
	)
	wg.Go(func() {
		for {
			c, err := l.AcceptTCP()
			if err != nil {
				return
			}
			mu.Lock()
			if closed { // accepted as the test ended
				mu.Unlock()
				c.Close()
				continue
			}
			conns[c] = true
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// gonetListener opens a listener on GoNet's port, closed when the test ends.
func (h *host) gonetListener(t *testing.T, port uint16) *tcp.Listener {
	t.Helper()
	l, err := h.stack.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// serve runs a service (services.ServeEchoTCP and the like) on GoNet's
// port until the test ends, and checks that it then returns nil.
func (h *host) serve(t *testing.T, port uint16, svc func(context.Context, net.Listener) error) {
	t.Helper()
	l := h.gonetListener(t, port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("service on port %d: %v", port, err)
		}
	})
}

// gonetDial opens a GoNet connection to the kernel's port.
func (h *host) gonetDial(t *testing.T, port int) *tcp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := h.stack.DialTCP(ctx, netip.AddrPortFrom(kernelAddr.Addr(), uint16(port)))
	if err != nil {
		t.Fatalf("GoNet dials the kernel's port %d: %v", port, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// accept takes the next connection from l, within a few seconds.
func accept(t *testing.T, l *tcp.Listener) *tcp.Conn {
	t.Helper()
	l.SetDeadline(time.Now().Add(10 * time.Second))
	c, err := l.AcceptTCP()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	l.SetDeadline(time.Time{})
	t.Cleanup(func() { c.Close() })
	return c
}

// logCounters logs GoNet's non-zero TCP counters and its connection table
// when the test has failed, or always with all set.
func (h *host) logCounters(t *testing.T, all bool) {
	t.Helper()
	if !all && !t.Failed() {
		return
	}
	var sb strings.Builder
	for _, ci := range h.stack.Connections() {
		fmt.Fprintf(&sb, "  %+v\n", ci)
	}
	counters := h.stack.Counters()
	for _, name := range slices.Sorted(maps.Keys(counters)) {
		if v := counters[name]; strings.HasPrefix(name, "TCP.") && v != 0 {
			fmt.Fprintf(&sb, "  %s %d\n", name, v)
		}
	}
	t.Logf("GoNet's TCP:\n%s", sb.String())
}

// tcpCounter returns one of GoNet's TCP counters ("FastRetrans").
func (h *host) tcpCounter(name string) int64 { return h.stack.Counters()["TCP."+name] }

// kernelCounters reads the namespace's network counters, as nstat names
// them ("TcpExtTCPKeepAlive").
func (h *host) kernelCounters(t *testing.T, names ...string) map[string]int64 {
	t.Helper()
	out := h.run(t, 5*time.Second, "nstat", append([]string{"-a", "-s", "-z"}, names...)...)
	m := map[string]int64{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) >= 2 {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				m[f[0]] = n
			}
		}
	}
	return m
}

// kernelCounter reads one of the namespace's counters.
func (h *host) kernelCounter(t *testing.T, name string) int64 {
	t.Helper()
	n, ok := h.kernelCounters(t, name)[name]
	if !ok {
		t.Fatalf("nstat has no %s", name)
	}
	return n
}

// gonetRow returns GoNet's connection-table row for local, remote.
func (h *host) gonetRow(local, remote netip.AddrPort) (tcp.ConnInfo, bool) {
	for _, ci := range h.stack.Connections() {
		if ci.Local == local && ci.Remote == remote {
			return ci, true
		}
	}
	return tcp.ConnInfo{}, false
}

// waitGone waits until GoNet's table has no row for local, remote, and
// returns the states it saw the connection pass through meanwhile.
func (h *host) waitGone(t *testing.T, local, remote netip.AddrPort, within time.Duration) []string {
	t.Helper()
	var states []string
	deadline := time.Now().Add(within)
	for {
		ci, ok := h.gonetRow(local, remote)
		if !ok {
			return states
		}
		if len(states) == 0 || states[len(states)-1] != ci.State {
			states = append(states, ci.State)
		}
		if time.Now().After(deadline) {
			h.logCounters(t, true)
			t.Fatalf("GoNet's connection %v-%v still in the table after %v (states seen: %v)", local, remote, within, states)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// kernelSockets returns the kernel's sockets in the namespace in state
// (an ss state filter such as "time-wait"), as ss -tan prints them.
func (h *host) kernelSockets(t *testing.T, state string) string {
	t.Helper()
	return h.run(t, 5*time.Second, "ss", "-Htan", "state", state)
}

func addrPort(a net.Addr) netip.AddrPort { return a.(*net.TCPAddr).AddrPort() }

// 1. socat to GoNet's echo service.

func TestSocatEchoTCP(t *testing.T) {
	lookPath(t, "socat")
	checkGoroutines(t)
	h := newHost(t, options{})
	h.serve(t, 7, services.ServeEchoTCP)
	defer h.logCounters(t, false)
	for _, size := range []int64{1, 64 << 10, bulk} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			// -t: after its input ends socat waits this long for the
			// echo's end, and exits as soon as it has it.
			cmd := h.ns.Command(ctx, "socat", "-b", "65536", "-t", "60", "-T", "60", "STDIO", "TCP4:"+gonetTCPAddr(7))
			sent, got := newDigest(), newDigest()
			cmd.Stdin = io.TeeReader(payload(uint64(size), size), sent)
			cmd.Stdout = got
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("socat: %v: %s", err, stderr.String())
			}
			if sent.n != size || got.n != size || got.sum() != sent.sum() {
				t.Fatalf("sent %d bytes (sha256 %s), echo came back as %d bytes (sha256 %s)", sent.n, sent.sum(), got.n, got.sum())
			}
			logRate(t, "socat echo", size, time.Since(start))
		})
	}
}

// 2. Bulk transfers between GoNet and a kernel socket, each way.

func TestGoNetSendsToKernel(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	c := h.bulkToKernel(t, 1, "GoNet to kernel")
	// The kernel's side closes after our FIN: we read its FIN.
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("GoNet's read after the kernel closed: %d, %v; want 0, EOF", n, err)
	}
}

func TestKernelSendsToGoNet(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	h.bulkFromKernel(t, 2, "kernel to GoNet")
}

// bulkToKernel sends bulk bytes of the pattern seeded by seed from a GoNet
// connection to a kernel socket that reads them all and closes, checks
// they arrived whole by SHA-256, and logs the rate as what. It returns
// GoNet's connection, write side closed, for the caller's further checks.
func (h *host) bulkToKernel(t *testing.T, seed uint64, what string) net.Conn {
	t.Helper()
	got := make(chan *digest, 1)
	h.kernelServe(t, 5001, func(c *net.TCPConn) {
		c.SetDeadline(time.Now().Add(120 * time.Second))
		d := newDigest()
		if err := recvAll(c, d); err != nil {
			t.Errorf("kernel: %v", err)
		}
		got <- d
	})
	c := h.gonetDial(t, 5001)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(120 * time.Second))
	sent := newDigest()
	start := time.Now()
	if err := sendAll(c, seed, bulk, sent); err != nil {
		t.Fatalf("GoNet: %v", err)
	}
	d := <-got
	if d.n != bulk || d.sum() != sent.sum() {
		t.Fatalf("GoNet sent %d bytes (sha256 %s), the kernel received %d (sha256 %s)", int64(bulk), sent.sum(), d.n, d.sum())
	}
	logRate(t, what, bulk, time.Since(start))
	return c
}

// bulkFromKernel is bulkToKernel the other way: a kernel socket sends,
// GoNet reads to the end.
func (h *host) bulkFromKernel(t *testing.T, seed uint64, what string) {
	t.Helper()
	sent := make(chan *digest, 1)
	h.kernelServe(t, 5001, func(c *net.TCPConn) {
		c.SetDeadline(time.Now().Add(120 * time.Second))
		d := newDigest()
		if err := sendAll(c, seed, bulk, d); err != nil {
			t.Errorf("kernel: %v", err)
		}
		sent <- d
	})
	c := h.gonetDial(t, 5001)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(120 * time.Second))
	got := newDigest()
	start := time.Now()
	if err := recvAll(c, got); err != nil {
		t.Fatalf("GoNet: %v", err)
	}
	d := <-sent
	if got.n != bulk || got.sum() != d.sum() {
		t.Fatalf("the kernel sent %d bytes (sha256 %s), GoNet received %d (sha256 %s)", d.n, d.sum(), got.n, got.sum())
	}
	logRate(t, what, bulk, time.Since(start))
}

// 3. curl against GoNet's web server.

func TestCurlFromGoNetHTTP(t *testing.T) {
	lookPath(t, "curl")
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	root := t.TempDir()
	size := int64(100 << 20)
	want := newDigest()
	f, err := os.Create(root + "/big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.MultiWriter(f, want), payload(3, size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	h.serve(t, 80, func(ctx context.Context, l net.Listener) error {
		return services.ServeHTTP(ctx, l, services.HTTPHandler(root, nil))
	})
	url := "http://" + gonetAddr.Addr().String() + "/"
	// --noproxy: the request goes to GoNet whatever the environment says.
	curl := func(args ...string) string {
		t.Helper()
		return h.run(t, 120*time.Second, "curl", append([]string{"--noproxy", "*", "-sS", "--max-time", "100"}, args...)...)
	}

	t.Run("whole", func(t *testing.T) {
		out := t.TempDir() + "/big"
		start := time.Now()
		curl("--fail", "-o", out, url+"big")
		logRate(t, "curl", size, time.Since(start))
		g, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		got := newDigest()
		io.Copy(got, g)
		if got.n != size || got.sum() != want.sum() {
			t.Fatalf("curl got %d bytes (sha256 %s), want %d (sha256 %s)", got.n, got.sum(), size, want.sum())
		}
	})
	t.Run("ranges", func(t *testing.T) {
		data, err := os.ReadFile(root + "/big")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct {
			spec       string
			start, end int64 // the bytes expected, end exclusive
		}{
			{"0-0", 0, 1},
			{"100-1099", 100, 1100},
			{"5000000-5999999", 5000000, 6000000},
			{"-1000", size - 1000, size},
			{fmt.Sprint(size-10, "-"), size - 10, size},
		} {
			out := t.TempDir() + "/part"
			code := curl("--fail", "-r", r.spec, "-o", out, "-w", "%{http_code}", url+"big")
			part, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if code != "206" || !bytes.Equal(part, data[r.start:r.end]) {
				t.Errorf("curl -r %s: status %s, %d bytes, want 206 and bytes %d-%d", r.spec, code, len(part), r.start, r.end-1)
			}
		}
	})
	t.Run("HEAD", func(t *testing.T) {
		head := curl("-I", url+"big")
		if !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(head, fmt.Sprintf("Content-Length: %d\r\n", size)) ||
			!strings.Contains(head, "Accept-Ranges: bytes") {
			t.Errorf("curl -I:\n%s", head)
		}
	})
	t.Run("404", func(t *testing.T) {
		if code := curl("-o", "/dev/null", "-w", "%{http_code}", url+"no-such-file"); code != "404" {
			t.Errorf("missing file: status %s, want 404", code)
		}
	})
}

// 4. A thousand connections at once.

func TestThousandConcurrentEchoes(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	h.serve(t, 7, services.ServeEchoTCP)
	const conns, dialers = 1000, 50
	// Open them all first, each dialer a thread in the namespace.
	cs := make([]*net.TCPConn, conns)
	var wg sync.WaitGroup
	errs := make(chan error, dialers)
	for w := range dialers {
		wg.Go(func() {
			errs <- h.ns.Do(func() error {
				for i := w; i < conns; i += dialers {
					c, err := net.DialTimeout("tcp4", gonetTCPAddr(7), 20*time.Second)
					if err != nil {
						return fmt.Errorf("connection %d: %w", i, err)
					}
					cs[i] = c.(*net.TCPConn)
				}
				return nil
			})
		})
	}
	wg.Wait()
	close(errs)
	t.Cleanup(func() {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	})
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// All of them are established at once.
	deadline := time.Now().Add(10 * time.Second)
	for h.tcpCounter("CurrEstab") < conns && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := h.tcpCounter("CurrEstab"); n < conns {
		t.Fatalf("GoNet has %d connections established, want %d", n, conns)
	}
	start := time.Now()
	var total atomic.Int64
	failures := make(chan error, conns)
	for i, c := range cs {
		wg.Go(func() {
			c.SetDeadline(time.Now().Add(60 * time.Second))
			msg := make([]byte, 2000+i*37%6000)
			rand.NewChaCha8([32]byte{byte(i), byte(i >> 8)}).Read(msg)
			werr := make(chan error, 1)
			go func() {
				_, err := c.Write(msg)
				if err == nil {
					err = c.CloseWrite()
				}
				werr <- err
			}()
			back, rerr := io.ReadAll(c)
			if rerr != nil {
				c.Close()
			}
			if err := errors.Join(<-werr, rerr); err != nil {
				failures <- fmt.Errorf("connection %d: %w", i, err)
				return
			}
			if !bytes.Equal(back, msg) {
				failures <- fmt.Errorf("connection %d: sent %d bytes, echo came back as %d bytes, equal=%v", i, len(msg), len(back), bytes.Equal(back, msg))
				return
			}
			total.Add(int64(len(msg)))
		})
	}
	wg.Wait()
	close(failures)
	n := 0
	for err := range failures {
		if n++; n <= 10 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d connections failed", n, conns)
	}
	logRate(t, fmt.Sprintf("%d echoes at once", conns), total.Load(), time.Since(start))
	if got := h.tcpCounter("PassiveOpens"); got != conns {
		t.Errorf("TCP.PassiveOpens = %d, want %d", got, conns)
	}
}

// 5. Closing orders, resets and refusals.

// pairUp returns a kernel connection to GoNet's listener on port and the
// GoNet end of it.
func (h *host) pairUp(t *testing.T, l *tcp.Listener) (*net.TCPConn, *tcp.Conn) {
	t.Helper()
	k := h.kernelConn(t, gonetTCPAddr(int(l.AddrPort().Port())))
	g := accept(t, l)
	if addrPort(k.LocalAddr()) != addrPort(g.RemoteAddr()) {
		t.Fatalf("kernel's end %v, GoNet's peer %v", k.LocalAddr(), g.RemoteAddr())
	}
	// A byte each way: both ends are in ESTABLISHED with nothing owed.
	exchangeByte(t, k, g)
	exchangeByte(t, g, k)
	return k, g
}

// exchangeByte sends one byte from a to b.
func exchangeByte(t *testing.T, a, b net.Conn) {
	t.Helper()
	if _, err := a.Write([]byte{'x'}); err != nil {
		t.Fatalf("write from %v: %v", a.LocalAddr(), err)
	}
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer b.SetReadDeadline(time.Time{})
	if _, err := io.ReadFull(b, make([]byte, 1)); err != nil {
		t.Fatalf("read at %v: %v", b.LocalAddr(), err)
	}
}

// readEOF checks that c's next read ends the stream cleanly.
func readEOF(t *testing.T, who string, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("%s's read after the peer's FIN: %d, %v; want 0, EOF", who, n, err)
	}
}

// readReset checks that c's next read fails with ECONNRESET.
func readReset(t *testing.T, who string, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 10))
	if n != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s's read after the peer's RST: %d, %v; want ECONNRESET", who, n, err)
	}
}

// shortMSL makes TIME-WAIT last 200 ms.
var shortMSL = stack.Config{TCP: tcp.Config{MSL: 100 * time.Millisecond}}

func TestCloseKernelFirst(t *testing.T) {
	lookPath(t, "ss")
	checkGoroutines(t)
	h := newHost(t, options{stack: shortMSL})
	defer h.logCounters(t, false)
	k, g := h.pairUp(t, h.gonetListener(t, 5002))
	local, remote := addrPort(g.LocalAddr()), addrPort(g.RemoteAddr())
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	readEOF(t, "GoNet", g)
	if err := g.Close(); err != nil {
		t.Fatalf("GoNet's close: %v", err)
	}
	// GoNet's passive close: LAST-ACK, then gone once its FIN is
	// acknowledged; the kernel, which closed first, waits in TIME-WAIT.
	states := h.waitGone(t, local, remote, 5*time.Second)
	t.Logf("GoNet's states after its close: %v", states)
	if tw := h.kernelSockets(t, "time-wait"); !strings.Contains(tw, remote.String()) {
		t.Errorf("the kernel's socket %v is not in TIME-WAIT:\n%s", remote, tw)
	}
	if n := h.tcpCounter("OutRsts") + h.tcpCounter("InRsts"); n != 0 {
		t.Errorf("%d resets in an orderly close", n)
	}
}

func TestCloseGoNetFirst(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{stack: shortMSL})
	defer h.logCounters(t, false)
	k, g := h.pairUp(t, h.gonetListener(t, 5002))
	local, remote := addrPort(g.LocalAddr()), addrPort(g.RemoteAddr())
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	readEOF(t, "kernel", k)
	closed := time.Now()
	if err := k.Close(); err != nil {
		t.Fatalf("kernel's close: %v", err)
	}
	// GoNet's active close: FIN-WAIT-2, then TIME-WAIT for 2*MSL.
	states := h.waitGone(t, local, remote, 5*time.Second)
	lasted := time.Since(closed)
	t.Logf("GoNet's states after the kernel's close: %v, gone after %v", states, lasted)
	if lasted < 2*shortMSL.TCP.MSL {
		t.Errorf("GoNet's connection left the table %v after the kernel's FIN, before TIME-WAIT's 2*MSL", lasted)
	}
	if got := h.tcpCounter("TimeWaits"); got != 1 {
		t.Errorf("TCP.TimeWaits = %d, want 1", got)
	}
	if n := h.tcpCounter("OutRsts") + h.tcpCounter("InRsts"); n != 0 {
		t.Errorf("%d resets in an orderly close", n)
	}
}

// TestCloseSimultaneously has both ends close at the same moment over a link
// that delays every frame, so that the FINs cross (RFC 9293 3.6, figure 13):
// both go through CLOSING to TIME-WAIT.
func TestCloseSimultaneously(t *testing.T) {
	lookPath(t, "ss")
	checkGoroutines(t)
	h := newHost(t, options{stack: shortMSL, wrap: delayLink(20 * time.Millisecond)})
	defer h.logCounters(t, false)
	k, g := h.pairUp(t, h.gonetListener(t, 5002))
	local, remote := addrPort(g.LocalAddr()), addrPort(g.RemoteAddr())
	var wg sync.WaitGroup
	go1 := make(chan struct{})
	var kerr, gerr error
	wg.Go(func() { <-go1; kerr = k.Close() })
	wg.Go(func() { <-go1; gerr = g.Close() })
	close(go1)
	wg.Wait()
	if kerr != nil || gerr != nil {
		t.Fatalf("close: kernel %v, GoNet %v", kerr, gerr)
	}
	states := h.waitGone(t, local, remote, 5*time.Second)
	t.Logf("GoNet's states after the close: %v", states)
	if !slices.Contains(states, "CLOSING") && !slices.Contains(states, "TIME-WAIT") {
		t.Errorf("GoNet went through %v, not CLOSING or TIME-WAIT", states)
	}
	if got := h.tcpCounter("TimeWaits"); got != 1 {
		t.Errorf("TCP.TimeWaits = %d, want 1: the FINs crossed and both ends wait", got)
	}
	if tw := h.kernelSockets(t, "time-wait"); !strings.Contains(tw, remote.String()) {
		t.Errorf("the kernel's socket %v is not in TIME-WAIT:\n%s", remote, tw)
	}
	if n := h.tcpCounter("OutRsts") + h.tcpCounter("InRsts"); n != 0 {
		t.Errorf("%d resets in an orderly close", n)
	}
}

func TestKernelResets(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	k, g := h.pairUp(t, h.gonetListener(t, 5002))
	local, remote := addrPort(g.LocalAddr()), addrPort(g.RemoteAddr())
	// GoNet is blocked in Read when the reset comes.
	errc := make(chan error, 1)
	go func() {
		g.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := g.Read(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	k.SetLinger(0)
	k.Close()
	if err := <-errc; !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("GoNet's read after the kernel's RST: %v, want ECONNRESET", err)
	}
	if _, err := g.Write([]byte("late")); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("GoNet's write after the kernel's RST: %v, want ECONNRESET", err)
	}
	h.waitGone(t, local, remote, time.Second)
	if got := h.tcpCounter("InRsts"); got != 1 {
		t.Errorf("TCP.InRsts = %d, want 1", got)
	}
	if got := h.tcpCounter("EstabResets"); got != 1 {
		t.Errorf("TCP.EstabResets = %d, want 1", got)
	}
}

func TestGoNetResets(t *testing.T) {
	lookPath(t, "ss")
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	k, g := h.pairUp(t, h.gonetListener(t, 5002))
	local, remote := addrPort(g.LocalAddr()), addrPort(g.RemoteAddr())
	if err := g.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	readReset(t, "kernel", k)
	h.waitGone(t, local, remote, time.Second)
	// One reset from the connection. (OutRsts may count a second: the
	// answer to an ACK of the kernel's that crossed the first.)
	if got := h.tcpCounter("EstabResets"); got != 1 {
		t.Errorf("TCP.EstabResets = %d, want 1", got)
	}
	// The kernel forgot the connection at once: no TIME-WAIT after a reset.
	if ss := h.kernelSockets(t, "all"); strings.Contains(ss, remote.String()) {
		t.Errorf("the kernel still has the reset socket:\n%s", ss)
	}
}

// TestGoNetResetsWithUnreadData closes a GoNet connection with data it has
// not read: RFC 2525 2.17 says to reset, as Linux does.
func TestGoNetResetsWithUnreadData(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	k, g := h.pairUp(t, h.gonetListener(t, 5002))
	if _, err := k.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for g.Info().RecvQueue == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	g.Close()
	readReset(t, "kernel", k)
}

func TestConnectionRefused(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	t.Run("GoNet dials the kernel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := h.stack.DialTCP(ctx, netip.AddrPortFrom(kernelAddr.Addr(), 5003))
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("GoNet dials a closed kernel port: %v, want ECONNREFUSED", err)
		}
		if got := h.tcpCounter("AttemptFails"); got != 1 {
			t.Errorf("TCP.AttemptFails = %d, want 1", got)
		}
	})
	t.Run("kernel dials GoNet", func(t *testing.T) {
		before := h.tcpCounter("OutRsts")
		_, err := h.dialKernel(t, net.Dialer{}, gonetTCPAddr(5003))
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("kernel dials a closed GoNet port: %v, want ECONNREFUSED", err)
		}
		if got := h.tcpCounter("OutRsts") - before; got != 1 {
			t.Errorf("GoNet sent %d resets, want 1", got)
		}
	})
	if len(h.stack.Connections()) != 0 {
		t.Errorf("connections left: %v", h.stack.Connections())
	}
}

// 6. Closed windows.

// progress counts the bytes a writer has written, so a test can see it
// stall.
type progress struct {
	w io.Writer
	n atomic.Int64
}

func (p *progress) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n.Add(int64(n))
	return n, err
}

// stalled samples p over d and reports whether it made no progress.
func stalled(p *progress, d time.Duration) (bool, int64) {
	before := p.n.Load()
	time.Sleep(d)
	after := p.n.Load()
	return before == after, after
}

// TestKernelClosesItsWindow has GoNet write to a kernel socket that stops
// reading: the kernel's receive buffer fills, its window closes, GoNet's
// writes block and its persist timer probes (RFC 9293 3.8.6.1) until the
// kernel reads again.
func TestKernelClosesItsWindow(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	l := h.gonetListener(t, 5004)
	// A small receive buffer, set before the handshake, so the window
	// closes after little data.
	k, err := h.dialKernel(t, net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 32<<10)
		})
		return errors.Join(err, serr)
	}}, gonetTCPAddr(5004))
	if err != nil {
		t.Fatal(err)
	}
	g := accept(t, l)
	const size = 16 << 20
	g.SetDeadline(time.Now().Add(60 * time.Second))
	k.SetDeadline(time.Now().Add(60 * time.Second))
	sent := newDigest()
	p := &progress{w: g}
	werr := make(chan error, 1)
	go func() {
		_, err := io.Copy(p, io.TeeReader(payload(6, size), sent))
		if err == nil {
			err = g.CloseWrite()
		}
		werr <- err
	}()
	// The kernel does not read for three seconds. GoNet's persist timer
	// backs off as its retransmission timer does (RFC 9293 3.8.6.1): with
	// an RTO of 200 ms, probes after 0.2, 0.6, 1.4 and 3 s.
	time.Sleep(time.Second)
	still, written := stalled(p, 2*time.Second)
	info := g.Info()
	probes := h.tcpCounter("PersistProbes")
	t.Logf("after 3 s: GoNet wrote %d bytes, send queue %d, peer's window %d, %d persist probes", written, info.SendQueue, info.SendWindow, probes)
	if !still || written >= size {
		t.Errorf("GoNet's writes did not block on the closed window: %d bytes written", written)
	}
	if info.SendWindow != 0 {
		t.Errorf("GoNet sees a window of %d, want 0", info.SendWindow)
	}
	if probes < 2 {
		t.Errorf("TCP.PersistProbes = %d after 3 s of closed window, want at least 2", probes)
	}
	got := newDigest()
	rerr := recvAll(k, got)
	if rerr != nil {
		g.Close()
	}
	if err := errors.Join(<-werr, rerr); err != nil {
		t.Fatal(err)
	}
	if got.n != size || got.sum() != sent.sum() {
		t.Fatalf("GoNet sent %d bytes (sha256 %s), the kernel read %d (sha256 %s)", sent.n, sent.sum(), got.n, got.sum())
	}
}

// TestGoNetClosesItsWindow is the reverse: GoNet's reader stops, GoNet's
// window closes, the kernel's writes block and it probes, until GoNet reads
// again and says its window opened.
func TestGoNetClosesItsWindow(t *testing.T) {
	lookPath(t, "nstat")
	lookPath(t, "ss")
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	l := h.gonetListener(t, 5004)
	k := h.kernelConn(t, gonetTCPAddr(5004))
	g := accept(t, l)
	const size = 16 << 20 // more than GoNet's 4 MiB window and the kernel's send buffer
	g.SetDeadline(time.Now().Add(60 * time.Second))
	k.SetDeadline(time.Now().Add(60 * time.Second))
	sent := newDigest()
	p := &progress{w: k}
	werr := make(chan error, 1)
	go func() {
		_, err := io.Copy(p, io.TeeReader(payload(7, size), sent))
		if err == nil {
			err = k.CloseWrite()
		}
		werr <- err
	}()
	probes := h.kernelCounter(t, "TcpExtTCPWinProbe")
	time.Sleep(time.Second)
	still, written := stalled(p, 2*time.Second)
	info := g.Info()
	// The kernel arms its persist timer only when the peer's window
	// leaves it nothing to send.
	ss := h.run(t, 5*time.Second, "ss", "-Htnoi", "state", "established", "dst", gonetAddr.Addr().String())
	probes = h.kernelCounter(t, "TcpExtTCPWinProbe") - probes
	t.Logf("after 3 s: the kernel wrote %d bytes, GoNet's receive queue %d, the kernel sent %d window probes:\n%s", written, info.RecvQueue, probes, ss)
	if !still || written >= size {
		t.Errorf("the kernel's writes did not block on GoNet's closed window: %d bytes written", written)
	}
	if want := h.stack.TCP().Config().ReceiveBuffer - 64<<10; info.RecvQueue < want {
		t.Errorf("GoNet holds %d bytes unread, want its buffer nearly full (at least %d)", info.RecvQueue, want)
	}
	if !strings.Contains(ss, "timer:(persist") {
		t.Errorf("the kernel's persist timer is not running: it does not see GoNet's window closed")
	}
	// On a clean link the kernel never retransmits: if it does, GoNet
	// dropped data sent within a window it had advertised, that is, it
	// shrank its window (RFC 9293 3.8.6.2.2).
	if n := h.kernelCounter(t, "TcpRetransSegs"); n != 0 {
		t.Errorf("the kernel retransmitted %d segments on a clean link: GoNet shrank its window", n)
	}
	got := newDigest()
	rerr := recvAll(g, got)
	if rerr != nil {
		k.Close()
	}
	if err := errors.Join(<-werr, rerr); err != nil {
		t.Fatal(err)
	}
	if got.n != size || got.sum() != sent.sum() {
		t.Fatalf("the kernel sent %d bytes (sha256 %s), GoNet read %d (sha256 %s)", sent.n, sent.sum(), got.n, got.sum())
	}
}

// 7. Keepalive.

// TestKernelKeepaliveAnswered leaves a kernel connection with keepalive
// probes every second idle: GoNet answers each (a probe is an old sequence
// number, RFC 9293 3.8.4, which earns an ACK), and the kernel, which gives
// up after two unanswered ones, keeps the connection.
func TestKernelKeepaliveAnswered(t *testing.T) {
	lookPath(t, "nstat")
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	l := h.gonetListener(t, 5005)
	k := h.kernelConn(t, gonetTCPAddr(5005))
	g := accept(t, l)
	if err := k.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 2}); err != nil {
		t.Fatal(err)
	}
	exchangeByte(t, k, g)
	before := h.kernelCounter(t, "TcpExtTCPKeepAlive")
	time.Sleep(4500 * time.Millisecond)
	probes := h.kernelCounter(t, "TcpExtTCPKeepAlive") - before
	t.Logf("the kernel sent %d keepalive probes in 4.5 s", probes)
	if probes < 3 {
		t.Errorf("the kernel sent %d keepalive probes, want at least 3", probes)
	}
	exchangeByte(t, k, g)
	exchangeByte(t, g, k)
}

// TestGoNetKeepalive leaves a GoNet connection with keepalive idle: GoNet
// probes, the kernel answers, and the connection stays up.
func TestGoNetKeepalive(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	kl := h.kernelListener(t, kernelTCPAddr(5005))
	g := h.gonetDial(t, 5005)
	k, err := kl.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	k.SetKeepAlive(false) // only GoNet probes
	exchangeByte(t, g, k)
	exchangeByte(t, k, g)
	if err := g.SetKeepAlive(true); err != nil {
		t.Fatal(err)
	}
	if err := g.SetKeepAlivePeriod(500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// Two unanswered probes would end the connection within the wait.
	if err := g.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Count: 2}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	probes := h.tcpCounter("KeepaliveProbes")
	t.Logf("GoNet sent %d keepalive probes in 3 s", probes)
	if probes < 3 {
		t.Errorf("TCP.KeepaliveProbes = %d after 3 s idle with a 500 ms period, want at least 3", probes)
	}
	if got := h.tcpCounter("KeepaliveAborts"); got != 0 {
		t.Errorf("TCP.KeepaliveAborts = %d: the kernel's answers were not taken", got)
	}
	exchangeByte(t, g, k)
	exchangeByte(t, k, g)
}

// 9. net/http, unchanged, over GoNet.

func TestHTTPClientOverGoNet(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	l := h.kernelListener(t, kernelTCPAddr(8080))
	body := bytes.Repeat([]byte("kernel's answer\n"), 100000)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Path", r.URL.Path)
		w.Write(body)
	})}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	defer func() {
		srv.Close()
		if err := <-done; err != http.ErrServerClosed {
			t.Errorf("kernel's http server: %v", err)
		}
	}()
	tr := &http.Transport{DialContext: h.stack.DialContext} // no Proxy: straight to the namespace
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for i := range 3 { // the second and third reuse the connection
		resp, err := client.Get("http://" + kernelTCPAddr(8080) + "/hello/" + fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("X-Path") != "/hello/"+fmt.Sprint(i) || !bytes.Equal(got, body) {
			t.Fatalf("GET: %s, X-Path %q, %d bytes (want %d)", resp.Status, resp.Header.Get("X-Path"), len(got), len(body))
		}
	}
	if got := h.tcpCounter("ActiveOpens"); got != 1 {
		t.Errorf("TCP.ActiveOpens = %d, want 1: keep-alive reuses the connection", got)
	}
}

func TestHTTPServerOverGoNet(t *testing.T) {
	lookPath(t, "curl")
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	l, err := h.stack.Listen("tcp", ":8080")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s from %s: %d bytes\n", r.Method, r.URL.Path, r.RemoteAddr, len(b))
	})}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	defer func() {
		srv.Close()
		if err := <-done; err != http.ErrServerClosed {
			t.Errorf("GoNet's http server: %v", err)
		}
	}()
	url := "http://" + gonetTCPAddr(8080) + "/x"
	out := h.run(t, 30*time.Second, "curl", "--noproxy", "*", "-sS", "--fail", url)
	want := fmt.Sprintf("GET /x from %s:", kernelAddr.Addr())
	if !strings.HasPrefix(out, want) {
		t.Errorf("curl %s: %q, want %q...", url, out, want)
	}
	post := h.run(t, 30*time.Second, "curl", "--noproxy", "*", "-sS", "--fail", "--data-binary", strings.Repeat("p", 100000), url)
	if !strings.HasPrefix(post, "POST /x") || !strings.HasSuffix(post, ": 100000 bytes\n") {
		t.Errorf("curl POST: %q", post)
	}
}

// A kernel client with Nagle's algorithm on (Go's net turns it off; curl,
// many HTTP clients and databases' drivers leave it on) that writes a
// request in two pieces before reading the answer holds the second piece
// until the first is acknowledged. GoNet acknowledges a young connection's
// data at once (tcp/quickack.go), as Linux does, so the answer does not
// wait for a 40 ms delayed ACK.
func TestNagleClientWaitsForNoDelayedAck(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	const head, body, port = 100, 100, 8080
	l := h.gonetListener(t, port)
	var served sync.WaitGroup
	defer served.Wait()
	served.Add(1)
	go func() {
		defer served.Done()
		for {
			c, err := l.AcceptTCP()
			if err != nil {
				return
			}
			served.Add(1)
			go func() {
				defer served.Done()
				defer c.Close()
				if _, err := io.ReadFull(c, make([]byte, head+body)); err == nil {
					c.Write([]byte{'!'})
				}
			}()
		}
	}()
	before := h.tcpCounter("DelayedACKs")
	best := time.Hour
	for range 5 { // the fastest of five: a busy machine only slows some
		c := h.kernelConn(t, gonetTCPAddr(port))
		if err := c.SetNoDelay(false); err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		if _, err := c.Write(make([]byte, head)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(make([]byte, body)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatalf("the answer: %v", err)
		}
		best = min(best, time.Since(start))
		c.Close()
	}
	l.Close()
	if delayed := h.tcpCounter("DelayedACKs") - before; best > 20*time.Millisecond || delayed != 0 {
		t.Errorf("the fastest request in two pieces took %v, and GoNet sent %d delayed ACKs; want well under the 40 ms of a delayed ACK, and none", best, delayed)
	}
}
