// Package shm is a link endpoint between two processes over shared memory:
// each process runs its own stack, and frames cross between them without a
// system call per frame, in batches, with a wake-up only when the peer
// sleeps.
//
// # Set-up
//
// One side listens on a UNIX socket (Listen, Listener.Accept), the other
// dials it (Dial). The dialler says which MTU, MAC and offloads it wants;
// the listener creates the shared memory (a memfd sealed against shrinking
// and growing, so that neither side can make the other's mapping fault),
// and two eventfds, and passes all three over the socket (SCM_RIGHTS) with
// its answer: the ring sizes, its MAC, and the offloads both sides offered.
// The socket stays open for the link's life: its end (EOF, or an error) is
// how each side learns that the other has exited, crashed or closed.
//
// # Layout
//
// The memory holds a header page, two single-producer single-consumer
// rings of descriptors, one each way, and a data area per ring (layout.go).
// A descriptor carries a frame's place in the data area, its length and
// its offload metadata (buffer.Offload), so that when both sides offer
// offloads a 64 KiB TCP super-segment crosses whole, with a partial
// checksum, and is never cut into segments. The data area is a byte ring,
// not a slot per descriptor (ring.go says why). Each ring's producer and
// consumer indices are free-running 32-bit counters on cache lines of their
// own, published with sequentially consistent atomics.
//
// # Notification
//
// A consumer that finds its ring empty sets its sleeping flag in the shared
// page, looks at the ring once more, and only then blocks, on its eventfd.
// A producer stores its index first and reads the flag after: with both
// accesses atomic, one of them sees the other, so no wake-up is lost. The
// producer writes the eventfd only when the flag was set, and clears it, so
// a busy consumer costs no system call at all, and a sleeping one one per
// batch: WriteBatch publishes up to 64 frames (buffer.MaxBatch) before it
// looks, and ReadBatch takes everything that is there, up to its batch.
//
// # Trust
//
// The peer is another process and is not trusted: it may die at any
// moment, stop reading, or write anything anywhere in the shared memory.
// Each side therefore keeps its own indices privately and only reads the
// other's; every index, offset, length and offload field read from shared
// memory is copied once, checked, and used as checked, so that nothing is
// ever read or written outside the mapping. A value that breaks the
// protocol is a violation: the link goes down (ReadBatch and WriteBatch
// return an error wrapping ErrLinkDown, Stats.Garbage counts it) and the
// socket is closed, so that the peer's side goes down too. A peer that
// exits goes down the same way, through the socket (Stats.PeerGone). A
// peer that stops reading fills its ring, and WriteBatch drops what does
// not fit (Stats.TxRingFull), as a full TAP queue does; it never blocks or
// spins. What a peer can still do is send frames, or ring the eventfd, as
// fast as it likes: that costs this side as much as the peer, and no more.
package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// Defaults and bounds of Options.
const (
	// DefaultMTU is Ethernet's (RFC 894).
	DefaultMTU = 1500
	// MinMTU is the 68 bytes every IPv4 link must carry (RFC 791 section 3.2).
	MinMTU = 68
	// MaxMTU is a frame of 64 KiB, which a packet buffer holds.
	MaxMTU = 65536 - link.EthernetHeaderLen
	// DefaultRingSize is the descriptors per ring: as many frames as a
	// TAP device queues (Linux's txqueuelen of 1000), sixteen batches,
	// so that a TCP window's burst of 1500-byte frames fits without
	// drops while the peer's reader is busy.
	DefaultRingSize = 1024
	// DefaultDataSize is the data area per ring: 4 MiB, sixty-four
	// 64 KiB super-segments (a whole batch), or 2730 1500-byte frames,
	// more than the ring has descriptors.
	DefaultDataSize = 4 << 20
	// DefaultSpin is how long ReadBatch keeps looking at an empty ring
	// before it sleeps on its eventfd (link.Spin says why it polls).
	DefaultSpin = link.DefaultSpin
)

