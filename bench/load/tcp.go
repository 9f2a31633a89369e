package load

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/bench/handlers"
)

func hostPort(addr string, port int) string { return net.JoinHostPort(addr, strconv.Itoa(port)) }

// family is the IP version of the server's address: 6 for an IPv6
// literal, 4 otherwise. The generators name the family in the network they
// dial ("tcp4", "tcp6") so that each measures the one the suite asked for.
func family(addr string) int {
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() && !a.Is4In6() {
		return 6
	}
	return 4
}

// tcpNet and udpNet are the networks to dial addr with.
func tcpNet(addr string) string { return fmt.Sprint("tcp", family(addr)) }
func udpNet(addr string) string { return fmt.Sprint("udp", family(addr)) }

// ShortResult is the short-transfers workload's result.
type ShortResult struct {
	Clients   int     `json:"clients"`
	Transfers int64   `json:"transfers"` // completed
	Errors    int64   `json:"errors"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	Mbps      float64 `json:"mbit_s"`
	ConnsPerS float64 `json:"conns_s"`
	FirstErr  string  `json:"first_error,omitempty"`
}

// Short runs n concurrent clients for dur, each in a loop connecting to the
// discard port, sending size bytes and closing (the GoNet paper's Figure
// 4). A transfer counts once the server has read every byte: the client
// half-closes and waits for the server's FIN, which the discard handler
// sends only after it read the client's.
func Short(addr string, n, size int, dur time.Duration) (ShortResult, error) {
	target := hostPort(addr, handlers.DiscardPort)
	payload := make([]byte, size)
	var done, errs atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	start := time.Now()
	end := start.Add(dur)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			d := net.Dialer{Timeout: 5 * time.Second}
			for time.Now().Before(end) {
				c, err := d.Dial(tcpNet(addr), target)
				if err != nil {
					fail(err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				_, err = c.Write(payload)
				if err == nil {
					err = c.(*net.TCPConn).CloseWrite()
				}
				if err == nil {
					_, err = drain(c)
				}
				c.Close()
				if err != nil {
					fail(err)
					continue
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	r := ShortResult{Clients: n, Transfers: done.Load(), Errors: errs.Load(), Seconds: secs}
	r.Bytes = r.Transfers * int64(size)
	r.Mbps = float64(r.Bytes) * 8 / secs / 1e6
	r.ConnsPerS = float64(r.Transfers) / secs
	if e, ok := firstErr.Load().(string); ok {
		r.FirstErr = e
	}
	return r, nil
}

// BulkResult is the bulk workload's result.
type BulkResult struct {
	Dir     string  `json:"dir"`
	Streams int     `json:"streams"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Gbps    float64 `json:"gbit_s"`
	// CC is the congestion control the client's kernel gave its
	// sockets: the sender's kernel→stack, the suite's check that a
	// route's congctl took.
	CC string `json:"cc,omitempty"`
	// Slices is how many runs of their own the bytes came from, when
	// the run was cut in slices (BulkSliced); SliceGbps is each one's
	// rate, in the order they ran.
	Slices    int       `json:"slices,omitempty"`
	SliceGbps []float64 `json:"slice_gbit_s,omitempty"`
	// Twin is the second address's result when slices went to two
	// addresses in turn.
	Twin *BulkResult `json:"twin,omitempty"`
}

// Bulk moves data for dur over n streams: "up" writes to the discard port
// (counted once the server has read it all: half-close, then wait for its
// FIN), "down" reads from the source port. A port other than 0 replaces
// the handler's: a daemon's discard (RFC 863) ends as the handler does,
// and its chargen (RFC 864) sends as the source does.
func Bulk(addr, dir string, n, port int, dur time.Duration) (BulkResult, error) {
	switch {
	case dir != "up" && dir != "down":
		return BulkResult{}, fmt.Errorf("bulk: -dir %q: up or down", dir)
	case port != 0:
	case dir == "down":
		port = handlers.SourcePort
	default:
		port = handlers.DiscardPort
	}
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.DialTimeout(tcpNet(addr), hostPort(addr, port), 5*time.Second)
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return BulkResult{}, err
		}
		conns[i] = c
	}
	cc, err := congestionControl(conns[0])
	if err != nil {
		for _, c := range conns {
			c.Close()
		}
		return BulkResult{}, err
	}
	var total atomic.Int64
	errc := make(chan error, n)
	start := time.Now()
	end := start.Add(dur)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			defer c.Close()
			buf := make([]byte, handlers.BufSize)
			if dir == "down" {
				c.SetReadDeadline(end)
				for {
					m, err := c.Read(buf)
					total.Add(int64(m))
					if err != nil {
						if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
							errc <- err
						}
						return
					}
				}
			}
			c.SetWriteDeadline(end)
			for {
				m, err := c.Write(buf)
				total.Add(int64(m))
				if err != nil {
					if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
						errc <- err
						return
					}
					break
				}
			}
			c.SetDeadline(time.Now().Add(30 * time.Second))
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				errc <- err
				return
			}
			if _, err := drain(c); err != nil {
				errc <- fmt.Errorf("waiting for the server to read everything: %w", err)
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	close(errc)
	if err := <-errc; err != nil {
		return BulkResult{}, err
	}
	b := total.Load()
	return BulkResult{Dir: dir, Streams: n, Bytes: b, Seconds: secs, Gbps: float64(b) * 8 / secs / 1e9, CC: cc}, nil
}

