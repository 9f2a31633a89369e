// Package server is the benchmark server: one process per stack under test,
// which sets up GoNet, gVisor netstack or the kernel's sockets, serves the
// handlers of package handlers on the same ports, and answers the suite's
// requests for statistics on its standard input and output.
//
// The protocol is one command a line on stdin, one JSON line on stdout:
//
//	stats               a Snapshot
//	profile-start FILE  start a CPU profile into FILE
//	profile-stop        stop it
//	quit (or EOF)       exit
//
// Before any command it prints "ready NAME" once its listeners are up.
//
// The stack always has the IPv4 address of -addr; with -addr6 it has that
// IPv6 address too, and the handlers serve on IPv6: GoNet's wildcard
// listeners take both families in either case, gVisor's endpoints and the
// kernel's sockets are of the family the set-up measures.
package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/bench/handlers"
)

// Stacks are the names of the stacks under test, in the order the suite
// runs them.
var Stacks = []string{"gonet", "gvisor", "kernel"}

// Config is the server's command line.
type Config struct {
	Stack string
	TAP   string       // TAP device to create (gonet, gvisor)
	Addr  netip.Prefix // the stack's IPv4 address
	// Addr6 is the stack's IPv6 address, when the set-up measures IPv6
	// (invalid otherwise): the handlers then serve on it.
	Addr6 netip.Prefix
	MTU   int
	// CC is gVisor's congestion control ("": its default, Reno); the
	// paths family gives it CUBIC, as GoNet's and the kernel's there.
	CC string
}

// stackHost is one stack under test, set up and listening.
type stackHost interface {
	listen(port int) (net.Listener, error)
	listenPacket(port int) (net.PacketConn, error)
	// frames returns the frames the stack read and wrote on its link
	// (-1 when it has no link of its own: the kernel).
	frames() (rx, tx int64)
	// counters returns the stack's own counters (drops, retransmissions),
	// by name; nil when the stack has none to give (the kernel's are read
	// by the suite from its namespace).
	counters() map[string]int64
	close()
}

// Main runs the server with the command-line arguments args.
func Main(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	var c Config
	var addr, addr6 string
	fs.StringVar(&c.Stack, "stack", "", "gonet, gvisor or kernel")
	fs.StringVar(&c.TAP, "tap", "", "TAP device to create (gonet, gvisor)")
	fs.StringVar(&addr, "addr", "", "the stack's address A.B.C.D/NN")
	fs.StringVar(&addr6, "addr6", "", "the stack's IPv6 address ADDR/NN besides -addr; the handlers serve on it")
	fs.IntVar(&c.MTU, "mtu", 1500, "MTU")
	fs.StringVar(&c.CC, "cc", "", "gVisor's congestion control, reno or cubic (default: its own, reno)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if c.Addr, err = netip.ParsePrefix(addr); err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	if !c.Addr.Addr().Is4() {
		return fmt.Errorf("-addr %s: not an IPv4 address (the IPv6 one is -addr6)", addr)
	}
	if addr6 != "" {
		if c.Addr6, err = netip.ParsePrefix(addr6); err != nil {
			return fmt.Errorf("-addr6: %w", err)
		}
		if a := c.Addr6.Addr(); !a.Is6() || a.Is4In6() {
			return fmt.Errorf("-addr6 %s: not an IPv6 address", addr6)
		}
	}
	return Run(c, os.Stdin, os.Stdout)
}

