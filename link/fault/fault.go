// Package fault wraps a link endpoint to make its wire unreliable: frames
// are lost, duplicated, reordered, corrupted and delayed at random, in both
// directions, as on the lossy links a stack must survive (smoltcp's
// FaultInjector and Linux's netem play the same part); ECN-capable packets
// can be marked Congestion Experienced as a router would (ce.go); and each
// direction can be a bottleneck, a rate behind a drop-tail queue
// (bottleneck.go), ahead of a delay line (line.go).
//
// Decisions come from a seeded generator per direction, and every frame
// draws the same number of values whatever happens to it, so the n-th
// frame in a direction meets the same fate in every run with the same seed:
// a failing run is replayed by reusing its seed (Config.String prints it).
//
// The endpoint keeps only copies it owns, from its own buffer.Pool: the
// packets a caller passes to WriteBatch stay the caller's, and Close
// releases whatever is still held back or in flight.
package fault

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Direction counts the faults injected in one direction.
type Direction struct {
	Frames     stats.Counter // frames that entered the fault injector
	Dropped    stats.Counter // frames lost
	Duplicated stats.Counter // frames delivered twice
	Reordered  stats.Counter // frames held back until after the next frame, or ReorderHold
	Corrupted  stats.Counter // frames with one bit flipped
	CEMarked   stats.Counter // ECN-capable packets marked CE (ce.go)
	Delayed    stats.Counter // frames delivered only after Config.Delay

	// TailDropped counts frames the bottleneck's queue had no room for
	// (Config.Rate and Queue, bottleneck.go).
	TailDropped stats.Counter

	// HoldExpired counts held frames (a duplicate held with its frame
	// too) that no next frame passed within Config.ReorderHold, sent on
	// alone by the hold timer (hold.go).
	HoldExpired stats.Counter
}

// Stats are the endpoint's counters.
type Stats struct {
	Rx Direction // frames read from the inner endpoint
	Tx Direction // frames written to the inner endpoint
	// TxErrors counts delayed frames the inner endpoint failed to write:
	// their writer has already returned, so the error can only be counted.
	TxErrors stats.Counter
}

