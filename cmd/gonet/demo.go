package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stack"
)

var demoCommand = &command{
	name:    "demo",
	summary: "show GoNet talking to the kernel in a private namespace (or to itself in memory)",
	usage:   "gonet demo [-mem]",
	about: `Needs no set-up. As root, it creates a private network namespace with a
TAP device in it, puts the kernel at 10.99.0.1/24 and GoNet at 10.99.0.2/24
on it, serves echo, discard, daytime and chargen on GoNet's UDP, and drives
the kernel's own ping and socat (or nc) against GoNet; then GoNet pings the
kernel. The namespace is removed at the end, on error and on Ctrl-C too.
Without root or /dev/net/tun it says why and runs the same story between
two GoNet stacks joined by an in-memory link. Traffic never leaves the
namespace or the process. Exits 0 on success, 1 on failure.`,
	flags: func() *flag.FlagSet { fs, _ := demoFlags(); return fs },
	run:   runDemo,
}

// The demo's network. THE NETWORK RULE: the demo sends only inside the
// namespace it created, or over the in-memory link, and only to these
// addresses; demoDest enforces it.
var (
	demoNet    = netip.MustParsePrefix("10.99.0.0/24")
	demoKernel = netip.MustParsePrefix("10.99.0.1/24") // the kernel (or stack A in memory)
	demoGoNet  = netip.MustParsePrefix("10.99.0.2/24") // GoNet (stack B in memory)
)

const (
	demoPrefix = "gonet-demo" // namespace names: gonet-demo-PID-N
	demoDev    = "gonet0"     // the TAP device, inside the namespace
	demoMTU    = 1500         // Ethernet's, so that the large pings fragment
	// demoTimeout bounds every wait for an answer.
	demoTimeout = 2 * time.Second
)

// demoServices are the services GoNet runs in the demo.
const demoServices = "echo,discard,daytime,chargen"

// demoConfig is gonet demo's command line, parsed.
type demoConfig struct {
	mem bool // use the in-memory link even when a namespace is possible
}

func demoFlags() (*flag.FlagSet, *demoConfig) {
	c := &demoConfig{}
	fs := newFlagSet("demo")
	fs.BoolVar(&c.mem, "mem", false, "run between two GoNet stacks on an in-memory link, even as root")
	return fs, c
}

// parseDemo parses gonet demo's arguments.
func parseDemo(args []string) (*demoConfig, error) {
	fs, c := demoFlags()
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: demo takes only flags", fs.Arg(0))
	}
	return c, nil
}

func runDemo(ctx context.Context, cmd *command, out *output, args []string) int {
	c, err := parseDemo(args)
	if err != nil {
		return reportParseError(out, cmd, err)
	}
	w := out.stdout
	if c.mem {
		fmt.Fprintln(w, "gonet demo: in memory, as -mem asks")
	} else if why := netns.Available(); why != nil {
		fmt.Fprintf(w, "gonet demo: no private network namespace here (%v); running between two GoNet stacks in memory instead\n", why)
		c.mem = true
	}
	if c.mem {
		err = demoMemory(ctx, w)
	} else {
		err = demoNamespace(ctx, w)
	}
	if err != nil {
		if ctx.Err() != nil {
			// What the interrupted step said is only noise now.
			fmt.Fprintln(out.stderr, "gonet demo: interrupted")
			return exitFail
		}
		fmt.Fprintf(out.stderr, "gonet demo: %v\n", err)
		return exitFail
	}
	fmt.Fprintln(w, "gonet demo: done")
	return exitOK
}

// demoDest returns a, after checking it is on the demo's network: the one
// check every destination the demo sends to goes through.
func demoDest(a netip.Addr) netip.Addr {
	if !demoNet.Contains(a) {
		panic(fmt.Sprintf("gonet demo: %v is outside %v; the demo sends nowhere else", a, demoNet))
	}
	return a
}

// stepper numbers the demo's steps and indents what each says.
type stepper struct {
	w     io.Writer
	n, of int
}

func (s *stepper) step(format string, args ...any) {
	s.n++
	fmt.Fprintf(s.w, "\n[%d/%d] %s\n", s.n, s.of, fmt.Sprintf(format, args...))
}

// say prints an indented line of the current step.
func (s *stepper) say(format string, args ...any) {
	fmt.Fprintf(s.w, "      %s\n", fmt.Sprintf(format, args...))
}

