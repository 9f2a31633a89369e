// Package pathemu is the path the real-world-paths family (issue 16) puts
// between a stack and its peer: two TAP devices, one in each namespace, and
// GoNet's fault injector between them, which delays every frame, paces it
// through a token bucket behind a bounded drop-tail queue and loses it at
// random from a seeded generator (link/fault). The kernel has no netem
// here, so the wide-area path is emulated in user space, and every stack's
// traffic crosses the same program.
//
// Frames cross whole and untouched: the devices carry plain frames, no
// virtio-net header, so the kernel cuts TCP super-segments to the MTU before
// the path sees them, and a loss is one packet's, as on a real wire.
//
// The fault endpoint wraps device B: frames from A to B go through its
// transmit side, frames from B to A through its receive side, each with
// its own generator, delay line and bucket, so the path is the same both
// ways and the round trip is twice the configured delay.
package pathemu

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/bench/relay"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stats"
)

// Path is two TAP devices joined through a fault endpoint.
type Path struct {
	a   *tap.Endpoint
	b   *tap.Endpoint
	f   *fault.Endpoint // wraps b
	mtu int

	closeOnce sync.Once
	closeErr  error
}

// Config is where the path's two ends are and what lies between them.
type Config struct {
	// A and B name the TAP devices to create; ANS and BNS are the
	// network namespaces to create them in (a path such as
	// /run/netns/NAME; empty: the calling thread's).
	A, ANS, B, BNS string
	MTU            int
	Fault          fault.Config
}

// Open creates both devices and the fault endpoint; Run then moves frames.
func Open(c Config) (*Path, error) {
	if c.A == "" || c.B == "" {
		return nil, errors.New("pathemu: both devices must be named")
	}
	if err := c.Fault.Validate(); err != nil {
		return nil, fmt.Errorf("pathemu: %w", err)
	}
	a, err := openTAP(c.A, c.ANS, c.MTU)
	if err != nil {
		return nil, err
	}
	b, err := openTAP(c.B, c.BNS, c.MTU)
	if err != nil {
		a.Close()
		return nil, err
	}
	return &Path{a: a, b: b, f: fault.New(b, c.Fault), mtu: a.MTU()}, nil
}

// openTAP creates the TAP device name in the namespace at ns: plain
// frames, no offloads (the package comment says why).
func openTAP(name, ns string, mtu int) (*tap.Endpoint, error) {
	var t *tap.Endpoint
	open := func() (err error) {
		t, err = tap.Open(name, tap.Options{MTU: mtu})
		return err
	}
	var err error
	if ns == "" {
		err = open()
	} else {
		err = netns.DoPath(ns, open)
	}
	if err != nil {
		return nil, fmt.Errorf("pathemu: device %s in %s: %w", name, nsName(ns), err)
	}
	return t, nil
}

func nsName(ns string) string {
	if ns == "" {
		return "this namespace"
	}
	return ns
}

// Run moves frames both ways until Close; it returns nil after Close, or
// the first error of either direction.
func (p *Path) Run() error {
	errc := make(chan error, 2)
	go func() { errc <- relay.CopyFrames(p.f, p.a, p.mtu) }() // A to B: the fault endpoint's transmit side
	go func() { errc <- relay.CopyFrames(p.a, p.f, p.mtu) }() // B to A: its receive side
	err := <-errc
	p.Close()
	<-errc
	if errors.Is(err, link.ErrClosed) {
		return nil
	}
	return fmt.Errorf("pathemu: %w", err)
}

// Close closes both devices; frames still in the path are lost, as on a
// wire that is cut. Later calls return the first's error.
func (p *Path) Close() error {
	p.closeOnce.Do(func() { p.closeErr = errors.Join(p.a.Close(), p.f.Close()) })
	return p.closeErr
}

// Counters are the path's counters by name: the fault endpoint's
// ("Fault.Tx.Dropped" is A to B, "Fault.Rx..." B to A) and each device's
// ("A.RxFrames": frames that entered the path at A; "B.TxBytes": bytes
// delivered at B).
func (p *Path) Counters() map[string]int64 {
	m := stats.Map("Fault", p.f.Stats())
	for k, v := range stats.Map("A", p.a.Stats()) {
		m[k] = v
	}
	for k, v := range stats.Map("B", p.b.Stats()) {
		m[k] = v
	}
	return m
}

// Snapshot is the path's counters at one moment, as the stats command
// prints them.
type Snapshot struct {
	Time     time.Time        `json:"time"`
	Counters map[string]int64 `json:"counters"`
}

// Main runs the path with the command-line arguments args: it creates both
// devices, prints "ready", and moves frames until a signal or "quit" (or
// the end of its standard input) comes; "stats" on its standard input
// prints a Snapshot as one JSON line, and "seed N" starts the loss
// generators of both directions again from N (fault.Endpoint.Reseed) and
// answers {"seed":N}.
func Main(args []string) error {
	fs := flag.NewFlagSet("pathemu", flag.ContinueOnError)
	var c Config
	fs.StringVar(&c.A, "a", "", "the TAP device of end A (the stack's side)")
	fs.StringVar(&c.ANS, "a-netns", "", "the network namespace to create A in (a path; default: this process's)")
	fs.StringVar(&c.B, "b", "", "the TAP device of end B (the peer's side)")
	fs.StringVar(&c.BNS, "b-netns", "", "the network namespace to create B in (a path; default: this process's)")
	fs.IntVar(&c.MTU, "mtu", 1500, "MTU of both devices")
	spec := fs.String("impair", "", "the path, in link/fault's spec form (delay=20ms,loss=0.01,seed=1,...), each direction")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if c.Fault, err = fault.ParseSpec(*spec); err != nil {
		return err
	}
	p, err := Open(c)
	if err != nil {
		return err
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run() }()
	fmt.Printf("ready %s\n", c.Fault)
	return serve(p, os.Stdin, os.Stdout, ran)
}

// serve answers commands on in until quit, the end of in, a signal, or the
// path's end.
func serve(p *Path, in io.Reader, out io.Writer, ran <-chan error) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	enc := json.NewEncoder(out)
	for {
		select {
		case <-sigs:
			p.Close()
			return <-ran
		case err := <-ran:
			return err
		case l, ok := <-lines:
			if !ok || l == "quit" {
				p.Close()
				return <-ran
			}
			var err error
			cmd, arg, _ := strings.Cut(l, " ")
			switch cmd {
			case "stats":
				err = enc.Encode(Snapshot{Time: time.Now(), Counters: p.Counters()})
			case "seed":
				// Before each measured flow: its losses are then
				// the seed's, not what crossed before it.
				seed, perr := strconv.ParseUint(arg, 10, 64)
				if perr != nil {
					err = enc.Encode(map[string]string{"error": fmt.Sprintf("seed %q: want an unsigned integer", arg)})
					break
				}
				p.f.Reseed(seed)
				err = enc.Encode(map[string]uint64{"seed": seed})
			default:
				err = enc.Encode(map[string]string{"error": fmt.Sprintf("unknown command %q", l)})
			}
			if err != nil {
				p.Close()
				<-ran
				return err
			}
		}
	}
}
