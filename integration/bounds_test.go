package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// Memory bounds against the kernel: ten thousand connections held at once
// with GoNet's memory per connection measured, and a small memory budget
// that refuses connections beyond it while those it took keep working.

// The kernel's side of the ten thousand connections runs in a child
// process (this test binary again, in the namespace), so that the memory
// measured in this process is GoNet's alone. It speaks on stdin/stdout:
// "ready" once every connection is established, then on a line from stdin
// it sends a message on each and reads the echo, says "echoed", and holds
// the connections until stdin closes.
const dialerEnv = "GONET_TEST_DIALER" // "ip:port,count"

// TestKernelDialerProcess is the child: a test that runs only when the
// parent sets dialerEnv.
func TestKernelDialerProcess(t *testing.T) {
	spec := os.Getenv(dialerEnv)
	if spec == "" {
		t.Skip("the kernel's side of TestTenThousandConnections, run by it")
	}
	addr, count, _ := strings.Cut(spec, ",")
	n, err := strconv.Atoi(count)
	if err != nil {
		t.Fatal(err)
	}
	say := func(format string, args ...any) { fmt.Printf("dialer: "+format+"\n", args...) }
	conns := make([]net.Conn, n)
	if err := parallel(n, 64, func(i int) error {
		c, err := net.DialTimeout("tcp4", addr, 30*time.Second)
		conns[i] = c
		return err
	}); err != nil {
		say("error %v", err)
		return
	}
	say("ready")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return
	}
	if err := parallel(n, 64, func(i int) error {
		msg := []byte(fmt.Sprintf("%08d", i))
		conns[i].SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := conns[i].Write(msg); err != nil {
			return err
		}
		back := make([]byte, len(msg))
		if _, err := io.ReadFull(conns[i], back); err != nil {
			return err
		}
		if string(back) != string(msg) {
			return fmt.Errorf("connection %d: echo %q, want %q", i, back, msg)
		}
		return nil
	}); err != nil {
		say("error %v", err)
		return
	}
	say("echoed")
	io.Copy(io.Discard, in)
	for _, c := range conns {
		c.Close()
	}
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first
// error, naming its index.
func parallel(n, workers int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("connection %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// goMemory is what this process holds: live heap objects, goroutine
// stacks, and the resident set.
type goMemory struct{ heap, stacks, rss int64 }

func measureMemory(t *testing.T) goMemory {
	t.Helper()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	m := goMemory{heap: int64(s[0].Value.Uint64()), stacks: int64(s[1].Value.Uint64())}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			m.rss = kb << 10
		}
	}
	return m
}