// startServices runs the demo's services on s's UDP and TCP.
func startServices(ctx context.Context, s *stack.Stack) (*serviceGroup, error) {
	list, err := services.Lookup(demoServices)
	if err != nil {
		return nil, err
	}
	g, err := startUDPServices(ctx, s, list)
	if err != nil {
		return nil, err
	}
	if err := g.startTCP(s, list); err != nil {
		return nil, errors.Join(err, g.Stop())
	}
	return g, nil
}

// serviceList describes the demo's services for the reader.
func serviceList() string {
	list, _ := services.Lookup(demoServices)
	var parts []string
	for _, s := range list {
		parts = append(parts, fmt.Sprintf("%s (%d)", s.Name, s.Port))
	}
	return strings.Join(parts, ", ")
}

// fragments returns how many IPv4 fragments an ICMP echo of size payload
// bytes takes on a link of this MTU (RFC 791: every fragment but the last
// carries a multiple of 8 bytes).
func fragments(size, mtu int) int {
	perFrag := (mtu - 20) &^ 7
	total := size + icmpEchoHeaderLen
	return (total + perFrag - 1) / perFrag
}

// pingFrom pings dst from s count times with size bytes of payload,
// printing a line per reply as the kernel's ping does, and adds the results
// to st. seq numbers the requests across calls.
func pingFrom(ctx context.Context, st *stepper, s *stack.Stack, dst netip.Addr, size, count int, seq *int, ps *pingStats) error {
	dst = demoDest(dst)
	for range count {
		*seq++
		pctx, cancel := context.WithTimeout(ctx, demoTimeout)
		rtt, err := s.Ping(pctx, dst, size)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ps.sent++
		if err != nil {
			st.say("no reply from %v: icmp_seq=%d: %v", dst, *seq, err)
			continue
		}
		ps.add(rtt)
		st.say("%d bytes from %v: icmp_seq=%d time=%s ms", size+icmpEchoHeaderLen, dst, *seq, formatMS(rtt))
	}
	return nil
}

// writePingSummary prints a pingStats summary indented, and fails when no
// reply came back at all.
func writePingSummary(st *stepper, who string, ps *pingStats, elapsed time.Duration) error {
	var b strings.Builder
	ps.writeSummary(&b, elapsed)
	for line := range strings.Lines(b.String()) {
		st.say("%s", strings.TrimSpace(line))
	}
	if ps.received() == 0 {
		return fmt.Errorf("%s: no reply to any of %d pings", who, ps.sent)
	}
	return nil
}

// plural returns "1 byte", "2 bytes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeCounters prints s's non-zero counters, three to a line.
func writeCounters(st *stepper, s *stack.Stack) {
	counters := s.Counters()
	var names []string
	for name, v := range counters {
		if v != 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		st.say("(no counter moved)")
		return
	}
	var cells []string
	width := 0
	for _, name := range names {
		cells = append(cells, fmt.Sprintf("%s %d", name, counters[name]))
		width = max(width, len(cells[len(cells)-1]))
	}
	for i := range cells {
		cells[i] = fmt.Sprintf("%-*s", width+2, cells[i])
	}
	for chunk := range slices.Chunk(cells, 3) {
		st.say("%s", strings.TrimRight(strings.Join(chunk, ""), " "))
	}
}

