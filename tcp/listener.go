package tcp

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/internal/deadline"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// Listener is a passive open (RFC 9293 3.10.7.2, the LISTEN state). It
// implements net.Listener. The backlog bounds both half-open connections
// and those established but not yet accepted.
type Listener struct {
	p       *Protocol
	laddr   netip.AddrPort
	v6only  bool // on ::, IPv6 only (ListenV6Only)
	backlog int

	accepted chan *Conn // established, waiting for Accept
	done     chan struct{}
	acceptDL *deadline.Deadline

	mu       sync.Mutex
	halfOpen int
	closed   bool
	cookieAt time.Time // the last SYN cookie sent (syncookie.go)

	cookieLog *logs.Repeated // a full backlog answered by cookies (log.go)
}

var _ net.Listener = (*Listener)(nil)

// Listen opens a listener on laddr with the given backlog (0: the
// configured default). An unspecified address listens on all of the
// host's: 0.0.0.0 (or the zero Addr) on its IPv4 addresses, :: on those
// of both families, as a Linux socket on :: does by default (ip.Binding);
// a specific address must be the host's (EADDRNOTAVAIL otherwise), and a
// link-local one takes the zone of its interface when given without.
func (p *Protocol) Listen(laddr netip.AddrPort, backlog int) (*Listener, error) {
	return p.listen(laddr, backlog, false)
}

// ListenV6Only is Listen for a listener on :: that takes IPv6 only
// (IPV6_V6ONLY, RFC 3493 section 5.3), what Go's "tcp6" asks for: the
// same port can then carry a separate IPv4 listener.
func (p *Protocol) ListenV6Only(laddr netip.AddrPort, backlog int) (*Listener, error) {
	return p.listen(laddr, backlog, true)
}

func (p *Protocol) listen(laddr netip.AddrPort, backlog int, v6only bool) (*Listener, error) {
	a := laddr.Addr()
	if !a.IsValid() {
		a = netip.IPv4Unspecified()
	}
	if v6only && !a.Is6() {
		return nil, listenError(laddr, syscall.EINVAL)
	}
	a, err := p.localAddr(a)
	if err != nil {
		return nil, listenError(laddr, err)
	}
	b := ip.Binding{Addr: a, V6Only: v6only}
	if backlog <= 0 {
		backlog = p.cfg.Backlog
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, listenError(laddr, net.ErrClosed)
	}
	port := laddr.Port()
	if port == 0 {
		n := int(p.cfg.EphemeralHigh-p.cfg.EphemeralLow) + 1
		start := p.env.Rand.IntN(n)
		for i := range n {
			cand := p.cfg.EphemeralLow + uint16((start+i)%n)
			if len(p.listeners[cand]) == 0 && !p.portInUse(cand) {
				port = cand
				break
			}
		}
		if port == 0 {
			return nil, listenError(laddr, syscall.EADDRINUSE)
		}
	}
	for _, o := range p.listeners[port] {
		if b.Conflicts(o.binding()) {
			return nil, listenError(laddr, syscall.EADDRINUSE)
		}
	}
	l := &Listener{
		p:         p,
		laddr:     netip.AddrPortFrom(a, port),
		v6only:    v6only,
		backlog:   backlog,
		accepted:  make(chan *Conn, backlog),
		done:      make(chan struct{}),
		acceptDL:  deadline.New(p.env.Clock),
		cookieLog: p.newCookieLog(),
	}
	p.listeners[port] = append(p.listeners[port], l)
	return l, nil
}

// localAddr checks that a, to bind to, is unspecified or one of the host's
// addresses, and returns it as the network layer names it in what it
// delivers: a link-local address with its interface's zone.
func (p *Protocol) localAddr(a netip.Addr) (netip.Addr, error) {
	nw, err := p.nets.For(a)
	if err != nil {
		return a, err
	}
	if a.IsUnspecified() {
		return a, nil
	}
	r, err := nw.Route(a)
	if err != nil || !r.Local {
		return a, syscall.EADDRNOTAVAIL
	}
	return r.Src, nil
}

// binding is the listener's address and the families it takes.
func (l *Listener) binding() ip.Binding { return ip.Binding{Addr: l.laddr.Addr(), V6Only: l.v6only} }

// portInUse reports whether a connection uses port locally; p.mu is held.
func (p *Protocol) portInUse(port uint16) bool {
	for id := range p.conns {
		if id.local.Port() == port {
			return true
		}
	}
	return false
}

func listenError(laddr netip.AddrPort, err error) error {
	return &net.OpError{Op: "listen", Net: "tcp", Addr: net.TCPAddrFromAddrPort(laddr), Err: err}
}

