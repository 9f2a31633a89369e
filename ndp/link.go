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
// DAD again, tentative meanwhile (or optimistic, still in use); a host
// solicits routers again, from its link-local address once that has
// passed (or at once from an optimistic one), until an advertisement
// answers. A router (Advertise) solicits none: once its link-local address
// has passed, it advertises again as an interface that has just become an
// advertising one does (RFC 4861 section 6.2.4: at once, then the first
// MAX_INITIAL_RTR_ADVERTISEMENTS no more than
// MAX_INITIAL_RTR_ADVERT_INTERVAL apart), so that hosts on the link it
// came up on learn it without waiting out MaxRtrAdvInterval.
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
		p.redadLocked(a)
		if a.origin == fromLinkLocal && a.state == Tentative {
			p.llAgain = llReady
		}
	}
	if p.llAgain == nil {
		close(llReady) // no link-local address to wait for
	}
	if a := p.adv; a != nil {
		p.wg.Add(1)
		go p.readvertise(a, llReady)
		return
	}
	if p.cfg.NoRouterSolicitation {
		return
	}
	p.wg.Add(1)
	go p.solicitRouters(llReady, p.raAgain)
}

// readvertise starts an advertising interface's initial advertisements
// over once its link-local address, their source, has passed DAD again.
func (p *Protocol) readvertise(a *advertiser, llReady <-chan struct{}) {
	defer p.wg.Done()
	select {
	case <-llReady:
	case <-a.stop:
		return
	case <-p.done:
		return
	}
	a.mu.Lock()
	a.sent, a.next = 0, p.env.Clock.Now()
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// redadLocked puts an address through DAD again: tentative, so not a
// source nor taking datagrams, or optimistic (Config.OptimisticDAD), so
// still used, until it passes (dadDoneLocked) or is found duplicate
// (duplicateLocked). A run under way is replaced: its solicitations may
// have gone while the link was down. p.mu is held.
func (p *Protocol) redadLocked(a *address) {
	if st := p.dadStateLocked(a.origin); a.state != st {
		a.state = st
		host, addr := p.host, a.addr()
		p.later(func() { host.SetAddressState(addr, st) })
	}
	a.dadGen++
	p.Stats.DADStarted.Inc()
	p.wg.Add(1)
	go p.dad(a, a.dadGen)
}

// linkLocalReadyLocked tells a router solicitation waiting on the
// link-local address's DAD, at start or after the link came up, that it
// may go: DAD is over, or the address is optimistic. p.mu is held.
func (p *Protocol) linkLocalReadyLocked() {
	p.llOnce.Do(func() { close(p.llDone) })
	if p.llAgain != nil {
		close(p.llAgain)
		p.llAgain = nil
	}
}