// demoNamespace runs the demo against the kernel in a namespace of its own.
func demoNamespace(ctx context.Context, w io.Writer) (err error) {
	// A demo killed before its cleanup (kill -9) leaves its namespace
	// behind; remove those first, leaving running demos' alone.
	if removed, err := netns.RemoveStale(demoPrefix); err == nil && len(removed) > 0 {
		fmt.Fprintf(w, "gonet demo: removed namespaces left by earlier demos: %s\n", strings.Join(removed, ", "))
	}
	ns, err := netns.New(demoPrefix)
	if err != nil {
		return fmt.Errorf("creating a network namespace: %w", err)
	}
	defer func() {
		if cerr := ns.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("removing namespace %s: %w", ns, cerr))
			return
		}
		fmt.Fprintf(w, "\ngonet demo: removed namespace %s\n", ns)
	}()

	// The TAP is opened on a thread inside the namespace, so the device
	// is born there and the kernel's side of it is the namespace's.
	var dev *tap.Endpoint
	if err := ns.Do(func() error {
		var err error
		dev, err = tap.Open(demoDev, tap.Options{MTU: demoMTU})
		return err
	}); err != nil {
		return fmt.Errorf("opening TAP device %s in namespace %s: %w", demoDev, ns, err)
	}
	s := stack.New(stack.Config{})
	if err := s.AddNIC(demoDev, dev); err != nil {
		s.Close()
		dev.Close()
		return fmt.Errorf("attaching %s to the stack: %w", demoDev, err)
	}
	// Deferred after ns.Close, so run before it: the TAP's descriptor,
	// which the stack closes, would keep the namespace alive, unnamed.
	defer func() {
		if cerr := s.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the stack: %w", cerr))
		}
	}()
	if err := s.AddAddress(demoDev, demoGoNet); err != nil {
		return fmt.Errorf("assigning %v to GoNet: %w", demoGoNet, err)
	}
	if err := ns.ConfigureLink(demoDev, demoKernel, demoMTU); err != nil {
		return fmt.Errorf("configuring the kernel's side of %s: %w", demoDev, err)
	}
	svc, err := startServices(ctx, s)
	if err != nil {
		return err
	}
	defer func() {
		if serr := svc.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()

	fmt.Fprintf(w, "gonet demo: namespace %s, TAP device %s, MTU %d\n", ns, demoDev, demoMTU)
	fmt.Fprintf(w, "gonet demo: the kernel is %v; GoNet is %v (%v), serving %s on UDP and TCP\n",
		demoKernel, demoGoNet, dev.MAC(), serviceList())

	st := &stepper{w: w, of: 7}
	gonet := demoDest(demoGoNet.Addr()).String()

	for _, p := range []struct {
		what        string
		count, size int
	}{
		{"the kernel pings GoNet", 5, 56},
		{fmt.Sprintf("the kernel pings GoNet with datagrams in %d fragments", fragments(8000, demoMTU)), 3, 8000},
	} {
		args := []string{"-c", fmt.Sprint(p.count), "-s", fmt.Sprint(p.size), "-i", "0.2", "-W", "2", gonet}
		st.step("%s: ping %s", p.what, strings.Join(args, " "))
		if err := kernelPing(ctx, st, ns, args); err != nil {
			return err
		}
	}

	st.step("UDP round trips from the kernel to GoNet's services")
	if err := kernelUDP(ctx, st, ns, gonet); err != nil {
		return err
	}

	st.step("TCP: a kernel socket streams %s through GoNet's echo service", demoBulkText)
	var kconn net.Conn
	if err := ns.Do(func() error {
		var err error
		d := net.Dialer{Timeout: demoTimeout}
		kconn, err = d.DialContext(ctx, "tcp", net.JoinHostPort(gonet, "7"))
		return err
	}); err != nil {
		return fmt.Errorf("TCP: the kernel connecting to GoNet's echo: %w", err)
	}
	if err := tcpEcho(ctx, st, kconn); err != nil {
		return err
	}

	st.step("HTTP: GoNet's net/http client fetches from a kernel net/http server")
	if err := httpFromKernel(ctx, st, ns, s); err != nil {
		return err
	}

	st.step("GoNet pings the kernel (stack.Ping to %v)", demoKernel.Addr())
	var ps pingStats
	seq := 0
	start := time.Now()
	for _, size := range []int{56, 56, 56, 1472, 8000} {
		if err := pingFrom(ctx, st, s, demoKernel.Addr(), size, 1, &seq, &ps); err != nil {
			return err
		}
	}
	if err := writePingSummary(st, "GoNet pinging the kernel", &ps, time.Since(start)); err != nil {
		return err
	}

	st.step("GoNet's counters")
	writeCounters(st, s)
	return nil
}

// kernelPing runs the kernel's ping in the namespace and prints its summary.
func kernelPing(ctx context.Context, st *stepper, ns *netns.NS, args []string) error {
	out, err := ns.Run(ctx, "ping", args...)
	var summary []string
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "packets transmitted") || strings.HasPrefix(line, "rtt ") || strings.HasPrefix(line, "round-trip") {
			summary = append(summary, line)
			st.say("%s", line)
		}
	}
	if err != nil {
		if len(summary) == 0 {
			return fmt.Errorf("kernel ping: %w", err)
		}
		return fmt.Errorf("kernel ping %s: %s", strings.Join(args, " "), summary[0])
	}
	return nil
}

