// Package stream is a link endpoint on a stream socket carrying Ethernet
// frames, each preceded by its length as a 32-bit big-endian integer. That
// is the framing of QEMU's -netdev stream and -netdev socket (net/stream.c
// and net/socket.c, both read through net_fill_rstate), which passt speaks
// to QEMU too: a VM wired to a UNIX socket reaches a GoNet stack without a
// TAP device and without privileges.
//
// The length prefix is the stream's only framing. After a bad one (0, or
// more than the MTU allows) no reader can tell where the next frame starts,
// so the endpoint counts a framing error and drops the connection, as QEMU
// does with a frame over its buffer. A Listen endpoint then takes the next
// peer, one at a time, as passt and QEMU's server side do for one VM; the
// single connection of New and Dial leaves the link down (reads wait for
// Close, writes are dropped and counted), as an unplugged cable would.
//
// Reads go through a buffered reader, so one read(2) takes as many frames
// as the socket holds up to the buffer's size, and ReadBatch hands out every
// whole frame already buffered without blocking again. WriteBatch sends a
// batch's frames and their prefixes together, with one writev(2) on a
// socket (net.Buffers).
package stream

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// DefaultMTU is the MTU of Options with none given: Ethernet's (RFC 894).
const DefaultMTU = 1500

// MinMTU is the smallest MTU accepted: the 68 bytes every IPv4 link must
// carry (RFC 791 section 3.2).
const MinMTU = 68

// MaxMTU is the largest MTU accepted: a frame of 64 KiB, which fits a
// packet buffer. It is above passt's and slirp's 65520.
const MaxMTU = 65536 - link.EthernetHeaderLen

// A compile-time check that a frame of MaxMTU fits a packet's data.
const _ = uint(buffer.MaxSize - (MaxMTU + link.EthernetHeaderLen))

// readBufSize is the buffered reader's size: room for two frames at
// MaxMTU, so that big frames batch too, and for more than a batch of
// 1500-byte frames.
const readBufSize = 256 << 10

// Options configure New, Dial and Listen.
type Options struct {
	// MTU is the largest IP packet carried; 0 means DefaultMTU. The peer
	// must agree: a frame over link.MaxFrame(MTU) from it is a framing
	// error.
	MTU int
	// MAC is the stack's hardware address on the link; nil means a random
	// locally administered unicast address.
	MAC net.HardwareAddr
	// EndWithPeer makes an endpoint of New or Dial report the end of its
	// one connection: ReadBatch returns ErrPeerGone instead of waiting for
	// Close, so that an owner of many such links (a bridge's ports) can
	// let a dead one go. Listen, which takes the next peer, ignores it.
	EndWithPeer bool
}

// ErrPeerGone is what ReadBatch returns, with Options.EndWithPeer, once the
// connection of a New or Dial endpoint has ended.
var ErrPeerGone = errors.New("stream: the peer has gone")

// Stats are the endpoint's counters.
type Stats struct {
	RxFrames stats.Counter // frames handed to ReadBatch callers
	RxBytes  stats.Counter // bytes of those frames, prefixes excluded
	// RxErrors counts frames refused on the way in without losing the
	// framing: runts shorter than an Ethernet header, skipped; and frames
	// cut short by the end of their connection.
	RxErrors stats.Counter
	// FramingErrors counts length prefixes of 0 or over
	// link.MaxFrame(MTU); each dropped its connection.
	FramingErrors stats.Counter
	TxFrames      stats.Counter // frames written to the peer
	TxBytes       stats.Counter // bytes of those frames, prefixes excluded
	// TxErrors counts frames refused as malformed: shorter than an
	// Ethernet header or longer than link.MaxFrame(MTU).
	TxErrors stats.Counter
	// TxDropped counts frames lost for want of a peer: written while none
	// was connected, or in a write that failed (which drops the
	// connection).
	TxDropped stats.Counter
	// Connects counts the connections the endpoint has carried: New's or
	// Dial's one, each one Listen accepted.
	Connects stats.Counter
	// Disconnects counts connections that ended before Close: closed or
	// reset by the peer, or dropped after a framing error or a failed
	// write.
	Disconnects stats.Counter
}

// Endpoint carries frames over a stream connection. It implements
// link.Endpoint.
type Endpoint struct {
	name string // the socket's path or the connection's address, for errors
	mtu  int
	mac  net.HardwareAddr
	ln   net.Listener // Listen's; nil for New and Dial
	// endWithPeer is Options.EndWithPeer.
	endWithPeer bool
	stats       Stats

	// mu guards conn, the connection writes go to, nil when there is
	// none, and closed, which bars a new one.
	mu     sync.Mutex
	conn   net.Conn
	closed bool

	rd reader // ReadBatch's state; one caller at a time
	wr writer // WriteBatch's state; one caller at a time

	isClosed  atomic.Bool
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

var _ link.Endpoint = (*Endpoint)(nil)

// New returns an endpoint carrying frames over conn, any connected stream
// (a UNIX or TCP socket, one end of net.Pipe). The endpoint owns conn and
// closes it on Close, or when the peer breaks the framing.
func New(conn net.Conn, opts Options) (*Endpoint, error) {
	name := "stream"
	if a := conn.RemoteAddr(); a != nil && a.String() != "" {
		name = "stream " + a.String()
	}
	e, err := newEndpoint(name, opts)
	if err != nil {
		conn.Close()
		return nil, err
	}
	e.attach(conn)
	return e, nil
}

// Dial connects to the UNIX stream socket at path, where QEMU
// (-netdev stream,server=on,addr.type=unix,addr.path=PATH) or another
// program listens, and returns an endpoint on that one connection.
func Dial(path string, opts Options) (*Endpoint, error) {
	e, err := newEndpoint("stream "+path, opts)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.name, err)
	}
	e.attach(conn)
	return e, nil
}

