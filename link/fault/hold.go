package fault

import (
	"errors"
	"net"
	"time"

	"github.com/gonetstack/gonet/buffer"
)

// Reordering with a bounded hold. A frame chosen to be reordered (with its
// duplicate, if it has one) is held back until the next frame in its
// direction has passed it, and then follows that frame; but it waits at
// most Config.ReorderHold. Without the bound the last frame of a burst, a
// lone retransmission or a FIN would wait for traffic that may never come:
// both ends would fall silent until a retransmission timer fired, and the
// frame, when at last some later frame released it, would arrive as a very
// old duplicate. The link would then manufacture timeouts no real network
// causes; real reordering (parallel paths, netem's "reorder", which sends
// the chosen packets ahead of others held for the configured delay)
// displaces a packet by a bounded time.
//
// The hold timer runs on the endpoint's clock. When it fires it sends the
// held frames on the way the frame that would have released them would
// have gone: to ReadBatch through the rx line, or to the inner endpoint
// (through the tx line and pump with Delay or Rate). The shaper's mu is
// held from the moment a frame is shaped until it is handed to that next
// stage, by the rx pump and WriteBatch as by the timer, so frames reach the
// next stage in the order the shaper let them out, and no frame other than
// the held one moves.

// DefaultReorderHold is the hold bound when Config.ReorderHold is zero.
// netem displaces a reordered packet by at most the delay the others get
// (its manual's example: 10 ms); GoNet's links are LANs, TAPs and pipes
// with round trips well under a millisecond, where 1 ms is a long
// displacement, yet shorter than the earliest timer either end of a
// connection arms for a missing segment: a tail loss probe waits at least
// 2·SRTT + 2 ms, in Linux as in GoNet (TCP_TIMEOUT_MIN), and the
// retransmission timer far longer. A frame held for its full bound so
// arrives before a timer fires for it (RACK may still deem it lost, as on
// a path that truly reorders by 1 ms, and learn from the D-SACK). In a
// burst the next frame comes within
// microseconds (12 µs for 1500 bytes at 1 Gb/s) and releases it first, as
// before the bound.
const DefaultReorderHold = time.Millisecond

// reorderHold returns the hold bound c asks for.
func (c *Config) reorderHold() time.Duration {
	if c.ReorderHold == 0 {
		return DefaultReorderHold
	}
	return c.ReorderHold
}

// hold holds frames back to be reordered and arms the timer that bounds
// their wait. s.mu is held.
func (s *shaper) hold(frames []*buffer.Packet) {
	s.held = append(s.held, frames...)
	d := s.cfg.reorderHold()
	s.heldUntil = s.clk.Now().Add(d)
	// Every arming is counted until its callback has run or it is
	// stopped, so that whoever closes the way out can wait for the
	// callbacks still to come (stopHold).
	s.pending.Add(1)
	if s.timer == nil {
		s.timer = s.clk.AfterFunc(d, s.expire)
	} else if s.timer.Reset(d) {
		s.pending.Done() // an earlier arming, now never to fire
	}
}

// unhold appends the held frames to out, behind the frame that passed
// them, and disarms their timer. s.mu is held.
func (s *shaper) unhold(out []*buffer.Packet) []*buffer.Packet {
	out = append(out, s.held...)
	clear(s.held)
	s.held = s.held[:0]
	s.disarm()
	return out
}

// expired appends the held frames to out if their hold has run out by
// now: nothing when they are gone already, passed by a frame while the
// timer fired, or when the timer is an earlier one that missed its stop
// and the frames held now have time left. s.mu is held.
func (s *shaper) expired(now time.Time, out []*buffer.Packet) []*buffer.Packet {
	if len(s.held) == 0 || now.Before(s.heldUntil) {
		return out
	}
	s.st.HoldExpired.Add(uint64(len(s.held)))
	return s.unhold(out)
}

// disarm stops the hold timer. s.mu is held.
func (s *shaper) disarm() {
	if s.timer != nil && s.timer.Stop() {
		s.pending.Done()
	}
}

// stopHold disarms the hold timer and waits for a callback already under
// way: after it the timer sends nothing more, as long as no frame is held
// anew.
func (s *shaper) stopHold() {
	s.mu.Lock()
	s.disarm()
	s.mu.Unlock()
	s.pending.Wait()
}

// expireRx is the rx shaper's hold timer: it queues the frames whose hold
// has run out for ReadBatch, as the rx pump queues what it shapes. The rx
// pump waits for it (stopHold) before it closes the rx line.
func (e *Endpoint) expireRx() {
	s := &e.rx
	defer s.pending.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.expired(e.clk.Now(), s.out[:0])
	e.enqueue(s, e.rxLine, out)
	s.out = out[:0]
}

// expireTx is the tx shaper's hold timer: it writes the frames whose hold
// has run out to the inner endpoint, or with Delay or Rate queues them for
// the tx pump, as WriteBatch does with what it shapes. Its writer has
// returned long ago, so an error can only be counted. Close waits for it
// (stopHold).
func (e *Endpoint) expireTx() {
	s := &e.tx
	defer s.pending.Done()
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return // Close releases the held frames
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.expired(e.clk.Now(), s.out[:0])
	defer func() { s.out = out[:0] }()
	if e.txLine != nil {
		e.enqueue(s, e.txLine, out)
		return
	}
	if len(out) > 0 {
		n, err := e.inner.WriteBatch(out)
		if err != nil {
			e.stats.TxErrors.Add(uint64(len(out) - n))
			if errors.Is(err, net.ErrClosed) {
				e.txErr.CompareAndSwap(nil, &err)
			}
		}
	}
	for _, p := range out {
		p.Release()
	}
	clear(out)
}
