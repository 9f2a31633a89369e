package ndp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// Routers and prefixes, a router's side (RFC 4861 section 6.2): once
// Advertise has made the interface an advertising interface, ndp sends
// Router Advertisements to all-nodes, unsolicited at random intervals
// (section 6.2.4) and in answer to Router Solicitations (section 6.2.6),
// naming the router's prefixes, the link MTU and, by RFC 8106, its DNS
// servers, and marks its Neighbor Advertisements with the Router flag
// (section 7.2.4's IsRouter). It stops soliciting routers and leaves other
// routers' advertisements unprocessed (section 6.2.7: a router does not
// configure itself from them). What the gateway package needs to be a
// guest's IPv6 router; the host's side is router.go.

// Router constants of RFC 4861 section 10.
const (
	MaxInitialRtrAdvertInterval = 16 * time.Second
	MaxInitialRtrAdvertisements = 3
	MaxFinalRtrAdvertisements   = 3
	MinDelayBetweenRAs          = 3 * time.Second
	MaxRADelayTime              = 500 * time.Millisecond
)

// RouterConfig is what an advertising interface advertises: the router
// configuration variables of RFC 4861 section 6.2.1, and RFC 8106's DNS
// servers. Zero fields take the section's defaults.
type RouterConfig struct {
	// MaxRtrAdvInterval and MinRtrAdvInterval bound the time between
	// unsolicited advertisements (600 s; 0.33 times the maximum).
	MaxRtrAdvInterval, MinRtrAdvInterval time.Duration
	// DefaultLifetime is AdvDefaultLifetime, the Router Lifetime
	// advertised (three times MaxRtrAdvInterval).
	DefaultLifetime time.Duration
	// CurHopLimit is AdvCurHopLimit (64, Linux's default hop limit).
	CurHopLimit uint8
	// LinkMTU is AdvLinkMTU, sent in an MTU option (the NIC's MTU).
	LinkMTU int
	// Prefixes is AdvPrefixList.
	Prefixes []AdvPrefix
	// DNSServers are advertised in a Recursive DNS Server option (RFC
	// 8106 section 5.1), with DNSLifetime (three times
	// MaxRtrAdvInterval, section 5.1's "SHOULD by default be at least
	// 3 * MaxRtrAdvInterval").
	DNSServers  []netip.Addr
	DNSLifetime time.Duration
	// DNSSearch are advertised in a DNS Search List option (RFC 8106
	// section 5.2) with DNSLifetime: domain names, dotted, without the
	// trailing dot.
	DNSSearch []string
}

// AdvPrefix is a prefix of AdvPrefixList (section 6.2.1): on-link and
// autonomous by default for SLAAC (RFC 4862 section 5.5.3), with
// AdvValidLifetime (30 days) and AdvPreferredLifetime (7 days).
type AdvPrefix struct {
	Prefix                       netip.Prefix
	NotOnLink, NotAutonomous     bool
	ValidLifetime, PreferredLife time.Duration
}

