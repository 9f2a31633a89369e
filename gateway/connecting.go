package gateway

import (
	"context"
	"slices"
	"sync"
	"time"
)

// The host connects in progress are bounded (Config.MaxConnecting): each
// holds a host socket and a goroutine, and a guest that sends SYNs to
// random addresses would otherwise open one per SYN and wait out
// ConnectTimeout on each. A bound alone would let such a flood starve the
// guest's next connections for a whole ConnectTimeout after it stopped, so
// a full set makes room the way conntrack's early drop does in a full
// table: the oldest connect in progress gives way, provided it has waited
// at least evictAge. A connect to a host that answers takes a round trip
// and is never old enough to be evicted by a burst; one to an address
// that never answers is. The evicted connect's SYN goes unanswered, as if
// lost, and the guest's TCP sends it again later.
//
// When every connect in progress is younger than evictAge the new SYN is
// dropped unanswered rather than refused: the destination did not refuse,
// and the guest's retransmission a second later finds room.

// evictAge is the least time a connect in progress has waited before a
// newer one may take its place.
const evictAge = time.Second

// connectSlots is the set of host connects in progress.
type connectSlots struct {
	max int

	mu      sync.Mutex
	pending []*pendingConnect // oldest first
}

// pendingConnect is one host connect in progress.
type pendingConnect struct {
	start   time.Time
	cancel  context.CancelFunc // ends the connect when it is evicted
	evicted bool               // under connectSlots.mu
}

// begin takes a slot for a connect that cancel ends, evicting the oldest
// connect in progress if the set is full and that one is old enough. It
// reports whether it took one, and whether it evicted another.
func (s *connectSlots) begin(now time.Time, cancel context.CancelFunc) (p *pendingConnect, evicted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) >= s.max {
		oldest := s.pending[0]
		if now.Sub(oldest.start) < evictAge {
			return nil, false
		}
		oldest.evicted = true
		oldest.cancel()
		s.pending = slices.Delete(s.pending, 0, 1)
		evicted = true
	}
	p = &pendingConnect{start: now, cancel: cancel}
	s.pending = append(s.pending, p)
	return p, evicted
}

// end gives back p's slot when its connect has finished, and reports
// whether p was evicted first (its result, even a success, then stands
// for nothing: its slot has gone to another).
func (s *connectSlots) end(p *pendingConnect) (evicted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.evicted {
		return true
	}
	if i := slices.Index(s.pending, p); i >= 0 {
		s.pending = slices.Delete(s.pending, i, i+1)
	}
	return false
}
