package ndp

import (
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/wire"
)

// Routers and prefixes, a host's side (RFC 4861 section 6.3): solicit
// advertisements at start, then keep the default router list and the
// prefix list the advertisements fill, each entry expiring on the clock.

// solicitRouters sends up to MAX_RTR_SOLICITATIONS router solicitations,
// RTR_SOLICITATION_INTERVAL apart, the first after a random delay of up to
// MAX_RTR_SOLICITATION_DELAY, and stops at the first valid advertisement
// (RFC 4861 section 6.3.7), which closes raSeen. It first waits for the
// link-local address to leave DAD (llReady), so that the solicitations
// carry it and our link-layer address, and the routers' answers can be
// unicast to us; a tentative address must not be their source (RFC 4862
// section 5.4).
func (p *Protocol) solicitRouters(llReady, raSeen <-chan struct{}) {
	defer p.wg.Done()
	select {
	case <-llReady:
	case <-raSeen:
		return
	case <-p.done:
		return
	}
	delay := time.Duration(p.env.Rand.IntN(int(MaxRtrSolicitationDelay)))
	for i := 0; i < MaxRtrSolicitations; i++ {
		t := p.env.Clock.NewTimer(delay)
		select {
		case <-t.C():
		case <-raSeen:
			t.Stop()
			return
		case <-p.done:
			t.Stop()
			return
		}
		p.mu.Lock()
		if p.adv != nil {
			// A router solicits no routers (section 6.3.7 is a host's).
			p.mu.Unlock()
			return
		}
		// The source is the link-local address once DAD has made it
		// usable, :: before (section 6.3.7: "the unspecified address
		// ... if the host has no IP address").
		src := p.linkLocalLocked()
		m := p.routerSolicitation(src, p.sllaFromLocked(src))
		p.mu.Unlock()
		p.send(m)
		delay = RtrSolicitationInterval
	}
}

// router is an entry of the default router list; p.mu guards it.
type router struct {
	addr  netip.Addr
	pref  route.Preference
	timer clock.Timer
}

// onLinkPrefix is an entry of the prefix list; p.mu guards it.
type onLinkPrefix struct {
	timer clock.Timer
}

// routerAdvertisement processes a valid RA from src (RFC 4861 section
// 6.3.4). p.mu is held.
func (p *Protocol) routerAdvertisementLocked(src netip.Addr, ra wire.RouterAdvertisement) {
	p.raOnce.Do(func() { close(p.raSeen) })
	if p.raAgain != nil {
		close(p.raAgain) // answers the solicitations of the link coming up
		p.raAgain = nil
	}
	host := p.host
	// "If the received Cur Hop Limit value is non-zero, the host SHOULD
	// set its CurHopLimit variable to the received value."
	if hl := ra.CurHopLimit(); hl != 0 {
		p.later(func() { host.SetHopLimit(hl) })
	}
	// The default router list, with the preference of RFC 4191 section
	// 3 ("If the Router Lifetime is zero, the preference value MUST be
	// set to (00) by the sender and MUST be ignored by the receiver").
	p.setRouterLocked(src, route.PreferenceFromBits(uint8(ra.Preference())), time.Duration(ra.RouterLifetime())*time.Second)
	// "If the received Reachable Time value is non-zero, the host SHOULD
	// set its BaseReachableTime variable to the received value. If the
	// new value differs from the previous value, the host SHOULD
	// re-compute a new random ReachableTime value."
	if rt := time.Duration(ra.ReachableTime()) * time.Millisecond; rt != 0 && rt != p.params.base {
		p.params.setBase(rt)
	}
	if rt := time.Duration(ra.RetransTimer()) * time.Millisecond; rt != 0 {
		p.params.retrans = rt
	}
	// Section 4.2's M and O flags: what DHCPv6 has to give.
	if f := [2]bool{ra.Managed(), ra.Other()}; f != p.configFlags && (f[0] || f[1]) {
		p.configFlags = f
		p.later(func() { host.SetConfigFlags(f[0], f[1]) })
	}
	dnsChanged := false
	for opts := ra.Options(); len(opts) > 0; {
		var o wire.NDOption
		o, opts = opts.Next()
		switch o.Type() {
		case wire.NDOptSourceLinkAddr:
			// "If the advertisement contains a Source Link-Layer
			// Address option, the link-layer address SHOULD be
			// recorded in the Neighbor Cache entry for the router ...
			// and the IsRouter flag in the Neighbor Cache entry MUST
			// be set to TRUE."
			if mac, ok := o.LinkLayerAddr(); ok {
				if n := p.learnLocked(src, mac); n != nil {
					n.router = true
				}
			}
		case wire.NDOptMTU:
			// "hosts SHOULD copy the option's value into LinkMTU so
			// long as the value is greater than or equal to the
			// minimum link MTU [IPv6] and does not exceed the maximum
			// LinkMTU value specified in the link-type-specific
			// document".
			if mtu, ok := o.MTU(); ok && mtu >= wire.IPv6MinMTU && int(mtu) <= p.nic.MTU() {
				p.params.linkMTU = int(mtu) // MLD's reports fit it
				p.later(func() { host.SetLinkMTU(int(mtu)) })
			}
		case wire.NDOptPrefixInfo:
			if pi, ok := o.PrefixInfo(); ok {
				p.prefixInfoLocked(pi)
			}
		case wire.NDOptRouteInfo:
			p.routeInfoLocked(src, o)
		case wire.NDOptRDNSS:
			dnsChanged = p.rdnssLocked(o) || dnsChanged
		case wire.NDOptDNSSL:
			dnsChanged = p.dnsslLocked(o) || dnsChanged
		}
	}
	if dnsChanged {
		p.dnsChangedLocked() // once for all the advertisement's DNS options
	}
	if n := p.cache[cacheKey(src)]; n != nil {
		n.router = true
	}
}