// Endpoint injects faults into the frames of an inner endpoint. It
// implements link.Endpoint.
type Endpoint struct {
	inner     link.Endpoint
	cfg       Config
	clk       clock.Clock
	pool      *buffer.Pool // the copies the endpoint holds
	frameSize int          // room the rx pump gives each frame
	stats     Stats

	rx, tx shaper

	// rxLine carries shaped frames from the rx pump to ReadBatch; the
	// pump closes it when the inner endpoint is closed, leaving the error
	// in rxErr. rxTimer waits for a frame's due time in ReadBatch.
	rxLine  *line
	rxErr   error
	rxTimer clock.Timer

	// txLine carries shaped frames from WriteBatch to the tx pump when
	// frames are delayed (Delay or Rate); without, WriteBatch writes them
	// itself, through txOut. txErr is the inner endpoint's closing error,
	// once a delayed write has met it.
	txLine *line
	txOut  []*buffer.Packet
	txErr  atomic.Pointer[error]

	// mu is held shared by ReadBatch and WriteBatch for their whole call
	// and exclusively by Close, so that Close releases nothing they use.
	mu        sync.RWMutex
	closed    bool
	done      chan struct{} // closed first thing in Close, to wake waiters
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var _ link.Endpoint = (*Endpoint)(nil)

// Streams of the per-direction generators, so that the directions draw
// independent sequences from one seed and traffic in one does not perturb
// the other.
const (
	rxStream = 0x7278 // "rx"
	txStream = 0x7478 // "tx"
)

// New wraps inner. The endpoint owns inner from then on: Close closes it.
// New panics when cfg is invalid (see Config.Validate): a configuration
// comes from code or from ParseSpec, which has already checked it.
func New(inner link.Endpoint, cfg Config) *Endpoint {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	e := &Endpoint{
		inner:     inner,
		cfg:       cfg,
		clk:       cfg.Clock,
		pool:      buffer.NewPool(),
		frameSize: inner.Capabilities().RxFrameSize(inner.MTU()),
		rxLine:    newLine(cfg.lineBytes()),
		done:      make(chan struct{}),
	}
	if e.clk == nil {
		e.clk = clock.Real{}
	}
	e.rx = shaper{cfg: &e.cfg, rng: newRand(cfg.Seed, rxStream), pool: e.pool, st: &e.stats.Rx, clk: e.clk, expire: e.expireRx}
	e.tx = shaper{cfg: &e.cfg, rng: newRand(cfg.Seed, txStream), pool: e.pool, st: &e.stats.Tx, clk: e.clk, expire: e.expireTx}
	e.wg.Add(1)
	go e.rxPump()
	if cfg.delays() {
		e.txLine = newLine(cfg.lineBytes())
		e.wg.Add(1)
		go e.txPump()
	}
	return e
}

func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

// Reseed starts both directions' generators again from seed, as New seeds
// them: from then on the nth frame in a direction meets the fate it would
// meet as the nth through a new endpoint with that seed, whatever crossed
// before. A benchmark reseeds before each flow it measures, so that flows
// of different stacks meet the same losses although the traffic before
// them differed.
func (e *Endpoint) Reseed(seed uint64) {
	for _, d := range []struct {
		s      *shaper
		stream uint64
	}{{&e.rx, rxStream}, {&e.tx, txStream}} {
		d.s.mu.Lock()
		d.s.rng = newRand(seed, d.stream)
		d.s.mu.Unlock()
	}
}

// shaper applies the faults to one direction's frames, in order.
type shaper struct {
	cfg  *Config
	rng  *rand.Rand
	pool *buffer.Pool
	st   *Direction

	// The hold (hold.go): mu is held while frames are shaped and handed
	// on, held is a frame, and its duplicate, held back to reorder until
	// heldUntil at the latest, when timer calls expire; pending counts
	// the timer's armings yet to run or be stopped.
	mu        sync.Mutex
	held      []*buffer.Packet
	out       []*buffer.Packet // the timer's frames on their way out
	heldUntil time.Time
	clk       clock.Clock
	timer     clock.Timer
	expire    func()
	pending   sync.WaitGroup

	// The bottleneck (bottleneck.go): when the port will have serialised
	// what it accepted, and the fraction of a nanosecond left over.
	busyUntil time.Time
	carry     int64
}

// delays reports whether frames wait in a line before they are due.
func (c *Config) delays() bool { return c.Delay > 0 || c.Rate > 0 }

// shape decides the fate of p, which the shaper now owns, and appends to
// out what is to be delivered now. s.mu is held.
func (s *shaper) shape(p *buffer.Packet, out []*buffer.Packet) []*buffer.Packet {
	// Counted last, so that whoever sees the count also sees the shaper's
	// state after this frame.
	defer s.st.Frames.Inc()
	// Every frame draws all its values, used or not, so that one frame's
	// fate does not shift the next frame's draws.
	loss, corrupt, dup, reorder, bit := s.rng.Float64(), s.rng.Float64(), s.rng.Float64(), s.rng.Float64(), s.rng.Uint64()

	// Drawn only when asked for, so that the seeds of runs without CE
	// marks replay as before.
	var ce float64
	if s.cfg.CE > 0 {
		ce = s.rng.Float64()
	}

	if loss < s.cfg.Loss {
		s.st.Dropped.Inc()
		p.Release()
		return out
	}
	if ce < s.cfg.CE && markCE(p.Bytes()) {
		s.st.CEMarked.Inc()
	}
	// Flip a bit past the Ethernet header, where the IP, TCP, UDP or ICMP
	// checksums cover it (the FCS that would catch it on a real wire is
	// gone by the time a frame reaches the stack).
	if corrupt < s.cfg.Corrupt && p.Len() > link.EthernetHeaderLen {
		// A checksum the link vouches for would let the flipped bit
		// through: finish it first and let the stack check it.
		if p.Offload.Flags&buffer.NeedsCsum != 0 {
			wire.FinishChecksum(p.Bytes(), int(p.Offload.CsumStart), int(p.Offload.CsumOffset))
		}
		p.Offload.Flags &^= buffer.NeedsCsum | buffer.DataValid
		b := p.Bytes()[link.EthernetHeaderLen:]
		i := bit % uint64(len(b)*8)
		b[i/8] ^= 1 << (i % 8)
		s.st.Corrupted.Inc()
	}
	frames := []*buffer.Packet{p}
	var both [2]*buffer.Packet
	if dup < s.cfg.Dup {
		both[0], both[1] = p, s.pool.Clone(p)
		frames = both[:]
		s.st.Duplicated.Inc()
	}
	if len(s.held) == 0 && reorder < s.cfg.Reorder {
		s.hold(frames)
		s.st.Reordered.Inc()
		return out
	}
	out = append(out, frames...)
	if len(s.held) > 0 {
		out = s.unhold(out)
	}
	return out
}

// drop releases a frame held back for reordering, once the hold timer is
// stopped.
func (s *shaper) drop() {
	for _, p := range s.held {
		p.Release()
	}
	clear(s.held)
	s.held = s.held[:0]
}

// rxPump reads the inner endpoint, shapes what it reads and queues it for
// ReadBatch, until the inner endpoint closes.
func (e *Endpoint) rxPump() {
	defer e.wg.Done()
	defer e.rxLine.close()
	defer e.rx.stopHold() // before the line closes: the timer puts there
	in := make([]*buffer.Packet, buffer.MaxBatch)
	out := make([]*buffer.Packet, 0, 2*buffer.MaxBatch)
	defer func() {
		for _, p := range in {
			if p != nil {
				p.Release()
			}
		}
	}()
	for {
		for i, p := range in {
			if p == nil {
				in[i] = e.pool.Get(e.frameSize)
			}
		}
		n, err := e.inner.ReadBatch(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				e.rxErr = err
				return
			}
			if !e.rxLine.put(delivery{err: err}, e.done) {
				return
			}
			continue
		}
		e.rx.mu.Lock()
		out = out[:0]
		for i := range in[:n] {
			out = e.rx.shape(in[i], out)
			in[i] = nil
		}
		ok := e.enqueue(&e.rx, e.rxLine, out)
		e.rx.mu.Unlock()
		if !ok {
			return
		}
	}
}

