package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/ip"
)

// The socket API: a *Conn is a net.Conn with the methods of *net.TCPConn
// that Go programs use, and errors shaped as the standard library's
// (*net.OpError wrapping a syscall.Errno, so errors.Is works).

var _ net.Conn = (*Conn)(nil)

// Dial opens a connection to raddr (active open, RFC 9293 3.10.1) from
// laddr (zero: the route's source address and an ephemeral port), and waits
// for the handshake, ctx's end, or failure.
func (p *Protocol) Dial(ctx context.Context, laddr, raddr netip.AddrPort) (*Conn, error) {
	fail := func(err error) error {
		oe := &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(raddr), Err: err}
		if laddr.IsValid() {
			oe.Source = net.TCPAddrFromAddrPort(laddr)
		}
		return oe
	}
	local := laddr.Addr()
	if raddr.Port() == 0 || (local.IsValid() && !local.IsUnspecified() && local.Is4() != raddr.Addr().Is4()) {
		return nil, fail(syscall.EINVAL)
	}
	nw, err := p.nets.For(raddr.Addr())
	if err != nil {
		return nil, fail(err)
	}
	route, err := nw.Route(raddr.Addr())
	if err != nil {
		return nil, fail(fmt.Errorf("%w: %w", err, syscall.ENETUNREACH))
	}
	// The 4-tuple names link-local addresses with their zone, as the
	// network layer delivers them (ip.Header).
	raddr = netip.AddrPortFrom(ip.Scoped(raddr.Addr(), route), raddr.Port())
	if !local.IsValid() || local.IsUnspecified() || local == route.Src.WithZone("") {
		local = route.Src
	}
	if !local.IsValid() {
		return nil, fail(syscall.EADDRNOTAVAIL)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fail(net.ErrClosed)
	}
	port := laddr.Port()
	if port == 0 {
		var ok bool
		if port, ok = p.pickPort(local, raddr); !ok {
			p.mu.Unlock()
			return nil, fail(syscall.EADDRNOTAVAIL)
		}
	}
	id := fourTuple{netip.AddrPortFrom(local, port), raddr}
	if p.conns[id] != nil {
		p.mu.Unlock()
		return nil, fail(syscall.EADDRINUSE)
	}
	if !p.reserveConn(id.local, id.remote) {
		p.mu.Unlock()
		return nil, fail(errNoBuffers)
	}
	c := p.newConn(id, nw, route, SynSent)
	c.snd.cc = p.congestion(c.snd.mss)
	p.conns[id] = c
	p.wg.Add(1)
	p.Stats.Connections.Add(1)
	p.mu.Unlock()
	p.Stats.ActiveOpens.Inc()
	c.start()
	select {
	case <-c.established:
		return c, nil
	case <-c.done:
		return nil, fail(c.sock.err)
	case <-ctx.Done():
		c.abort(ctx.Err())
		<-c.done
		select {
		case <-c.established: // it raced to completion: still give up
		default:
		}
		return nil, fail(mapContextErr(ctx.Err()))
	}
}

func mapContextErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return err
}

// Read reads received data. It returns io.EOF after the peer's FIN, and a
// *net.OpError wrapping ECONNRESET or ETIMEDOUT after a reset or timeout.
func (c *Conn) Read(b []byte) (int, error) {
	if err := c.awaitData("read"); err != nil {
		return 0, err
	}
	if len(b) == 0 {
		c.mu.Unlock()
		return 0, nil
	}
	n := c.sock.rcvBuf.read(b)
	c.consumed(n)
	return n, nil
}

// WriteTo writes received data to w until the peer's FIN, handing w the
// received segments' bytes where they lie instead of copying them through
// a buffer: io.Copy from a connection uses it, so a relay (package
// gateway) holds no buffer of its own while the connection is idle. It
// returns nil at the FIN, w's error as w returned it, and otherwise what
// Read would.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	var total int64
	var segs []rcvSeg
	for {
		if err := c.awaitData("read"); err != nil {
			if err == io.EOF {
				err = nil
			}
			return total, err
		}
		segs = c.sock.rcvBuf.take(segs)
		c.mu.Unlock()
		n := 0
		var werr error
		for i := range segs {
			if werr == nil {
				var k int
				k, werr = w.Write(segs[i].data)
				total += int64(k)
			}
			n += len(segs[i].data)
			segs[i].pk.Release()
		}
		clear(segs)
		segs = segs[:0]
		c.mu.Lock()
		c.consumed(n)
		if werr != nil {
			return total, werr
		}
	}
}