// Listen listens on a UNIX stream socket at path and carries frames with
// one peer at a time (QEMU's -netdev stream,server=off,addr.type=unix,
// addr.path=PATH, say): ReadBatch accepts a peer, and when that one leaves
// or breaks the framing, the next. Until ReadBatch has accepted one, frames
// written are dropped and counted (TxDropped), as with no carrier; a stack's
// NIC reads from the start, so that is the time before AddNIC. A peer that
// connects while another is served waits in the listen queue. The socket file is removed on Close; a
// file already at path is an error, not replaced.
func Listen(path string, opts Options) (*Endpoint, error) {
	e, err := newEndpoint("stream "+path, opts)
	if err != nil {
		return nil, err
	}
	if e.ln, err = net.Listen("unix", path); err != nil {
		return nil, fmt.Errorf("%s: %w", e.name, err)
	}
	return e, nil
}

func newEndpoint(name string, opts Options) (*Endpoint, error) {
	e := &Endpoint{name: name, mtu: opts.MTU, endWithPeer: opts.EndWithPeer, done: make(chan struct{})}
	if e.mtu == 0 {
		e.mtu = DefaultMTU
	}
	if e.mtu < MinMTU || e.mtu > MaxMTU {
		return nil, fmt.Errorf("%s: MTU %d outside %d..%d", name, e.mtu, MinMTU, MaxMTU)
	}
	mac, err := link.HardwareAddr(opts.MAC)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	e.mac = mac
	e.rd.br = bufio.NewReaderSize(nil, readBufSize)
	e.rd.maxFrame = link.MaxFrame(e.mtu)
	e.rd.runts = &e.stats.RxErrors
	return e, nil
}

// attach makes conn the connection both directions use. It reports false,
// having closed conn, when the endpoint is closed.
func (e *Endpoint) attach(conn net.Conn) bool {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		conn.Close()
		return false
	}
	e.conn = conn
	e.mu.Unlock()
	e.rd.conn = conn
	e.rd.br.Reset(conn)
	e.stats.Connects.Inc()
	return true
}

// current returns the connection writes go to, nil when there is none.
func (e *Endpoint) current() net.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conn
}

// drop ends conn, the framing of a stream cannot survive a bad prefix or a
// partial write, unless it has already been ended: whoever takes the
// connection out of e.conn (drop or Close) closes it, once.
func (e *Endpoint) drop(conn net.Conn) {
	e.mu.Lock()
	mine := e.conn == conn
	if mine {
		e.conn = nil
	}
	e.mu.Unlock()
	if mine {
		conn.Close()
	}
}

// nextConn waits for a connection for ReadBatch: Listen's next peer; for
// New and Dial, whose one connection has ended, only Close.
func (e *Endpoint) nextConn() error {
	if e.ln == nil {
		if e.endWithPeer {
			return fmt.Errorf("%s: %w", e.name, ErrPeerGone)
		}
		<-e.done
		return link.ErrClosed
	}
	backoff := 5 * time.Millisecond
	for {
		conn, err := e.ln.Accept()
		if err == nil {
			if !e.attach(conn) {
				return link.ErrClosed
			}
			return nil
		}
		if e.isClosed.Load() || errors.Is(err, net.ErrClosed) {
			return link.ErrClosed
		}
		// Out of descriptors, say: wait rather than spin, as net/http's
		// server does, and try again.
		select {
		case <-time.After(backoff):
		case <-e.done:
			return link.ErrClosed
		}
		backoff = min(2*backoff, time.Second)
	}
}

// Connected reports whether a peer is connected now.
func (e *Endpoint) Connected() bool { return e.current() != nil }

// MTU returns the MTU.
func (e *Endpoint) MTU() int { return e.mtu }

// MAC returns the stack's hardware address on this link. The caller must
// not modify it.
func (e *Endpoint) MAC() net.HardwareAddr { return e.mac }

// Capabilities returns no offloads: the framing carries no virtio-net
// header, so every frame has full checksums and fits the MTU.
func (e *Endpoint) Capabilities() link.Capabilities { return link.Capabilities{} }

// Stats returns the endpoint's live counters.
func (e *Endpoint) Stats() *Stats { return &e.stats }

// Close closes the connection and the listening socket (removing its file),
// and wakes a blocked ReadBatch and WriteBatch, which return
// link.ErrClosed from then on. Closing twice does nothing.
func (e *Endpoint) Close() error {
	var err error
	e.closeOnce.Do(func() {
		e.isClosed.Store(true)
		close(e.done)
		e.mu.Lock()
		e.closed = true
		conn := e.conn
		e.conn = nil
		e.mu.Unlock()
		if e.ln != nil {
			err = e.ln.Close()
		}
		if conn != nil {
			err = errors.Join(err, conn.Close())
		}
		if err != nil {
			err = fmt.Errorf("%s: close: %w", e.name, err)
		}
	})
	return err
}
