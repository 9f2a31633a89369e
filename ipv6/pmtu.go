package ipv6

import (
	"net/netip"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/pathmtu"
	"github.com/gonetstack/gonet/wire"
)

// Path MTU discovery for IPv6 (RFC 8201), the host's part: path MTUs per
// destination learnt from Packet Too Big messages that a transport or
// ICMPv6 has validated, in the cache IPv4 shares (package pathmtu), and
// consulted by every route lookup.
//
// IPv6 routers never fragment, so unlike IPv4's there is no "locked" MTU
// to send without DF below: a report below 1280 bytes lowers the path MTU
// to 1280 only (RFC 8201 section 4: a node must not go below the minimum
// link MTU), and the datagrams then go whole at 1280, never as atomic
// fragments (RFC 8021, which removed RFC 2460's rule that asked for them).

type pmtuCache struct{ c pathmtu.Cache }

type pmtuEntry struct{ mtu int }

func (c *pmtuCache) lookup(dst netip.Addr, clk clock.Clock) (pmtuEntry, bool) {
	e, ok := c.c.Lookup(dst, clk)
	return pmtuEntry{e.MTU}, ok
}

// UpdatePMTU takes a validated Packet Too Big report (RFC 4443 section
// 3.2): a datagram to dst met a link of the given MTU. A report that would
// not lower the path MTU is ignored (RFC 8201 section 4: the estimate only
// falls until it expires); one below 1280 is raised to it. quotedLen, the
// length of the datagram quoted, is unused: a Packet Too Big always
// carries the MTU, so IPv4's guess from RFC 1191's plateaus has no IPv6
// counterpart. It returns the path MTU in force afterwards, zero for a
// destination with no route.
func (p *Protocol) UpdatePMTU(dst netip.Addr, mtu, quotedLen int) int {
	ri, err := p.Route(dst)
	if err != nil || ri.Local {
		p.Stats.PMTUIgnored.Inc()
		return 0
	}
	cur := ri.MTU
	if mtu < wire.IPv6MinMTU {
		p.Stats.PMTUClamped.Inc()
		mtu = wire.IPv6MinMTU
	}
	if mtu >= cur {
		p.Stats.PMTUIgnored.Inc()
		return cur
	}
	now := p.env.Clock.Now()
	if p.pmtu.c.Store(dst.WithZone(""), pathmtu.Entry{MTU: mtu, Expires: now.Add(p.cfg.PMTUExpiry)}, now) {
		p.Stats.PMTUEvictions.Inc()
	}
	p.Stats.PMTUUpdates.Inc()
	if p.debug() {
		p.logPMTU(dst.String(), cur, mtu)
	}
	return mtu
}
