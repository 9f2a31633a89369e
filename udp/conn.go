package udp

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/internal/deadline"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// queueLen bounds the datagrams in a receive queue, besides its bytes.
const queueLen = 1024

// Conn is a bound UDP endpoint. It implements net.PacketConn; it is safe for
// concurrent use.
type Conn struct {
	p      *Protocol
	laddr  netip.AddrPort
	v6only bool                   // on ::, IPv6 only (ListenV6Only)
	reuse  bool                   // the port shared (ListenMulticast)
	raddr  netip.AddrPort         // a forwarded flow's peer (forward.go); zero otherwise
	device atomic.Pointer[string] // the interface it sends through (BindToDevice); nil: any

	queue chan *buffer.Packet
	// queued counts bytes in queue against the read buffer; mu guards it.
	mu     sync.Mutex
	queued int
	// arrivals say of the queued datagrams what the queued bytes cannot:
	// the zone of one from a link-local address (the interface it came in
	// on, RFC 4007 section 11), and with packet information asked for
	// (pktinfo.go) the interface each came in on. Such datagrams are few
	// (a link's own services) or asked for, so they ride beside the queue
	// rather than making every entry of it wider; mu guards it.
	arrivals map[*buffer.Packet]arrival
	pktinfo  bool // SetPacketInfo; mu guards it
	rcvbuf   int
	mcast    mcastOpts // multicast.go
	closed   bool
	// peer is the endpoint's peer once connected (Connect); mu guards it.
	// softErr is the error an ICMP message about it left for the next
	// Read (icmp.go), which errWake wakes: atomic, because every Read
	// looks and almost never finds one.
	peer    netip.AddrPort
	softErr atomic.Pointer[error]
	errWake chan struct{}
	done    chan struct{}
	readDL  *deadline.Deadline
	writeDL *deadline.Deadline
}

var _ net.PacketConn = (*Conn)(nil)

func newConn(p *Protocol, a netip.Addr) *Conn {
	return &Conn{
		p:       p,
		laddr:   netip.AddrPortFrom(a, 0),
		queue:   make(chan *buffer.Packet, queueLen),
		rcvbuf:  p.cfg.ReadBuffer,
		mcast:   mcastOpts{ttl: 1},
		done:    make(chan struct{}),
		errWake: make(chan struct{}, 1),
		readDL:  deadline.New(p.env.Clock),
		writeDL: deadline.New(p.env.Clock),
	}
}

// binding is the endpoint's address and the families it takes.
func (c *Conn) binding() ip.Binding { return ip.Binding{Addr: c.laddr.Addr(), V6Only: c.v6only} }

// arrival is what a queued datagram's bytes do not say of it.
type arrival struct {
	zone string // its source's zone, "" unless link-local
	in   string // the interface it came in on, kept with pktinfo only
}

// enqueue queues a datagram for readers, reserving its bytes from the
// socket's buffer and the stack's budget; it reports false when either is
// full or the conn is closed. zone is its source's, "" for most; in is
// the interface it came in on. Runs in the network layer's dealer.
func (c *Conn) enqueue(pk *buffer.Packet, zone, in string) bool {
	n := pk.Len()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.queued+n > c.rcvbuf || !c.p.env.Budget.Reserve(n) {
		return false
	}
	if !c.pktinfo {
		in = ""
	}
	if zone != "" || in != "" {
		// Before the send: the reader may take pk at once, and looks
		// its arrival up under mu, which is held here until then.
		if c.arrivals == nil {
			c.arrivals = map[*buffer.Packet]arrival{}
		}
		c.arrivals[pk] = arrival{zone: zone, in: in}
	}
	select {
	case c.queue <- pk:
		c.queued += n
		return true
	default:
		delete(c.arrivals, pk)
		c.p.env.Budget.Release(n)
		return false
	}
}