// handle takes a segment for the listener, in the dealer (RFC 9293
// 3.10.7.2): a RST is ignored, an ACK is answered with a RST unless it
// returns a SYN cookie, and a SYN opens a connection in SYN-RECEIVED
// within the backlog, or beyond it gets a SYN cookie (syncookie.go). The
// dealer has parsed the segment's options; optsOK is false if they did not
// parse. The segment's packet is released unless a connection took it.
func (l *Listener) handle(seg *segment, id fourTuple, optsOK bool) {
	p := l.p
	defer seg.release()
	switch {
	case seg.has(wire.TCPFlagRST):
		return
	case seg.has(wire.TCPFlagACK):
		if l.cookieACK(seg, id) {
			return
		}
		p.sendResetTo(id, seg.ack, 0, wire.TCPFlagRST)
		return
	case !seg.has(wire.TCPFlagSYN):
		return
	}
	if !optsOK {
		p.Stats.InErrs.Inc()
		return
	}
	l.mu.Lock()
	noMem := !p.connRoom()
	full := l.closed || l.halfOpen+len(l.accepted) >= l.backlog || noMem
	cookie := l.wantCookie(full, p.env.Clock.Now())
	if !full && !cookie {
		l.halfOpen++
	}
	l.mu.Unlock()
	if cookie {
		if full {
			l.cookieSent(id.remote)
		}
		l.sendCookie(seg, id)
		return
	}
	if full {
		// No cookie (turned off, or the accept queue is full too): drop
		// the SYN, as Linux does, and the client retries.
		if noMem {
			p.memoryRefused(id.remote, id.local)
		} else {
			p.Stats.ListenOverflows.Inc()
		}
		p.Stats.ListenDrops.Inc()
		return
	}
	nw, route, err := p.route(id.remote.Addr())
	if err != nil {
		p.Stats.ListenDrops.Inc()
		l.halfOpenDone(nil, false)
		return
	}
	c := p.newConn(id, nw, route, SynReceived)
	if seg.reopenISS != 0 {
		c.snd.startAt(seg.reopenISS) // RFC 6191 (timewait.go)
	}
	c.lis = l
	c.negotiate(seg)
	c.snd.wnd = uint32(seg.wnd)
	c.snd.wl1 = seg.seq
	c.snd.maxWnd = c.snd.wnd
	if !p.register(c) {
		p.Stats.ListenDrops.Inc()
		l.halfOpenDone(nil, false)
		return
	}
	p.Stats.PassiveOpens.Inc()
	c.start()
}

// halfOpenDone is told that a half-open connection was established (ok) or
// failed; an established one joins the accept queue.
func (l *Listener) halfOpenDone(c *Conn, ok bool) {
	l.mu.Lock()
	l.halfOpen--
	closed := l.closed
	if ok && !closed {
		select {
		case l.accepted <- c:
			l.mu.Unlock()
			return
		default:
		}
	}
	l.mu.Unlock()
	if ok {
		// Accept queue full or listener closed: reset it. Called from
		// c's goroutine with c.mu held, so ask, do not reset directly.
		c.sock.abortReq = errConnReset
		c.wake()
	}
}

// Accept waits for the next established connection.
func (l *Listener) Accept() (net.Conn, error) { return l.AcceptTCP() }

// AcceptTCP is Accept returning the concrete type.
func (l *Listener) AcceptTCP() (*Conn, error) {
	select {
	case <-l.done:
		return nil, l.opError(net.ErrClosed)
	case <-l.acceptDL.Done():
		return nil, l.opError(os.ErrDeadlineExceeded)
	default:
	}
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.done:
		return nil, l.opError(net.ErrClosed)
	case <-l.acceptDL.Done():
		return nil, l.opError(os.ErrDeadlineExceeded)
	}
}

// SetDeadline sets the deadline for Accept.
func (l *Listener) SetDeadline(t time.Time) error {
	l.acceptDL.Set(t)
	return nil
}

// Close stops listening; connections not yet accepted are reset.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return l.opError(net.ErrClosed)
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	p := l.p
	p.mu.Lock()
	list := p.listeners[l.laddr.Port()]
	for i, o := range list {
		if o == l {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.listeners, l.laddr.Port())
	} else {
		p.listeners[l.laddr.Port()] = list
	}
	p.mu.Unlock()
	for {
		select {
		case c := <-l.accepted:
			c.abort(errConnReset)
		default:
			return nil
		}
	}
}

// Addr returns the listening address as a *net.TCPAddr.
func (l *Listener) Addr() net.Addr { return net.TCPAddrFromAddrPort(l.laddr) }

// AddrPort returns the listening address.
func (l *Listener) AddrPort() netip.AddrPort { return l.laddr }

func (l *Listener) opError(err error) error {
	return &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: err}
}