// BulkSliced is Bulk cut into slices of slice each, each a run of its own
// with connections of its own, for dur in all at each address: with two,
// the server's address in two families say, the slices take them in the
// order ABBA ABBA... Two bulk runs of a few seconds one after the other
// differ by 10-20% on two shared cores (ARCHITECTURE.md, "IPv6"): each
// connection settles into its own pattern of batches and wake-ups, and
// the machine drifts under it. Many short slices average the first over
// many connections and, interleaved, cancel the second, as ping's twins
// cancel it echo by echo. Every slice pays its connections' start and
// the drain of its last writes, the same for either address. The result
// is the first address's, its Twin the second's.
func BulkSliced(addrs []string, dir string, n, port int, dur, slice time.Duration) (BulkResult, error) {
	if len(addrs) == 0 || len(addrs) > 2 {
		return BulkResult{}, fmt.Errorf("bulk: %d addresses to slice between, want one or two", len(addrs))
	}
	if slice <= 0 || slice > dur {
		return BulkResult{}, fmt.Errorf("bulk: slices of %v in a run of %v", slice, dur)
	}
	per := int((dur + slice - 1) / slice) // slices at each address
	rs := make([]BulkResult, len(addrs))
	for i := range per * len(addrs) {
		// 0, 1, 1, 0, 0, 1, 1, 0...: a drift linear in time weighs
		// the same on both within every four.
		a := (i + 1) / 2 % len(addrs)
		r, err := Bulk(addrs[a], dir, n, port, slice)
		if err != nil {
			return BulkResult{}, fmt.Errorf("slice %d of %d, at %s: %w", i+1, per*len(addrs), addrs[a], err)
		}
		sum := &rs[a]
		sum.Bytes += r.Bytes
		sum.Seconds += r.Seconds
		sum.SliceGbps = append(sum.SliceGbps, r.Gbps)
		sum.Slices++
		if sum.CC == "" {
			sum.CC = r.CC
		}
	}
	for i := range rs {
		rs[i].Dir, rs[i].Streams = dir, n
		rs[i].Gbps = float64(rs[i].Bytes) * 8 / rs[i].Seconds / 1e9
	}
	if len(rs) == 2 {
		rs[0].Twin = &rs[1]
	}
	return rs[0], nil
}

// congestionControl is the congestion control algorithm the kernel runs on
// c (TCP_CONGESTION).
func congestionControl(c net.Conn) (string, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return "", fmt.Errorf("congestion control of a %T: not a kernel TCP socket", c)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return "", err
	}
	var cc string
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		cc, gerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}); err != nil {
		return "", err
	}
	if gerr != nil {
		return "", fmt.Errorf("getsockopt TCP_CONGESTION: %w", gerr)
	}
	return cc, nil
}

// RRResult is the request-response workload's result.
type RRResult struct {
	Conns        int     `json:"conns"`
	Transactions int64   `json:"transactions"`
	PerSecond    float64 `json:"transactions_s"`
	Latency      Latency `json:"latency"`
	// Twin is the second address's result when each client took two
	// in turn (RRTwins).
	Twin *RRResult `json:"twin,omitempty"`
}

