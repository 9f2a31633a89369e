package route

import (
	"net/netip"
	"sync"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// Redirects are the host routes a family puts in its table at a router's
// Redirect (IPv4's ICMP Redirect, RFC 1122 section 3.2.2.2; IPv6's, RFC
// 4861 section 8.3), each kept for a lifetime after the last redirect for
// its destination, and at most a bound of them at once, the oldest given
// up first. So the table cannot grow without bound at a first hop's word,
// and a redirect to a router that has since gone does not outlive the
// lifetime: the destination falls back to its own route, as Linux's
// redirect exceptions expire.
type Redirects[I Iface] struct {
	clk clock.Clock
	// has, add and remove read and change the family's table.
	has    func(Route[I]) bool
	add    func(Route[I]) error
	remove func(Route[I]) bool

	take  sync.Mutex // one Take at a time: each changes the table in steps
	mu    sync.Mutex // guards byDst, which the timers change too
	byDst map[netip.Addr]*redirect[I]
}

// redirect is one host route a Redirect made.
type redirect[I Iface] struct {
	r     Route[I]
	at    time.Time
	timer clock.Timer
}

// The redirects' bounds.
const (
	// RedirectLifetime is how long a redirect's route holds after the
	// last redirect for its destination: 300 s, Linux's route
	// gc_timeout, which its redirect exceptions expire by.
	RedirectLifetime = 300 * time.Second
	// MaxRedirects bounds the redirects in force at once.
	MaxRedirects = 256
)

// NewRedirects returns the redirects of a family whose table has, add and
// remove read and change, on clk's time.
func NewRedirects[I Iface](clk clock.Clock, has func(Route[I]) bool, add func(Route[I]) error, remove func(Route[I]) bool) *Redirects[I] {
	return &Redirects[I]{clk: clk, has: has, add: add, remove: remove, byDst: map[netip.Addr]*redirect[I]{}}
}

// Take puts r, a host route through the router a Redirect named (on-link
// when r has no gateway), in the table in place of an earlier redirect's
// for its destination, evicting the oldest when the bound is reached.
func (rs *Redirects[I]) Take(r Route[I]) error {
	rs.take.Lock()
	defer rs.take.Unlock()
	dst := r.Dst.Addr()
	rs.mu.Lock()
	if rs.byDst[dst] == nil && rs.has(r) {
		// The table holds the route already, by configuration: it is
		// not the redirect's to expire.
		rs.mu.Unlock()
		return nil
	}
	var gone []Route[I]
	if old := rs.byDst[dst]; old != nil {
		old.timer.Stop()
		delete(rs.byDst, dst)
		gone = append(gone, old.r)
	}
	if len(rs.byDst) >= MaxRedirects {
		var oldest *redirect[I]
		for _, e := range rs.byDst {
			if oldest == nil || e.at.Before(oldest.at) {
				oldest = e
			}
		}
		oldest.timer.Stop()
		delete(rs.byDst, oldest.r.Dst.Addr())
		gone = append(gone, oldest.r)
	}
	rs.mu.Unlock()
	// The table changes outside the lock, which the timers take: the
	// family's own lock is taken there.
	for _, g := range gone {
		rs.remove(g)
	}
	if err := rs.add(r); err != nil {
		return err
	}
	e := &redirect[I]{r: r, at: rs.clk.Now()}
	rs.mu.Lock()
	e.timer = rs.clk.AfterFunc(RedirectLifetime, func() { rs.expire(e) })
	rs.byDst[dst] = e
	rs.mu.Unlock()
	return nil
}

// expire removes e's route at the end of its lifetime, unless a later
// redirect has taken its place.
func (rs *Redirects[I]) expire(e *redirect[I]) {
	dst := e.r.Dst.Addr()
	rs.mu.Lock()
	current := rs.byDst[dst] == e
	if current {
		delete(rs.byDst, dst)
	}
	rs.mu.Unlock()
	if current {
		rs.remove(e.r)
	}
}

// Len returns how many redirects are in force.
func (rs *Redirects[I]) Len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.byDst)
}

// Stop stops every redirect's timer, leaving the routes: the family is
// closing.
func (rs *Redirects[I]) Stop() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, e := range rs.byDst {
		e.timer.Stop()
	}
}
