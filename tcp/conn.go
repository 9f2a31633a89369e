package tcp

import (
	"errors"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/internal/deadline"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// Conn is a TCP connection. Its goroutine (run) owns the Transmission
// Control Block below; the application's goroutines share only the fields
// marked "shared", under mu. It implements net.Conn (api.go).
type Conn struct {
	p     *Protocol
	id    fourTuple
	route ipv4.RouteInfo
	lis   *Listener // for a passive open until it is accepted

	in   mailbox       // segments from the dealer (mailbox.go)
	kick chan struct{} // the application has work for run

	// Signals to the application (capacity 1), and the end of run.
	readable    chan struct{}
	writable    chan struct{}
	established chan struct{} // closed when the handshake completes
	done        chan struct{} // closed when run has exited

	readDL, writeDL *deadline.Deadline

	mu sync.Mutex // guards the shared fields; run holds it while it works

	// Shared with the application.
	state      State
	snd        sendBuffer
	sndBufSize int
	rcv        rcvQueue
	rcvBufSize int
	rcvEOF     bool  // FIN received and all data before it queued
	err        error // why the connection ended (ECONNRESET, ETIMEDOUT...)
	wrShut     bool  // CloseWrite or Close: FIN once the send buffer drains
	rdShut     bool  // CloseRead or Close
	closed     bool  // Close called
	abortReq   error // the application (or the stack) asks for a reset
	noDelay    bool
	keepalive  bool
	kaIdle     time.Duration
	kaInterval time.Duration
	kaCount    int
	kaReset    bool // keepalive settings changed: run restarts the idle clock
	linger     int  // seconds; -1: default (close in the background)

	// The TCB, owned by run. Send sequence variables (RFC 9293 3.3.1).
	iss       seqnum.Value
	sndUna    seqnum.Value
	sndNxt    seqnum.Value
	sndMax    seqnum.Value // highest sequence number sent (sndNxt goes back on RTO)
	sndBufSeq seqnum.Value // sequence number of snd's first byte
	sndWnd    uint32       // peer's window, scaled
	sndWl1    seqnum.Value
	sndWl2    seqnum.Value
	maxSndWnd uint32
	// Receive sequence variables.
	irs    seqnum.Value
	rcvNxt seqnum.Value
	rcvAdv seqnum.Value // right edge of the window advertised
	ooo    []oooSeg
	oooN   int
	// Options (RFC 7323): negotiated only when the peer offered them.
	sndWScale, rcvWScale uint8
	wsOK                 bool
	tsOK                 bool
	sackOK               bool      // both sides sent SACK-permitted (RFC 2018)
	dsack                sackRange // a duplicate to report (RFC 2883)
	lastOOO              sackRange // the latest out-of-order arrival
	sackBuf              [wire.TCPMaxSACKBlocks]wire.SACKBlock
	tsRecent             uint32
	tsRecentAt           time.Time // when tsRecent was taken: PAWS (paws.go)
	lastChallenge        time.Time // the last challenge ACK (challenge.go)
	tsOffset             uint32
	sndMSS               int // payload bytes per segment, options excluded
	rcvMSS               int // the MSS we announce
	// Loss recovery and congestion control.
	cc         CongestionControl
	sent       []sentSeg // the retransmission queue: segments in flight
	srtt       time.Duration
	rttvar     time.Duration
	rto        time.Duration
	backoff    int // consecutive RTO expiries
	dupAcks    int
	recover    seqnum.Value
	inRecovery bool
	lastSend   time.Time
	builtAt    time.Time  // when the last segment was built: its transmission time (RACK)
	sb         scoreboard // SACK scoreboard (sack_sender.go)
	rack       rackState  // RACK (rack.go)
	tlp        tlpState   // tail loss probe (tlp.go)
	prr        prrState   // proportional rate reduction (prr.go)
	// ACKs owed to the peer.
	ackNow      bool
	segsUnacked int
	dupAcksOwed int // segments that arrived out of order since the last output
	// Timers, as deadlines; one clock timer fires for the earliest.
	timer       clock.Timer
	timerAt     time.Time
	rexmitAt    time.Time
	delackAt    time.Time
	keepaliveAt time.Time
	closeAt     time.Time // TIME-WAIT, FIN-WAIT-2 or linger end
	kaProbes    int
	synRetries  int
	// Statistics shown in the connection table.
	retransmits uint64
	icmp        icmpState // ICMP errors for run (icmp.go)
	ecn         ecnState  // RFC 3168 (ecn.go)
	memPressure bool      // the budget holds the window back (memory.go)
	// Time bounds (timeouts.go): the user timeout, since when data has
	// been outstanding without an ACK taking any, and an orphan's
	// zero-window probes.
	userTimeout  time.Duration // shared
	stallSince   time.Time
	orphanProbes int
	tune         rcvTuner // receive auto-tuning (autotune.go), shared
}

// sentSeg is a segment in flight: the retransmission queue keeps one per
// transmission, so that Karn's rule and, later, SACK and RACK have per-
// segment state.
type sentSeg struct {
	start, end seqnum.Value
	sentAt     time.Time
	retrans    bool
	sacked     bool // the peer holds it (RFC 2018): not in flight
	lost       bool // deemed lost (RFC 6675, RFC 8985), not yet retransmitted
}

// newConn makes a connection in state for id, not yet registered.
func (p *Protocol) newConn(id fourTuple, route ipv4.RouteInfo, state State) *Conn {
	clk := p.env.Clock
	c := &Conn{
		p:           p,
		id:          id,
		route:       route,
		in:          newMailbox(),
		kick:        make(chan struct{}, 1),
		readable:    make(chan struct{}, 1),
		writable:    make(chan struct{}, 1),
		established: make(chan struct{}),
		done:        make(chan struct{}),
		readDL:      deadline.New(clk),
		writeDL:     deadline.New(clk),
		state:       state,
		sndBufSize:  p.cfg.SendBuffer,
		rcvBufSize:  p.cfg.ReceiveBuffer,
		noDelay:     true, // as Go's net package sets TCP_NODELAY
		kaIdle:      p.cfg.KeepaliveIdle,
		kaInterval:  p.cfg.KeepaliveInterval,
		kaCount:     p.cfg.KeepaliveCount,
		linger:      -1,
		tune:        rcvTuner{off: p.cfg.ReceiveBufferMax <= p.cfg.ReceiveBuffer},
		rto:         p.cfg.RTOInitial,
		userTimeout: p.cfg.UserTimeout,
		tsOffset:    p.env.Rand.Uint32(),
	}
	c.iss = p.isn(id)
	c.sndUna, c.sndNxt, c.sndMax = c.iss, c.iss, c.iss
	c.recover = c.iss // RFC 6582 3.2 step 1: "initialized to the ISS"
	c.sndBufSeq = c.iss + 1
	// RFC 9293 3.7.1 and RFC 6691: the MSS announced is the route's MTU
	// less the fixed IP and TCP headers.
	c.rcvMSS = route.MTU() - wire.IPv4MinHeaderLen - wire.TCPMinHeaderLen
	c.sndMSS = min(536, c.rcvMSS) // RFC 9293 3.7.1 default until told
	// RFC 7323 section 2.3: the smallest shift that lets the window
	// field express the whole receive buffer.
	for c.rcvWScale < 14 && 65535<<c.rcvWScale < max(c.rcvBufSize, p.cfg.ReceiveBufferMax) {
		c.rcvWScale++
	}
	return c
}

// start launches the connection's goroutine.
func (c *Conn) start() {
	go c.run()
}

// deliver queues a segment for the connection; it runs in the dealer and
// never blocks.
func (c *Conn) deliver(seg *segment) {
	if !c.in.put(seg) {
		c.p.Stats.InQueueDrops.Inc()
		seg.pk.Release()
	}
}

// poke wakes run for the application's request.
func (c *Conn) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run is the connection's process: it takes segments, requests and timer
// expiries, one at a time, and after each sends what the TCB calls for.
func (c *Conn) run() {
	c.timer = c.p.env.Clock.NewTimer(time.Hour)
	c.timer.Stop()
	c.mu.Lock()
	c.begin()
	c.afterEvent()
	c.mu.Unlock()
	for {
		select {
		case <-c.in.notify:
			c.mu.Lock()
			c.inputBatch()
		case <-c.kick:
			c.mu.Lock()
			c.request()
		case <-c.timer.C():
			c.mu.Lock()
			c.timerAt = time.Time{}
			c.onTimer()
		}
		c.afterEvent()
		closed := c.state == Closed
		c.mu.Unlock()
		if closed {
			c.exit()
			return
		}
	}
}

// begin sends the opening segment: SYN for an active open, SYN-ACK for a
// passive one.
func (c *Conn) begin() {
	if c.state == Established {
		return // made from a SYN cookie: the handshake is over
	}
	flags := uint8(wire.TCPFlagSYN)
	if c.state == SynReceived {
		flags |= wire.TCPFlagACK
	}
	c.sendSYN(flags)
}

// afterEvent sends what is due and re-arms the timer; mu is held.
func (c *Conn) afterEvent() {
	if c.state != Closed {
		c.output()
		c.restartPTO()
	}
	c.armTimer()
}

// request handles what the application asked for since the last kick.
func (c *Conn) request() {
	if c.abortReq != nil {
		c.reset(c.abortReq)
		return
	}
	c.icmpEvents()
	if c.closed && c.state == SynSent {
		c.finish(errClosedByApp)
		return
	}
	if c.kaReset {
		// Keepalive turned on or retimed: the idle clock starts now, as
		// Linux's setsockopt restarts it, not at the next segment, which
		// an idle connection may never receive.
		c.kaReset = false
		c.armKeepalive(c.p.env.Clock.Now())
	}
	// A Read freed receive space: say so if the window grew enough
	// (checked in output); a Write queued data; a shutdown queued a FIN.
}

// reset aborts the connection: a RST to a synchronized peer, and the end.
func (c *Conn) reset(err error) {
	if c.state.synchronized() || c.state == SynReceived {
		c.sendFlags(c.sndMax, wire.TCPFlagRST|wire.TCPFlagACK)
		c.p.Stats.OutRsts.Inc()
		if c.state.countsEstablished() {
			c.p.Stats.EstabResets.Inc()
		}
	}
	c.finish(err)
}

// setState moves the TCB to s, keeping tcpCurrEstab right.
func (c *Conn) setState(s State) {
	if c.state.countsEstablished() && !s.countsEstablished() {
		c.p.Stats.CurrEstab.Add(-1)
	}
	if !c.state.countsEstablished() && s.countsEstablished() {
		c.p.Stats.CurrEstab.Add(1)
	}
	if s == TimeWait {
		c.p.Stats.TimeWaits.Inc()
	}
	c.state = s
}

// finish ends the connection with err (nil for an orderly end): the state
// becomes CLOSED and run exits after this event; mu is held.
func (c *Conn) finish(err error) {
	if c.state == Closed {
		return
	}
	if c.state == SynSent || c.state == SynReceived {
		c.p.Stats.AttemptFails.Inc()
	}
	if err == errTimedOut && c.icmp.softErr != nil {
		err = c.icmp.softErr // RFC 1122 4.2.3.9: report the soft error
	}
	c.setState(Closed)
	if c.err == nil {
		c.err = err
	}
}

// exit runs as the goroutine ends: it leaves the demultiplexing table,
// releases every buffer, and wakes everyone waiting.
func (c *Conn) exit() {
	c.p.unregister(c)
	c.timer.Stop()
	c.mu.Lock()
	bud := c.p.env.Budget
	// Data received in order stays readable after an orderly end: the
	// application reads it, then io.EOF, and Close releases it. A reset
	// discards it, as Read then reports the reset.
	if c.rcv.n > 0 && (c.err != nil || c.closed) {
		bud.Release(c.rcv.clear())
	} else if c.rcv.n > 0 {
		c.p.keepUnread(c)
	}
	for _, o := range c.ooo {
		o.pk.Release()
		bud.Release(len(o.data))
	}
	c.ooo, c.oooN = nil, 0
	c.snd.discard(c.snd.n, bud)
	if c.err == nil && !c.rcvEOF {
		c.err = errConnClosed
	}
	lis := c.lis
	c.lis = nil
	c.mu.Unlock()
	if lis != nil {
		lis.halfOpenDone(c, false)
	}
	c.in.close()
	close(c.done)
	signal(c.readable)
	signal(c.writable)
	c.p.wg.Done()
}

// abort asks the connection to reset and end, from outside its goroutine.
func (c *Conn) abort(err error) {
	c.mu.Lock()
	if c.abortReq == nil {
		c.abortReq = err
	}
	c.mu.Unlock()
	c.poke()
}

// Errors a connection ends with; the API wraps them in *net.OpError.
var (
	errConnReset   = syscall.ECONNRESET
	errConnRefused = syscall.ECONNREFUSED
	errTimedOut    = syscall.ETIMEDOUT
	errStackClosed = errors.New("tcp: stack closed")
	errClosedByApp = errors.New("tcp: connection closed")
	errConnClosed  = errors.New("tcp: connection closed by peer")
)

// local and remote addresses for the API.
func (c *Conn) localAddr() netip.AddrPort  { return c.id.local }
func (c *Conn) remoteAddr() netip.AddrPort { return c.id.remote }
