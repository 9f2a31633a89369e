// Package dealer is the skeleton every packet dealer of GoNet shares: the
// inbox a dealer goroutine takes its work from.
//
// The layer below hands a dealer work with Deliver, which never blocks: a
// full inbox drops the message and counts its packets, as a NIC drops when
// its ring is full, so that one protocol that falls behind cannot stall the
// goroutine feeding every protocol on the link. The dealer takes from C in
// its own select, beside whatever else it waits for, and opens each
// envelope it takes. Sync sends a marker through the same channel, so that
// when the dealer opens it everything queued before it has been dealt with:
// an explicit way for tests and for the stack to know a dealer is idle. Once
// the dealer has stopped, Close releases what is still queued.
package dealer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/stats"
)

// Message is what an inbox carries: a batch of packets, as a NIC deals
// them, or one packet. Whoever holds a message owns its packets.
type Message interface {
	*buffer.Batch | *buffer.Packet
	Release()
}

// NetworkInbox is the size, in packets, of a network layer's inbox of the
// NICs' batches: as many frames as a TAP device's queue holds in front of
// its reader (tap.DefaultTxQueueLen), the queue a burst waited in before
// the reader polled the device and dealt it on a frame or two at a time.
// Its channel takes 24 bytes a slot, 384 KiB for the inbox.
const NetworkInbox = 16384

// ErrClosed is returned by Sync once the inbox is closed: what was queued
// will not be dealt with.
var ErrClosed = errors.New("dealer: closed")

// Inbox is a dealer's bounded input queue. It is bounded in packets, not
// messages: a NIC's reader that polls hands over a batch of one or two
// frames at a time in a burst, where one that sleeps between reads hands
// over up to 64, and the same burst must fit either way.
type Inbox[T Message] struct {
	c       chan Envelope[T]
	queued  atomic.Int64 // packets in the messages queued
	limit   int64
	dropped *stats.Counter

	mu     sync.RWMutex // Deliver holds it shared, Close exclusively
	closed bool         // guarded by mu
	done   chan struct{}
}

// Envelope is what the dealer takes from C: a message, or a Sync marker.
type Envelope[T Message] struct {
	m      T
	in     *Inbox[T]     // whose count of queued packets Open lowers
	synced chan struct{} // non-nil for a marker: closed when the dealer opens it
}

// New returns an inbox holding up to size packets, whose drops are counted,
// in packets, in dropped.
func New[T Message](size int, dropped *stats.Counter) *Inbox[T] {
	// Every message holds a packet at least, so the channel never fills
	// before the count does.
	return &Inbox[T]{c: make(chan Envelope[T], size), limit: int64(size), dropped: dropped, done: make(chan struct{})}
}

// Deliver queues m for the dealer and takes ownership of it. When the inbox
// is full, or closed, m is released and its packets counted as dropped.
// Deliver never blocks.
func (in *Inbox[T]) Deliver(m T) {
	n := int64(packets(m))
	in.mu.RLock()
	if !in.closed && in.queued.Add(n) <= in.limit {
		select {
		case in.c <- Envelope[T]{m: m, in: in}:
			in.mu.RUnlock()
			return
		default:
		}
	}
	if !in.closed {
		in.queued.Add(-n)
	}
	in.mu.RUnlock()
	in.dropped.Add(uint64(n))
	m.Release()
}

// packets is how many packets a drop of m counts.
func packets[T Message](m T) int {
	if b, ok := any(m).(*buffer.Batch); ok {
		return len(b.Pkts)
	}
	return 1
}

// C is the channel the dealer takes envelopes from.
func (in *Inbox[T]) C() <-chan Envelope[T] { return in.c }

// Open returns the message e carries and true. For a Sync marker it tells
// the caller of Sync that the dealer has come to it, and returns false: the
// dealer, which deals with one envelope at a time, has finished with every
// message queued before the marker.
func (e Envelope[T]) Open() (T, bool) {
	if e.synced != nil {
		close(e.synced)
		var none T
		return none, false
	}
	e.in.queued.Add(-int64(packets(e.m)))
	return e.m, true
}

// Sync returns once the dealer has dealt with every message queued before
// the call, by sending a marker through the inbox and waiting for the
// dealer to open it. A full inbox makes Sync wait for room: the marker is
// never dropped. Sync covers what the dealer does with a message in its own
// goroutine, not what it hands to other goroutines, nor messages still on
// their way to Deliver. It returns ctx's error if ctx ends first, and
// ErrClosed once the inbox is closed.
func (in *Inbox[T]) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	synced := make(chan struct{})
	select {
	case in.c <- Envelope[T]{synced: synced}:
	case <-in.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-synced:
		return nil
	case <-in.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the inbox once its dealer has stopped taking from it: it
// releases the messages still queued (a stack shutting down; they are not
// counted as drops), makes Deliver drop from then on, and makes Sync return
// ErrClosed. Closing twice does nothing.
func (in *Inbox[T]) Close() {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return
	}
	in.closed = true
	close(in.done)
	in.mu.Unlock()
	for {
		select {
		case e := <-in.c:
			if e.synced == nil {
				e.m.Release()
			}
		default:
			return
		}
	}
}