// kernelUDP exchanges datagrams with GoNet's UDP services through socat, or
// nc when socat is missing.
func kernelUDP(ctx context.Context, st *stepper, ns *netns.NS, gonet string) error {
	tool := ""
	for _, t := range []string{"socat", "nc"} {
		if _, err := exec.LookPath(t); err == nil {
			tool = t
			break
		}
	}
	if tool == "" {
		st.say("skipped: neither socat nor nc is installed")
		return nil
	}
	exchange := func(port uint16, payload string) ([]byte, error) {
		var args []string
		if tool == "socat" {
			// -t1: after sending stdin, wait a second for the answer.
			args = []string{"-T2", "-t1", "-", fmt.Sprintf("UDP:%s:%d", gonet, port)}
		} else {
			args = []string{"-u", "-w1", gonet, fmt.Sprint(port)}
		}
		cmd := ns.Command(ctx, tool, args...)
		cmd.Stdin = strings.NewReader(payload)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
		}
		return stdout.Bytes(), nil
	}

	line := "hello from the kernel, echoed by GoNet\n"
	got, err := exchange(7, line)
	if err != nil {
		return fmt.Errorf("UDP echo: %w", err)
	}
	if string(got) != line {
		return fmt.Errorf("UDP echo through %s: sent %q, got back %q", tool, line, got)
	}
	st.say("echo (%s): sent %d bytes, %d bytes echoed back, identical", tool, len(line), len(got))
	if tool != "socat" {
		return nil // nc's UDP mode varies too much to count on for the rest
	}

	got, err = exchange(13, "\n")
	if err != nil {
		return fmt.Errorf("UDP daytime: %w", err)
	}
	if len(got) == 0 {
		return fmt.Errorf("UDP daytime through socat: no answer")
	}
	st.say("daytime (socat): %q", got)

	// The answer's length is random, 0..512 (RFC 864), so an empty one
	// is no failure.
	got, err = exchange(19, "\n")
	if err != nil {
		return fmt.Errorf("UDP chargen: %w", err)
	}
	first, _, _ := strings.Cut(string(got), "\r\n")
	st.say("chargen (socat): %d characters, starting %q", len(got), first)
	return nil
}

// demoMemory runs the demo between two GoNet stacks on an in-memory link:
// stack A at demoKernel's address, stack B at demoGoNet's.
func demoMemory(ctx context.Context, w io.Writer) (err error) {
	macA := net.HardwareAddr{0x02, 0x00, 0x00, 0x99, 0x00, 0x01}
	macB := net.HardwareAddr{0x02, 0x00, 0x00, 0x99, 0x00, 0x02}
	epA, epB := pipe.New(demoMTU, macA, macB)
	a, b := stack.New(stack.Config{}), stack.New(stack.Config{})
	defer func() {
		if cerr := errors.Join(a.Close(), b.Close()); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the stacks: %w", cerr))
		}
		// The stacks close the NICs they took; these are for an end
		// AddNIC refused. Closing a pipe end twice does nothing.
		epA.Close()
		epB.Close()
	}()
	for _, x := range []struct {
		s    *stack.Stack
		nic  string
		ep   *pipe.Endpoint
		addr netip.Prefix
	}{{a, "a0", epA, demoKernel}, {b, "b0", epB, demoGoNet}} {
		if err := x.s.AddNIC(x.nic, x.ep); err != nil {
			return fmt.Errorf("attaching %s: %w", x.nic, err)
		}
		if err := x.s.AddAddress(x.nic, x.addr); err != nil {
			return fmt.Errorf("assigning %v to %s: %w", x.addr, x.nic, err)
		}
	}
	svc, err := startServices(ctx, b)
	if err != nil {
		return err
	}
	defer func() {
		if serr := svc.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()

	fmt.Fprintf(w, "gonet demo: stack A is %v (%v), stack B is %v (%v), on an in-memory link with MTU %d\n",
		demoKernel, macA, demoGoNet, macB, demoMTU)
	fmt.Fprintf(w, "gonet demo: stack B serves %s on UDP and TCP\n", serviceList())

	st := &stepper{w: w, of: 4}
	dstB := demoDest(demoGoNet.Addr())

	st.step("stack A pings stack B")
	var ps pingStats
	seq := 0
	start := time.Now()
	for _, size := range []int{56, 1472, 8000, 65000} {
		if n := fragments(size, demoMTU); n > 1 {
			st.say("%d bytes of payload: %d fragments each way", size, n)
		}
		if err := pingFrom(ctx, st, a, dstB, size, 3, &seq, &ps); err != nil {
			return err
		}
	}
	if err := writePingSummary(st, "stack A pinging stack B", &ps, time.Since(start)); err != nil {
		return err
	}

	st.step("UDP echo from stack A to stack B's port 7")
	if err := memoryEcho(ctx, st, a, dstB); err != nil {
		return err
	}

	st.step("TCP: stack A streams %s through stack B's echo service", demoBulkText)
	dctx, cancel := context.WithTimeout(ctx, demoTimeout)
	conn, err := a.DialTCP(dctx, netip.AddrPortFrom(dstB, 7))
	cancel()
	if err != nil {
		return fmt.Errorf("TCP: stack A connecting to stack B's echo: %w", err)
	}
	if err := tcpEcho(ctx, st, conn); err != nil {
		return err
	}

	st.step("stack A's counters")
	writeCounters(st, a)
	return nil
}