// Ten thousand kernel connections to a GoNet listener, all established at
// once, then each used for one small echo. GoNet's memory per idle
// connection (heap and goroutine stacks, measured after a GC) is logged
// with the resident set's growth, and must stay within what the memory
// budget charges per connection (tcp.ConnMemory): the budget's bound on
// connections is then a bound on real memory.
func TestTenThousandConnections(t *testing.T) {
	const conns = 10000
	checkGoroutines(t)
	h := newHost(t, options{stack: stack.Config{MemoryLimit: 1 << 30}})
	defer h.logCounters(t, false)
	l := h.gonetListener(t, 7)

	accepted := make(chan *tcp.Conn, conns)
	go func() {
		for {
			c, err := l.AcceptTCP()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var held []*tcp.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	before := measureMemory(t)
	usedBefore := h.stack.Budget().Used()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cmd := h.ns.Command(ctx, os.Args[0], "-test.run=^TestKernelDialerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", dialerEnv, gonetTCPAddr(7), conns))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	expect := func(want string) {
		t.Helper()
		for lines.Scan() {
			if msg, ok := strings.CutPrefix(lines.Text(), "dialer: "); ok {
				if msg != want {
					t.Fatalf("the kernel's side: %s, want %q", msg, want)
				}
				return
			}
		}
		t.Fatalf("the kernel's side ended before %q: %v", want, lines.Err())
	}
	expect("ready")
	for len(held) < conns {
		select {
		case c := <-accepted:
			held = append(held, c)
		case <-ctx.Done():
			t.Fatalf("accepted %d of %d connections", len(held), conns)
		}
	}
	established := time.Since(start)
	if n := h.tcpCounter("CurrEstab"); n != conns {
		t.Fatalf("CurrEstab = %d, want %d", n, conns)
	}
	after := measureMemory(t)
	charged := (h.stack.Budget().Used() - usedBefore) / conns
	perConn := func(a, b int64) float64 { return float64(a-b) / conns / 1024 }
	heapStacks := perConn(after.heap+after.stacks, before.heap+before.stacks)
	t.Logf("%d connections established in %v; GoNet per idle connection: %.1f KiB heap + %.1f KiB goroutine stack = %.1f KiB (resident set %.1f KiB), budget charge %.1f KiB",
		conns, established.Round(time.Millisecond), perConn(after.heap, before.heap), perConn(after.stacks, before.stacks),
		heapStacks, perConn(after.rss, before.rss), float64(charged)/1024)
	measured := heapStacks
	if raceEnabled {
		// The race detector doubles goroutine stacks (8 KiB here for
		// 4 KiB without it): hold the heap alone to the charge.
		measured = perConn(after.heap, before.heap)
	}
	if measured > float64(charged)/1024 {
		t.Errorf("%.1f KiB per connection, more than the %.1f KiB the budget charges", measured, float64(charged)/1024)
	}

	// Each used once: GoNet echoes what the kernel sends.
	var wg sync.WaitGroup
	echoErrs := make(chan error, conns)
	for _, c := range held {
		wg.Go(func() {
			c.SetDeadline(time.Now().Add(30 * time.Second))
			buf := make([]byte, 8)
			if _, err := io.ReadFull(c, buf); err != nil {
				echoErrs <- err
				return
			}
			if _, err := c.Write(buf); err != nil {
				echoErrs <- err
			}
		})
	}
	start = time.Now()
	fmt.Fprintln(stdin, "go")
	expect("echoed")
	wg.Wait()
	close(echoErrs)
	for err := range echoErrs {
		t.Fatalf("GoNet's echo: %v", err)
	}
	t.Logf("%d echoes in %v", conns, time.Since(start).Round(time.Millisecond))
}

// A stack with a small memory budget (SYN cookies off) makes connections
// while the budget keeps half its bytes free for data: two from the
// kernel, two of its own. Then the kernel's SYNs are dropped (counted; its
// connect times out) and GoNet's own Dial fails with ENOBUFS; the
// connections it has carry data both ways, and one that ends makes room
// for another.
func TestSmallBudgetRefusesExcessConnectionsFromTheKernel(t *testing.T) {
	const fit = 4 // connections in half the budget
	checkGoroutines(t)
	h := newHost(t, options{stack: stack.Config{
		MemoryLimit: int64(2*fit*tcp.ConnMemory + 4096), // 4096: ARP and IPv4 while they work
		TCP:         tcp.Config{SynCookies: tcp.SynCookiesNever},
	}})
	defer h.logCounters(t, false)
	l := h.gonetListener(t, 7)
	h.kernelServe(t, 9, func(c *net.TCPConn) { io.Copy(c, c) })
	var kernel []*net.TCPConn
	var gonet []net.Conn
	for range fit / 2 {
		k := h.kernelConn(t, gonetTCPAddr(7))
		kernel, gonet = append(kernel, k), append(gonet, accept(t, l))
	}
	for range fit / 2 {
		gonet = append(gonet, h.gonetDial(t, 9))
	}

	if _, err := h.dialKernel(t, net.Dialer{Timeout: 1500 * time.Millisecond}, gonetTCPAddr(7)); err == nil {
		t.Fatal("the kernel connected beyond the budget")
	}
	refused := h.tcpCounter("MemoryRefusals")
	if refused < 1 {
		t.Errorf("MemoryRefusals = %d, want at least 1: the kernel's SYN", refused)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := h.stack.DialTCP(ctx, netip.AddrPortFrom(kernelAddr.Addr(), 9))
	var oe *net.OpError
	if !errors.As(err, &oe) || !errors.Is(err, syscall.ENOBUFS) {
		t.Fatalf("GoNet dials beyond its budget: %v, want a *net.OpError wrapping ENOBUFS", err)
	}
	if n := h.tcpCounter("MemoryRefusals"); n != refused+1 {
		t.Errorf("MemoryRefusals = %d after the refused Dial, want %d", n, refused+1)
	}

	for i, k := range kernel {
		exchangeByte(t, k, gonet[i])
		exchangeByte(t, gonet[i], k)
	}
	for _, g := range gonet[fit/2:] {
		msg := []byte("through the kernel's echo")
		if _, err := g.Write(msg); err != nil {
			t.Fatal(err)
		}
		g.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(g, make([]byte, len(msg))); err != nil {
			t.Fatalf("echo from the kernel: %v", err)
		}
	}

	// The kernel ends one of GoNet's passive connections (no TIME-WAIT
	// on GoNet's side): its memory comes back, and a new one gets in.
	kernel[0].Close()
	readEOF(t, "GoNet", gonet[0])
	gonet[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for h.tcpCounter("Connections") > fit-1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	k := h.kernelConn(t, gonetTCPAddr(7))
	exchangeByte(t, k, accept(t, l))
}

// Receive auto-tuning against the kernel: 50 MiB from a kernel sender,
// with GoNet's receive buffer auto-tuned from 128 KiB (the default) and
// fixed at 4 MiB (the default before auto-tuning), in turn, three times
// each; the rates and the buffer each reached are logged. Every byte must
// arrive, and the tuned buffer must have grown.
func TestReceiveAutoTuningAgainstTheKernel(t *testing.T) {
	configs := []struct {
		name string
		cfg  tcp.Config
	}{
		{"auto-tuned", tcp.Config{}},
		{"fixed 4 MiB", tcp.Config{ReceiveBuffer: 4 << 20, ReceiveBufferMax: 4 << 20}},
	}
	for round := range 3 {
		for _, cf := range configs {
			h := newHost(t, options{stack: stack.Config{TCP: cf.cfg}})
			port := 5001 + round
			h.kernelServe(t, port, func(c *net.TCPConn) {
				c.SetDeadline(time.Now().Add(60 * time.Second))
				if err := sendAll(c, 2, bulk, newDigest()); err != nil {
					t.Errorf("kernel: %v", err)
				}
			})
			c := h.gonetDial(t, port)
			c.SetDeadline(time.Now().Add(60 * time.Second))
			got := newDigest()
			start := time.Now()
			if err := recvAll(c, got); err != nil {
				t.Fatalf("%s: GoNet: %v", cf.name, err)
			}
			took := time.Since(start)
			if got.n != bulk {
				t.Fatalf("%s: GoNet received %d bytes, want %d", cf.name, got.n, bulk)
			}
			buf := c.Info().RecvBuffer
			t.Logf("%s: %.1f MB/s, receive buffer %d KiB, %d growths", cf.name, float64(bulk)/took.Seconds()/1e6, buf>>10, h.tcpCounter("RcvBufAutoGrows"))
			if cf.cfg.ReceiveBuffer == 0 && h.tcpCounter("RcvBufAutoGrows") == 0 {
				t.Errorf("%s: the receive buffer never grew", cf.name)
			}
		}
	}
}