// awaitData waits until received data is queued and returns with mu held,
// or returns what a read gets instead (io.EOF, a closed connection's error,
// a deadline) without it.
func (c *Conn) awaitData(op string) error {
	err := c.awaitDataOnce(op)
	if err != nil {
		// What ends this Read ends any other blocked beside it: pass the
		// wake-up on, as only one waiter took it.
		c.sock.readable.wake()
	}
	return err
}

func (c *Conn) awaitDataOnce(op string) error {
	for {
		if c.sock.readDL.Passed() {
			return c.opError(op, os.ErrDeadlineExceeded)
		}
		c.mu.Lock()
		if c.sock.closed {
			c.mu.Unlock()
			return c.opError(op, net.ErrClosed)
		}
		if c.sock.rcvBuf.n > 0 {
			return nil
		}
		switch {
		case c.sock.rdShut || c.sock.rcvEOF:
			c.mu.Unlock()
			return io.EOF
		case c.sock.err != nil && c.state == Closed:
			err := c.sock.err
			c.mu.Unlock()
			return c.opError(op, err)
		}
		c.mu.Unlock()
		// One channel: the deadline passing wakes it (NewWaking), and so
		// does the connection's end (exit). A select over three cost
		// request-response a twentieth of the stack's CPU.
		<-c.sock.readable
	}
}

// consumed follows the application's taking of n bytes from the receive
// queue; mu is held, and released here. The bytes go back to the budget,
// and run is woken: the window may have opened enough to say so.
func (c *Conn) consumed(n int) {
	c.rcvSpaceAdjust(n)
	more := c.sock.rcvBuf.n > 0
	c.mu.Unlock()
	c.p.env.Budget.Release(n)
	if more {
		c.sock.readable.wake() // for another reader
	}
	c.wake()
}

// Write queues b for sending, waiting while the send buffer is full. It
// returns a *net.OpError wrapping EPIPE after CloseWrite, ECONNRESET after a
// reset, and net.ErrClosed after Close.
func (c *Conn) Write(b []byte) (int, error) {
	written := 0
	err := c.whenWritable(func() bool { return written == len(b) }, func(room int) int {
		k := c.sock.sndBuf.write(b[written:written+min(room, len(b)-written)], c.p.env.Budget)
		written += k
		return k
	})
	return written, err
}

// Fill queues for sending up to limit bytes that fill reads straight into the
// send buffer, in place of the copy Write makes from a buffer of the
// caller's: a relay that reads a socket with readv(2) moves each byte once
// (package gateway). It waits for room as Write does, then calls fill once,
// with mu held, handing it the buffer's free space (one slice per 16 KiB
// chunk, at most limit bytes in all); fill returns how many bytes it put at
// the front of that space, which are queued. It returns that count, and
// Write's errors, in which case fill has not run.
func (c *Conn) Fill(limit int, fill func(space [][]byte) int) (int, error) {
	filled, ran := 0, false
	err := c.whenWritable(func() bool { return ran }, func(room int) int {
		filled, ran = c.sock.sndBuf.fill(min(room, limit), c.p.env.Budget, fill)
		return filled
	})
	return filled, err
}