// RR runs n connections for dur, each sending a 1-byte request to the RR
// port (or port, when not 0: an echo service answers the same) and waiting
// for the 1-byte response before the next (netperf's TCP_RR). The first
// 100 ms are a warm-up and not recorded.
func RR(addr string, n, port int, dur time.Duration) (RRResult, error) {
	if port == 0 {
		port = handlers.RRPort
	}
	return RROver(func(network, address string) (net.Conn, error) {
		return net.DialTimeout(network, address, 5*time.Second)
	}, hostPort(addr, port), n, dur)
}

// RRTwins is RR over addr and twin at once: the server's address in two
// families, say. An idle stack's round trip is mostly wake-ups, whose cost
// moves by 10-20% from one run to the next; in one run both addresses meet
// the same threads and the same moments, as PingTwins' echoes do. A single
// client holds a connection to each and takes them in turn, one
// transaction each; more clients hold one connection each, half of them
// to each address (rrOver). The result is addr's, its Twin twin's; dur is
// the two's, and each address's rate counts its transactions over its
// share of the clients' time, the rate all n would have had on it.
func RRTwins(addr, twin string, n, port int, dur time.Duration) (RRResult, error) {
	if port == 0 {
		port = handlers.RRPort
	}
	rs, err := rrOver(func(network, address string) (net.Conn, error) {
		return net.DialTimeout(network, address, 5*time.Second)
	}, []string{hostPort(addr, port), hostPort(twin, port)}, n, dur)
	if err != nil {
		return RRResult{}, err
	}
	rs[0].Twin = &rs[1]
	return rs[0], nil
}

// Dialer opens a connection as net.Dial does: the kernel's, or a stack's
// in the load generator's own process.
type Dialer func(network, address string) (net.Conn, error)

// RROver is RR over the connections dial opens to address, a server that
// answers each byte with one (the RR handler, or an RFC 862 echo service):
// how a GoNet stack in the load generator's process (package gnclient)
// measures request-response over its own link.
func RROver(dial Dialer, address string, n int, dur time.Duration) (RRResult, error) {
	rs, err := rrOver(dial, []string{address}, n, dur)
	if err != nil {
		return RRResult{}, err
	}
	return rs[0], nil
}