// dequeued accounts for a datagram taken off the queue and returns how it
// arrived.
func (c *Conn) dequeued(pk *buffer.Packet) arrival {
	n := pk.Len()
	c.mu.Lock()
	c.queued -= n
	a, ok := c.arrivals[pk]
	if ok {
		delete(c.arrivals, pk)
	}
	c.mu.Unlock()
	c.p.env.Budget.Release(n)
	return a
}

// ReadFromUDPAddrPort reads one datagram into b, returning its size (a
// datagram larger than b is truncated, as with the kernel's UDP) and its
// source.
func (c *Conn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	pk, a, err := c.next()
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	payload, from := datagram(pk, a.zone)
	n := copy(b, payload)
	pk.Release()
	return n, from, nil
}

// ReadDatagram waits for the next datagram, as ReadFromUDPAddrPort does,
// and hands handle its payload where it lies in the stack's buffer, with
// its source; the payload is valid only until handle returns. A caller
// that relays datagrams (package gateway) so holds no buffer of its own
// while it waits.
func (c *Conn) ReadDatagram(handle func(payload []byte, from netip.AddrPort)) error {
	pk, a, err := c.next()
	if err != nil {
		return err
	}
	payload, from := datagram(pk, a.zone)
	handle(payload, from)
	pk.Release()
	return nil
}

// next takes the next queued datagram, with how it arrived, waiting for
// one until the deadline or Close.
func (c *Conn) next() (*buffer.Packet, arrival, error) {
	// A passed deadline fails the read even with a datagram queued, as
	// net.Conn requires; the select below would pick at random.
	select {
	case <-c.done:
		return nil, arrival{}, c.opError("read", netip.AddrPort{}, net.ErrClosed)
	case <-c.readDL.Done():
		return nil, arrival{}, c.opError("read", netip.AddrPort{}, os.ErrDeadlineExceeded)
	default:
	}
	for {
		if err := c.takeError(); err != nil {
			return nil, arrival{}, c.opError("read", c.peer, err)
		}
		select {
		case pk := <-c.queue:
			return pk, c.dequeued(pk), nil
		case <-c.errWake:
		case <-c.done:
			return nil, arrival{}, c.opError("read", netip.AddrPort{}, net.ErrClosed)
		case <-c.readDL.Done():
			return nil, arrival{}, c.opError("read", netip.AddrPort{}, os.ErrDeadlineExceeded)
		}
	}
}

// nextQueued takes the next queued datagram, with how it arrived, if there is
// one, without waiting.
func (c *Conn) nextQueued() (*buffer.Packet, arrival, bool) {
	select {
	case pk := <-c.queue:
		return pk, c.dequeued(pk), true
	default:
		return nil, arrival{}, false
	}
}

// queueable readies a datagram for an endpoint's queue, which holds
// datagrams from their network header on, so that a reader learns the
// source from it (datagram): it moves IPv6's fixed header up against the
// UDP header, over any extension headers between, so that the UDP header
// is found from the version alone. A queued datagram carries nothing
// else: a queue of packets is a pointer per datagram.
func queueable(pk *buffer.Packet, h ip.Header) {
	if !h.Dst.Is6() || h.Off == wire.IPv6HeaderLen {
		return
	}
	b := pk.Bytes()
	copy(b[h.Off-wire.IPv6HeaderLen:h.Off], b[:wire.IPv6HeaderLen])
	pk.TrimFront(h.Off - wire.IPv6HeaderLen)
}

// datagram returns a queued datagram's payload and source (queueable),
// with zone as the source's zone (enqueue).
func datagram(pk *buffer.Packet, zone string) ([]byte, netip.AddrPort) {
	b := pk.Bytes()
	var u wire.UDP
	var src netip.Addr
	if b[0]>>4 == 6 {
		h := wire.IPv6(b)
		u, src = wire.UDP(b[wire.IPv6HeaderLen:]), h.Src()
		if zone != "" {
			src = src.WithZone(zone)
		}
	} else {
		h := wire.IPv4(b)
		u, src = wire.UDP(h.Payload()), h.Src()
	}
	return u.Payload(), netip.AddrPortFrom(src, u.SrcPort())
}

