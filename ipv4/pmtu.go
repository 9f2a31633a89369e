package ipv4

import (
	"net/netip"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/pathmtu"
)

// Path MTU discovery (RFC 1191), the host's part: a cache of path MTUs per
// destination, learnt from ICMP "fragmentation needed and DF set" messages
// that a transport has validated (TCP checks the quoted sequence number,
// RFC 5927 section 4.1), and consulted by every route lookup, so that new
// connections and UDP datagrams to the destination see it too.
//
// The cache itself (pathmtu) is shared with IPv6.

// pmtuEntry is what a route lookup takes of a destination's entry.
type pmtuEntry struct {
	mtu int
	// locked: the report was below the floor (Config.MinPMTU), so the
	// path MTU is the floor and datagrams to the destination go without
	// DF, to be fragmented on the way, as Linux does for a "locked" MTU:
	// segments of the floor's size with DF would never get through.
	locked bool
}

// pmtuCache maps destinations to their path MTU.
type pmtuCache struct{ c pathmtu.Cache }

// lookup returns dst's live entry; the clock is read only if there is one.
func (c *pmtuCache) lookup(dst netip.Addr, clk clock.Clock) (pmtuEntry, bool) {
	e, ok := c.c.Lookup(dst, clk)
	return pmtuEntry{e.MTU, e.Locked}, ok
}

// plateaus is RFC 1191 section 7's table of MTU plateaus, highest first.
var plateaus = [...]int{65535, 32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68}

// PlateauBelow returns the largest plateau of RFC 1191 section 7 less than
// totalLen, the length of a datagram a router could not forward: the
// guess RFC 1191 section 5 makes when an old router reports a next-hop
// MTU of zero.
func PlateauBelow(totalLen int) int {
	for _, p := range plateaus {
		if p < totalLen {
			return p
		}
	}
	return 68
}

// UpdatePMTU takes a validated "fragmentation needed" report (RFC 1191
// section 4): a datagram of quotedLen bytes to dst met a link whose MTU is
// nextHopMTU (zero from routers older than RFC 1191: the plateau below
// quotedLen is used, unless quotedLen exceeds the path MTU already). Reports below 68 bytes, the least MTU of RFC 791,
// are bogus and ignored; reports below Config.MinPMTU lower the path MTU to
// MinPMTU only, and unlock fragmentation (see pmtuEntry.locked); a report
// that would not lower the path MTU is ignored (RFC 1191 section 6.3: the
// estimate only ever falls until its entry expires). It returns the path
// MTU in force afterwards.
func (p *Protocol) UpdatePMTU(dst netip.Addr, nextHopMTU, quotedLen int) int {
	ri, err := p.Route(dst)
	if err != nil || ri.Local {
		p.Stats.PMTUIgnored.Inc()
		return 0
	}
	cur := ri.MTU
	mtu := nextHopMTU
	if mtu == 0 {
		// A datagram larger than the estimate was sent before it fell:
		// its report says nothing new, and a plateau below it would step
		// the estimate down once more for each datagram of that flight.
		if quotedLen > cur {
			p.Stats.PMTUIgnored.Inc()
			return cur
		}
		mtu = PlateauBelow(quotedLen)
	}
	if mtu < 68 || mtu >= cur {
		p.Stats.PMTUIgnored.Inc()
		return cur
	}
	locked := false
	if mtu < p.cfg.MinPMTU {
		p.Stats.PMTUClamped.Inc()
		mtu, locked = min(p.cfg.MinPMTU, cur), true
		if mtu == cur && ri.PMTULocked {
			return cur
		}
	}
	now := p.env.Clock.Now()
	if p.pmtu.c.Store(dst, pathmtu.Entry{MTU: mtu, Expires: now.Add(p.cfg.PMTUExpiry), Locked: locked}, now) {
		p.Stats.PMTUEvictions.Inc()
	}
	p.Stats.PMTUUpdates.Inc()
	p.logPMTU(dst, cur, mtu)
	return mtu
}