// enqueue puts shaped frames in line l, each due when s's bottleneck and
// Delay say, and drops those the bottleneck's queue has no room for. It
// reports false, having released the frames it did not queue, when the
// endpoint closes while it waits for room. s.mu is held, so that frames
// are queued in the order they were shaped.
func (e *Endpoint) enqueue(s *shaper, l *line, frames []*buffer.Packet) bool {
	now := e.clk.Now()
	for i, p := range frames {
		due, ok := s.admit(now, p.Len())
		if !ok {
			p.Release()
			frames[i] = nil
			continue
		}
		if e.cfg.Delay > 0 {
			s.st.Delayed.Inc()
		}
		if p.Cap()-p.Len() > shrinkSlack {
			// Read into room for a super-segment: the line may hold
			// thousands of frames, so each keeps only its own size.
			q := e.pool.Clone(p)
			p.Release()
			p, frames[i] = q, q
		}
		if !l.put(delivery{p: p, due: due}, e.done) {
			for _, p := range frames[i:] {
				if p != nil {
					p.Release()
				}
			}
			clear(frames)
			return false
		}
		frames[i] = nil
	}
	return true
}

// shrinkSlack is the room beyond its length past which a queued frame is
// copied into a packet of its size.
const shrinkSlack = 4096

// txPump writes delayed frames to the inner endpoint once they are due,
// each time all that are due, up to a batch.
func (e *Endpoint) txPump() {
	defer e.wg.Done()
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	out := make([]*buffer.Packet, 0, buffer.MaxBatch)
	for {
		d, ok := e.txLine.wait(e.done)
		if !ok || !e.waitUntil(&timer, d.due) {
			return
		}
		now := e.clk.Now()
		out = out[:0]
		for len(out) < cap(out) {
			d, ok, _ := e.txLine.peek()
			if !ok || d.due.After(now) {
				break
			}
			out = append(out, e.txLine.pop().p)
		}
		n, err := e.inner.WriteBatch(out)
		if err != nil {
			e.stats.TxErrors.Add(uint64(len(out) - n))
			if errors.Is(err, net.ErrClosed) {
				e.txErr.CompareAndSwap(nil, &err)
			}
		}
		for _, p := range out {
			p.Release()
		}
		clear(out)
	}
}

// waitUntil waits for due on the endpoint's clock, with *t, made on first
// use; it reports false when the endpoint closes first.
func (e *Endpoint) waitUntil(t *clock.Timer, due time.Time) bool {
	if due.IsZero() {
		return true
	}
	d := due.Sub(e.clk.Now())
	if d <= 0 {
		return true
	}
	if *t == nil {
		*t = e.clk.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-(*t).C():
		return true
	case <-e.done:
		return false
	}
}