// Options configure Listen and Dial.
type Options struct {
	// MTU is the largest IP packet carried; 0 means DefaultMTU. Both
	// sides must give the same.
	MTU int
	// MAC is this side's hardware address; nil means a random locally
	// administered unicast address (a fresh one for each endpoint a
	// Listener accepts).
	MAC net.HardwareAddr
	// Offload offers checksum offload and TSO: when both sides offer it,
	// frames carry partial checksums and TCP super-segments of up to
	// link.MaxGSOFrame bytes, and Capabilities says so.
	Offload bool
	// RingSize is the descriptors per ring, a power of two in
	// MinRingSize..MaxRingSize; 0 means DefaultRingSize. The listener's
	// choice holds; a dialler's is ignored.
	RingSize int
	// DataSize is the bytes of data area per ring, a multiple of 4096 up
	// to MaxDataSize, room for two frames at least; 0 means
	// DefaultDataSize. The listener's choice holds; a dialler's is
	// ignored.
	DataSize int
	// Spin is the longest ReadBatch polls an empty ring, yielding the
	// processor between looks, before it sleeps on its eventfd; 0 means
	// DefaultSpin, and a negative value never polls. It polls that long
	// while frames keep coming within it, and less, down to not at all,
	// while they come later. Each side chooses its own.
	Spin time.Duration
}

// resolve fills in the defaults and checks the options.
func (o Options) resolve() (Options, error) {
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if o.MTU < MinMTU || o.MTU > MaxMTU {
		return o, fmt.Errorf("MTU %d outside %d..%d", o.MTU, MinMTU, MaxMTU)
	}
	if o.RingSize == 0 {
		o.RingSize = DefaultRingSize
	}
	if o.DataSize == 0 {
		o.DataSize = DefaultDataSize
	}
	if o.Spin == 0 {
		o.Spin = DefaultSpin
	}
	if o.RingSize > MaxRingSize || o.DataSize > MaxDataSize {
		return o, fmt.Errorf("ring of %d descriptors and %d bytes of data exceeds %d and %d", o.RingSize, o.DataSize, MaxRingSize, MaxDataSize)
	}
	if o.MAC != nil {
		if _, err := link.HardwareAddr(o.MAC); err != nil {
			return o, err
		}
	}
	return o, nil
}

// geometry is the shape of memory the listener makes from these options.
func (o Options) geometry() geometry {
	return geometry{ringSize: uint32(o.RingSize), dataSize: uint32(o.DataSize)}
}

// maxFrame is the longest frame a link with these MTU and offloads
// carries.
func maxFrame(mtu int, offload bool) int {
	if offload {
		return link.MaxGSOFrame
	}
	return link.MaxFrame(mtu)
}

// ErrLinkDown is what ReadBatch and WriteBatch return, wrapped with the
// reason, once the peer has gone or broken the ring protocol. The link
// stays down until Close: the memory may be in any state. errors.Is(err,
// net.ErrClosed) holds for it too, so that a stack's NIC stops reading, as
// it does when its link is closed, instead of trying again.
var ErrLinkDown error = linkDown{}

type linkDown struct{}

func (linkDown) Error() string        { return "link down" }
func (linkDown) Is(target error) bool { return target == net.ErrClosed }