// demoBulk is what the TCP step streams each way.
const (
	demoBulk     = 32 << 20
	demoBulkText = "32 MiB"
)

// tcpEcho streams demoBulk bytes through an echo service on conn, writing
// and reading at once, checks them, and prints the throughput.
func tcpEcho(ctx context.Context, st *stepper, conn net.Conn) error {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	msg := make([]byte, demoBulk)
	for i := range msg {
		msg[i] = byte(i*7 + i>>13)
	}
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(msg)
		if err == nil {
			err = conn.(interface{ CloseWrite() error }).CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(stallReader{conn, demoTimeout * 3})
	if err != nil {
		return fmt.Errorf("TCP echo: reading after %d bytes: %w", len(got), err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("TCP echo: writing: %w", err)
	}
	elapsed := time.Since(start)
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("TCP echo: sent %d bytes, got back %d bytes that differ", len(msg), len(got))
	}
	st.say("%s sent and echoed back identical in %s ms: %.0f Mbit/s each way",
		plural(len(msg), "byte"), formatMS(elapsed), float64(len(msg))*8/elapsed.Seconds()/1e6)
	return nil
}

// stallReader reads conn with a deadline that bounds each read, so that it
// fails on a stall, not on a transfer a slow machine (the race detector, a
// loaded CI runner) takes its time over.
type stallReader struct {
	conn  net.Conn
	stall time.Duration
}

func (r stallReader) Read(p []byte) (int, error) {
	r.conn.SetReadDeadline(time.Now().Add(r.stall))
	return r.conn.Read(p)
}

// httpFromKernel starts a net/http server on a kernel socket in ns and
// fetches from it with a net/http client whose connections are GoNet's.
func httpFromKernel(ctx context.Context, st *stepper, ns *netns.NS, s *stack.Stack) error {
	var ln net.Listener
	if err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(demoKernel.Addr().String(), "8080"))
		return err
	}); err != nil {
		return fmt.Errorf("HTTP: listening on the kernel's side: %w", err)
	}
	body := bytes.Repeat([]byte("GoNet speaks HTTP through net/http, unchanged.\n"), 1<<14)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Server", "Linux kernel TCP, Go net/http")
			w.Write(body)
		}),
		ReadHeaderTimeout: demoTimeout,
	}
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: s.DialContext}, Timeout: demoTimeout * 3}
	defer client.CloseIdleConnections()
	url := "http://" + net.JoinHostPort(demoDest(demoKernel.Addr()).String(), "8080") + "/"
	for range 2 {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("HTTP: GET %s over GoNet: %w", url, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			return fmt.Errorf("HTTP: GET %s over GoNet: %d bytes, err %v", url, len(got), err)
		}
		st.say("GET %s: %s, %s from %q in %s ms", url, resp.Status, plural(len(got), "byte"), resp.Header.Get("Server"), formatMS(time.Since(start)))
	}
	st.say("the second request reused the connection: keep-alive over GoNet's TCP")
	return nil
}

// memoryEcho sends datagrams of several sizes from s to the echo service at
// dst and checks each comes back whole.
func memoryEcho(ctx context.Context, st *stepper, s *stack.Stack, dst netip.Addr) error {
	conn, err := s.ListenUDP(netip.AddrPortFrom(demoKernel.Addr(), 0))
	if err != nil {
		return fmt.Errorf("UDP echo: binding a socket on stack A: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(demoDest(dst), 7))
	buf := make([]byte, 65536)
	var moved int
	for _, size := range []int{1, 1472, 30000} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte('a' + i%26)
		}
		start := time.Now()
		if err := conn.SetReadDeadline(start.Add(demoTimeout)); err != nil {
			return fmt.Errorf("UDP echo: %w", err)
		}
		if _, err := conn.WriteTo(msg, to); err != nil {
			return fmt.Errorf("UDP echo: sending %d bytes to %v: %w", size, to, err)
		}
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("UDP echo: waiting for the echo of %d bytes from %v: %w", size, to, err)
		}
		rtt := time.Since(start)
		if !bytes.Equal(buf[:n], msg) {
			return fmt.Errorf("UDP echo: sent %d bytes to %v, got back %d bytes that differ", size, to, n)
		}
		moved += size + n
		st.say("%s echoed by %v in %s ms", plural(n, "byte"), from, formatMS(rtt))
	}
	st.say("%s moved in all, both ways", plural(moved, "byte"))
	return nil
}