// ReadBatch returns frames read from the inner endpoint after the faults:
// it blocks until at least one frame survives them (and, with Delay or
// Rate, until it is due), then fills pkts with as many due frames as are
// ready. Each packet needs room for link.MaxFrame(MTU()) bytes.
func (e *Endpoint) ReadBatch(pkts []*buffer.Packet) (int, error) {
	for i, p := range pkts {
		if p.Cap() < e.frameSize {
			return 0, fmt.Errorf("fault: ReadBatch: packet %d has room for %d bytes, frames need %d", i, p.Cap(), e.frameSize)
		}
	}
	if len(pkts) == 0 {
		return 0, nil
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0, link.ErrClosed
	}
	d, ok := e.rxLine.wait(e.done)
	switch {
	case !ok && isClosed(e.done):
		return 0, link.ErrClosed
	case !ok:
		return 0, e.rxErr // the rx pump has stopped
	case d.err != nil:
		e.rxLine.pop()
		return 0, d.err
	}
	if !e.waitUntil(&e.rxTimer, d.due) {
		return 0, link.ErrClosed
	}
	now := e.clk.Now()
	n := 0
	for n < len(pkts) {
		// Go on with the next frame only if it is there and due; an
		// error found there waits for the next call.
		d, ok, _ := e.rxLine.peek()
		if !ok || d.err != nil || d.due.After(now) {
			break
		}
		src := e.rxLine.pop().p
		dst := pkts[n]
		dst.SetLen(src.Len())
		copy(dst.Bytes(), src.Bytes())
		dst.Offload = src.Offload
		src.Release()
		n++
	}
	return n, nil
}

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// WriteBatch copies the frames, applies the faults to the copies and writes
// what survives to the inner endpoint, now or, with Delay or Rate, from a
// goroutine once due; the caller's packets are untouched. Frames lost to a
// fault or to the bottleneck's queue are taken all the same: it returns
// len(pkts), or 0 and the inner endpoint's error.
func (e *Endpoint) WriteBatch(pkts []*buffer.Packet) (int, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0, link.ErrClosed
	}
	if err := e.txErr.Load(); err != nil {
		return 0, *err
	}
	// Held while the frames are shaped and handed on, so that the hold
	// timer's cannot overtake them (hold.go).
	e.tx.mu.Lock()
	defer e.tx.mu.Unlock()
	out := e.txOut[:0]
	for _, p := range pkts {
		out = e.tx.shape(e.pool.Clone(p), out)
	}
	defer func() {
		clear(out)
		e.txOut = out[:0]
	}()
	if e.txLine != nil {
		if !e.enqueue(&e.tx, e.txLine, out) {
			return 0, link.ErrClosed
		}
		return len(pkts), nil
	}
	var err error
	if len(out) > 0 {
		_, err = e.inner.WriteBatch(out)
	}
	for _, p := range out {
		p.Release()
	}
	if err != nil {
		return 0, err
	}
	return len(pkts), nil
}

// Up reports whether the inner endpoint's link is up (link.StateWatcher).
func (e *Endpoint) Up() bool { return link.IsUp(e.inner) }

// WatchState passes the inner endpoint's changes of state on to f.
func (e *Endpoint) WatchState(f func(up bool)) { link.WatchState(e.inner, f) }

// MTU returns the inner endpoint's MTU.
func (e *Endpoint) MTU() int { return e.inner.MTU() }

// MAC returns the inner endpoint's MAC.
func (e *Endpoint) MAC() net.HardwareAddr { return e.inner.MAC() }

// Capabilities returns the inner endpoint's receive offloads, whose frames
// keep their metadata through the fault injector, and no transmit
// offloads: a bit flipped in a frame whose checksum the device finishes
// would go through undetected, and a lost super-segment would be 45 losses
// at once, neither what the faults are meant to be.
func (e *Endpoint) Capabilities() link.Capabilities {
	c := e.inner.Capabilities()
	return link.Capabilities{RxChecksum: c.RxChecksum, RxGSO: c.RxGSO}
}

// Config returns the configuration the endpoint was made with.
func (e *Endpoint) Config() Config { return e.cfg }

// Stats returns the endpoint's live counters.
func (e *Endpoint) Stats() *Stats { return &e.stats }

// Close closes the inner endpoint, wakes a blocked ReadBatch and releases
// every frame still held back, queued or delayed: those are lost, as on a
// wire that is cut. It returns the inner endpoint's Close error; later calls
// return the same.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		// Wake what waits on the endpoint, then on the inner endpoint (a
		// write may be parked in its poller), before waiting for the
		// calls in flight to return.
		close(e.done)
		e.closeErr = e.inner.Close()
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		e.wg.Wait()
		e.rxLine.release()
		if e.txLine != nil {
			e.txLine.release()
		}
		if e.rxTimer != nil {
			e.rxTimer.Stop()
		}
		e.rx.stopHold()
		e.tx.stopHold()
		e.rx.drop()
		e.tx.drop()
	})
	return e.closeErr
}