// rrOver runs n clients over addresses and returns each address's result.
// With fewer clients than addresses (one client, two addresses) each
// client holds a connection to every address and takes them in turn;
// otherwise client i holds one, to addresses[i%len(addresses)], so that a
// point of n connections holds n whatever its addresses, as a run at one
// address does. Taking turns over two connections each, GoNet's 100
// clients measured 810-820 µs at each family against 742 µs for 100
// clients at one (Intel Xeon), a cost of twice the connections that a
// peer's run at one address does not pay.
func rrOver(dial Dialer, addresses []string, n int, dur time.Duration) ([]RRResult, error) {
	networks := make([]string, len(addresses))
	for i, address := range addresses {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		networks[i] = tcpNet(host)
	}
	// A client's connections, each with its address's index.
	type conn struct {
		net.Conn
		at int
	}
	var conns []conn
	clients := make([][]conn, n)
	turns := make([]int, len(addresses)) // the connections at each address
	for i := range clients {
		for at, address := range addresses {
			if n >= len(addresses) && at != i%len(addresses) {
				continue
			}
			c, err := dial(networks[at], address)
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return nil, err
			}
			conns = append(conns, conn{c, at})
			clients[i] = append(clients[i], conn{c, at})
			turns[at]++
		}
	}
	warm := time.Now().Add(100 * time.Millisecond)
	end := warm.Add(dur)
	var mu sync.Mutex
	all := make([][]float64, len(addresses))
	var firstErr error
	var wg sync.WaitGroup
	for _, cs := range clients {
		wg.Go(func() {
			samples := make([][]float64, len(cs))
			for i, c := range cs {
				defer c.Close()
				c.SetDeadline(end.Add(10 * time.Second))
				samples[i] = make([]float64, 0, 1<<14/len(cs))
			}
			var b [1]byte
			var err error
		loop:
			for {
				for i, c := range cs {
					t0 := time.Now()
					if !t0.Before(end) {
						break loop
					}
					if _, err = c.Write(b[:]); err != nil {
						break loop
					}
					if _, err = io.ReadFull(c, b[:]); err != nil {
						break loop
					}
					if t0.After(warm) {
						samples[i] = append(samples[i], us(time.Since(t0)))
					}
				}
			}
			mu.Lock()
			for i, c := range cs {
				all[c.at] = append(all[c.at], samples[i]...)
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	rs := make([]RRResult, len(addresses))
	for i, a := range all {
		// A client's time is shared evenly among its connections: an
		// address's share is its connections' over all of them.
		share := dur.Seconds() * float64(turns[i]) / float64(len(conns))
		rs[i] = RRResult{Conns: n, Transactions: int64(len(a)), PerSecond: float64(len(a)) / share, Latency: summarise(a)}
	}
	return rs, nil
}

// CRRResult is the connect-request-response workload's result.
type CRRResult struct {
	Clients   int     `json:"clients"`
	Conns     int64   `json:"conns"` // completed: connected, answered, closed
	Errors    int64   `json:"errors"`
	Seconds   float64 `json:"seconds"`
	ConnsPerS float64 `json:"conns_s"`
	Latency   Latency `json:"latency"` // connect to close, each
	FirstErr  string  `json:"first_error,omitempty"`
}

// CRR runs n clients for dur, each in a loop connecting to the RR port,
// sending one byte, reading the one-byte answer and closing (netperf's
// TCP_CRR): the rate at which a path sets connections up and tears them
// down, which a relaying gateway pays twice (the guest's side and its own
// host socket).
func CRR(addr string, n int, dur time.Duration) (CRRResult, error) {
	target := hostPort(addr, handlers.RRPort)
	var mu sync.Mutex
	var all []float64
	var errs atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	end := start.Add(dur)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			d := net.Dialer{Timeout: 5 * time.Second}
			samples := make([]float64, 0, 1<<12)
			var b [1]byte
			for time.Now().Before(end) {
				t0 := time.Now()
				c, err := d.Dial(tcpNet(addr), target)
				if err == nil {
					c.SetDeadline(t0.Add(10 * time.Second))
					if _, err = c.Write(b[:]); err == nil {
						_, err = io.ReadFull(c, b[:])
					}
					if cerr := c.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					// A refused or reset connect returns at once: do not
					// spin on it.
					time.Sleep(10 * time.Millisecond)
					continue
				}
				samples = append(samples, us(time.Since(t0)))
			}
			mu.Lock()
			all = append(all, samples...)
			mu.Unlock()
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	r := CRRResult{Clients: n, Conns: int64(len(all)), Errors: errs.Load(), Seconds: secs}
	r.ConnsPerS = float64(r.Conns) / secs
	r.Latency = summarise(all)
	if e, ok := firstErr.Load().(string); ok {
		r.FirstErr = e
	}
	return r, nil
}

// ScaleResult is the scale workload's result.
type ScaleResult struct {
	Conns        int     `json:"conns"`
	EstablishS   float64 `json:"establish_s"`
	ConnsPerS    float64 `json:"conns_s"`
	UseS         float64 `json:"use_s"` // all used once: 1 byte each way
	Failed       int     `json:"failed"`
	FirstFailure string  `json:"first_failure,omitempty"`
}

// Scale opens n connections to the echo port, concurrency at a time, and
// holds them idle; it prints the establishment as a first JSON line and
// waits for a line on in (the suite measures the server meanwhile), then
// uses every connection once, one byte echoed, and returns.
func Scale(addr string, n, concurrency int, in io.Reader, out io.Writer) (ScaleResult, error) {
	target := hostPort(addr, handlers.EchoPort)
	conns := make([]net.Conn, n)
	r := ScaleResult{Conns: n}
	var mu sync.Mutex
	failed := func(err error) {
		mu.Lock()
		r.Failed++
		if r.FirstFailure == "" {
			r.FirstFailure = err.Error()
		}
		mu.Unlock()
	}
	work := make(chan int)
	start := time.Now()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range work {
				c, err := net.DialTimeout(tcpNet(addr), target, 10*time.Second)
				if err != nil {
					failed(err)
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
	r.EstablishS = time.Since(start).Seconds()
	r.ConnsPerS = float64(n-r.Failed) / r.EstablishS
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err := json.NewEncoder(out).Encode(r); err != nil {
		return r, err
	}
	bufio.NewReader(in).ReadString('\n')

	work = make(chan int)
	start = time.Now()
	for range concurrency {
		wg.Go(func() {
			var b [1]byte
			for i := range work {
				c := conns[i]
				if c == nil {
					continue
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				_, err := c.Write(b[:])
				if err == nil {
					_, err = io.ReadFull(c, b[:])
				}
				if err != nil {
					failed(err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	r.UseS = time.Since(start).Seconds()
	return r, nil
}
