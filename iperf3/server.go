package iperf3

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/gonetstack/gonet/stats"
)

// Limits on what a client may ask of the server. iperf3's own are 128
// streams and 1 MiB TCP blocks.
const (
	maxStreams  = 128
	maxTCPBlock = 1 << 20
	// defaultTimeout bounds every wait outside the running test: for a
	// cookie, a control message, the streams after CREATE_STREAMS.
	defaultTimeout = 10 * time.Second
)

// iperf3's error numbers (i_errno) that the server sends after
// SERVER_ERROR; the client prints its own text for each.
const (
	errNumStreams   = 6  // IENUMSTREAMS
	errBlockSize    = 7  // IEBLOCKSIZE
	errUnimplmented = 13 // IEUNIMP
	errUDPBlockSize = 20 // IEUDPBLOCKSIZE
)

// ServerStats count what the server did and what it turned away.
type ServerStats struct {
	// Tests counts tests that ran to their results.
	Tests stats.Counter
	// Failed counts tests that ended without results: a client that
	// went away, timed out or broke the protocol.
	Failed stats.Counter
	// Denied counts clients turned away with ACCESS_DENIED because a
	// test was running.
	Denied stats.Counter
	// Refused counts tests refused with SERVER_ERROR for parameters the
	// server does not take.
	Refused stats.Counter
	// StrayDatagrams counts UDP datagrams that belong to no stream of
	// the running test, dropped.
	StrayDatagrams stats.Counter
}

// Server serves iperf3 tests, one at a time, over any stack's sockets.
type Server struct {
	// Logger gets a line per test at info level; nil discards.
	Logger *slog.Logger
	// Timeout bounds every wait outside the running test; 10 s when
	// zero.
	Timeout time.Duration
	// Stats are the server's counters.
	Stats ServerStats

	mu   sync.Mutex
	test *serverTest // the running test; nil when idle
}

func (s *Server) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) timeout() time.Duration {
	if s.Timeout <= 0 {
		return defaultTimeout
	}
	return s.Timeout
}

// Serve runs the server on ln (the control connections and TCP streams)
// and pc (UDP streams; nil: TCP tests only), which should be bound to
// the same port, until ctx is done; it then closes both, ends the
// running test and returns nil. It returns an error when ln fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener, pc net.PacketConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		if pc != nil {
			pc.Close()
		}
	})
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	if pc != nil {
		wg.Go(func() { s.readUDP(pc) })
	}
	// seq numbers the connections in the order they were accepted,
	// which is the order iperf3's client opens its streams in.
	var seq uint64
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			cancel()
			return fmt.Errorf("iperf3: server on %v: %w", ln.Addr(), err)
		}
		seq++
		n := seq
		wg.Go(func() { s.handle(ctx, c, n, pc) })
	}
}

// handle reads the cookie a new connection begins with and makes it the
// control connection of a new test, a stream of the running one, or
// turns it away.
func (s *Server) handle(ctx context.Context, c net.Conn, seq uint64, pc net.PacketConn) {
	c.SetReadDeadline(time.Now().Add(s.timeout()))
	cookie, err := readCookie(c)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	s.mu.Lock()
	t := s.test
	if t == nil {
		t = newServerTest(c, cookie, pc, s.timeout())
		s.test = t
	}
	s.mu.Unlock()
	switch {
	case t.ctrl == c:
		err := t.run(ctx)
		// Idle before the client sees the connection close, so that
		// a client that starts its next test at once is not denied.
		s.mu.Lock()
		s.test = nil
		s.mu.Unlock()
		c.Close()
		s.report(t, err)
	case t.addTCP(cookie, c, seq):
	default:
		// One test at a time, as iperf3's server runs them.
		s.Stats.Denied.Inc()
		writeState(c, AccessDenied)
		c.Close()
	}
}

// report logs a test's outcome and counts it.
func (s *Server) report(t *serverTest, err error) {
	var refused *refusal
	switch {
	case err == nil:
		s.Stats.Tests.Inc()
		var bytes uint64
		for _, st := range t.streams {
			bytes += st.results(0).Bytes
		}
		secs := t.elapsed.Seconds()
		s.log().Info("iperf3 test done", "client", t.ctrl.RemoteAddr(), "proto", t.proto(),
			"reverse", t.reverse, "streams", len(t.streams), "bytes", bytes, "seconds", secs,
			"bits_per_second", float64(bytes)*8/max(secs, 1e-9))
	case errors.As(err, &refused):
		s.Stats.Refused.Inc()
		s.log().Info("iperf3 test refused", "client", t.ctrl.RemoteAddr(), "err", err)
	default:
		s.Stats.Failed.Inc()
		s.log().Info("iperf3 test failed", "client", t.ctrl.RemoteAddr(), "err", err)
	}
}

// readUDP reads the UDP endpoint until it is closed, handing each
// datagram to the running test.
func (s *Server) readUDP(pc net.PacketConn) {
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if isClosed(err) {
				return
			}
			continue
		}
		now := time.Now()
		s.mu.Lock()
		t := s.test
		s.mu.Unlock()
		if t == nil || !t.udpDatagram(buf[:n], from, now) {
			s.Stats.StrayDatagrams.Inc()
		}
	}
}

