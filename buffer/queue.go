package buffer

import "github.com/gonetstack/gonet/budget"

// Queue is a bounded queue of packets whose bytes are charged to a memory
// budget while they wait: the datagrams parked on a neighbour's resolution
// (arp, ndp; RFC 4861 section 7.2.2: "the queue SHOULD be bounded"). Any
// number of goroutines may Put; one at a time may Take.
type Queue struct {
	ch     chan *Packet
	budget *budget.Budget
}

// NewQueue returns a Queue of at most n packets charged to b.
func NewQueue(n int, b *budget.Budget) *Queue {
	return &Queue{ch: make(chan *Packet, n), budget: b}
}

// Put queues pkt and reports true, or releases it and reports false when
// the queue is full or the budget cannot take its bytes: the new arrival
// is dropped, not the oldest, which has waited longest and is as good as
// any.
func (q *Queue) Put(pkt *Packet) bool {
	n := pkt.Len()
	if !q.budget.Reserve(n) {
		pkt.Release()
		return false
	}
	select {
	case q.ch <- pkt:
		return true
	default:
		q.budget.Release(n)
		pkt.Release()
		return false
	}
}

// Take returns the oldest packet, its bytes given back to the budget and
// the packet the caller's, or nil when the queue is empty.
func (q *Queue) Take() *Packet {
	select {
	case pkt := <-q.ch:
		q.budget.Release(pkt.Len())
		return pkt
	default:
		return nil
	}
}
