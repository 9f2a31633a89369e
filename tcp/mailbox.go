package tcp

import (
	"sync"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// A connection's mailbox: the queue between the TCP dealer, which runs in
// the network layer's dealer goroutine, and the connection's goroutine. It is a
// process's buffered input, as a CSP channel would be, made of a slice
// under a mutex of its own: a buffered channel would cost its whole
// capacity in memory on every connection, idle or not, and a channel
// operation per segment. It carries segments parsed by the dealer, header
// and options, by value, so the connection's goroutine never parses one
// again and nothing is allocated per segment. The dealer appends to a
// slice lent by segmentSlices; the goroutine takes the slice whole and
// gives it back once it has handled it, so no slice is allocated in steady
// state and an idle connection holds none. It handles the batch buffer.MaxBatch
// segments at a time, each such chunk one event with one ACK decision
// after it: between them the application's Read and Write get the
// connection's mutex, and a wake-up or the timer its turn.
//
// The lock is not the connection's mu, which run holds while it works: the
// dealer never waits for a connection to finish a batch, only for an append
// or a take.

// inQueueLen bounds the segments waiting for a connection's goroutine:
// those in the mailbox and those of its batch beyond the chunk in hand. A
// full mailbox drops (counted): TCP recovers from the loss, and the dealer
// never blocks on one slow connection.
const inQueueLen = 1024

// mailboxKeep is the capacity, in segments, of the slices the mailboxes
// take from segmentSlices: the NIC's batch, the most one pass of the IPv4
// dealer brings. A mailbox that falls further behind grows its slice, and
// lets it go once run has handled it.
const mailboxKeep = buffer.MaxBatch

// segmentSlices lends the mailboxes their slices, emptied: the dealer takes
// one when a segment finds its connection's mailbox without one, and run
// gives its batch back as soon as it has handled it. An idle connection
// thus holds none (a slice of mailboxKeep segments is some 11 KiB), a busy
// one two at most, and in steady state they are reused without
// allocation.
var segmentSlices = sync.Pool{New: func() any { return new([mailboxKeep]segment) }}

func getSegments() []segment { return segmentSlices.Get().(*[mailboxKeep]segment)[:0] }

// putSegments gives s back to segmentSlices, emptied, unless it was grown
// beyond mailboxKeep (or is nil): that one is let go.
func putSegments(s []segment) {
	if cap(s) != mailboxKeep {
		return
	}
	clear(s) // no pointers kept to packets released or passed on
	segmentSlices.Put((*[mailboxKeep]segment)(s[:mailboxKeep]))
}

type mailbox struct {
	mu     sync.Mutex
	q      []segment // segments waiting, oldest first; nil when none
	held   int       // run's batch beyond the chunk in hand, counted against the bound
	closed bool      // run has exited: nothing more is taken
	wakeup waker     // run's (shared with its other inputs): q has become non-empty, or run has more

	// run's own, not under mu: the batch it took and how far it has got.
	batch   []segment
	pos     int
	resumed bool // run woke itself for the batch's next chunk
}

func newMailbox(w waker) mailbox {
	return mailbox{wakeup: w}
}

// put queues a copy of seg and wakes the goroutine if the mailbox was
// empty (a non-empty one has a wake-up pending, or its goroutine is at
// work and will look again). It reports false, leaving seg's packet to the
// caller, when the mailbox is full or closed.
func (m *mailbox) put(seg *segment) bool { return m.add(seg, true) }

// putMarker queues a Sync marker (sync.go). Unlike a segment it is not
// refused by a full mailbox, which would make Sync wait for room that a
// busy connection may not leave; it reports false if run has exited.
func (m *mailbox) putMarker(synced chan struct{}) bool {
	return m.add(&segment{synced: synced}, false)
}

func (m *mailbox) add(seg *segment, bounded bool) bool {
	m.mu.Lock()
	if m.closed || bounded && len(m.q)+m.held >= inQueueLen {
		m.mu.Unlock()
		return false
	}
	wake := len(m.q) == 0
	if m.q == nil {
		m.q = getSegments()
	}
	m.q = append(m.q, *seg)
	m.mu.Unlock()
	if wake {
		m.wakeup.wake()
	}
	return true
}

// take returns the segments waiting and empties the mailbox.
func (m *mailbox) take() []segment {
	m.mu.Lock()
	q := m.q
	m.q, m.held = nil, max(len(q)-buffer.MaxBatch, 0)
	m.mu.Unlock()
	return q
}

// next returns run's next chunk, up to buffer.MaxBatch segments: more of
// the batch it holds, or, that one finished, what the mailbox holds.
func (m *mailbox) next() []segment {
	if m.pos == len(m.batch) {
		m.batch, m.pos = m.take(), 0
	}
	n := min(len(m.batch)-m.pos, buffer.MaxBatch)
	m.pos += n
	return m.batch[m.pos-n : m.pos]
}

// done follows run's handling of a chunk. While the batch has more, run
// wakes itself for it, and the bound counts what is left beyond the next
// chunk. Once it is finished, run gives the batch's slice back, and a run
// that woke itself looks whether segments came meanwhile, since their
// wake-up went into the same waker. A batch of one chunk, the common case,
// takes no lock here.
func (m *mailbox) done() {
	if m.pos < len(m.batch) {
		m.resumed = true
		m.mu.Lock()
		m.held = max(len(m.batch)-m.pos-buffer.MaxBatch, 0)
		m.mu.Unlock()
		m.wakeup.wake()
		return
	}
	putSegments(m.batch)
	m.batch, m.pos = nil, 0
	if !m.resumed {
		return // the common case: one chunk, its wake-up from put
	}
	m.resumed = false
	m.mu.Lock()
	waiting := len(m.q) > 0
	m.mu.Unlock()
	if waiting {
		m.wakeup.wake()
	}
}

// close refuses further segments and releases those waiting, and what is
// left of run's batch; run calls it as it exits.
func (m *mailbox) close() {
	m.mu.Lock()
	q := m.q
	m.q, m.closed = nil, true
	m.mu.Unlock()
	for i := range q {
		q[i].discard()
	}
	putSegments(q)
	for i := range m.batch[m.pos:] {
		m.batch[m.pos+i].discard()
	}
	putSegments(m.batch)
	m.batch, m.pos = nil, 0
}

// inputBatch hands run's next chunk from the mailbox to input; mu is
// held. Full-sized segments are acknowledged every second one as they are
// taken (ackWithinBatch); any other ACK the chunk owes is one decision, in
// run, after it: one ACK can answer many small segments. What is left when
// the connection closes is released.
func (c *Conn) inputBatch() {
	chunk := c.in.next()
	ackedWithin := false
	for i := range chunk {
		if chunk[i].synced != nil {
			c.takeMarker(&chunk[i])
			continue
		}
		c.input(&chunk[i])
		if i < len(chunk)-1 && c.ackWithinBatch() {
			ackedWithin = true
		}
	}
	// What came after the last of those ACKs is acknowledged at the
	// batch's end, as a batch always was, not after the delayed-ACK
	// timeout.
	if ackedWithin && c.rcv.segsUnacked > 0 {
		c.rcv.ackNow = true
	}
	c.in.done()
}

// ackWithinBatch sends the ACK that two full-sized segments owe before
// the rest of the batch is taken, and reports whether it did (RFC 5681
// section 4.2: "an ACK SHOULD be generated for at least every second
// full-sized segment"). One ACK for a whole batch gave a sender an ACK for
// every seven segments on a 1 Gbit/s path, where the kernel's receiver
// acknowledges every second: fewer ACKs to clock its sending and grow its
// window by. An ACK owed for another reason waits for the batch's end,
// where data or a SACK may carry it.
func (c *Conn) ackWithinBatch() bool {
	// Two segments, more than one full-sized one's worth of bytes (as
	// Linux's __tcp_ack_snd_check), whatever options shortened them.
	full := c.rcv.segsUnacked >= 2 && c.rcv.nxt.Sub(c.rcv.acked) > seqnum.Size(c.rcv.mss)
	if !full || !c.state.canReceive() || len(c.rcv.ooo) > 0 {
		return false
	}
	c.sendFlags(c.snd.ackSeq(), wire.TCPFlagACK)
	return true
}
