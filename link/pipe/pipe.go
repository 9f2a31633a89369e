// Package pipe is an in-memory wire between two link endpoints, so that two
// stacks can talk inside one process without privileges or a kernel device.
//
// Each direction is a bounded queue, like a NIC's receive ring: a frame
// written on one end is copied into the queue the other end reads, and when
// that queue is full the frame is dropped and counted rather than blocking
// the writer. The queues hold copies from a private buffer.Pool, so that the
// steady state allocates nothing per frame.
package pipe

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// QueueLen is how many frames each direction holds before it drops: the
// order of a NIC's receive ring (Linux drivers commonly default to 256).
const QueueLen = 256

// Stats are an endpoint's counters. Tx counts what this end wrote, Rx what
// it read.
type Stats struct {
	TxFrames stats.Counter // frames queued for the peer
	TxBytes  stats.Counter // bytes of those frames
	// TxDropped counts frames lost because the peer's queue was full or the
	// peer was closed, as a NIC drops on a full ring or a dead carrier.
	TxDropped stats.Counter
	// TxErrors counts frames refused as malformed: shorter than an
	// Ethernet header or longer than link.MaxFrame(MTU).
	TxErrors stats.Counter
	RxFrames stats.Counter // frames handed to ReadBatch callers
	RxBytes  stats.Counter // bytes of those frames
}

// Endpoint is one end of a pipe. It implements link.Endpoint.
type Endpoint struct {
	mtu   int
	mac   net.HardwareAddr
	pool  *buffer.Pool // shared by both ends; holds the queued copies
	rx    *queue       // frames the peer wrote, for this end to read
	peer  *Endpoint
	stats Stats

	closed    atomic.Bool
	closeOnce sync.Once

	// cable is the state both ends share: up, or unplugged (SetUp).
	cable    *cable
	watchMu  sync.Mutex
	watchers []func(up bool)
}

// cable is the pipe's link state, shared by its ends.
type cable struct {
	mu   sync.Mutex // orders SetUp's changes and their telling
	down atomic.Bool
}

var (
	_ link.Endpoint     = (*Endpoint)(nil)
	_ link.StateWatcher = (*Endpoint)(nil)
)

// queue is a bounded FIFO of frames with a wake-up for one blocked reader.
type queue struct {
	mu     sync.Mutex
	ring   [QueueLen]*buffer.Packet
	head   int // index of the oldest frame
	n      int // frames queued
	closed bool

	// ready holds a token when frames may have arrived since the reader
	// last looked; capacity one, so writers never block on it.
	ready chan struct{}
	// done is closed when the reading end closes.
	done chan struct{}
}

func newQueue() *queue {
	return &queue{ready: make(chan struct{}, 1), done: make(chan struct{})}
}

// New returns the two ends of a pipe carrying frames of up to
// link.MaxFrame(mtu) bytes. macA and macB are the ends' hardware addresses;
// they are copied.
func New(mtu int, macA, macB net.HardwareAddr) (a, b *Endpoint) {
	if mtu <= 0 || link.MaxFrame(mtu) > buffer.MaxSize {
		panic(fmt.Sprintf("pipe: MTU %d outside 1..%d", mtu, buffer.MaxSize-link.EthernetHeaderLen))
	}
	pool := buffer.NewPool()
	c := &cable{}
	a = &Endpoint{mtu: mtu, mac: cloneMAC(macA), pool: pool, rx: newQueue(), cable: c}
	b = &Endpoint{mtu: mtu, mac: cloneMAC(macB), pool: pool, rx: newQueue(), cable: c}
	a.peer, b.peer = b, a
	return a, b
}

func cloneMAC(m net.HardwareAddr) net.HardwareAddr {
	return append(net.HardwareAddr(nil), m...)
}

// ReadBatch blocks until the peer has written at least one frame, then
// copies as many queued frames as fit into pkts, with their offload
// metadata. Each packet must have room for link.MaxFrame(MTU()) bytes.
func (e *Endpoint) ReadBatch(pkts []*buffer.Packet) (int, error) {
	if err := checkRoom(pkts, link.MaxFrame(e.mtu)); err != nil {
		return 0, err
	}
	if len(pkts) == 0 {
		return 0, nil
	}
	q := e.rx
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return 0, link.ErrClosed
		}
		if q.n > 0 {
			n := min(q.n, len(pkts))
			var bytes int
			for i := range n {
				src := q.ring[q.head]
				q.ring[q.head] = nil
				q.head = (q.head + 1) % QueueLen
				dst := pkts[i]
				dst.SetLen(src.Len())
				copy(dst.Bytes(), src.Bytes())
				dst.Offload = src.Offload
				bytes += src.Len()
				src.Release()
			}
			q.n -= n
			q.mu.Unlock()
			e.stats.RxFrames.Add(uint64(n))
			e.stats.RxBytes.Add(uint64(bytes))
			return n, nil
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-q.done:
		}
	}
}

