package ndp

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/ipv6"
)

// Temporary addresses (RFC 8981), with Config.TempAddresses: beside each
// address SLAAC forms from a prefix, one whose interface identifier is
// random and lives a day or less as preferred, two as valid, so that
// peers cannot follow the host across networks and time by its
// identifier. A new one is formed REGEN_ADVANCE before the current one is
// deprecated; the old one stays, deprecated, for the connections that use
// it, until its valid lifetime ends. Each goes through DAD like any other
// address, and a duplicate is replaced by a new random one
// TEMP_IDGEN_RETRIES times.

// RFC 8981 section 3.8's defaults.
const (
	TempValidLifetime     = 2 * 24 * time.Hour
	TempPreferredLifetime = 24 * time.Hour
	TempIDGenRetries      = 3
	// MaxDesyncFactor is "0.4 * TEMP_PREFERRED_LIFETIME": each temporary
	// address's preferred lifetime is shortened by a random amount up to
	// it, so that hosts started together do not renew together.
	MaxDesyncFactor = TempPreferredLifetime * 4 / 10
)

// tempState is what a temporary address keeps beyond an address's own:
// when it was made and its DESYNC_FACTOR, which bound its lifetimes;
// whether its successor has been formed; and how many duplicates came
// before it. p.mu guards it.
type tempState struct {
	created     time.Time
	desync      time.Duration
	regenerated bool
	retries     uint8
}

// regenAdvance is REGEN_ADVANCE (RFC 8981 section 3.8): "2 +
// (TEMP_IDGEN_RETRIES * DupAddrDetectTransmits * RetransTimer / 1000)"
// seconds, time for a successor to pass DAD, retries included, before its
// predecessor is deprecated. p.mu is held.
func (p *Protocol) regenAdvance() time.Duration {
	return 2*time.Second + time.Duration(TempIDGenRetries*p.cfg.DupAddrDetectTransmits)*p.params.retrans
}

// tempPrefixLocked applies an advertisement of prefix, whose public
// address SLAAC has just formed or refreshed, to its temporary addresses
// (RFC 8981 section 3.4): their lifetimes follow the advertised ones
// without ever passing TEMP_VALID_LIFETIME and TEMP_PREFERRED_LIFETIME -
// DESYNC_FACTOR from their making, and a prefix without a temporary
// address in use, or about to be, gets one. p.mu is held.
func (p *Protocol) tempPrefixLocked(prefix netip.Prefix, valid, preferred time.Duration, now time.Time) {
	if !p.cfg.TempAddresses {
		return
	}
	current := false
	for _, a := range p.addrs {
		if a.origin != fromTemporary || a.state == Duplicate || a.prefix.Masked() != prefix {
			continue
		}
		p.setTempLifetimesLocked(a, valid, preferred, now)
		current = current || a.state.underDAD() || a.state == Preferred && !a.temp.regenerated
	}
	if !current && valid > 0 {
		p.newTempLocked(prefix, valid, preferred, 0, now)
	}
}

// setTempLifetimesLocked sets a temporary address's lifetimes from an
// advertisement's: "the lesser of the Valid Lifetime in the Prefix
// Information option and TEMP_VALID_LIFETIME - age", and likewise the
// preferred one with TEMP_PREFERRED_LIFETIME - DESYNC_FACTOR (section 3.4).
func (p *Protocol) setTempLifetimesLocked(a *address, valid, preferred time.Duration, now time.Time) {
	a.validUntil = earlier(until(now, valid), a.temp.created.Add(TempValidLifetime))
	a.preferredUntil = earlier(until(now, preferred), a.temp.created.Add(TempPreferredLifetime-a.temp.desync))
	if a.state.underDAD() {
		return // DAD arms the timer when it ends
	}
	if a.state == Preferred && !now.Before(a.preferredUntil) {
		a.state = Deprecated
		host, addr := p.host, a.addr()
		p.later(func() { host.SetAddressState(addr, Deprecated) })
	}
	p.armLifetimeLocked(a)
}

// earlier is the earlier of two ends of lifetimes, the zero time being
// never.
func earlier(t, u time.Time) time.Time {
	if t.IsZero() || !u.IsZero() && u.Before(t) {
		return u
	}
	return t
}

// newTempLocked forms a temporary address in prefix (RFC 8981 section
// 3.4) with a new random identifier, unless its preferred lifetime would
// not outlast REGEN_ADVANCE ("the temporary address MUST NOT be
// configured"); retries counts the duplicates it replaces. p.mu is held.
func (p *Protocol) newTempLocked(prefix netip.Prefix, valid, preferred time.Duration, retries uint8, now time.Time) {
	desync := time.Duration(p.env.Rand.IntN(int(MaxDesyncFactor) + 1))
	valid, preferred = min(valid, TempValidLifetime), min(preferred, TempPreferredLifetime-desync)
	if preferred <= p.regenAdvance() || prefix.Bits() != 64 {
		return
	}
	formed := 0
	for _, a := range p.addrs {
		if a.origin == fromSLAAC || a.origin == fromTemporary {
			formed++
		}
	}
	if formed >= p.cfg.MaxAddresses {
		p.Stats.ListsFull.Inc()
		return
	}
	var addr netip.Addr
	for {
		// Section 3.3.1: a random identifier, none of those RFC
		// 5453 reserves, nor one of ours already.
		var iid ipv6.IID
		binary.BigEndian.PutUint64(iid[:], p.env.Rand.Uint64())
		a, err := ipv6.FromPrefix(prefix, iid)
		if err == nil && !iid.IsReserved() && p.addrs[a] == nil {
			addr = a
			break
		}
	}
	p.Stats.TempAddrs.Inc()
	a := p.addAddressLocked(netip.PrefixFrom(addr, prefix.Bits()), fromTemporary, valid, preferred)
	a.temp = tempState{created: now, desync: desync, retries: retries}
}

// tempRegenerateLocked forms a's successor once a is within REGEN_ADVANCE
// of its deprecation (section 3.4: "the node ... generates a new temporary
// address REGEN_ADVANCE time units before a temporary address becomes
// deprecated"), with the prefix's lifetimes as its public address now has
// them; none while the prefix has no public address. p.mu is held.
func (p *Protocol) tempRegenerateLocked(a *address, now time.Time) {
	if a.temp.regenerated || a.preferredUntil.IsZero() || now.Before(a.preferredUntil.Add(-p.regenAdvance())) {
		return
	}
	a.temp.regenerated = true
	if pub := p.publicLocked(a.prefix.Masked()); pub != nil {
		p.newTempLocked(a.prefix.Masked(), remaining(now, pub.validUntil), remaining(now, pub.preferredUntil), 0, now)
	}
}

// tempDuplicateLocked replaces a temporary address DAD found in use by
// another with a new random one, TEMP_IDGEN_RETRIES times at most (section
// 3.4). p.mu is held.
func (p *Protocol) tempDuplicateLocked(a *address) {
	if a.temp.retries >= TempIDGenRetries {
		return
	}
	now := p.env.Clock.Now()
	if pub := p.publicLocked(a.prefix.Masked()); pub != nil {
		p.newTempLocked(a.prefix.Masked(), remaining(now, pub.validUntil), remaining(now, pub.preferredUntil), a.temp.retries+1, now)
	}
}

// publicLocked returns the address SLAAC formed in prefix, if it is ours.
func (p *Protocol) publicLocked(prefix netip.Prefix) *address {
	for _, a := range p.addrs {
		if a.origin == fromSLAAC && a.state != Duplicate && a.prefix.Masked() == prefix {
			return a
		}
	}
	return nil
}
