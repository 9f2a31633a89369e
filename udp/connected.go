package udp

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
)

// Connected is a UDP endpoint connected to one peer, as a net.Conn (what
// net.Dial("udp", ...) returns): Write sends to the peer, and Read returns
// only the peer's datagrams.
type Connected struct {
	*Conn
	raddr netip.AddrPort
}

var _ net.Conn = (*Connected)(nil)

// Connect fixes c's peer to raddr.
func (c *Conn) Connect(raddr netip.AddrPort) (*Connected, error) {
	fail := func(err error) (*Connected, error) {
		c.Close()
		return nil, &net.OpError{Op: "dial", Net: "udp", Addr: net.UDPAddrFromAddrPort(raddr), Err: err}
	}
	if !c.binding().Reaches(raddr.Addr()) || raddr.Port() == 0 {
		return fail(syscall.EINVAL)
	}
	nw, err := c.p.nets.For(raddr.Addr())
	if err != nil {
		return fail(err)
	}
	r, err := nw.Route(raddr.Addr())
	if err != nil {
		return fail(fmt.Errorf("%w: %w", err, syscall.ENETUNREACH))
	}
	// The peer as the network layer names its datagrams: a link-local
	// one with its zone, which Read compares.
	raddr = netip.AddrPortFrom(ip.Scoped(raddr.Addr(), r), raddr.Port())
	c.mu.Lock()
	c.peer = raddr
	c.mu.Unlock()
	return &Connected{Conn: c, raddr: raddr}, nil
}

// Read reads the next datagram from the peer; others are dropped.
func (c *Connected) Read(b []byte) (int, error) {
	for {
		n, from, err := c.ReadFromUDPAddrPort(b)
		if err != nil || from == c.raddr {
			return n, err
		}
	}
}

// ReadDatagram hands handle the payload of the peer's next datagram where
// it lies, as Conn.ReadDatagram; others are dropped.
func (c *Connected) ReadDatagram(handle func(payload []byte)) error {
	for {
		took := false
		err := c.Conn.ReadDatagram(func(payload []byte, from netip.AddrPort) {
			if from == c.raddr {
				took = true
				handle(payload)
			}
		})
		if err != nil || took {
			return err
		}
	}
}

// MaxBatch is the most datagrams ReadDatagrams hands over at once.
const MaxBatch = 64

// datagramBatch is ReadDatagrams' datagrams and their payloads, pooled so
// that a batch allocates nothing and an endpoint that is not read holds
// none.
type datagramBatch struct {
	pks      [MaxBatch]*buffer.Packet
	payloads [MaxBatch][]byte
}

var datagramBatches = sync.Pool{New: func() any { return new(datagramBatch) }}

// ReadDatagrams waits for the peer's next datagram, as ReadDatagram does,
// and hands handle its payload together with those of the peer's
// datagrams already queued behind it, up to max (MaxBatch at most), where
// they lie in the stack's buffers; they are valid only until handle
// returns. A relay so sends what queued up while it was sending in one
// go (package gateway: one UDP GSO send for a run of equal sizes).
func (c *Connected) ReadDatagrams(max int, handle func(payloads [][]byte)) error {
	max = min(max, MaxBatch)
	b := datagramBatches.Get().(*datagramBatch)
	defer datagramBatches.Put(b)
	n := 0
	take := func(pk *buffer.Packet, a arrival) {
		payload, from := datagram(pk, a.zone)
		if from != c.raddr {
			pk.Release()
			return
		}
		b.pks[n], b.payloads[n] = pk, payload
		n++
	}
	for n == 0 {
		pk, a, err := c.next()
		if err != nil {
			return err
		}
		take(pk, a)
	}
	for n < max {
		pk, a, ok := c.nextQueued()
		if !ok {
			break
		}
		take(pk, a)
	}
	handle(b.payloads[:n])
	for i := range n {
		b.pks[i].Release()
		b.pks[i], b.payloads[i] = nil, nil
	}
	return nil
}

// Write sends b as one datagram to the peer.
func (c *Connected) Write(b []byte) (int, error) { return c.WriteToUDPAddrPort(b, c.raddr) }

// RemoteAddr returns the peer's address as a *net.UDPAddr.
func (c *Connected) RemoteAddr() net.Addr { return net.UDPAddrFromAddrPort(c.raddr) }