// checkRoom reports a packet too small to receive a frame of size bytes,
// before any frame is taken, so that a caller's mistake loses nothing.
func checkRoom(pkts []*buffer.Packet, size int) error {
	for i, p := range pkts {
		if p.Cap() < size {
			return fmt.Errorf("pipe: ReadBatch: packet %d has room for %d bytes, frames need %d", i, p.Cap(), size)
		}
	}
	return nil
}

// WriteBatch copies each frame into the peer's queue. A frame that does not
// fit the queue, or that finds the peer closed, is dropped and counted in
// TxDropped; a malformed one is counted in TxErrors. Either way it is taken:
// the result is len(pkts) unless this end is closed.
func (e *Endpoint) WriteBatch(pkts []*buffer.Packet) (int, error) {
	if e.closed.Load() {
		return 0, link.ErrClosed
	}
	var frames, bytes, dropped, malformed int
	q := e.peer.rx
	q.mu.Lock()
	for _, p := range pkts {
		switch {
		case p.Len() < link.EthernetHeaderLen || p.Len() > link.MaxFrame(e.mtu):
			malformed++
		case q.closed || q.n == QueueLen || e.cable.down.Load():
			dropped++
		default:
			q.ring[(q.head+q.n)%QueueLen] = e.pool.Clone(p)
			q.n++
			frames++
			bytes += p.Len()
		}
	}
	q.mu.Unlock()
	if frames > 0 {
		select {
		case q.ready <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	e.stats.TxFrames.Add(uint64(frames))
	e.stats.TxBytes.Add(uint64(bytes))
	e.stats.TxDropped.Add(uint64(dropped))
	e.stats.TxErrors.Add(uint64(malformed))
	return len(pkts), nil
}

// SetUp plugs the pipe's cable in (true) or pulls it out (false), for
// both ends: while it is out, what either end writes is dropped and
// counted in TxDropped, as a NIC without carrier drops. Each end's
// watchers are told of a change (link.StateWatcher), in SetUp's
// goroutine, before it returns.
func (e *Endpoint) SetUp(up bool) {
	e.cable.mu.Lock()
	defer e.cable.mu.Unlock()
	if e.cable.down.Swap(!up) == !up {
		return
	}
	for _, end := range []*Endpoint{e, e.peer} {
		end.watchMu.Lock()
		fs := end.watchers
		end.watchMu.Unlock()
		for _, f := range fs {
			f(up)
		}
	}
}

// Up reports whether the pipe's cable is in (SetUp); it is when made.
func (e *Endpoint) Up() bool { return !e.cable.down.Load() }

// WatchState has f told of each change SetUp makes.
func (e *Endpoint) WatchState(f func(up bool)) {
	e.watchMu.Lock()
	e.watchers = append(e.watchers, f)
	e.watchMu.Unlock()
}

// Queued returns how many frames wait in this end's receive queue.
func (e *Endpoint) Queued() int {
	e.rx.mu.Lock()
	defer e.rx.mu.Unlock()
	return e.rx.n
}

// MTU returns the MTU given to New.
func (e *Endpoint) MTU() int { return e.mtu }

// MAC returns this end's hardware address. The caller must not modify it.
func (e *Endpoint) MAC() net.HardwareAddr { return e.mac }

// Capabilities returns no offloads: a pipe carries offload metadata across
// unchanged but completes no checksum and splits no segment itself.
func (e *Endpoint) Capabilities() link.Capabilities { return link.Capabilities{} }

// Stats returns the endpoint's live counters.
func (e *Endpoint) Stats() *Stats { return &e.stats }

// Close closes this end: its ReadBatch and WriteBatch return link.ErrClosed,
// a blocked ReadBatch wakes, the frames still queued for it are discarded,
// and the peer's writes are dropped from then on, as on an unplugged
// cable. Frames already queued for the peer stay readable there. Closing
// twice does nothing.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		q := e.rx
		q.mu.Lock()
		q.closed = true
		for ; q.n > 0; q.n-- {
			q.ring[q.head].Release()
			q.ring[q.head] = nil
			q.head = (q.head + 1) % QueueLen
		}
		q.mu.Unlock()
		close(q.done)
	})
	return nil
}