// ReadFrom implements net.PacketConn.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := c.ReadFromUDPAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return n, net.UDPAddrFromAddrPort(from), nil
}

// BindToDevice binds the endpoint to the named interface, as Linux's
// SO_BINDTODEVICE does: it sends through that interface only, to the
// limited broadcast straight onto that link, from 0.0.0.0 while the
// interface has no address yet (RFC 1122 section 3.2.1.3), which a DHCP
// client needs; and it takes only the datagrams that come in on it. An
// empty name unbinds. Call it before the endpoint sends; the family must
// support it (IPv4). To share a port with endpoints bound to other
// interfaces, bind with Protocol.ListenOn instead.
func (c *Conn) BindToDevice(name string) error {
	if name != "" {
		if _, ok := c.p.deviceRouter(); !ok || c.v6only || c.laddr.Addr().Is6() && !c.laddr.Addr().IsUnspecified() {
			return c.opError("bind to device", netip.AddrPort{}, syscall.EAFNOSUPPORT)
		}
	}
	if name == "" {
		c.device.Store(nil)
	} else {
		c.device.Store(&name)
	}
	return nil
}

// boundDevice is the interface the endpoint is bound to, "" for none.
func (c *Conn) boundDevice() string {
	if d := c.device.Load(); d != nil {
		return *d
	}
	return ""
}

// takesFrom reports whether the endpoint takes a datagram that came in on
// the interface named in: any, unless it is bound to another one. The
// host's own datagrams (in empty) reach no endpoint bound to an interface,
// as none of Linux's sockets bound to a device hears its loopback.
func (c *Conn) takesFrom(in string) bool {
	d := c.boundDevice()
	return d == "" || d == in
}

// WriteToUDPAddrPort sends b as one datagram to addr.
func (c *Conn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return c.WriteMsg(b, addr, PacketInfo{})
}

// WriteTo implements net.PacketConn; addr must be a *net.UDPAddr.
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok || ua == nil {
		return 0, &net.OpError{Op: "write", Net: "udp", Source: c.LocalAddr(), Addr: addr, Err: syscall.EINVAL}
	}
	ap := ua.AddrPort()
	return c.WriteToUDPAddrPort(b, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
}

// Close unbinds the endpoint, wakes blocked readers and drops what it
// queued.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.opError("close", netip.AddrPort{}, net.ErrClosed)
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	c.p.unbind(c)
	c.leaveAll()
	for {
		select {
		case pk := <-c.queue:
			c.dequeued(pk)
			pk.Release()
		default:
			return nil
		}
	}
}

// LocalAddr returns the bound address as a *net.UDPAddr.
func (c *Conn) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(c.laddr) }

// LocalAddrPort returns the bound address.
func (c *Conn) LocalAddrPort() netip.AddrPort { return c.laddr }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.readDL.Set(t)
	c.writeDL.Set(t)
	return nil
}

// SetReadDeadline sets the deadline for ReadFrom.
func (c *Conn) SetReadDeadline(t time.Time) error { c.readDL.Set(t); return nil }

// SetWriteDeadline sets the deadline for WriteTo.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.writeDL.Set(t); return nil }

// SetReadBuffer sets the bytes of datagrams the receive queue holds.
func (c *Conn) SetReadBuffer(n int) error {
	if n <= 0 {
		return c.opError("set", netip.AddrPort{}, syscall.EINVAL)
	}
	c.mu.Lock()
	c.rcvbuf = n
	c.mu.Unlock()
	return nil
}

func (c *Conn) opError(op string, raddr netip.AddrPort, err error) error {
	oe := &net.OpError{Op: op, Net: "udp", Source: c.LocalAddr(), Err: err}
	if raddr.IsValid() {
		oe.Addr = net.UDPAddrFromAddrPort(raddr)
	}
	return oe
}
