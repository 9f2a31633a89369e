package tcp

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// Conn is a TCP connection: its Transmission Control Block, split as RFC
// 9293 section 3.3.1 splits the sequence variables, into a sender (snd,
// sender.go) and a receiver (rcv, receiver.go), with the timers (timers,
// timer.go) and the application's side (sock, socket.go). Its goroutine
// (run) owns all of it and holds mu while it works; the application's
// goroutines share the socket, state and the fields marked "shared", and
// only under mu. It implements net.Conn (api.go).
type Conn struct {
	p     *Protocol
	id    fourTuple
	net   ip.Network // the network layer of the connection's family
	route ip.Route
	lis   *Listener // for a passive open until it is accepted
	// forwarded marks a passive open the forwarder accepted (forward.go):
	// passive, with no listener.
	forwarded bool

	in     mailbox         // segments from the dealer (mailbox.go)
	wakeup waker           // run has work: segments, the timer, the application (wake)
	syncs  []chan struct{} // run's: Sync markers taken in this event (sync.go)
	// eventAt is when run's current event began, zero between events
	// (now).
	eventAt time.Time

	established chan struct{} // closed when the handshake completes
	done        chan struct{} // closed when run has exited

	mu    sync.Mutex // guards the shared fields; run holds it while it works
	state State      // shared
	sock  socket     // shared: the application's side (socket.go)

	snd    sender   // send sequence space, loss recovery, congestion control
	rcv    receiver // receive sequence space and the ACKs owed
	timers timers   // deadlines, one clock timer for the earliest (timer.go)

	// Options both sides agreed on in the handshake (RFC 7323, RFC 2018).
	wsOK     bool   // window scaling
	tsOK     bool   // timestamps
	sackOK   bool   // SACK
	tsOffset uint32 // added to our timestamp clock, random per connection

	lastChallenge time.Time // the last challenge ACK (challenge.go)
	icmp          icmpState // ICMP errors for run (icmp.go)
	ecn           ecnState  // RFC 3168 (ecn.go)
}

// newConn makes a connection in state for id, not yet registered.
func (p *Protocol) newConn(id fourTuple, nw ip.Network, route ip.Route, state State) *Conn {
	clk := p.env.Clock
	c := &Conn{
		p:           p,
		id:          id,
		net:         nw,
		route:       route,
		wakeup:      newWaker(),
		established: make(chan struct{}),
		done:        make(chan struct{}),
		state:       state,
		sock:        newSocket(p, clk),
		snd:         sender{rto: p.cfg.RTOInitial, rtoMin: p.cfg.RTOMin, rtoMax: p.cfg.RTOMax},
		rcv:         receiver{tune: rcvTuner{off: p.cfg.ReceiveBufferMax <= p.cfg.ReceiveBuffer}},
		tsOffset:    p.env.Rand.Uint32(),
	}
	c.in = newMailbox(c.wakeup)
	c.snd.startAt(p.isn(id))
	c.rcv.mss = mssFor(nw, &route)
	c.snd.mss = min(536, c.rcv.mss) // RFC 9293 3.7.1 default until told
	// RFC 7323 section 2.3: the smallest shift that lets the window
	// field express the whole receive buffer.
	for c.rcv.wscale < 14 && 65535<<c.rcv.wscale < max(c.sock.rcvBufSize, p.cfg.ReceiveBufferMax) {
		c.rcv.wscale++
	}
	return c
}

// mssFor is the MSS a route allows (RFC 9293 3.7.1 and RFC 6691): its
// MTU less the fixed network and TCP headers.
func mssFor(nw ip.Network, r *ip.Route) int {
	return r.MTU - nw.HeaderLen() - wire.TCPMinHeaderLen
}

// passive reports whether the connection was opened by the peer's SYN,
// through a listener or the forwarder, rather than by a simultaneous open.
func (c *Conn) passive() bool { return c.lis != nil || c.forwarded }

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

// A waker wakes one goroutine that waits on it, never blocking the one
// that wakes it: its capacity of 1 holds one wake-up, and more before the
// waiter takes it add nothing. It wakes run (Conn.wake, the mailbox) and
// the application's Read and Write (socket.readable, socket.writable).
type waker chan struct{}

func newWaker() waker { return make(waker, 1) }

// wake wakes the waiter, or leaves a wake-up pending for it.
func (w waker) wake() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// wake wakes run for the application's request.
func (c *Conn) wake() { c.wakeup.wake() }

// run is the connection's process: it takes segments, requests and timer
// expiries, and after each wake-up sends what the TCB calls for. The three
// inputs share one waker, so that run waits on one channel: a select over
// the mailbox's, the application's and a timer's channel cost a tenth of
// the stack's CPU in request-response with 100 connections (locking three
// channels, and blocking and unblocking the timer's, at every wake-up).
func (c *Conn) run() {
	c.timers.clock = c.p.env.Clock.AfterFunc(time.Hour, c.timerFired)
	c.timers.clock.Stop()
	c.mu.Lock()
	c.beginEvent()
	c.begin()
	c.afterEvent()
	c.endEvent()
	c.mu.Unlock()
	for range c.wakeup {
		c.mu.Lock()
		c.beginEvent()
		c.event()
		c.afterEvent()
		syncs := c.answerSyncs()
		closed := c.state == Closed
		c.endEvent()
		c.mu.Unlock()
		if closed {
			c.exit()
		}
		answer(syncs)
		if closed {
			return
		}
	}
}

