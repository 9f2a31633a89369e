package iperf3

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Defaults of a test, iperf3's: a 10-second test, one stream, 128 KiB
// TCP blocks, UDP datagrams the size of the TCP segment an Ethernet MTU
// takes (iperf3 takes its control connection's MSS), so that they are
// not fragmented, at 1 Mbit/s.
const (
	DefaultDuration = 10 * time.Second
	DefaultTCPLen   = 128 << 10
	// DefaultUDPLen is the UDP datagram over IPv4: 1500 - 20 - 20.
	DefaultUDPLen = 1460
	// DefaultUDPLen6 is the UDP datagram over IPv6: 1500 - 40 - 20.
	DefaultUDPLen6 = 1440
	DefaultUDPRate = 1 << 20
)

// Dialer opens a connection as net.Dialer.DialContext does; GoNet's
// stack.Stack.DialContext is one.
type Dialer func(ctx context.Context, network, address string) (net.Conn, error)

// Config is a test as the client asks for it.
type Config struct {
	// Addr is the server's "host:port".
	Addr string
	// UDP tests UDP; TCP otherwise.
	UDP bool
	// Reverse has the server send and the client receive (-R).
	Reverse bool
	// Parallel is the number of streams (-P); 1 when zero.
	Parallel int
	// Rate is each stream's target in bits per second (-b); zero is
	// unlimited for TCP and DefaultUDPRate for UDP.
	Rate uint64
	// Len is the block length (-l): a TCP write's, a UDP datagram's
	// payload; DefaultTCPLen, or DefaultUDPLen (DefaultUDPLen6 to an
	// IPv6 server) when zero.
	Len int
	// Duration of the test (-t), whole seconds as iperf3 sends it;
	// DefaultDuration when zero.
	Duration time.Duration
	// Timeout bounds every wait outside the running test; 10 s when
	// zero.
	Timeout time.Duration
}