// Run serves until in says quit or ends.
func Run(c Config, in io.Reader, out io.Writer) error {
	var h stackHost
	var err error
	switch c.Stack {
	case "gonet":
		h, err = newGoNet(c)
	case "gvisor":
		h, err = newGVisor(c)
	case "kernel":
		h, err = newKernel(c)
	default:
		return fmt.Errorf("unknown stack %q", c.Stack)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.Stack, err)
	}
	defer h.close()

	var n handlers.Counters
	sink := &handlers.UDPSink{}
	var closers []io.Closer
	defer func() {
		for _, cl := range closers {
			cl.Close()
		}
	}()
	for _, s := range []struct {
		port int
		h    handlers.Handler
	}{
		{handlers.EchoPort, handlers.Echo},
		{handlers.DiscardPort, handlers.Discard},
		{handlers.SourcePort, handlers.Source},
		{handlers.RRPort, handlers.RR},
	} {
		l, err := h.listen(s.port)
		if err != nil {
			return fmt.Errorf("%s: listen tcp %d: %w", c.Stack, s.port, err)
		}
		closers = append(closers, l)
		go func() {
			if err := handlers.Serve(l, s.h, &n); err != nil {
				fmt.Fprintf(os.Stderr, "server: accept on %d: %v\n", s.port, err)
			}
		}()
	}
	pc, err := h.listenPacket(handlers.UDPSinkPort)
	if err != nil {
		return fmt.Errorf("%s: listen udp: %w", c.Stack, err)
	}
	closers = append(closers, pc)
	go sink.Serve(pc)
	echo, err := h.listenPacket(handlers.UDPEchoPort)
	if err != nil {
		return fmt.Errorf("%s: listen udp %d: %w", c.Stack, handlers.UDPEchoPort, err)
	}
	closers = append(closers, echo)
	go handlers.UDPEcho(echo, &n)
	source, err := h.listenPacket(handlers.UDPSourcePort)
	if err != nil {
		return fmt.Errorf("%s: listen udp %d: %w", c.Stack, handlers.UDPSourcePort, err)
	}
	closers = append(closers, source)
	go handlers.UDPSource(source)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	enc := json.NewEncoder(out)
	fmt.Fprintf(out, "ready %s\n", c.Stack)
	var profile *os.File
	// The stats replies' own allocations (walking the stack's counters,
	// encoding them) are the measurement's, not the server's: each reply
	// counts what the replies before it allocated after reading the
	// runtime's figures, and takes it off its allocation counts, so that
	// between two replies only the server's own work is counted.
	var ownAllocs ownCount
	var statsAt GoStats
	defer func() {
		if profile != nil {
			pprof.StopCPUProfile()
			profile.Close()
		}
	}()
	for {
		var line string
		var ok bool
		select {
		case <-sigs:
			return nil
		case line, ok = <-lines:
		}
		if !ok {
			return nil
		}
		cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		var reply any
		switch cmd {
		case "stats":
			snap := snapshot(h, &n, sink)
			statsAt = snap.Go
			snap.Go.Allocs -= ownAllocs.objects
			snap.Go.AllocBytes -= ownAllocs.bytes
			reply = snap
		case "profile-start":
			f, err := os.Create(arg)
			if err == nil {
				err = pprof.StartCPUProfile(f)
			}
			if err == nil {
				profile = f
			}
			reply = result(err)
		case "profile-stop":
			var err error
			if profile == nil {
				err = errors.New("no profile running")
			} else {
				pprof.StopCPUProfile()
				err = profile.Close()
				profile = nil
			}
			reply = result(err)
		case "gc":
			// A collection forced while the server holds its load, so
			// the suite can measure what one costs even when the
			// server's own settings let none run (stack.TuneGC).
			runtime.GC()
			reply = result(nil)
		case "quit":
			return nil
		default:
			reply = result(fmt.Errorf("unknown command %q", cmd))
		}
		if err := enc.Encode(reply); err != nil {
			return err
		}
		if cmd == "stats" {
			ownAllocs.since(statsAt)
		}
	}
}

type reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

func result(err error) reply {
	if err != nil {
		return reply{Error: err.Error()}
	}
	return reply{OK: true}
}

// Snapshot is the server's state at one moment; the suite subtracts two.
type Snapshot struct {
	Time      time.Time        `json:"time"`
	CPUUser   float64          `json:"cpu_user_s"` // getrusage(RUSAGE_SELF): every thread
	CPUSys    float64          `json:"cpu_sys_s"`
	RSS       int64            `json:"rss_bytes"` // VmRSS
	Go        GoStats          `json:"go"`
	RxFrames  int64            `json:"rx_frames"` // frames over the stack's link, -1: none (kernel)
	TxFrames  int64            `json:"tx_frames"`
	Accepted  int64            `json:"accepted"`
	Active    int64            `json:"active"`
	BytesIn   int64            `json:"bytes_in"`
	BytesOut  int64            `json:"bytes_out"`
	Exchanges int64            `json:"exchanges"`
	Errors    int64            `json:"errors"`
	UDP       handlers.UDPFlow `json:"udp"`
	Counters  map[string]int64 `json:"counters,omitempty"`
}

func snapshot(h stackHost, n *handlers.Counters, sink *handlers.UDPSink) Snapshot {
	// The runtime's figures first: what the rest of the snapshot
	// allocates comes after them (ownCount).
	g := readGoStats()
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	rx, tx := h.frames()
	return Snapshot{
		Time:      time.Now(),
		CPUUser:   tv(ru.Utime),
		CPUSys:    tv(ru.Stime),
		RSS:       rss(),
		Go:        g,
		RxFrames:  rx,
		TxFrames:  tx,
		Accepted:  n.Accepted.Load(),
		Active:    n.Active.Load(),
		BytesIn:   n.BytesIn.Load(),
		BytesOut:  n.BytesOut.Load(),
		Exchanges: n.Exchanges.Load(),
		Errors:    n.Errors.Load(),
		UDP:       sink.Flow(),
		Counters:  h.counters(),
	}
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// rss returns the process's resident set size from /proc/self/status.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return -1
}