// Stats are an endpoint's counters. Tx counts what this side wrote, Rx
// what it read.
type Stats struct {
	RxFrames stats.Counter // frames handed to ReadBatch callers
	RxBytes  stats.Counter // bytes of those frames
	TxFrames stats.Counter // frames published to the peer
	TxBytes  stats.Counter // bytes of those frames
	// TxRingFull counts frames dropped because the peer's ring had no
	// free descriptor or its data area no room: the peer is slow, or has
	// stopped reading.
	TxRingFull stats.Counter
	// TxErrors counts frames refused as malformed: shorter than an
	// Ethernet header, longer than the link carries, or with offload
	// metadata the link did not agree on.
	TxErrors stats.Counter
	// TxGathered counts frames copied into the ring from their loans as
	// well as their own buffer (link.Capabilities.TxGather): TCP payload
	// copied once, from its send buffer, rather than twice.
	TxGathered stats.Counter
	// TxDown counts frames refused because the link was down.
	TxDown stats.Counter
	// WakeupsSent counts eventfd writes to wake a sleeping peer.
	WakeupsSent stats.Counter
	// Sleeps counts the times ReadBatch found the ring empty and blocked.
	Sleeps stats.Counter
	// SpinHits counts the times ReadBatch found the ring empty, polled
	// it (Options.Spin), and found frames before it had to sleep.
	SpinHits stats.Counter
	// Garbage counts violations of the protocol found in shared memory
	// (an index out of range, a frame outside the data area, a bad
	// length or offload field) or on the socket; each took the link
	// down.
	Garbage stats.Counter
	// PeerGone counts the link going down because the peer's socket
	// closed: it exited, crashed or closed its endpoint.
	PeerGone stats.Counter
}

// Endpoint is one side of a shared-memory link. It implements
// link.Endpoint.
type Endpoint struct {
	name     string // "shm PATH", for errors
	mtu      int
	mac      net.HardwareAddr
	peerMAC  net.HardwareAddr
	offload  bool
	maxFrame int        // longest frame either way, and the room ReadBatch needs in each packet
	spin     *link.Spin // how long ReadBatch polls an empty ring now (Options.Spin)
	stats    Stats
	conn     *net.UnixConn
	wake     *os.File        // this side's eventfd: the peer rings it when this side sleeps
	kick     *os.File        // the peer's eventfd
	wakeConn syscall.RawConn // wake's and kick's, for writes that never wait
	kickConn syscall.RawConn
	wakeBuf  [8]byte // ReadBatch's eventfd read

	// memMu is read-held while the mapping is touched and write-held by
	// Close to unmap it, so that no access can fault on unmapped memory.
	memMu sync.RWMutex
	mem   []byte // nil once unmapped
	tx    producer
	rx    consumer
	// pieces is the frame WriteBatch is copying, as Slices gives it.
	pieces [][]byte

	down      atomic.Pointer[error] // why the link went down; nil while up
	downing   atomic.Bool           // goDown has begun: the first cause wins
	closed    atomic.Bool
	closeOnce sync.Once
	watched   chan struct{} // closed when watch returns
}

var _ link.Endpoint = (*Endpoint)(nil)

// role says which rings a side uses: the listener produces on ring 0.
type role int

const (
	listenerRole role = 0
	diallerRole  role = 1
)