// normalized returns c with its defaults filled in.
func (c Config) normalized() Config {
	if c.Parallel == 0 {
		c.Parallel = 1
	}
	if c.Len == 0 {
		c.Len = DefaultTCPLen
		if c.UDP {
			c.Len = DefaultUDPLen
			if ap, err := netip.ParseAddrPort(c.Addr); err == nil && ap.Addr().Unmap().Is6() {
				c.Len = DefaultUDPLen6
			}
		}
	}
	if c.UDP && c.Rate == 0 {
		c.Rate = DefaultUDPRate
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	return c
}

// check reports a configuration the protocol cannot carry.
func (c Config) check() error {
	switch {
	case c.Parallel < 1 || c.Parallel > maxStreams:
		return fmt.Errorf("iperf3: %d parallel streams, outside 1..%d", c.Parallel, maxStreams)
	case c.UDP && (c.Len < HeaderLen || c.Len > maxDatagram):
		return fmt.Errorf("iperf3: UDP length %d, outside %d..%d", c.Len, HeaderLen, maxDatagram)
	case !c.UDP && (c.Len < 1 || c.Len > maxTCPBlock):
		return fmt.Errorf("iperf3: TCP length %d, outside 1..%d", c.Len, maxTCPBlock)
	case c.Duration < time.Second:
		return fmt.Errorf("iperf3: duration %v is under the protocol's unit, a second", c.Duration)
	}
	return nil
}

// params are the parameters the client sends for c.
func (c Config) params() Params {
	p := Params{Time: int(c.Duration / time.Second), Parallel: c.Parallel, Len: c.Len,
		Bandwidth: c.Rate, PacingTimer: 1000, Version: "gonet"}
	if c.UDP {
		p.UDP = true
	} else {
		p.TCP = true
	}
	if c.Reverse {
		p.Reverse = true
	}
	return p
}

// ErrBusy is the server's ACCESS_DENIED: it is running another test.
var ErrBusy = errors.New("iperf3: the server is busy running a test")

// ServerErr is a test the server refused or failed, with iperf3's error
// number (i_errno) and the server's system errno.
type ServerErr struct {
	Code, Errno int32
}

func (e *ServerErr) Error() string {
	return "iperf3: the server reported error " + strconv.Itoa(int(e.Code)) + " (errno " + strconv.Itoa(int(e.Errno)) + ")"
}

// Run runs one test against the server at cfg.Addr, opening its
// connections with dial, and returns both sides' counts.
func Run(ctx context.Context, dial Dialer, cfg Config) (Result, error) {
	cfg = cfg.normalized()
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	ctrl, err := dial(ctx, "tcp", cfg.Addr)
	if err != nil {
		return Result{}, fmt.Errorf("iperf3: control connection to %s: %w", cfg.Addr, err)
	}
	c := &client{cfg: cfg, dial: dial, ctrl: ctrl, cookie: NewCookie()}
	defer c.close()
	stop := context.AfterFunc(ctx, func() { ctrl.Close() })
	defer stop()
	return c.run(ctx)
}

// client is one test from the client's side.
type client struct {
	cfg    Config
	dial   Dialer
	ctrl   net.Conn
	cookie Cookie

	streams []*stream
	conns   []net.Conn
	senders sync.WaitGroup
	readers sync.WaitGroup
	stopRun context.CancelFunc
	start   time.Time
	elapsed time.Duration
	ended   bool
}

// controlMsg is what the server said: a state, the results that follow
// EXCHANGE_RESULTS, or the read's failure.
type controlMsg struct {
	state   State
	results *Results
	err     error
}

// readControl reads the server's messages onto msgs until the control
// connection fails or the test is over.
func (c *client) readControl(msgs chan<- controlMsg, done <-chan struct{}) {
	send := func(m controlMsg) bool {
		select {
		case msgs <- m:
			return m.err == nil
		case <-done:
			return false
		}
	}
	for {
		st, err := readState(c.ctrl)
		if err != nil {
			send(controlMsg{err: err})
			return
		}
		switch st {
		case ExchangeResults:
			// The server's results follow the client's, which the
			// client sends on hearing this.
			if !send(controlMsg{state: st}) {
				return
			}
			var r Results
			if err := readJSON(c.ctrl, "server's results", &r); err != nil {
				send(controlMsg{err: err})
				return
			}
			if !send(controlMsg{results: &r}) {
				return
			}
		case ServerError:
			var codes [8]byte
			if _, err := io.ReadFull(c.ctrl, codes[:]); err != nil {
				send(controlMsg{err: fmt.Errorf("iperf3: reading the server's error: %w", err)})
				return
			}
			send(controlMsg{err: &ServerErr{Code: int32(binary.BigEndian.Uint32(codes[:4])), Errno: int32(binary.BigEndian.Uint32(codes[4:]))}})
			return
		case AccessDenied:
			send(controlMsg{err: ErrBusy})
			return
		case ServerTerminate:
			send(controlMsg{err: errors.New("iperf3: the server terminated the test")})
			return
		default:
			if !send(controlMsg{state: st}) || st == DisplayResults {
				return
			}
		}
	}
}

func (c *client) run(ctx context.Context) (Result, error) {
	c.ctrl.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
	if _, err := c.ctrl.Write(c.cookie[:]); err != nil {
		return Result{}, fmt.Errorf("iperf3: sending the cookie: %w", err)
	}
	c.ctrl.SetWriteDeadline(time.Time{})
	msgs := make(chan controlMsg)
	done := make(chan struct{})
	defer close(done)
	go c.readControl(msgs, done)

	// Outside the running test every message is due within Timeout.
	wait := time.NewTimer(c.cfg.Timeout)
	defer wait.Stop()
	var testEnd <-chan time.Time
	var theirs *Results
	for {
		select {
		case <-ctx.Done():
			writeState(c.ctrl, ClientTerminate)
			return Result{}, ctx.Err()
		case <-wait.C:
			return Result{}, fmt.Errorf("iperf3: the server said nothing for %v", c.cfg.Timeout)
		case <-testEnd:
			testEnd = nil
			c.end()
			if err := writeState(c.ctrl, TestEnd); err != nil {
				return Result{}, err
			}
			wait.Reset(c.cfg.Timeout)
		case m := <-msgs:
			if m.err != nil {
				return Result{}, m.err
			}
			wait.Reset(c.cfg.Timeout)
			if m.results != nil {
				theirs = m.results
				continue
			}
			switch m.state {
			case ParamExchange:
				if err := writeJSON(c.ctrl, "parameters", c.cfg.params()); err != nil {
					return Result{}, err
				}
			case CreateStreams:
				if err := c.createStreams(ctx); err != nil {
					return Result{}, err
				}
			case TestStart:
			case TestRunning:
				c.startStreams(ctx)
				wait.Stop()
				testEnd = time.After(c.cfg.Duration)
			case ExchangeResults:
				c.end()
				c.closeStreams()
				if err := writeJSON(c.ctrl, "client's results", c.results()); err != nil {
					return Result{}, err
				}
			case DisplayResults:
				if theirs == nil {
					return Result{}, errors.New("iperf3: DISPLAY_RESULTS before the server's results")
				}
				writeState(c.ctrl, IperfDone)
				c.linger()
				return c.result(*theirs), nil
			default:
				return Result{}, fmt.Errorf("iperf3: unexpected %v from the server", m.state)
			}
		}
	}
}

// lingerTimeout bounds the wait for the server to close the control
// connection after IPERF_DONE.
const lingerTimeout = 2 * time.Second

// linger waits for the server to close the control connection, after
// half-closing it, so that IPERF_DONE has reached the server before the
// caller can tear its stack down: a stack closed at once may never send
// it, and iperf3's server waits for it without a timeout.
func (c *client) linger() {
	if cw, ok := c.ctrl.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.ctrl.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.Copy(io.Discard, c.ctrl)
}

// createStreams opens the test's streams, one after the other as
// iperf3's client does.
func (c *client) createStreams(ctx context.Context) error {
	for i := range c.cfg.Parallel {
		s := &stream{id: streamID(i), sender: !c.cfg.Reverse, udp: c.cfg.UDP}
		var conn net.Conn
		var err error
		if c.cfg.UDP {
			conn, err = c.openUDP(ctx)
		} else {
			conn, err = c.openTCP(ctx)
		}
		if err != nil {
			return fmt.Errorf("iperf3: stream %d: %w", s.id, err)
		}
		c.streams = append(c.streams, s)
		c.conns = append(c.conns, conn)
	}
	return nil
}

// openTCP opens a TCP stream: a connection that begins with the cookie.
func (c *client) openTCP(ctx context.Context) (net.Conn, error) {
	conn, err := c.dial(ctx, "tcp", c.cfg.Addr)
	if err != nil {
		return nil, err
	}
	conn.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
	if _, err := conn.Write(c.cookie[:]); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sending the cookie: %w", err)
	}
	conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// helloInterval is how long the client waits for the answer to a UDP
// hello before it says hello again: datagrams get lost, and iperf3's
// server answers every hello.
const helloInterval = time.Second

// openUDP opens a UDP stream: a connected endpoint whose hello the
// server has answered.
func (c *client) openUDP(ctx context.Context) (net.Conn, error) {
	conn, err := c.dial(ctx, "udp", c.cfg.Addr)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(c.cfg.Timeout)
	buf := make([]byte, maxDatagram)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := conn.Write(helloMsg[:]); err != nil && isClosed(err) {
			break
		}
		next := time.Now().Add(helloInterval)
		if next.After(deadline) {
			next = deadline
		}
		conn.SetReadDeadline(next)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				break
			}
			if isHelloReply(buf[:n]) {
				conn.SetReadDeadline(time.Time{})
				return conn, nil
			}
		}
	}
	conn.Close()
	return nil, fmt.Errorf("no answer to the UDP hello within %v", c.cfg.Timeout)
}