// lifetime converts an advertised lifetime in seconds.
func lifetime(s uint32) time.Duration {
	if s == wire.NDInfiniteLifetime {
		return Infinite
	}
	return time.Duration(s) * time.Second
}

// prefixInfoLocked applies a Prefix Information option: on-link
// determination (RFC 4861 section 6.3.4) and address autoconfiguration
// (RFC 4862 section 5.5.3).
func (p *Protocol) prefixInfoLocked(pi wire.NDPrefixInfo) {
	if pi.PrefixLen() > 128 {
		p.Stats.PrefixesIgnored.Inc()
		return
	}
	prefix := pi.Prefix().Masked()
	if prefix.Addr().IsLinkLocalUnicast() {
		// RFC 4861 section 6.3.4: "If the prefix is the link-local
		// prefix, silently ignore the Prefix Information option";
		// RFC 4862 section 5.5.3 (b) the same.
		p.Stats.PrefixesIgnored.Inc()
		return
	}
	valid, preferred := lifetime(pi.ValidLifetime()), lifetime(pi.PreferredLifetime())
	if pi.OnLink() {
		p.setOnLinkLocked(prefix, valid)
	}
	if !pi.Autonomous() || p.cfg.NoSLAAC {
		return // RFC 4862 section 5.5.3 (a)
	}
	if preferred > valid {
		// (c) "If the preferred lifetime is greater than the valid
		// lifetime, silently ignore the Prefix Information option."
		p.Stats.PrefixesIgnored.Inc()
		return
	}
	p.slaacLocked(prefix, valid, preferred)
}

// setOnLinkLocked adds, refreshes or (with lifetime zero) times out an
// on-link prefix (RFC 4861 section 6.3.4: "If the prefix is not already in
// the Prefix List, and the Prefix Information option's Valid Lifetime
// field is non-zero, create a new entry ... If the prefix is already
// present in the host's Prefix List ..., reset its invalidation timer to
// the Valid Lifetime value ... If the new Lifetime value is zero, time-out
// the prefix immediately").
func (p *Protocol) setOnLinkLocked(prefix netip.Prefix, valid time.Duration) {
	o := p.onLink[prefix]
	if o == nil && valid == 0 {
		return
	}
	if o != nil {
		o.timer.Stop()
	}
	host := p.host
	if valid == 0 {
		delete(p.onLink, prefix)
		p.later(func() { host.SetOnLink(prefix, 0) })
		return
	}
	if o == nil {
		if len(p.onLink) >= p.cfg.MaxPrefixes {
			p.Stats.ListsFull.Inc()
			return
		}
		o = &onLinkPrefix{}
		p.onLink[prefix] = o
	}
	o.timer = p.expiry(valid, func() {
		if p.onLink[prefix] == o {
			delete(p.onLink, prefix)
			p.later(func() { host.SetOnLink(prefix, 0) })
		}
	})
	p.later(func() { host.SetOnLink(prefix, valid) })
}

// routeKey names a route a Route Information option gives: a prefix
// through a router.
type routeKey struct {
	prefix netip.Prefix
	router netip.Addr
}

// routeInfo is an entry of the routes Route Information options give;
// p.mu guards it.
type routeInfo struct {
	pref  route.Preference
	timer clock.Timer
}