// newEndpoint makes the endpoint of a finished handshake and starts
// watching the socket. It takes ownership of conn, mem and the eventfds.
func newEndpoint(name string, r role, conn *net.UnixConn, mem []byte, g geometry, efds [2]int, o Options, peerMAC net.HardwareAddr, offload bool) (*Endpoint, error) {
	e := &Endpoint{
		name:     name,
		mtu:      o.MTU,
		mac:      o.MAC,
		peerMAC:  peerMAC,
		offload:  offload,
		maxFrame: maxFrame(o.MTU, offload),
		spin:     link.NewSpin(o.Spin),
		conn:     conn,
		mem:      mem,
		watched:  make(chan struct{}),
	}
	e.tx = newProducer(g.ring(mem, int(r)))
	e.rx = consumer{r: g.ring(mem, 1-int(r)), maxFrame: e.maxFrame, mtuFrame: link.MaxFrame(o.MTU), offload: offload}
	// The eventfds are non-blocking (the listener made them so, and the
	// flag is the shared file's), so os.NewFile puts them in the runtime
	// poller: a read blocks the goroutine, not a thread, and Close wakes it.
	e.wake = os.NewFile(uintptr(efds[1-int(r)]), name+" wake-up")
	e.kick = os.NewFile(uintptr(efds[r]), name+" peer's wake-up")
	var err, err2 error
	e.wakeConn, err = e.wake.SyscallConn()
	e.kickConn, err2 = e.kick.SyscallConn()
	if err = errors.Join(err, err2); err != nil {
		e.wake.Close()
		e.kick.Close()
		unix.Munmap(mem)
		conn.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go e.watch()
	return e, nil
}

// watch reads the socket for the link's life: after the handshake the
// peer sends nothing, so a read returns only when the peer has gone (EOF,
// or a reset), or when it broke the protocol by sending more.
func (e *Endpoint) watch() {
	defer close(e.watched)
	var b [64]byte
	_, err := e.conn.Read(b[:])
	if e.closed.Load() {
		return
	}
	if err != nil {
		e.goDown(fmt.Errorf("peer gone: %w", err), &e.stats.PeerGone)
		return
	}
	e.goDown(violation("peer sent a message after the handshake"), &e.stats.Garbage)
}

// goDown takes the link down for cause, counted in c, once: it closes the
// socket, so that the peer goes down too, and wakes a blocked ReadBatch.
func (e *Endpoint) goDown(cause error, c *stats.Counter) {
	if !e.downing.CompareAndSwap(false, true) {
		return
	}
	// Counted before the link reads as down, so that whoever sees it down
	// sees it counted.
	c.Inc()
	err := fmt.Errorf("%s: %w: %w", e.name, ErrLinkDown, cause)
	e.down.Store(&err)
	e.conn.Close()
	ringEventfd(e.wakeConn)
}

// downErr returns why the link is down, nil while it is up.
func (e *Endpoint) downErr() error {
	if p := e.down.Load(); p != nil {
		return *p
	}
	return nil
}

// ringEventfd adds one to an eventfd, without waiting: the write fails
// only when the counter would overflow, which the peer can arrange, and
// then the reader is awake anyway. The RawConn holds the descriptor open
// for the write, so a concurrent Close cannot turn it into a write to
// another file.
func ringEventfd(rc syscall.RawConn) {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	rc.Write(func(fd uintptr) bool {
		unix.Write(int(fd), one[:])
		return true
	})
}

// ReadBatch blocks until the peer has published a frame, then copies as
// many as fit into pkts, with their offload metadata. Each packet needs
// room for Capabilities().RxFrameSize(MTU()) bytes. It returns an error
// wrapping ErrLinkDown once the link is down, and link.ErrClosed after
// Close; it never blocks past either.
func (e *Endpoint) ReadBatch(pkts []*buffer.Packet) (int, error) {
	for i, p := range pkts {
		if p.Cap() < e.maxFrame {
			return 0, fmt.Errorf("%s: ReadBatch: packet %d has room for %d bytes, frames need %d", e.name, i, p.Cap(), e.maxFrame)
		}
	}
	if len(pkts) == 0 {
		return 0, nil
	}
	var idle time.Time // when the ring was first found empty
	for {
		if e.closed.Load() {
			return 0, link.ErrClosed
		}
		if err := e.downErr(); err != nil {
			return 0, err
		}
		n, err := e.receive(pkts)
		if n > 0 && !idle.IsZero() {
			e.spin.Adapt(time.Since(idle))
		}
		if n > 0 || err != nil {
			return n, err
		}
		if idle.IsZero() {
			idle = time.Now()
		}
		if n, err := e.poll(pkts); n > 0 || err != nil {
			if n > 0 {
				e.spin.Adapt(time.Since(idle))
			}
			return n, err
		}
		if err := e.sleep(); err != nil {
			return 0, err
		}
	}
}

// receive takes what frames the ring holds. Frames taken before a
// violation are returned; the next call reports the link down.
func (e *Endpoint) receive(pkts []*buffer.Packet) (int, error) {
	e.memMu.RLock()
	defer e.memMu.RUnlock()
	if e.mem == nil {
		return 0, link.ErrClosed
	}
	n, bytes, err := e.rx.take(pkts)
	e.stats.RxFrames.Add(uint64(n))
	e.stats.RxBytes.Add(uint64(bytes))
	if err != nil {
		e.goDown(err, &e.stats.Garbage)
		if n == 0 {
			return 0, e.downErr()
		}
	}
	return n, nil
}

// poll looks at the empty ring again and again for up to the current
// spin, yielding the processor between looks so that this process's other
// goroutines (the one about to send what the peer will answer, say) run
// meanwhile, and returns what it finds. It finds nothing when the peer is
// quiet for longer, and ReadBatch sleeps.
func (e *Endpoint) poll(pkts []*buffer.Packet) (int, error) {
	spin := e.spin.Budget()
	if spin <= 0 {
		return 0, nil
	}
	deadline := time.Now().Add(spin)
	for time.Now().Before(deadline) {
		runtime.Gosched()
		if e.closed.Load() {
			return 0, link.ErrClosed
		}
		if err := e.downErr(); err != nil {
			return 0, err
		}
		n, err := e.receive(pkts)
		if n > 0 {
			e.stats.SpinHits.Inc()
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
	return 0, nil
}

// sleep waits for the peer to publish, unless it has already: it sets the
// sleeping flag, looks at the ring once more (the producer may have
// published before it could see the flag), and only then blocks on the
// eventfd. A wake-up that finds nothing (a stale one, or the peer ringing
// for nothing) costs a loop in ReadBatch.
func (e *Endpoint) sleep() error {
	e.memMu.RLock()
	if e.mem == nil {
		e.memMu.RUnlock()
		return link.ErrClosed
	}
	r := e.rx.r
	r.sleeping.Store(1)
	if r.prod.Load() != e.rx.tail {
		r.sleeping.Store(0)
		e.memMu.RUnlock()
		return nil
	}
	e.memMu.RUnlock()
	e.stats.Sleeps.Inc()
	_, err := e.wake.Read(e.wakeBuf[:])
	e.memMu.RLock()
	if e.mem != nil {
		r.sleeping.Store(0)
	}
	e.memMu.RUnlock()
	if err != nil {
		if e.closed.Load() {
			return link.ErrClosed
		}
		return fmt.Errorf("%s: reading the wake-up eventfd: %w", e.name, err)
	}
	return nil
}

// WriteBatch copies the frames in pkts into the peer's ring, publishing
// them up to buffer.MaxBatch at a time and waking the peer after each
// publication if it sleeps. A frame that finds the ring full is dropped
// with the rest of the batch and counted (TxRingFull), a malformed one
// refused and counted (TxErrors); either way it is taken, and the result
// is len(pkts). Once the link is
// down it takes nothing and returns an error wrapping ErrLinkDown; after
// Close, link.ErrClosed.
func (e *Endpoint) WriteBatch(pkts []*buffer.Packet) (int, error) {
	if e.closed.Load() {
		return 0, link.ErrClosed
	}
	if err := e.downErr(); err != nil {
		e.stats.TxDown.Add(uint64(len(pkts)))
		return 0, err
	}
	e.memMu.RLock()
	defer e.memMu.RUnlock()
	if e.mem == nil {
		return 0, link.ErrClosed
	}
	if err := e.tx.refresh(); err != nil {
		e.goDown(err, &e.stats.Garbage)
		e.stats.TxDown.Add(uint64(len(pkts)))
		return 0, e.downErr()
	}
	var frames, bytes, pending int
	for i, p := range pkts {
		off, ok := e.txOffload(p)
		if !ok {
			e.stats.TxErrors.Inc()
			continue
		}
		// A frame's loans (TCP's payload, link.Capabilities.TxGather)
		// are copied into the ring from where they are.
		e.pieces = p.Slices(e.pieces[:0])
		if !e.tx.put(e.pieces, off) {
			// Publish what is pending, so that the peer has work, and
			// see whether it has made room meanwhile.
			e.publish()
			pending = 0
			if err := e.tx.refresh(); err != nil {
				e.goDown(err, &e.stats.Garbage)
				e.stats.TxDown.Add(uint64(len(pkts) - i))
				break
			}
			if !e.tx.put(e.pieces, off) {
				// The rest of the batch is dropped too, as from the
				// tail of a full queue: a later, shorter frame might
				// fit, but would overtake this one.
				e.stats.TxRingFull.Add(uint64(len(pkts) - i))
				break
			}
		}
		frames++
		bytes += p.Len()
		if p.Borrowed() != 0 {
			e.stats.TxGathered.Inc()
		}
		if pending++; pending == buffer.MaxBatch {
			e.publish()
			pending = 0
		}
	}
	clear(e.pieces) // hold no loan past the write
	e.publish()
	e.stats.TxFrames.Add(uint64(frames))
	e.stats.TxBytes.Add(uint64(bytes))
	return len(pkts), nil
}

// publish publishes the frames put and wakes the peer if it sleeps.
func (e *Endpoint) publish() {
	if e.tx.publish() {
		ringEventfd(e.kickConn)
		e.stats.WakeupsSent.Inc()
	}
}

// txOffload returns the metadata to send with p, or false when the link
// cannot carry p: a length outside the link's bounds, or offloads the
// link did not agree on. A DataValid flag from the link p came in on says
// nothing to the peer without offloads, and is dropped.
func (e *Endpoint) txOffload(p *buffer.Packet) (buffer.Offload, bool) {
	n := p.Len()
	if n < link.EthernetHeaderLen || n > e.maxFrame {
		return buffer.Offload{}, false
	}
	o := p.Offload
	if !e.offload {
		if o.Flags&buffer.NeedsCsum != 0 || o.GSOType != buffer.GSONone {
			return buffer.Offload{}, false
		}
		return buffer.Offload{}, true
	}
	return o, checkOffload(o, n, link.MaxFrame(e.mtu)) == nil
}

// MTU returns the link's MTU.
func (e *Endpoint) MTU() int { return e.mtu }

// MAC returns this side's hardware address. The caller must not modify it.
func (e *Endpoint) MAC() net.HardwareAddr { return e.mac }

// PeerMAC returns the peer's hardware address, as its handshake gave it.
// The caller must not modify it.
func (e *Endpoint) PeerMAC() net.HardwareAddr { return e.peerMAC }

// Capabilities returns every offload when both sides offered them
// (Options.Offload), else none: the peer's stack finishes checksums and
// takes super-segments whole, as a VM's virtio-net device does for the
// kernel.
func (e *Endpoint) Capabilities() link.Capabilities {
	if !e.offload {
		return link.Capabilities{}
	}
	return link.Capabilities{TxChecksum: true, RxChecksum: true, TSO: true, RxGSO: true, TxGather: true}
}

// Stats returns the endpoint's live counters.
func (e *Endpoint) Stats() *Stats { return &e.stats }

// Down returns why the link is down, or nil while it is up.
func (e *Endpoint) Down() error { return e.downErr() }

// Close closes the socket, which takes the peer's side down, wakes a
// blocked ReadBatch, and unmaps the memory once no ReadBatch or WriteBatch
// touches it. ReadBatch and WriteBatch return link.ErrClosed from then on.
// Closing twice does nothing.
func (e *Endpoint) Close() error {
	var err error
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		e.conn.Close()
		e.wake.Close()
		<-e.watched
		e.memMu.Lock()
		err = unix.Munmap(e.mem)
		e.mem = nil
		e.memMu.Unlock()
		err = errors.Join(err, e.kick.Close())
		if err != nil {
			err = fmt.Errorf("%s: close: %w", e.name, err)
		}
	})
	return err
}