// event handles what woke run; mu is held. Segments go first, so that an
// ACK that came with the timer's expiry cancels the retransmission the
// timer would make; then the timer, then the application's requests.
func (c *Conn) event() {
	c.inputBatch()
	if c.state != Closed && c.timerDue() {
		c.timers.armedAt = noTime
		c.onTimer()
	}
	if c.state != Closed {
		c.request()
	}
}

// timerDue reports whether the clock timer has fired, or its time has come
// though its function has not run yet (it runs in a goroutine of its own:
// a Sync after a virtual clock's Advance must find the expiry handled).
func (c *Conn) timerDue() bool {
	fired := c.timers.fired.Swap(false)
	armed := c.timers.armedAt
	return fired || !armed.IsZero() && !c.now().Before(armed)
}

// timerFired is the clock timer's function: it runs in a goroutine of the
// clock's and hands the expiry to run. An expiry of a timer since re-armed
// finds nothing due (onTimer).
func (c *Conn) timerFired() {
	c.timers.fired.Store(true)
	c.wakeup.wake()
}

// beginEvent reads the clock once for the event run is about to handle:
// every timestamp, RTT sample and deadline the event sets takes this
// time, as Linux's tcp_mstamp is read once per batch of input or output.
// An event lasts microseconds; the clock read it saves is several per
// segment.
func (c *Conn) beginEvent() { c.eventAt = c.p.env.Clock.Now() }

// endEvent ends run's event: later readers of now (the application's
// goroutines, under mu) read the clock.
func (c *Conn) endEvent() { c.eventAt = noTime }

// now is the current time: the event's, within one of run's events, else
// the clock's. mu is held.
func (c *Conn) now() time.Time {
	if !c.eventAt.IsZero() {
		return c.eventAt
	}
	return c.p.env.Clock.Now()
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

// request handles what the application asked for since the last wake-up.
func (c *Conn) request() {
	if c.sock.abortReq != nil {
		if c.state.resetsOnAbort() {
			c.reset(c.sock.abortReq)
		} else {
			c.finish(c.sock.abortReq)
		}
		return
	}
	c.icmpEvents()
	if c.sock.closed && c.state == SynSent {
		c.finish(errClosedByApp)
		return
	}
	if c.sock.kaReset {
		// Keepalive turned on or retimed: the idle clock starts now, as
		// Linux's setsockopt restarts it, not at the next segment, which
		// an idle connection may never receive.
		c.sock.kaReset = false
		c.armKeepalive(c.now())
	}
	// A Read freed receive space: say so if the window grew enough
	// (checked in output); a Write queued data; a shutdown queued a FIN.
}

// reset aborts the connection: a RST to a synchronized peer, and the end.
// It goes at ackSeq, not SND.MAX: a peer whose window closed below what
// we sent accepts only a segment at its RCV.NXT (RFC 9293 3.10.7.4, RFC
// 5961 3.2), as Linux's tcp_send_active_reset knows.
func (c *Conn) reset(err error) {
	if c.state.synchronized() || c.state == SynReceived {
		c.sendFlags(c.snd.ackSeq(), wire.TCPFlagRST|wire.TCPFlagACK)
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
	c.logEnd(c.state, err)
	c.setState(Closed)
	if c.sock.err == nil {
		c.sock.err = err
	}
}

// exit runs as the goroutine ends: it leaves the demultiplexing table,
// releases every buffer, and wakes everyone waiting.
func (c *Conn) exit() {
	c.p.unregister(c)
	c.timers.clock.Stop()
	c.mu.Lock()
	bud := c.p.env.Budget
	// Data received in order stays readable after an orderly end: the
	// application reads it, then io.EOF, and Close releases it. A reset
	// discards it, as Read then reports the reset.
	if c.sock.rcvBuf.n > 0 && (c.sock.err != nil || c.sock.closed) {
		bud.Release(c.sock.rcvBuf.clear())
	} else if c.sock.rcvBuf.n > 0 {
		c.p.keepUnread(c)
	}
	for _, o := range c.rcv.ooo {
		o.pk.Release()
		bud.Release(len(o.data))
	}
	c.rcv.ooo, c.rcv.oooN = nil, 0
	c.sock.sndBuf.discard(c.sock.sndBuf.n, bud)
	if c.sock.err == nil && !c.sock.rcvEOF {
		c.sock.err = errConnClosed
	}
	lis := c.lis
	c.lis = nil
	c.mu.Unlock()
	if lis != nil {
		lis.halfOpenDone(c, false)
	}
	c.in.close()
	close(c.done)
	c.sock.readable.wake()
	c.sock.writable.wake()
	c.p.wg.Done()
}

// abort asks the connection to reset and end, from outside its goroutine.
func (c *Conn) abort(err error) {
	c.mu.Lock()
	if c.sock.abortReq == nil {
		c.sock.abortReq = err
	}
	c.mu.Unlock()
	c.wake()
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
