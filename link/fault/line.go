package fault

import (
	"sync"
	"time"

	"github.com/gonetstack/gonet/buffer"
)

// The delay line. Each direction's shaped frames wait in a line, in the
// order the shaper let them out, until they are due: the rx line between
// the rx pump and ReadBatch, the tx line between WriteBatch and the tx pump
// (used only with Delay or Rate; without them WriteBatch writes what it
// shapes at once). Each frame carries its own due time, since behind a
// bottleneck frames leave one serialisation time apart; the times never
// decrease along a line, so its head is always the next due.
//
// A line is bounded by bytes, not by frames: a path of 1 Gbit/s and 100 ms
// holds 12.5 MB in flight, over 8,000 full-sized frames or a few hundred
// super-segments, and the line must hold them all without dropping or
// making the sender wait, or the path would not be the one asked for. Its
// bound (lineBytes) is the bottleneck's queue and bandwidth-delay product
// (which a bottleneck's frames never exceed) above a floor for paths
// without a rate. Past it the producer waits: the rx pump stops reading (the
// inner endpoint then drops as it would without the wrapper), and a delayed
// writer blocks, as when the reader or the inner endpoint falls behind.

// minLineBytes is the bytes a line holds whatever the configuration: a
// delay without a rate holds a bandwidth-delay product of up to 32 MiB
// before its writers wait (2.5 Gbit/s at 100 ms).
const minLineBytes = 32 << 20

// lineBytes returns the bound of each direction's line.
func (c *Config) lineBytes() int64 {
	n := int64(minLineBytes)
	if c.Rate > 0 {
		n += int64(c.queue()) + c.bdp()
	}
	return n
}

// delivery is one shaped frame due at a time, or an error from the inner
// endpoint to pass on to the reader (p nil).
type delivery struct {
	p   *buffer.Packet
	due time.Time
	err error
}

// size returns the bytes d counts for in its line.
func (d delivery) size() int64 {
	if d.p == nil {
		return 0
	}
	return int64(d.p.Len())
}

// line is a FIFO of deliveries bounded by the bytes of their frames, for one
// producer at a time (the shaper's mu orders them) and one consumer.
type line struct {
	mu     sync.Mutex
	ring   []delivery // a circular buffer, grown by doubling
	head   int        // index of the oldest delivery
	n      int        // deliveries queued
	bytes  int64      // bytes of their frames
	limit  int64
	closed bool // no more deliveries will come

	// ready holds a token when a delivery may have arrived (or the line
	// closed) since the consumer last looked, room when one may have
	// left since the producer last looked; capacity one, so that neither
	// side blocks on them.
	ready chan struct{}
	room  chan struct{}
}

func newLine(limit int64) *line {
	return &line{ring: make([]delivery, 64), limit: limit, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// put appends d, waiting for room while the line is over its bound, unless
// it is empty: a frame larger than the bound still passes, alone. It
// reports false when done closes first, leaving d the caller's.
func (l *line) put(d delivery, done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		if l.n == 0 || l.bytes+d.size() <= l.limit {
			if l.n == len(l.ring) {
				grown := make([]delivery, 2*len(l.ring))
				for i := range l.n {
					grown[i] = l.ring[(l.head+i)%len(l.ring)]
				}
				l.ring, l.head = grown, 0
			}
			l.ring[(l.head+l.n)%len(l.ring)] = d
			l.n++
			l.bytes += d.size()
			l.mu.Unlock()
			signal(l.ready)
			return true
		}
		l.mu.Unlock()
		select {
		case <-l.room:
		case <-done:
			return false
		}
	}
}

// peek returns the oldest delivery, if any, and whether the line is closed.
func (l *line) peek() (d delivery, ok, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return delivery{}, false, l.closed
	}
	return l.ring[l.head], true, l.closed
}

// pop removes the oldest delivery, which peek returned.
func (l *line) pop() delivery {
	l.mu.Lock()
	d := l.ring[l.head]
	l.ring[l.head] = delivery{}
	l.head = (l.head + 1) % len(l.ring)
	l.n--
	l.bytes -= d.size()
	l.mu.Unlock()
	signal(l.room)
	return d
}

// wait returns the oldest delivery, waiting for one; ok is false when the
// line is closed and empty, or when done closes first.
func (l *line) wait(done <-chan struct{}) (d delivery, ok bool) {
	for {
		d, ok, closed := l.peek()
		if ok {
			return d, true
		}
		if closed {
			return delivery{}, false
		}
		select {
		case <-l.ready:
		case <-done:
			return delivery{}, false
		}
	}
}

// close tells the consumer that nothing more will come.
func (l *line) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	signal(l.ready)
}

// len returns the deliveries queued.
func (l *line) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// release drops every delivery left, once producer and consumer are gone.
func (l *line) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ; l.n > 0; l.n-- {
		if p := l.ring[l.head].p; p != nil {
			p.Release()
		}
		l.ring[l.head] = delivery{}
		l.head = (l.head + 1) % len(l.ring)
	}
	l.bytes = 0
}
