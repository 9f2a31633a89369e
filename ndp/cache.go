package ndp

import (
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/wire"
)

// The neighbour cache (RFC 4861 section 7.3): one entry per neighbour
// recently sent to, with its link-layer address and reachability state,
// moved between states by the events of section 7.3.3 and appendix C.
// REACHABLE falls to STALE by the clock alone, so that is not a timer:
// the entry remembers until when it is reachable and reads as STALE after.
// DELAY and PROBE each arm a clock timer; INCOMPLETE has a goroutine, the
// resolution (resolve.go), which owns the packets waiting on it.

// State is a neighbour cache entry's reachability state (RFC 4861 section
// 7.3.2).
type State uint8

// The states.
const (
	Incomplete State = iota + 1
	Reachable
	Stale
	Delay
	Probe
)

var stateText = [...]string{"", "INCOMPLETE", "REACHABLE", "STALE", "DELAY", "PROBE"}

// String names the state as RFC 4861 and `ip -6 neigh` do.
func (s State) String() string {
	if int(s) < len(stateText) && s != 0 {
		return stateText[s]
	}
	return "State(?)"
}

// neighbor is one cache entry; p.mu guards it.
type neighbor struct {
	addr     netip.Addr
	state    State
	mac      wire.MAC
	router   bool      // the IsRouter flag (section 6.3.1)
	until    time.Time // REACHABLE until then, STALE after
	probes   int       // unicast probes sent in PROBE
	timer    clock.Timer
	gen      uint64 // bumped at each change, so that a stale timer firing does nothing
	res      *resolution
	lastUsed time.Time
}

func (n *neighbor) stopTimer() {
	if n.timer != nil {
		n.timer.Stop()
		n.timer = nil
	}
}

// stateAt is the entry's state at now: REACHABLE past its time is STALE
// (section 7.3.3: "When ReachableTime milliseconds have passed since
// receipt of the last reachability confirmation for a neighbor, the
// Neighbor Cache entry's state changes from REACHABLE to STALE").
func (n *neighbor) stateAt(now time.Time) State {
	if n.state == Reachable && !now.Before(n.until) {
		n.state = Stale
	}
	return n.state
}

// set moves the entry to state, stopping its timer; p.mu is held.
func (p *Protocol) set(n *neighbor, s State) {
	n.stopTimer()
	n.gen++
	n.state = s
	n.probes = 0
	if s == Reachable {
		now := p.env.Clock.Now()
		n.until = now.Add(p.params.reachableTime(now))
	}
}

// cacheKey is the cache's key for addr: the address without its zone.
// ndp runs on one link, so a link-local address's zone, which the IPv6
// layer gives the addresses it received from or routes to, names nothing
// more; and the addresses messages carry (an advertisement's target) have
// none. Keyed with it, one neighbour would have two entries, and an
// advertisement would never resolve or confirm the one datagrams use.
func cacheKey(addr netip.Addr) netip.Addr { return addr.WithZone("") }

// newEntryLocked adds an entry for addr, making room by evicting the
// least recently used STALE entry when the cache is full; it returns nil
// when there is no room (CacheFull). p.mu is held.
func (p *Protocol) newEntryLocked(addr netip.Addr, s State) *neighbor {
	if len(p.cache) >= p.cfg.MaxEntries && !p.evictLocked() {
		p.Stats.CacheFull.Inc()
		return nil
	}
	addr = cacheKey(addr)
	n := &neighbor{addr: addr, lastUsed: p.env.Clock.Now()}
	p.cache[addr] = n
	p.set(n, s)
	return n
}

// evictLocked drops the least recently used entry that is STALE (or
// REACHABLE past its time): the one least likely to be missed, since a
// STALE entry is re-learnt with a probe the next time it is needed.
func (p *Protocol) evictLocked() bool {
	now := p.env.Clock.Now()
	var victim *neighbor
	for _, n := range p.cache {
		if n.stateAt(now) == Stale && (victim == nil || n.lastUsed.Before(victim.lastUsed)) {
			victim = n
		}
	}
	if victim == nil {
		return false
	}
	p.deleteLocked(victim)
	p.Stats.CacheEvictions.Inc()
	return true
}

func (p *Protocol) deleteLocked(n *neighbor) {
	n.stopTimer()
	n.gen++
	delete(p.cache, n.addr)
}

// learnLocked records a link-layer address a neighbour gave of itself in a
// Source Link-Layer Address option of an NS, RS or RA, or a Redirect's
// Target Link-Layer Address option (sections 7.2.3, 6.3.4, 8.3, and
// appendix C's "NS, RS, RA, Redirect" rows): a new entry is STALE; an
// existing one with another address takes it and becomes STALE; one with
// the same address is left as it is. An INCOMPLETE entry is resolved by
// it. p.mu is held.
func (p *Protocol) learnLocked(addr netip.Addr, mac wire.MAC) *neighbor {
	n := p.cache[cacheKey(addr)]
	if n == nil {
		n = p.newEntryLocked(addr, Stale)
		if n != nil {
			n.mac = mac
		}
		return n
	}
	if n.state == Incomplete {
		n.mac = mac
		p.set(n, Stale)
		n.res.answer(mac)
		return n
	}
	if n.mac != mac {
		n.mac = mac
		p.set(n, Stale)
	}
	return n
}