// routeInfoLocked applies a Route Information option from router (RFC
// 4191 section 3.1, a type C host's): the prefix is reached through the
// router with the option's preference until its Route Lifetime ends; zero
// removes it. Ignored, and counted: a malformed option or one with the
// reserved preference (section 2.3), a link-local or multicast prefix,
// which no router forwards to, and ::/0, which the default router list
// keeps with the advertisement's own preference and lifetime.
func (p *Protocol) routeInfoLocked(router netip.Addr, o wire.NDOption) {
	ri, ok := o.RouteInfo()
	a := ri.Prefix.Addr()
	if !ok || ri.Prefix.Bits() == 0 || a.IsLinkLocalUnicast() || a.IsMulticast() {
		p.Stats.RouteInfoIgnored.Inc()
		return
	}
	key := routeKey{ri.Prefix, router}
	r := p.routeInfos[key]
	life := lifetime(ri.Lifetime)
	if life == 0 {
		if r != nil {
			p.removeRouteInfoLocked(key)
		}
		return
	}
	if r == nil {
		if len(p.routeInfos) >= p.cfg.MaxPrefixes {
			p.Stats.ListsFull.Inc()
			return
		}
		r = &routeInfo{}
		p.routeInfos[key] = r
	} else {
		r.timer.Stop()
		if pref := route.PreferenceFromBits(uint8(ri.Preference)); pref != r.pref {
			// The table keys routes by preference too: the old
			// one goes before the new is added.
			old := r.pref
			host := p.host
			p.later(func() { host.SetRoute(key.prefix, router, old, 0) })
		}
	}
	r.pref = route.PreferenceFromBits(uint8(ri.Preference))
	r.timer = p.expiry(life, func() {
		if p.routeInfos[key] == r {
			p.removeRouteInfoLocked(key)
		}
	})
	host, pref := p.host, r.pref
	p.later(func() { host.SetRoute(key.prefix, router, pref, life) })
}

func (p *Protocol) removeRouteInfoLocked(key routeKey) {
	r := p.routeInfos[key]
	r.timer.Stop()
	delete(p.routeInfos, key)
	host, pref := p.host, r.pref
	p.later(func() { host.SetRoute(key.prefix, key.router, pref, 0) })
}

// setRouterLocked adds, refreshes or (with lifetime zero) removes a
// default router (RFC 4861 section 6.3.4).
func (p *Protocol) setRouterLocked(addr netip.Addr, pref route.Preference, life time.Duration) {
	r := p.routers[addr]
	if life == 0 {
		if r != nil {
			p.removeRouterLocked(addr)
		}
		return
	}
	if r == nil {
		if len(p.routers) >= p.cfg.MaxRouters {
			p.Stats.ListsFull.Inc()
			return
		}
		r = &router{addr: addr}
		p.routers[addr] = r
	} else {
		r.timer.Stop()
	}
	r.pref = pref
	r.timer = p.expiry(life, func() {
		if p.routers[addr] == r {
			p.removeRouterLocked(addr)
		}
	})
	host := p.host
	p.later(func() { host.SetDefaultRouter(addr, pref, life) })
}

func (p *Protocol) removeRouterLocked(addr netip.Addr) {
	r := p.routers[addr]
	if r == nil {
		return
	}
	r.timer.Stop()
	delete(p.routers, addr)
	host, pref := p.host, r.pref
	p.later(func() { host.SetDefaultRouter(addr, pref, 0) })
}

// expiry runs f under p.mu once d has passed; an Infinite d never does.
func (p *Protocol) expiry(d time.Duration, f func()) clock.Timer {
	if d == Infinite {
		return stopped{}
	}
	return p.env.Clock.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.unlock()
		if !p.closed {
			f()
		}
	})
}

// stopped is the timer of what never expires.
type stopped struct{}

func (stopped) C() <-chan time.Time      { return nil }
func (stopped) Stop() bool               { return false }
func (stopped) Reset(time.Duration) bool { return false }

// Router is a default router as Routers reports it.
type Router struct {
	Addr netip.Addr
	Pref route.Preference
}

// Routers returns the default router list.
func (p *Protocol) Routers() []Router {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Router, 0, len(p.routers))
	for _, r := range p.routers {
		out = append(out, Router{r.addr, r.pref})
	}
	return out
}

// redirectLocked applies a valid Redirect (RFC 4861 section 8.3): the
// target's link-layer address, if given, goes into the cache; a target
// other than the destination is a router; and the destination cache is
// the IPv6 layer's to update. p.mu is held.
func (p *Protocol) redirectLocked(r wire.Redirect) {
	target, dst := r.Target(), r.Dst()
	for opts := r.Options(); len(opts) > 0; {
		var o wire.NDOption
		o, opts = opts.Next()
		if mac, ok := o.LinkLayerAddr(); ok && o.Type() == wire.NDOptTargetLinkAddr {
			// "If the redirect contains a Target Link-Layer Address
			// option, the host either creates or updates the Neighbor
			// Cache entry for the target. In both cases, the cached
			// link-layer address is copied from the Target Link-Layer
			// Address option. If a Neighbor Cache entry is created for
			// the target, its reachability state MUST be set to STALE
			// ... If a cache entry already existed and it is updated
			// with a different link-layer address, its reachability
			// state MUST also be set to STALE."
			p.learnLocked(target, mac)
		}
	}
	if target != dst {
		// "If the Target Address is not the same as the Destination
		// Address, the host MUST set IsRouter to TRUE for the target."
		if n := p.cache[cacheKey(target)]; n != nil {
			n.router = true
		}
	}
	host := p.host
	p.later(func() { host.Redirect(dst, target) })
}
