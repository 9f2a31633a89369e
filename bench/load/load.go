// Package load is the client side of every benchmark: load generators
// that run in the client network namespace on the kernel's own TCP/IP and
// drive whichever stack the server runs. They are the same for all three
// stacks; each prints one JSON result on stdout.
package load

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

// Main runs the workload named by args[0] with the flags that follow and
// prints its result as JSON on stdout.
func Main(args []string) error {
	if len(args) == 0 {
		return errors.New("client: name a workload: ping, short, bulk, rr, crr, udp, udpdown, udprr, scale, burst")
	}
	fs := flag.NewFlagSet("client "+args[0], flag.ContinueOnError)
	addr := fs.String("addr", "", "the server's address")
	twin := fs.String("twin", "", "ping: a second address of the server's, which each pinger pings in turn with -addr; bulk: which the slices take in turn with -addr; rr: which a single client takes in turn with -addr, a connection to each, and half of more clients take instead of -addr (its result is the JSON's twin)")
	n := fs.Int("n", 1, "pingers, clients, streams or connections")
	dur := fs.Duration("dur", 2*time.Second, "how long to run")
	interval := fs.Duration("interval", 20*time.Millisecond, "ping: interval of each pinger (0: closed loop, each request sent as the reply to the last arrives)")
	size := fs.Int("size", 4096, "short, udp: bytes per transfer or datagram")
	dir := fs.String("dir", "up", "bulk: up (client to server) or down")
	slice := fs.Duration("slice", 0, "bulk: cut the run in slices this long, each with connections of its own (0: one run); -dur is each address's")
	rate := fs.Float64("rate", 0, "udp: offered Mbit/s (0: as fast as possible); udpdown: the Mbit/s asked of the source")
	run := fs.Int("run", 1, "udpdown: datagrams per send of the source's (more than 1: UDP segmentation offload)")
	conc := fs.Int("concurrency", 256, "scale, burst: dials at once")
	port := fs.Int("port", 0, "bulk, rr, udprr, burst: the server's port (0: the handler's, as package handlers numbers them); a daemon's own services")
	pause := fs.Duration("pause", 20*time.Millisecond, "burst: pause between one burst's last answer and the next burst")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var res any
	var err error
	switch args[0] {
	case "ping":
		if *twin != "" {
			res, err = PingTwins(*addr, *twin, *n, *interval, *dur)
		} else {
			res, err = Ping(*addr, *n, *interval, *dur)
		}
	case "short":
		res, err = Short(*addr, *n, *size, *dur)
	case "bulk":
		addrs := []string{*addr}
		if *twin != "" {
			addrs = append(addrs, *twin)
		}
		switch {
		case *slice > 0:
			res, err = BulkSliced(addrs, *dir, *n, *port, *dur, *slice)
		case *twin != "":
			err = errors.New("bulk: -twin takes -slice")
		default:
			res, err = Bulk(*addr, *dir, *n, *port, *dur)
		}
	case "rr":
		if *twin != "" {
			res, err = RRTwins(*addr, *twin, *n, *port, *dur)
		} else {
			res, err = RR(*addr, *n, *port, *dur)
		}
	case "crr":
		res, err = CRR(*addr, *n, *dur)
	case "udp":
		res, err = UDP(*addr, *size, *rate, *dur)
	case "udpdown":
		res, err = UDPDown(*addr, *size, *rate, *run, *dur)
	case "udprr":
		res, err = UDPRR(*addr, *n, *port, *dur)
	case "scale":
		res, err = Scale(*addr, *n, *conc, os.Stdin, os.Stdout)
	case "burst":
		res, err = Burst(*addr, *port, *n, *conc, *pause, *dur, os.Stdin, os.Stdout)
	default:
		return fmt.Errorf("client: unknown workload %q", args[0])
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// Latency summarises samples in microseconds.
type Latency struct {
	Samples int     `json:"samples"`
	MeanUS  float64 `json:"mean_us"`
	P50US   float64 `json:"p50_us"`
	P99US   float64 `json:"p99_us"`
	MaxUS   float64 `json:"max_us"`
}

func summarise(us []float64) Latency {
	if len(us) == 0 {
		return Latency{}
	}
	slices.Sort(us)
	var sum float64
	for _, v := range us {
		sum += v
	}
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(us)))) - 1
		return us[max(0, min(i, len(us)-1))]
	}
	return Latency{
		Samples: len(us),
		MeanUS:  sum / float64(len(us)),
		P50US:   q(0.50),
		P99US:   q(0.99),
		MaxUS:   us[len(us)-1],
	}
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// drain reads r to EOF, returning what it read.
func drain(r io.Reader) (int64, error) {
	var b [64 << 10]byte
	var n int64
	for {
		m, err := r.Read(b[:])
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