func (c *RouterConfig) setDefaults(nicMTU int) error {
	if c.MaxRtrAdvInterval == 0 {
		c.MaxRtrAdvInterval = 600 * time.Second
	}
	// "MUST be no less than 4 seconds and no greater than 1800 seconds."
	if c.MaxRtrAdvInterval < 4*time.Second || c.MaxRtrAdvInterval > 1800*time.Second {
		return fmt.Errorf("MaxRtrAdvInterval %v: not from 4 s to 1800 s (RFC 4861 section 6.2.1)", c.MaxRtrAdvInterval)
	}
	if c.MinRtrAdvInterval == 0 {
		c.MinRtrAdvInterval = c.MaxRtrAdvInterval * 33 / 100
	}
	// "MUST be no less than 3 seconds and no greater than .75 *
	// MaxRtrAdvInterval."
	if c.MinRtrAdvInterval < 3*time.Second || c.MinRtrAdvInterval > c.MaxRtrAdvInterval*3/4 {
		return fmt.Errorf("MinRtrAdvInterval %v: not from 3 s to 0.75 MaxRtrAdvInterval (RFC 4861 section 6.2.1)", c.MinRtrAdvInterval)
	}
	if c.DefaultLifetime == 0 {
		c.DefaultLifetime = 3 * c.MaxRtrAdvInterval
	}
	// "MUST be either zero or between MaxRtrAdvInterval and 9000
	// seconds."
	if c.DefaultLifetime < c.MaxRtrAdvInterval || c.DefaultLifetime > 9000*time.Second {
		return fmt.Errorf("DefaultLifetime %v: not from MaxRtrAdvInterval to 9000 s (RFC 4861 section 6.2.1)", c.DefaultLifetime)
	}
	if c.CurHopLimit == 0 {
		c.CurHopLimit = 64
	}
	if c.LinkMTU == 0 {
		c.LinkMTU = nicMTU
	}
	if c.LinkMTU < wire.IPv6MinMTU || c.LinkMTU > nicMTU {
		return fmt.Errorf("link MTU %d: not from %d to the NIC's %d", c.LinkMTU, wire.IPv6MinMTU, nicMTU)
	}
	if c.DNSLifetime == 0 {
		c.DNSLifetime = 3 * c.MaxRtrAdvInterval
	}
	for i := range c.Prefixes {
		a := &c.Prefixes[i]
		if !a.Prefix.IsValid() || !a.Prefix.Addr().Is6() || a.Prefix.Addr().IsLinkLocalUnicast() {
			return fmt.Errorf("prefix %v: not an IPv6 prefix a router advertises", a.Prefix)
		}
		a.Prefix = a.Prefix.Masked()
		if a.ValidLifetime == 0 {
			a.ValidLifetime = 30 * 24 * time.Hour
		}
		if a.PreferredLife == 0 {
			a.PreferredLife = 7 * 24 * time.Hour
		}
		if a.PreferredLife > a.ValidLifetime {
			return fmt.Errorf("prefix %v: preferred lifetime past the valid one (RFC 4862 section 5.5.3 c)", a.Prefix)
		}
	}
	for _, s := range c.DNSServers {
		if !s.Is6() || s.Is4In6() || s.IsMulticast() || s.IsUnspecified() {
			return fmt.Errorf("DNS server %v: not an IPv6 unicast address", s)
		}
	}
	c.DNSSearch = slices.Clone(c.DNSSearch) // the caller's, trimmed below
	for i, d := range c.DNSSearch {
		d = strings.TrimSuffix(d, ".")
		if len(d) == 0 || len(d) > 253 || slices.ContainsFunc(strings.Split(d, "."), func(l string) bool { return len(l) == 0 || len(l) > 63 }) {
			return fmt.Errorf("DNS search domain %q: not a domain name of labels of 1 to 63 bytes, 253 in all", d)
		}
		c.DNSSearch[i] = d
	}
	// An option's length is a byte of 8-octet units.
	if len(c.DNSServers) > 0 && wire.NDRDNSSLen(len(c.DNSServers)) > 255*wire.NDOptUnit ||
		len(c.DNSSearch) > 0 && wire.NDDNSSLLen(c.DNSSearch) > 255*wire.NDOptUnit {
		return errors.New("DNS servers or search domains: more than an option holds")
	}
	return nil
}

// advertiser is an advertising interface's state: the configuration, and
// when the next multicast advertisement goes.
type advertiser struct {
	cfg  RouterConfig
	wake chan struct{} // capacity one: next has moved earlier
	// stop asks the goroutine to cease advertising (StopAdvertising),
	// which closes stopped once its final advertisement is sent.
	stop, stopped chan struct{}
	stopOnce      sync.Once

	mu       sync.Mutex
	next     time.Time // the next multicast advertisement
	last     time.Time // the last one; zero before the first
	sent     int       // multicast advertisements sent
	stopping bool
}

// errAdvertising is returned by a second Advertise, errClosed by one
// after Close.
var (
	errAdvertising = errors.New("already advertising")
	errClosed      = errors.New("neighbour discovery closed")
)

// Advertise makes the interface an advertising one (RFC 4861 section 6.2.2)
// with cfg: a router for the link, as a user-mode gateway is for its
// guest. It is called once, after Start; Close sends the final
// advertisements of section 6.2.5.
func (p *Protocol) Advertise(cfg RouterConfig) error {
	if err := cfg.setDefaults(p.nic.MTU()); err != nil {
		return fmt.Errorf("ndp: advertise on %s: %w", p.nic.Name(), err)
	}
	if p.cfg.OptimisticDAD {
		// A router's advertisements come from its link-local address
		// once DAD has passed (section 6.2.2), and its neighbours
		// override their entries on its word.
		return fmt.Errorf("ndp: advertise on %s: a router does not use optimistic DAD (Config.OptimisticDAD)", p.nic.Name())
	}
	a := &advertiser{cfg: cfg, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return fmt.Errorf("ndp: advertise on %s: %w", p.nic.Name(), errClosed)
	case p.adv != nil:
		p.mu.Unlock()
		return fmt.Errorf("ndp: advertise on %s: %w", p.nic.Name(), errAdvertising)
	}
	p.adv = a
	p.isRouter.Store(true)
	p.mu.Unlock()
	p.wg.Add(1)
	go p.advertise(a)
	return nil
}