// startStreams starts moving data at TEST_RUNNING.
func (c *client) startStreams(ctx context.Context) {
	runCtx, cancel := context.WithCancel(ctx)
	c.stopRun = cancel
	c.start = time.Now()
	for i, s := range c.streams {
		conn := c.conns[i]
		s.mu.Lock()
		s.counting = true
		s.mu.Unlock()
		switch {
		case s.sender && s.udp:
			c.senders.Go(func() { s.sendUDP(runCtx, conn.Write, c.cfg.Len, c.cfg.Rate) })
		case s.sender:
			c.senders.Go(func() { s.sendTCP(runCtx, conn, c.cfg.Len, c.cfg.Rate) })
		case s.udp:
			c.readers.Go(func() { s.receiveUDP(conn) })
		default:
			c.readers.Go(func() { s.receiveTCP(conn, c.cfg.Len) })
		}
	}
}

// end stops the counting at the test's end, and the senders, waiting
// for them so that TEST_END follows the last byte sent, as it does from
// iperf3's single-threaded client, and the server has counted all it
// will count. A write under way is cut short by a deadline; what the
// stack took of it counts. Receivers go on reading until the streams
// close: a server still sending must not block on a full window before
// it hears TEST_END.
func (c *client) end() {
	if c.ended {
		return
	}
	c.ended = true
	if !c.start.IsZero() {
		c.elapsed = time.Since(c.start)
	}
	for i, s := range c.streams {
		s.stop()
		if s.sender && i < len(c.conns) {
			c.conns[i].SetWriteDeadline(time.Now())
		}
	}
	if c.stopRun != nil {
		c.stopRun()
	}
	c.senders.Wait()
}

// closeStreams closes the streams and waits for their goroutines.
func (c *client) closeStreams() {
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = c.conns[:0]
	c.senders.Wait()
	c.readers.Wait()
}

// close ends whatever is left of the test.
func (c *client) close() {
	c.end()
	c.closeStreams()
	c.ctrl.Close()
}

// results are the client's side of the test, for the server.
func (c *client) results() Results {
	r := Results{SenderHasRetransmits: 0}
	if c.cfg.Reverse {
		r.SenderHasRetransmits = -1
	}
	for _, s := range c.streams {
		r.Streams = append(r.Streams, s.results(c.elapsed))
	}
	return r
}
