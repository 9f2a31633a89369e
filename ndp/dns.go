package ndp

import (
	"net/netip"
	"slices"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/wire"
)

// DNS configuration from router advertisements, a host's side (RFC 8106
// section 5.3.1): the Recursive DNS Server and DNS Search List options
// fill two short lists, the DNS Server List and the DNS Search List of
// section 6.2, each entry expiring on the clock as routers and prefixes do.
// The host is told both lists whenever what they hold changes, so that a
// host on an IPv6-only link, configured by SLAAC, can resolve names.

// DNS is what routers advertised of DNS: the recursive servers, a
// link-local one zoned with the NIC's name, and the search domains, each
// list the most recently advertised first.
type DNS struct {
	Servers []netip.Addr
	Search  []string
}

// dnsEntry is one server or domain of a dnsList; p.mu guards it.
type dnsEntry[T comparable] struct {
	v       T
	expires time.Time // the zero time for what never expires
	timer   clock.Timer
}

// dnsList is the DNS Server List or the DNS Search List (RFC 8106 section
// 6.2), the most recently advertised first; p.mu guards it.
type dnsList[T comparable] struct {
	entries []*dnsEntry[T]
}

// values returns the list's servers or domains, in order.
func (l *dnsList[T]) values() []T {
	out := make([]T, len(l.entries))
	for i, e := range l.entries {
		out[i] = e.v
	}
	return out
}

func (l *dnsList[T]) remove(v T) bool {
	i := slices.IndexFunc(l.entries, func(e *dnsEntry[T]) bool { return e.v == v })
	if i < 0 {
		return false
	}
	l.entries[i].timer.Stop()
	l.entries = slices.Delete(l.entries, i, i+1)
	return true
}

func (l *dnsList[T]) stop() {
	for _, e := range l.entries {
		e.timer.Stop()
	}
}

// updateDNSLocked applies one option's values with their lifetime: zero
// removes them ("the RDNSS addresses MUST no longer be used", section 5.1);
// otherwise each goes, in the option's order, to the front of the list
// ("the latest received RDNSS or DNSSL is more preferred to the old ones",
// section 5.3.1) with its expiry reset. A list past max loses the entry
// that would expire first (section 6.2), the least preferred of those
// that would expire together. It reports whether the values or their order
// changed.
func updateDNSLocked[T comparable](p *Protocol, l *dnsList[T], vals []T, life time.Duration, max int) bool {
	before := l.values()
	if life == 0 {
		for _, v := range vals {
			l.remove(v)
		}
		return !slices.Equal(before, l.values())
	}
	var expires time.Time
	if life != Infinite {
		expires = p.env.Clock.Now().Add(life)
	}
	for _, v := range slices.Backward(vals) {
		l.remove(v)
		e := &dnsEntry[T]{v: v, expires: expires}
		e.timer = p.expiry(life, func() {
			if i := slices.Index(l.entries, e); i >= 0 {
				l.entries = slices.Delete(l.entries, i, i+1)
				p.dnsChangedLocked()
			}
		})
		l.entries = slices.Insert(l.entries, 0, e)
	}
	for len(l.entries) > max {
		first := len(l.entries) - 1
		for i := first - 1; i >= 0; i-- {
			if e := l.entries[i]; !e.expires.IsZero() && (l.entries[first].expires.IsZero() || e.expires.Before(l.entries[first].expires)) {
				first = i
			}
		}
		l.entries[first].timer.Stop()
		l.entries = slices.Delete(l.entries, first, first+1)
		p.Stats.DNSReplaced.Inc()
	}
	return !slices.Equal(before, l.values())
}

// rdnssLocked applies a Recursive DNS Server option. It reports whether
// the DNS Server List changed.
func (p *Protocol) rdnssLocked(o wire.NDOption) bool {
	life, servers, ok := o.RDNSS()
	if !ok {
		p.Stats.DNSOptionsIgnored.Inc()
		return false
	}
	for i, s := range servers {
		// Section 5.3.1: "the addresses should be unicast addresses";
		// an option that fails the checks is discarded whole.
		if !s.Is6() || s.Is4In6() || s.IsUnspecified() || s.IsMulticast() || s.IsLoopback() {
			p.Stats.DNSOptionsIgnored.Inc()
			return false
		}
		if s.IsLinkLocalUnicast() {
			servers[i] = s.WithZone(p.nic.Name())
		}
	}
	return updateDNSLocked(p, &p.dnsServers, servers, lifetime(life), p.cfg.MaxDNSServers)
}

// dnsslLocked applies a DNS Search List option. It reports whether the
// DNS Search List changed.
func (p *Protocol) dnsslLocked(o wire.NDOption) bool {
	life, domains, ok := o.DNSSL()
	if !ok {
		p.Stats.DNSOptionsIgnored.Inc()
		return false
	}
	return updateDNSLocked(p, &p.dnsSearch, domains, lifetime(life), p.cfg.MaxDNSSearch)
}

// dnsChangedLocked tells the host both lists as they now are.
func (p *Protocol) dnsChangedLocked() {
	d, host := p.dnsLocked(), p.host
	p.later(func() { host.SetDNS(d) })
}

func (p *Protocol) dnsLocked() DNS {
	return DNS{Servers: p.dnsServers.values(), Search: p.dnsSearch.values()}
}

// DNS returns the DNS configuration routers have advertised, as the lists
// hold it now.
func (p *Protocol) DNS() DNS {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dnsLocked()
}