// advertise sends the multicast advertisements until ndp closes. Section
// 6.2.2: the first goes once the interface is advertising; it waits for
// the link-local address to leave DAD, since "a router MUST use its
// link-local address as the source" (section 6.1.2's check on the
// receiver's side) and a tentative address may be no source (RFC 4862
// section 5.4).
func (p *Protocol) advertise(a *advertiser) {
	defer p.wg.Done()
	defer close(a.stopped)
	select {
	case <-p.llDone:
	case <-p.done:
		return
	case <-a.stop:
		return // nothing advertised, nothing to withdraw
	}
	now := p.env.Clock.Now()
	a.mu.Lock()
	if a.next.IsZero() || a.next.After(now) {
		a.next = now
	}
	a.mu.Unlock()
	var t clock.Timer
	for {
		a.mu.Lock()
		wait := a.next.Sub(p.env.Clock.Now())
		a.mu.Unlock()
		if t == nil {
			t = p.env.Clock.NewTimer(wait)
		} else {
			t.Reset(wait)
		}
		select {
		case <-t.C():
			p.sendAdvertisement(a, false)
		case <-a.wake:
			if !t.Stop() {
				select {
				case <-t.C():
				default:
				}
			}
		case <-p.done:
			t.Stop()
			p.sendFinalAdvertisements(a)
			return
		case <-a.stop:
			t.Stop()
			p.sendFinalAdvertisements(a)
			return
		}
	}
}

// StopAdvertising makes an advertising interface cease to (section
// 6.2.5): it returns once the final advertisement, with a Router Lifetime
// of zero, is handed to the NIC, so that a stack about to close its link
// sends it while the link still carries it. Close does the same for an
// interface still advertising. It does nothing on a host.
func (p *Protocol) StopAdvertising() {
	p.mu.Lock()
	a := p.adv
	p.mu.Unlock()
	if a == nil {
		return
	}
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.stopped
}

// sendAdvertisement sends a multicast advertisement if its time has come,
// and schedules the next (section 6.2.4): "a random value between the
// configured MinRtrAdvInterval and MaxRtrAdvInterval", no more than
// MAX_INITIAL_RTR_ADVERT_INTERVAL for the first
// MAX_INITIAL_RTR_ADVERTISEMENTS, "to speed convergence".
func (p *Protocol) sendAdvertisement(a *advertiser, final bool) {
	now := p.env.Clock.Now()
	a.mu.Lock()
	if !final && now.Before(a.next) {
		a.mu.Unlock()
		return // moved later by a solicited one sent meanwhile
	}
	a.last = now
	a.sent++
	lo, hi := a.cfg.MinRtrAdvInterval, a.cfg.MaxRtrAdvInterval
	d := lo + time.Duration(p.env.Rand.IntN(int(hi-lo)+1))
	if a.sent < MaxInitialRtrAdvertisements && d > MaxInitialRtrAdvertInterval {
		d = MaxInitialRtrAdvertInterval
	}
	a.next = now.Add(d)
	a.mu.Unlock()
	p.mu.Lock()
	src := p.linkLocalLocked()
	p.mu.Unlock()
	if src.IsUnspecified() {
		return // the link-local address went (a duplicate found late)
	}
	life := a.cfg.DefaultLifetime
	if final {
		life = 0
	}
	p.send(p.routerAdvertisement(a, src, life))
}

// sendFinalAdvertisements sends, as an interface ceases to advertise, a
// few advertisements with a Router Lifetime of zero, so that hosts stop
// using the router at once rather than when its lifetime ends (section
// 6.2.5). GoNet sends one: the NIC is closing, and a guest that misses it
// learns the same from neighbour unreachability detection.
func (p *Protocol) sendFinalAdvertisements(a *advertiser) {
	p.sendAdvertisement(a, true)
}

