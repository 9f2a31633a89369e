// Package ratelimit is the token bucket that bounds the error messages a
// host sends: ICMP's (RFC 1812 section 4.3.2.8) and ICMPv6's (RFC 4443
// section 2.4 (f)), one implementation for both families (issue 12, item
// 7). It runs on the stack's clock, so that a test moves time by hand.
package ratelimit

import (
	"sync"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// Bucket is a token bucket: it holds up to Burst tokens, gains Rate of
// them a second, and each message sent takes one. A burst of Burst
// messages goes at once; after that, Rate a second. It is safe for
// concurrent use, so that one bucket may be shared by both families, as
// Linux's icmp_msgs_per_sec and icmp_msgs_burst bound ICMP and ICMPv6
// together.
type Bucket struct {
	clock clock.Clock
	rate  float64 // tokens a second
	burst float64 // the bucket's depth

	mu     sync.Mutex
	tokens float64
	last   time.Time // when tokens was last brought up to date
}

// New returns a full bucket of burst tokens that refills at rate tokens a
// second on c.
func New(rate, burst float64, c clock.Clock) *Bucket {
	return &Bucket{clock: c, rate: rate, burst: burst, tokens: burst, last: c.Now()}
}

// Allow takes a token and reports whether there was one: false says the
// message must not be sent.
func (b *Bucket) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