// whenWritable runs put, with mu held, each time the send buffer has room
// (room bytes of it) while done is false, waiting for room or for memory
// (put found the stack's budget spent) between; it returns once done,
// or on a deadline, a close, a reset or a shutdown (Write's errors). A put
// that queues bytes wakes the connection to send them.
func (c *Conn) whenWritable(done func() bool, put func(room int) int) error {
	var freed <-chan struct{} // memory released anywhere in the stack
	for {
		if c.sock.writeDL.Passed() {
			return c.opError("write", os.ErrDeadlineExceeded)
		}
		c.mu.Lock()
		switch {
		case c.sock.closed:
			c.mu.Unlock()
			return c.opError("write", net.ErrClosed)
		case c.state == Closed:
			err := c.sock.err
			if err == nil || err == errConnClosed {
				err = syscall.EPIPE
			}
			c.mu.Unlock()
			return c.opError("write", err)
		case c.sock.wrShut:
			c.mu.Unlock()
			return c.opError("write", syscall.EPIPE)
		}
		if done() {
			c.mu.Unlock()
			return nil
		}
		if room := c.sock.sndBufSize - c.sock.sndBuf.n; room > 0 {
			k := put(room)
			c.mu.Unlock()
			if k > 0 {
				freed = nil
				c.wake()
				continue
			}
			if done() {
				return nil
			}
			if freed == nil {
				// The budget refused: take the channel the next
				// release closes and try once more, so a release
				// between the refusal and the wait is not missed.
				// Taking it only after a refusal spares every other
				// Write the channel Freed makes.
				freed = c.p.env.Budget.Freed()
				continue
			}
		} else {
			c.mu.Unlock()
			freed = nil
		}
		select {
		case <-c.sock.writable:
		case <-freed:
			freed = nil
		case <-c.sock.writeDL.Done():
		case <-c.done:
		}
	}
}

// Close closes the connection: a FIN after the data already written, sent
// in the background (or a RST if received data was left unread, RFC 2525
// 2.17, or SetLinger(0) was called). Later reads and writes fail with
// net.ErrClosed.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.sock.closed {
		c.mu.Unlock()
		return c.opError("close", net.ErrClosed)
	}
	c.sock.closed = true
	c.sock.rdShut = true
	unread := c.sock.rcvBuf.n > 0 && c.state != Closed
	c.p.env.Budget.Release(c.sock.rcvBuf.clear())
	c.p.forgetUnread(c)
	linger := c.sock.linger
	switch {
	case c.state == Closed:
	case unread || linger == 0:
		c.sock.abortReq = errClosedByApp
	default:
		c.sock.wrShut = true
		if c.state == FinWait2 {
			c.timers.closeAt = c.now().Add(c.p.cfg.FinTimeout)
		}
	}
	c.mu.Unlock()
	c.wake()
	c.sock.readable.wake()
	c.sock.writable.wake()
	if linger > 0 {
		// SO_LINGER with a time: wait for the send buffer to drain.
		t := c.p.env.Clock.NewTimer(time.Duration(linger) * time.Second)
		defer t.Stop()
		for {
			c.mu.Lock()
			drained := c.sock.sndBuf.n == 0 || c.state == Closed
			c.mu.Unlock()
			if drained {
				return nil
			}
			select {
			case <-c.sock.writable:
			case <-c.done:
			case <-t.C():
				c.abort(errClosedByApp)
				return nil
			}
		}
	}
	return nil
}

// CloseWrite shuts the sending side: a FIN follows the data written.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	if c.sock.closed {
		c.mu.Unlock()
		return c.opError("close", net.ErrClosed)
	}
	if c.state == Closed {
		c.mu.Unlock()
		return c.opError("close", syscall.ENOTCONN)
	}
	c.sock.wrShut = true
	c.mu.Unlock()
	c.wake()
	return nil
}

// CloseRead shuts the receiving side: reads return io.EOF, and data that
// arrives is acknowledged and dropped.
func (c *Conn) CloseRead() error {
	c.mu.Lock()
	if c.sock.closed {
		c.mu.Unlock()
		return c.opError("close", net.ErrClosed)
	}
	c.sock.rdShut = true
	c.p.env.Budget.Release(c.sock.rcvBuf.clear())
	c.mu.Unlock()
	c.wake()
	c.sock.readable.wake()
	return nil
}

// LocalAddr returns the local address as a *net.TCPAddr.
func (c *Conn) LocalAddr() net.Addr { return net.TCPAddrFromAddrPort(c.id.local) }

// RemoteAddr returns the peer's address as a *net.TCPAddr.
func (c *Conn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.id.remote) }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.sock.readDL.Set(t)
	c.sock.writeDL.Set(t)
	return nil
}

// SetReadDeadline sets the deadline for Read.
func (c *Conn) SetReadDeadline(t time.Time) error { c.sock.readDL.Set(t); return nil }

