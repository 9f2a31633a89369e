// Package pathmtu is the cache of path MTUs learnt per destination that
// both families keep, IPv4's from ICMP "fragmentation needed" (RFC 1191)
// and IPv6's from Packet Too Big (RFC 8201): what a report means and
// which to believe is the family's; keeping the entries, expiring and
// evicting them is here.
//
// The cache is copied on write: updates come with ICMP messages, rarely,
// while every route lookup reads it, without a lock.
package pathmtu

import (
	"maps"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// MaxEntries bounds the cache: reports are forged easily, and each costs
// an entry until it expires.
const MaxEntries = 1024

// Entry is a destination's learnt path MTU.
type Entry struct {
	MTU     int
	Expires time.Time
	// Locked says the report was below the family's floor, so the path
	// MTU is the floor: IPv4 then sends without DF, to be fragmented on
	// the way, as Linux does for a "locked" MTU.
	Locked bool
}

// Cache maps destinations to their path MTU. The zero value is empty and
// ready.
type Cache struct {
	mu  sync.Mutex // serialises writers
	cur atomic.Pointer[map[netip.Addr]Entry]
}

// Lookup returns dst's live entry; the clock is read only if there is one.
func (c *Cache) Lookup(dst netip.Addr, clk clock.Clock) (Entry, bool) {
	m := c.cur.Load()
	if m == nil || len(*m) == 0 {
		return Entry{}, false
	}
	e, ok := (*m)[dst]
	if !ok || !clk.Now().Before(e.Expires) {
		return Entry{}, false
	}
	return e, true
}

// Store sets dst's entry, dropping the expired ones, and reports whether
// another destination's entry was evicted to make room: the one closest to
// its end, learnt longest ago.
func (c *Cache) Store(dst netip.Addr, e Entry, now time.Time) (evicted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[netip.Addr]Entry{}
	if old := c.cur.Load(); old != nil {
		m = maps.Clone(*old)
	}
	maps.DeleteFunc(m, func(_ netip.Addr, e Entry) bool { return !now.Before(e.Expires) })
	if _, ok := m[dst]; !ok && len(m) >= MaxEntries {
		var victim netip.Addr
		var first time.Time
		for a, e := range m {
			if first.IsZero() || e.Expires.Before(first) {
				victim, first = a, e.Expires
			}
		}
		delete(m, victim)
		evicted = true
	}
	m[dst] = e
	c.cur.Store(&m)
	return evicted
}
