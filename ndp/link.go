package ndp

import (
	"maps"
	"net/netip"
	"slices"
)

// The link coming up (link.StateWatcher): RFC 4862 section 5.3 counts "the
// interface is reinitialized after a temporary interface failure" and "the
// interface attaches to a link" among the times an interface becomes
// enabled, and every address then goes through duplicate address
// detection before it is used (section 5.4): what the link carried before
// it went down, if it carried anything, may have changed, and a DAD run
// while it was down probed nobody (a TAP's solicitations before its kernel
// side is up go nowhere). Routers are solicited again for the same reason
// (RFC 4861 section 6.3.7: "when an interface becomes enabled"). Linux does
// both when a link's carrier comes back.

// LinkUp is told that the link came up. Every address in use goes through
// DAD again, tentative meanwhile; a host solicits routers again, from its
// link-local address once that has passed, until an advertisement
// answers. A router (Advertise) solicits none: its own advertisements go
// on.
func (p *Protocol) LinkUp() {
	p.mu.Lock()
	defer p.unlock()
	if p.closed {
		return
	}
	p.Stats.LinkUps.Inc()
	// Until an advertisement answers, or the link comes up again.
	if p.raAgain != nil {
		close(p.raAgain)
	}
	p.raAgain = make(chan struct{})
	llReady := make(chan struct{})
	p.llAgain = nil
	for _, addr := range slices.SortedFunc(maps.Keys(p.addrs), netip.Addr.Compare) {
		a := p.addrs[addr]
		if a.state == Duplicate || p.cfg.NoDAD {
			continue
		}
		if a.origin == fromLinkLocal {
			p.llAgain = llReady
		}
		p.redadLocked(a)
	}
	if p.llAgain == nil {
		close(llReady) // no link-local address to wait for
	}
	if p.cfg.NoRouterSolicitation || p.adv != nil {
		return
	}
	p.wg.Add(1)
	go p.solicitRouters(llReady, p.raAgain)
}

// redadLocked puts an address through DAD again: tentative, so not a
// source nor taking datagrams, until it passes (dadDoneLocked) or is found
// duplicate (duplicateLocked). A run under way for a tentative one is
// replaced: its solicitations may have gone while the link was down.
// p.mu is held.
func (p *Protocol) redadLocked(a *address) {
	if a.state != Tentative {
		a.state = Tentative
		host, addr := p.host, a.addr()
		p.later(func() { host.SetAddressState(addr, Tentative) })
	}
	a.dadGen++
	p.Stats.DADStarted.Inc()
	p.wg.Add(1)
	go p.dad(a, a.dadGen)
}

// linkLocalDADDoneLocked tells a router solicitation waiting on the
// link-local address's DAD after the link came up that it is over. p.mu
// is held.
func (p *Protocol) linkLocalDADDoneLocked() {
	p.llOnce.Do(func() { close(p.llDone) })
	if p.llAgain != nil {
		close(p.llAgain)
		p.llAgain = nil
	}
}