// serverTest is one test from the server's side.
type serverTest struct {
	ctrl    net.Conn
	cookie  Cookie
	pc      net.PacketConn
	timeout time.Duration

	params  Params
	udp     bool
	reverse bool
	elapsed time.Duration

	mu        sync.Mutex
	accepting bool // between CREATE_STREAMS and TEST_START
	streams   []*stream
	tcpConns  []net.Conn
	tcpSeqs   []uint64           // the order the TCP streams were accepted in
	udpPeers  map[string]*stream // by the client's address
	peerAddrs []net.Addr         // the UDP streams' clients, by stream
	arrived   chan struct{}      // a token per stream made
}

func newServerTest(c net.Conn, cookie Cookie, pc net.PacketConn, timeout time.Duration) *serverTest {
	return &serverTest{ctrl: c, cookie: cookie, pc: pc, timeout: timeout,
		udpPeers: map[string]*stream{}, arrived: make(chan struct{}, maxStreams)}
}

func (t *serverTest) proto() string {
	if t.udp {
		return "udp"
	}
	return "tcp"
}

// refusal is a test the server will not run, with the iperf3 error
// number it tells the client.
type refusal struct {
	code int32
	why  string
}

func (r *refusal) Error() string { return "iperf3: refused: " + r.why }

// check refuses parameters the server does not take.
func (t *serverTest) check() error {
	p := t.params
	switch {
	case bool(p.Bidir):
		return &refusal{errUnimplmented, "bidirectional tests are not implemented"}
	case p.Parallel < 1 || p.Parallel > maxStreams:
		return &refusal{errNumStreams, fmt.Sprintf("%d parallel streams, outside 1..%d", p.Parallel, maxStreams)}
	case t.udp && (p.Len < headerLen(bool(p.Counters64)) || p.Len > maxDatagram):
		return &refusal{errUDPBlockSize, fmt.Sprintf("UDP block of %d bytes, outside %d..%d", p.Len, headerLen(bool(p.Counters64)), maxDatagram)}
	case !t.udp && (p.Len < 1 || p.Len > maxTCPBlock):
		return &refusal{errBlockSize, fmt.Sprintf("TCP block of %d bytes, outside 1..%d", p.Len, maxTCPBlock)}
	case !bool(p.UDP) && !bool(p.TCP):
		return &refusal{errUnimplmented, "neither TCP nor UDP (SCTP?)"}
	case t.udp && t.pc == nil:
		return &refusal{errUnimplmented, "UDP tests: the server has no UDP endpoint"}
	}
	return nil
}

// refuse tells the client why the test will not run: SERVER_ERROR, then
// iperf3's error number and a system errno (none), both 32-bit
// big-endian.
func (t *serverTest) refuse(r *refusal) {
	state := ServerError
	msg := []byte{byte(state)}
	msg = binary.BigEndian.AppendUint32(msg, uint32(r.code))
	msg = binary.BigEndian.AppendUint32(msg, 0)
	t.ctrl.Write(msg)
}

// run drives the test on its control connection, from PARAM_EXCHANGE to
// IPERF_DONE, and closes the streams; the caller closes the control
// connection.
func (t *serverTest) run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { t.ctrl.Close() })
	defer stop()
	defer t.closeStreams()
	t.ctrl.SetDeadline(time.Now().Add(t.timeout))

	if err := writeState(t.ctrl, ParamExchange); err != nil {
		return err
	}
	if err := readJSON(t.ctrl, "parameters", &t.params); err != nil {
		return err
	}
	t.udp, t.reverse = bool(t.params.UDP), bool(t.params.Reverse)
	if err := t.check(); err != nil {
		t.refuse(err.(*refusal))
		return err
	}

	t.mu.Lock()
	t.accepting = true
	t.mu.Unlock()
	if err := writeState(t.ctrl, CreateStreams); err != nil {
		return err
	}
	if err := t.awaitStreams(ctx); err != nil {
		return err
	}

	if err := writeState(t.ctrl, TestStart); err != nil {
		return err
	}
	if err := writeState(t.ctrl, TestRunning); err != nil {
		return err
	}
	start := time.Now()
	runCtx, stopStreams := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.startStreams(runCtx, &wg)
	// The client ends the test; give it the test's duration and the
	// usual slack, or an hour for a test that ends on a byte count.
	limit := time.Hour
	if t.params.Time > 0 && t.params.Num == 0 && t.params.BlockCount == 0 {
		limit = time.Duration(t.params.Time+t.params.Omit)*time.Second + 2*t.timeout
	}
	t.ctrl.SetDeadline(start.Add(limit))
	st, err := readState(t.ctrl)
	t.elapsed = time.Since(start)
	for _, s := range t.streams {
		s.stop()
	}
	stopStreams()
	t.closeStreams()
	wg.Wait()
	switch {
	case err != nil:
		return err
	case st == ClientTerminate:
		return errors.New("iperf3: the client terminated the test")
	case st != TestEnd:
		return fmt.Errorf("iperf3: %v while the test ran, not TEST_END", st)
	}

	t.ctrl.SetDeadline(time.Now().Add(t.timeout))
	if err := writeState(t.ctrl, ExchangeResults); err != nil {
		return err
	}
	var theirs Results
	if err := readJSON(t.ctrl, "client's results", &theirs); err != nil {
		return err
	}
	if err := writeJSON(t.ctrl, "server's results", t.results()); err != nil {
		return err
	}
	if err := writeState(t.ctrl, DisplayResults); err != nil {
		return err
	}
	// The client says IPERF_DONE and closes; one that only closes has
	// its results all the same.
	if st, err := readState(t.ctrl); err == nil && st != IperfDone {
		return fmt.Errorf("iperf3: %v after DISPLAY_RESULTS, not IPERF_DONE", st)
	}
	return nil
}

