package load

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/gonetstack/gonet/bench/handlers"
)

// UDPRRResult is the UDP request-response workload's result.
type UDPRRResult struct {
	Sockets      int     `json:"sockets"`
	Transactions int64   `json:"transactions"`
	Lost         int64   `json:"lost"` // requests without an answer within a second
	PerSecond    float64 `json:"transactions_s"`
	Latency      Latency `json:"latency"`
	FirstErr     string  `json:"first_error,omitempty"`
}

// udpRRTimeout is how long a socket waits for the answer to a request
// before it counts the request lost and sends the next.
const udpRRTimeout = time.Second

// UDPRR runs n sockets for dur, each sending a 1-byte datagram to the UDP
// echo port (or port, when not 0) and waiting for it to come back before the next (netperf's
// UDP_RR): the small-packet path without TCP's acknowledgements or
// connection state. The first 100 ms are a warm-up and not recorded.
func UDPRR(addr string, n, port int, dur time.Duration) (UDPRRResult, error) {
	if port == 0 {
		port = handlers.UDPEchoPort
	}
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial(udpNet(addr), hostPort(addr, port))
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return UDPRRResult{}, err
		}
		conns[i] = c
	}
	warm := time.Now().Add(100 * time.Millisecond)
	end := warm.Add(dur)
	r := UDPRRResult{Sockets: n}
	var mu sync.Mutex
	var all []float64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			defer c.Close()
			samples := make([]float64, 0, 1<<14)
			var lost int64
			var firstErr error
			req := []byte{0}
			var b [16]byte
			for seq := byte(1); ; seq++ {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				// The byte tells this request's answer from a late
				// answer to an earlier one.
				req[0] = seq
				if _, err := c.Write(req); err != nil {
					firstErr = cmpErr(firstErr, err)
					lost++
					time.Sleep(10 * time.Millisecond) // refused: do not spin
					continue
				}
				c.SetReadDeadline(t0.Add(udpRRTimeout))
				for {
					m, err := c.Read(b[:])
					if err != nil {
						var ne net.Error
						if !errors.As(err, &ne) || !ne.Timeout() {
							firstErr = cmpErr(firstErr, err)
							time.Sleep(10 * time.Millisecond)
						}
						lost++
						break
					}
					if m != 1 || b[0] != seq {
						continue
					}
					if t0.After(warm) {
						samples = append(samples, us(time.Since(t0)))
					}
					break
				}
			}
			mu.Lock()
			all = append(all, samples...)
			r.Lost += lost
			if firstErr != nil && r.FirstErr == "" {
				r.FirstErr = firstErr.Error()
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	r.Transactions = int64(len(all))
	r.PerSecond = float64(len(all)) / dur.Seconds()
	r.Latency = summarise(all)
	return r, nil
}

// cmpErr keeps the first error of a sequence.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