// solicitedLocked schedules the answer to a valid Router Solicitation
// (section 6.2.6): a multicast advertisement after a random delay of up
// to MAX_RA_DELAY_TIME, unless one is due sooner anyway, and never within
// MIN_DELAY_BETWEEN_RAS of the last one. p.mu is held.
func (p *Protocol) solicitedLocked(a *advertiser) {
	now := p.env.Clock.Now()
	at := now.Add(time.Duration(p.env.Rand.IntN(int(MaxRADelayTime) + 1)))
	a.mu.Lock()
	if !a.last.IsZero() && at.Before(a.last.Add(MinDelayBetweenRAs)) {
		at = a.last.Add(MinDelayBetweenRAs)
	}
	moved := a.next.IsZero() || at.Before(a.next)
	if moved {
		a.next = at
	}
	a.mu.Unlock()
	if moved {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// routerAdvertisement builds an advertisement from src, the link-local
// address, to all-nodes (section 6.2.3): the fixed fields, our link-layer
// address, the MTU, each prefix, the DNS servers and the search domains.
func (p *Protocol) routerAdvertisement(a *advertiser, src netip.Addr, life time.Duration) message {
	c := &a.cfg
	n := wire.RouterAdvertisementLen + wire.NDLinkLayerAddrLen + wire.NDMTULen + len(c.Prefixes)*wire.NDPrefixInfoLen
	if len(c.DNSServers) > 0 {
		n += wire.NDRDNSSLen(len(c.DNSServers))
	}
	if len(c.DNSSearch) > 0 {
		n += wire.NDDNSSLLen(c.DNSSearch)
	}
	m := p.newMessage(src, ipv6.AllNodes, n, false)
	b := m.icmp
	wire.EncodeRouterAdvertisement(b, &wire.RouterAdvertisementFields{
		CurHopLimit:    c.CurHopLimit,
		RouterLifetime: uint16(life / time.Second),
	})
	off := wire.RouterAdvertisementLen
	wire.EncodeNDLinkLayerAddr(b[off:], wire.NDOptSourceLinkAddr, p.nic.MAC())
	off += wire.NDLinkLayerAddrLen
	wire.EncodeNDMTU(b[off:], uint32(c.LinkMTU))
	off += wire.NDMTULen
	for _, pr := range c.Prefixes {
		wire.EncodeNDPrefixInfo(b[off:], &wire.NDPrefixInfoFields{
			Prefix:            pr.Prefix,
			OnLink:            !pr.NotOnLink,
			Autonomous:        !pr.NotAutonomous,
			ValidLifetime:     seconds(pr.ValidLifetime),
			PreferredLifetime: seconds(pr.PreferredLife),
		})
		off += wire.NDPrefixInfoLen
	}
	if len(c.DNSServers) > 0 {
		wire.EncodeNDRDNSS(b[off:], seconds(c.DNSLifetime), c.DNSServers)
		off += wire.NDRDNSSLen(len(c.DNSServers))
	}
	if len(c.DNSSearch) > 0 {
		wire.EncodeNDDNSSL(b[off:], seconds(c.DNSLifetime), c.DNSSearch)
	}
	p.Stats.OutRouterAdvertisements.Inc()
	return m
}

// seconds is a lifetime as advertised: Infinite as all ones.
func seconds(d time.Duration) uint32 {
	if d == Infinite || d/time.Second >= wire.NDInfiniteLifetime {
		return wire.NDInfiniteLifetime
	}
	return uint32(d / time.Second)
}

// handleRS validates a Router Solicitation (section 6.1.1) and, on an
// advertising interface, answers it (section 6.2.6); a host discards it.
func (p *Protocol) handleRS(h ip.Header, m wire.ICMPv6) {
	rs, ok := wire.ParseRouterSolicitation(m)
	if !ok {
		p.Stats.InMalformed.Inc()
		return
	}
	mac, hasMAC := linkAddr(rs.Options(), wire.NDOptSourceLinkAddr)
	// "If the IP source address is the unspecified address, there is no
	// source link-layer address option in the message."
	if h.Src.IsUnspecified() && hasSLLA(rs.Options()) {
		p.Stats.InBadSource.Inc()
		return
	}
	p.mu.Lock()
	defer p.unlock()
	a := p.adv
	if a == nil || p.closed {
		// "Hosts MUST silently discard any received Router
		// Solicitation messages."
		return
	}
	// "Router Solicitations in which the Source Address is the
	// unspecified address MUST NOT update the router's Neighbor Cache;
	// solicitations with a proper source address update the Neighbor
	// Cache as follows. If the router already has a Neighbor Cache entry
	// for the solicitation's sender, the solicitation contains a Source
	// Link-Layer Address option, and the received link-layer address
	// differs from that already in the cache, then the link-layer
	// address SHOULD be updated in the appropriate Neighbor Cache entry,
	// and its reachability state MUST also be set to STALE. If there is
	// no existing Neighbor Cache entry for the solicitation's sender, the
	// router creates one, installs the link-layer address and sets its
	// reachability state to STALE."
	if hasMAC && !h.Src.IsUnspecified() {
		p.learnLocked(h.Src, mac)
	}
	p.solicitedLocked(a)
}
