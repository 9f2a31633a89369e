package load

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/bench/handlers"
)

// BurstResult is the overload workload's result. Its first form, printed
// once the connections are up, has only the establishment filled in.
type BurstResult struct {
	Conns      int     `json:"conns"`
	Failed     int     `json:"failed"` // connections not established
	EstablishS float64 `json:"establish_s"`
	Rounds     int     `json:"rounds"`
	Requests   int64   `json:"requests"` // answered
	// Errors counts requests that failed or had no answer within
	// burstDeadline; their connection takes no further part.
	Errors    int64   `json:"errors"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"transactions_s"`
	Latency   Latency `json:"latency"` // each request, write to answer
	// Burst is each burst's time from the first request written to the
	// last answer read.
	Burst    Latency `json:"burst"`
	FirstErr string  `json:"first_error,omitempty"`
}

// burstDeadline bounds one request: a connection whose answer takes
// longer has lost more than a few retransmission timeouts' worth.
const burstDeadline = 5 * time.Second

// Burst opens n connections to the RR port (or port, when not 0),
// concurrency dials at a time,
// prints the establishment as a first JSON line and waits for a line on in
// (the suite reads the counters meanwhile, so that its window holds the
// bursts alone). Then, for dur, every connection sends a 1-byte request at
// the same moment and reads its answer; once the last answer of a burst is
// in, all pause for pause and send again. Each burst puts n segments into
// the kernel's queue towards the stack at once, then n more as the
// answers are acknowledged: what a server sees of many clients that act
// together (a poll interval, a page's many fetches), the issue's
// overload.
func Burst(addr string, port, n, concurrency int, pause, dur time.Duration, in io.Reader, out io.Writer) (BurstResult, error) {
	if port == 0 {
		port = handlers.RRPort
	}
	r := BurstResult{Conns: n}
	if err := raiseFileLimit(uint64(n) + 64); err != nil {
		return r, err
	}
	t0 := time.Now()
	conns, failed, firstFail := dialAll(tcpNet(addr), hostPort(addr, port), n, concurrency)
	r.EstablishS = time.Since(t0).Seconds()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	r.Failed, r.FirstErr = failed, firstFail
	if err := json.NewEncoder(out).Encode(r); err != nil {
		return r, err
	}
	bufio.NewReader(in).ReadString('\n')

	type worker struct {
		c       net.Conn
		start   chan struct{}
		samples []float64
		err     error
	}
	var round, exited sync.WaitGroup
	var workers []*worker
	for _, c := range conns {
		if c == nil {
			continue
		}
		w := &worker{c: c, start: make(chan struct{}, 1)}
		workers = append(workers, w)
		exited.Go(func() {
			var b [1]byte
			for range w.start {
				if w.err == nil {
					t0 := time.Now()
					w.c.SetDeadline(t0.Add(burstDeadline))
					_, err := w.c.Write(b[:])
					if err == nil {
						_, err = io.ReadFull(w.c, b[:])
					}
					if err == nil {
						w.samples = append(w.samples, us(time.Since(t0)))
					}
					w.err = err
				}
				round.Done()
			}
		})
	}
	var bursts []float64
	start := time.Now()
	end := start.Add(dur)
	for r.Rounds == 0 || time.Now().Before(end) {
		t0 := time.Now()
		round.Add(len(workers))
		for _, w := range workers {
			w.start <- struct{}{}
		}
		round.Wait()
		bursts = append(bursts, us(time.Since(t0)))
		r.Rounds++
		time.Sleep(pause)
	}
	r.Seconds = time.Since(start).Seconds()
	for _, w := range workers {
		close(w.start)
	}
	exited.Wait()
	var all []float64
	for _, w := range workers {
		all = append(all, w.samples...)
		if w.err != nil {
			r.Errors++
			if r.FirstErr == "" {
				r.FirstErr = w.err.Error()
			}
		}
	}
	r.Requests = int64(len(all))
	r.PerSecond = float64(r.Requests) / r.Seconds
	r.Latency = summarise(all)
	r.Burst = summarise(bursts)
	return r, nil
}

// dialAll opens n connections to target, concurrency at a time; a failed
// one is nil in conns, counted in failed, the first failure said.
func dialAll(network, target string, n, concurrency int) (conns []net.Conn, failed int, first string) {
	conns = make([]net.Conn, n)
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(concurrency, n) {
		wg.Go(func() {
			for i := range work {
				c, err := net.DialTimeout(network, target, 10*time.Second)
				if err != nil {
					mu.Lock()
					failed++
					if first == "" {
						first = err.Error()
					}
					mu.Unlock()
					continue
				}
				conns[i] = c
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return conns, failed, first
}

// raiseFileLimit makes room for at least want open files: Go raises the
// soft limit to the hard one at start, which may be below what thousands
// of sockets need; root may raise the hard limit too.
func raiseFileLimit(want uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= want {
		return nil
	}
	l.Cur = want
	l.Max = max(l.Max, want)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("raising the open-file limit to %d for as many sockets: %w", want, err)
	}
	return nil
}