// advertisedLocked applies a Neighbor Advertisement for target to the
// cache (section 7.2.5). p.mu is held.
func (p *Protocol) advertisedLocked(target netip.Addr, mac wire.MAC, hasMAC, solicited, override, isRouter bool) {
	n := p.cache[cacheKey(target)]
	if n == nil {
		// "If no entry exists, the advertisement SHOULD be silently
		// discarded": an unsolicited NA creates no state.
		return
	}
	if n.state == Incomplete {
		if !hasMAC {
			return // "If the link layer has addresses and no Target Link-Layer Address option is included, the receiving node SHOULD silently discard the received advertisement."
		}
		n.mac = mac
		if solicited {
			p.set(n, Reachable)
		} else {
			p.set(n, Stale)
		}
		p.setRouterFlagLocked(n, isRouter)
		n.res.answer(mac)
		return
	}
	now := p.env.Clock.Now()
	differs := hasMAC && mac != n.mac
	if !override && differs {
		// "If the Override flag is clear and the supplied link-layer
		// address differs from that in the cache, then ... if the state
		// of the entry is REACHABLE, set it to STALE, but do not update
		// the entry in any other way. ... Otherwise, the received
		// advertisement should be ignored".
		if n.stateAt(now) == Reachable {
			p.set(n, Stale)
		}
		return
	}
	// "If the Override flag is set, or the supplied link-layer address is
	// the same as that in the cache, or no Target Link-Layer Address
	// option was supplied, the received advertisement MUST update the
	// Neighbor Cache entry".
	if differs {
		n.mac = mac
	}
	switch {
	case solicited:
		p.set(n, Reachable)
	case differs:
		p.set(n, Stale)
	}
	p.setRouterFlagLocked(n, isRouter)
}

// setRouterFlagLocked updates IsRouter from an advertisement; a router
// that says it no longer is one leaves the default router list (section
// 7.2.5: "the node MUST remove that router from the Default Router
// List").
func (p *Protocol) setRouterFlagLocked(n *neighbor, isRouter bool) {
	if n.router && !isRouter {
		p.removeRouterLocked(n.addr)
	}
	n.router = isRouter
}

// Confirm is an upper layer's reachability confirmation (section 7.3.1):
// TCP calls it when an acknowledgment shows forward progress with addr as
// the next hop. An entry in any state but INCOMPLETE becomes REACHABLE.
func (p *Protocol) Confirm(addr netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.cache[cacheKey(addr)]; n != nil && n.state != Incomplete {
		p.set(n, Reachable)
	}
}

// usedLocked notes a datagram sent to n's cached address: a STALE entry
// moves to DELAY and arms the probe timer (section 7.3.3: "The first time
// a node sends a packet to a neighbor whose entry is STALE, the sender
// changes the state to DELAY and sets a timer to expire in
// DELAY_FIRST_PROBE_TIME seconds"). p.mu is held.
func (p *Protocol) usedLocked(n *neighbor, now time.Time) {
	n.lastUsed = now
	if n.stateAt(now) == Stale {
		p.set(n, Delay)
		p.armLocked(n, DelayFirstProbeTime)
	}
}

// armLocked sets n's timer for its DELAY or PROBE state.
func (p *Protocol) armLocked(n *neighbor, d time.Duration) {
	gen := n.gen
	n.timer = p.env.Clock.AfterFunc(d, func() { p.neighborTimer(n, gen) })
}

// neighborTimer is the DELAY and PROBE timers' expiry: DELAY moves to
// PROBE with a first unicast solicitation; PROBE sends the next until
// MAX_UNICAST_SOLICIT, then deletes the entry (section 7.3.3).
func (p *Protocol) neighborTimer(n *neighbor, gen uint64) {
	p.mu.Lock()
	defer p.unlock()
	if p.closed || n.gen != gen || p.cache[n.addr] != n {
		return
	}
	switch n.state {
	case Delay:
		p.set(n, Probe)
	case Probe:
		if n.probes >= MaxUnicastSolicit {
			p.deleteLocked(n)
			p.Stats.ProbesFailed.Inc()
			return
		}
	default:
		return
	}
	src, ok := p.sourceForLocked(netip.Addr{})
	if !ok {
		p.deleteLocked(n)
		return
	}
	n.probes++
	m := p.neighborSolicitation(src, n.addr, n.addr, p.sllaFromLocked(src))
	mac := n.mac
	// A probe goes to the cached address, not through Output: it tests
	// that address (section 7.3.3: "sends a unicast Neighbor
	// Solicitation").
	p.later(func() {
		wire.SetICMPv6Checksum(m.icmp, m.src, m.dst)
		p.nic.Send(mac, wire.EtherTypeIPv6, m.pkt)
	})
	n.timer = nil
	p.armLocked(n, p.params.retrans)
}

// Neighbor is a cache entry as Neighbors reports it.
type Neighbor struct {
	Addr   netip.Addr
	MAC    wire.MAC // zero while INCOMPLETE
	State  State
	Router bool
}

// Neighbors returns a snapshot of the cache.
func (p *Protocol) Neighbors() []Neighbor {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.env.Clock.Now()
	out := make([]Neighbor, 0, len(p.cache))
	for _, n := range p.cache {
		out = append(out, Neighbor{n.addr, n.mac, n.stateAt(now), n.router})
	}
	return out
}

// Neighbor returns addr's cache entry.
func (p *Protocol) Neighbor(addr netip.Addr) (Neighbor, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.cache[cacheKey(addr)]
	if n == nil {
		return Neighbor{}, false
	}
	return Neighbor{n.addr, n.mac, n.stateAt(p.env.Clock.Now()), n.router}, true
}
