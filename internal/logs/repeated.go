package logs

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// DefaultInterval is how often a Repeated event is logged at most when its
// layer names no interval: often enough that an operator tailing the log
// sees a flood go on, rarely enough that the flood does not become one in
// the log (Linux's net_ratelimit allows 10 messages per 5 s; one a 10 s
// per kind of event is quieter, and the count says what was left out).
const DefaultInterval = 10 * time.Second

// Repeated is an event that may happen once per packet (a drop, a
// refusal): the first occurrence is logged, and after it at most one per
// interval, carrying how many occurrences were left out since the last
// logged one (attribute "suppressed"). It is safe for concurrent use.
//
// The caller asks Allow, which declines with an atomic load (and a call to
// the handler's Enabled) when the event is not to be logged, and only on
// true builds the attributes and calls Log: attributes built before the
// check would be an allocation per packet.
type Repeated struct {
	log   *slog.Logger
	clock clock.Clock
	level slog.Level
	msg   string
	every int64 // nanoseconds

	next       atomic.Int64  // unix nanoseconds before which occurrences are counted, not logged
	suppressed atomic.Uint64 // occurrences not logged since the last logged one
}

// NewRepeated returns the repeated event msg at level, logged on log at
// most once per every (DefaultInterval when zero) as c tells time.
func NewRepeated(log *slog.Logger, c clock.Clock, level slog.Level, msg string, every time.Duration) *Repeated {
	if every <= 0 {
		every = DefaultInterval
	}
	if c == nil {
		c = clock.Real{}
	}
	return &Repeated{log: OrDiscard(log), clock: c, level: level, msg: msg, every: int64(every)}
}

// Allow records an occurrence and reports whether it is to be logged, with
// how many occurrences were suppressed before it. With the logger disabled
// at the event's level it reports false and counts nothing: there is no
// log to tell the count to.
func (r *Repeated) Allow() (suppressed uint64, ok bool) {
	if !r.log.Enabled(context.Background(), r.level) {
		return 0, false
	}
	now := r.clock.Now().UnixNano()
	next := r.next.Load()
	// Of the occurrences that find the interval over, the one whose
	// swap succeeds logs; the others count as suppressed.
	if now < next || !r.next.CompareAndSwap(next, now+r.every) {
		r.suppressed.Add(1)
		return 0, false
	}
	return r.suppressed.Swap(0), true
}

// Log logs the occurrence Allow let through, with attrs and, when some were
// left out before it, their count.
func (r *Repeated) Log(suppressed uint64, attrs ...slog.Attr) {
	if suppressed > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", suppressed))
	}
	r.log.LogAttrs(context.Background(), r.level, r.msg, attrs...)
}
