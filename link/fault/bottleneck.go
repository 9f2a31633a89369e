package fault

import (
	"math"
	"math/bits"
	"time"
)

// The bottleneck. With Config.Rate each direction of the endpoint is a
// router's output port onto a slower link, the path's narrowest hop: a
// frame that survives the random faults (Loss comes first, as on a lossy
// link ahead of the router) joins a drop-tail queue of Config.Queue bytes,
// is serialised at Rate behind the frames ahead of it, and then travels for
// Config.Delay, the propagation delay, before it arrives. A frame that
// finds the queue too full for it is dropped, as a tail drop, and counted
// (Direction.TailDropped). A frame's serialisation takes its whole length:
// a super-segment read from an inner endpoint with receive GSO takes as
// long as the frames it stands for.
//
// The port is modelled by one time per direction, busyUntil, when it will
// have serialised everything it has accepted; the bytes waiting at an
// instant are what the port could serialise between then and busyUntil,
// including the untransmitted part of the frame on the wire. An idle port
// (busyUntil passed) takes any frame, however long: a real port sends what
// it is given when it has nothing else to do. The serialisation times are
// exact: the fraction of a nanosecond each frame's time leaves over is
// carried to the next, so that the rate holds over any number of frames,
// at any frame size.
//
// Everything is timed on Config.Clock: the time a frame arrives is the
// clock's when WriteBatch is called, or when the rx pump reads it, and the
// frame is due at the far end when its serialisation ends plus Delay. The
// frames between the queue's head and the far end wait in the delay line
// (line.go), which holds a path's whole bandwidth-delay product and more.

// DefaultQueue is the bottleneck's queue when Config.Rate is set and
// Config.Queue is not: 64 KiB, a shallow switch port's buffer, about 44
// full-sized frames, a bandwidth-delay product at 10 Mbit/s and 50 ms. A
// deep-buffered or a long fat path asks for its own (say two
// bandwidth-delay products, as a router sized by the old rule of thumb).
const DefaultQueue = 64 << 10

// queue returns the queue's size in bytes c asks for.
func (c *Config) queue() int {
	if c.Queue == 0 {
		return DefaultQueue
	}
	return c.Queue
}

// bdp returns the bytes Rate delivers in Delay, saturating.
func (c *Config) bdp() int64 {
	b := float64(c.Rate) / 8 * c.Delay.Seconds()
	if b >= math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return int64(b)
}

// admit decides the fate of a frame of n bytes that reaches the port now:
// it returns when the frame is due at the far end of the path, or ok false
// when the queue has no room for it (then counted as a tail drop). Without
// Rate or Delay it returns the zero time: the frame is due at once. s.mu is
// held, so that the frames of a direction are admitted in the order they
// are delivered.
func (s *shaper) admit(now time.Time, n int) (due time.Time, ok bool) {
	if s.cfg.Rate == 0 {
		if s.cfg.Delay == 0 {
			return time.Time{}, true
		}
		return now.Add(s.cfg.Delay), true
	}
	start := now
	if backlog := s.busyUntil.Sub(now); backlog > 0 {
		if waiting := bytesIn(backlog, s.cfg.Rate); waiting+int64(n) > int64(s.cfg.queue()) {
			s.st.TailDropped.Inc()
			return time.Time{}, false
		}
		start = s.busyUntil
	} else {
		s.carry = 0 // an idle port starts afresh
	}
	// n·8 bits at Rate bits per second take n·8·10⁹/Rate nanoseconds;
	// the remainder is carried. n is at most a super-segment's 64 KiB,
	// so the product stays far below overflow.
	b := int64(n)*8*int64(time.Second) + s.carry
	s.carry = b % s.cfg.Rate
	s.busyUntil = start.Add(time.Duration(b / s.cfg.Rate))
	return s.busyUntil.Add(s.cfg.Delay), true
}

// bytesIn returns the bytes a port serialising at rate bits per second
// sends in d, rounded down.
func bytesIn(d time.Duration, rate int64) int64 {
	hi, lo := bits.Mul64(uint64(d), uint64(rate))
	const div = 8 * uint64(time.Second)
	if hi >= div {
		return math.MaxInt64 // a backlog of centuries: no room
	}
	q, _ := bits.Div64(hi, lo, div)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}