// awaitStreams waits for the client's streams after CREATE_STREAMS.
func (t *serverTest) awaitStreams(ctx context.Context) error {
	timer := time.NewTimer(t.timeout)
	defer timer.Stop()
	for range t.params.Parallel {
		select {
		case <-t.arrived:
		case <-timer.C:
			return fmt.Errorf("iperf3: %d of %d streams came within %v", len(t.arrived), t.params.Parallel, t.timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t.mu.Lock()
	t.accepting = false
	t.mu.Unlock()
	t.numberTCP()
	return nil
}

// newStream makes the next stream; t.mu is held.
func (t *serverTest) newStream() *stream {
	s := &stream{id: streamID(len(t.streams)), sender: t.reverse, udp: t.udp,
		wide: bool(t.params.Counters64), counting: true}
	t.streams = append(t.streams, s)
	t.arrived <- struct{}{}
	return s
}

// addTCP takes c as a stream of the test if the test awaits TCP streams
// and c's cookie is its own.
func (t *serverTest) addTCP(cookie Cookie, c net.Conn, seq uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.accepting || t.udp || cookie != t.cookie || len(t.streams) >= t.params.Parallel {
		return false
	}
	t.newStream()
	t.tcpConns = append(t.tcpConns, c)
	t.tcpSeqs = append(t.tcpSeqs, seq)
	return true
}

// numberTCP gives the TCP streams their ids in the order they were
// accepted, the order the client made them in and numbered them by:
// their cookies may have been read in another.
func (t *serverTest) numberTCP() {
	t.mu.Lock()
	defer t.mu.Unlock()
	order := make([]int, len(t.tcpConns))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return cmp.Compare(t.tcpSeqs[i], t.tcpSeqs[j]) })
	conns := make([]net.Conn, len(order))
	for i, k := range order {
		conns[i] = t.tcpConns[k]
	}
	t.tcpConns = conns
}

// udpDatagram takes a datagram that came to the UDP endpoint: a hello
// makes a stream while the test awaits them, anything else from a
// stream's client counts on it. It reports whether the datagram was the
// test's.
func (t *serverTest) udpDatagram(b []byte, from net.Addr, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.udpPeers[from.String()]
	switch {
	case s != nil && len(b) == len(helloMsg) && t.accepting:
		// A repeated hello: the answer was lost.
		t.pc.WriteTo(helloReply[:], from)
	case s != nil:
		s.datagram(b, now)
	case t.accepting && t.udp && len(b) == len(helloMsg) && len(t.streams) < t.params.Parallel:
		s = t.newStream()
		t.udpPeers[from.String()] = s
		t.peerAddrs = append(t.peerAddrs, from)
		t.pc.WriteTo(helloReply[:], from)
	default:
		return false
	}
	return true
}

// startStreams starts the goroutines that move the test's data: senders
// in reverse mode, readers of TCP streams otherwise (UDP streams are fed
// by the server's UDP reader).
func (t *serverTest) startStreams(ctx context.Context, wg *sync.WaitGroup) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range t.streams {
		switch {
		case t.udp && t.reverse:
			to := t.peerAddrs[i]
			wg.Go(func() {
				s.sendUDP(ctx, func(b []byte) (int, error) { return t.pc.WriteTo(b, to) }, t.params.Len, t.params.Bandwidth)
			})
		case t.udp:
		case t.reverse:
			c := t.tcpConns[i]
			wg.Go(func() { s.sendTCP(ctx, c, t.params.Len, t.params.Bandwidth) })
		default:
			c := t.tcpConns[i]
			wg.Go(func() { s.receiveTCP(c, t.params.Len) })
		}
	}
}

// closeStreams closes the TCP streams, which ends their goroutines, as
// iperf3's server does at TEST_END, and forgets the UDP ones.
func (t *serverTest) closeStreams() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.accepting = false
	for _, c := range t.tcpConns {
		c.Close()
	}
	clear(t.udpPeers)
}

// results are the server's side of the test, for the client.
func (t *serverTest) results() Results {
	r := Results{SenderHasRetransmits: -1}
	if t.reverse {
		r.SenderHasRetransmits = 0
	}
	for _, s := range t.streams {
		r.Streams = append(r.Streams, s.results(t.elapsed))
	}
	return r
}