// SetWriteDeadline sets the deadline for Write.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.sock.writeDL.Set(t); return nil }

// SetNoDelay turns Nagle's algorithm off (true, the default, as in Go's
// net package) or on.
func (c *Conn) SetNoDelay(noDelay bool) error {
	c.mu.Lock()
	c.sock.noDelay = noDelay
	c.mu.Unlock()
	c.wake()
	return nil
}

// SetKeepAlive turns keepalive probes on or off (RFC 1122 4.2.3.6; off by
// default at the TCP level, as RFC 1122 asks).
func (c *Conn) SetKeepAlive(on bool) error {
	c.mu.Lock()
	c.sock.keepalive = on
	c.sock.kaReset = true
	c.mu.Unlock()
	c.wake()
	return nil
}

// SetKeepAlivePeriod sets the idle time before the first probe and the
// interval between probes, as Go's net package does.
func (c *Conn) SetKeepAlivePeriod(d time.Duration) error {
	if d <= 0 {
		return c.opError("set", syscall.EINVAL)
	}
	c.mu.Lock()
	c.sock.kaIdle, c.sock.kaInterval = d, d
	c.sock.kaReset = true
	c.mu.Unlock()
	c.wake()
	return nil
}

// SetKeepAliveConfig sets keepalive as net.TCPConn.SetKeepAliveConfig does.
func (c *Conn) SetKeepAliveConfig(cfg net.KeepAliveConfig) error {
	c.mu.Lock()
	c.sock.keepalive = cfg.Enable
	if cfg.Idle > 0 {
		c.sock.kaIdle = cfg.Idle
	}
	if cfg.Interval > 0 {
		c.sock.kaInterval = cfg.Interval
	}
	if cfg.Count > 0 {
		c.sock.kaCount = cfg.Count
	}
	c.sock.kaReset = true
	c.mu.Unlock()
	c.wake()
	return nil
}

// SetLinger sets what Close does with unsent data: sec < 0 (the default)
// sends it in the background; sec == 0 discards it and resets; sec > 0
// waits up to sec seconds for it to be sent.
func (c *Conn) SetLinger(sec int) error {
	c.mu.Lock()
	c.sock.linger = sec
	c.mu.Unlock()
	return nil
}

// SetReadBuffer sets the receive buffer, which bounds the window, and
// turns its auto-tuning off, as SO_RCVBUF does.
func (c *Conn) SetReadBuffer(bytes int) error {
	if bytes <= 0 {
		return c.opError("set", syscall.EINVAL)
	}
	c.mu.Lock()
	c.sock.rcvBufSize = bytes
	c.rcv.tune.off = true
	c.mu.Unlock()
	c.wake()
	return nil
}

// SetWriteBuffer sets the send buffer.
func (c *Conn) SetWriteBuffer(bytes int) error {
	if bytes <= 0 {
		return c.opError("set", syscall.EINVAL)
	}
	c.mu.Lock()
	c.sock.sndBufSize = bytes
	c.mu.Unlock()
	c.sock.writable.wake()
	return nil
}

// SetCongestion chooses the connection's congestion control by name, as
// Linux's TCP_CONGESTION socket option does: "cubic" (the stack's default
// unless Config.Congestion says otherwise) or "newreno". An unknown name is
// an error wrapping ENOENT. It is meant for before data flows, when the
// new algorithm starts as the old one would have. Switched mid-connection,
// the new algorithm takes over the congestion window and ssthresh in force
// but none of the old one's history: CUBIC starts a congestion avoidance
// stage from the current window as after a timeout (RFC 9438 section
// 4.8), HyStart++ runs only if the initial slow start was under way, and a
// fast recovery in progress is finished by the new algorithm.
func (c *Conn) SetCongestion(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, err := newCongestion(name, c.snd.mss, &c.p.Stats)
	if err != nil {
		return c.opError("set", err)
	}
	if c.snd.cc != nil {
		if c.snd.cc.Name() == cc.Name() {
			return nil // the same algorithm keeps its history
		}
		if s, ok := cc.(seeder); ok {
			s.seed(c.snd.cc.CWnd(), c.snd.cc.SSThresh(), c.snd.inRecovery)
		}
	}
	c.snd.cc = cc
	return nil
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
