package ndp

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// Addresses (RFC 4862): the link-local address formed at start (section
// 5.3), static ones the user adds, and those formed from advertised
// prefixes (section 5.5.3). Each is tentative until duplicate address
// detection (section 5.4), run by a goroutine of its own, finds no other
// node using it, or optimistic meanwhile (RFC 4429, Config.OptimisticDAD);
// it is then preferred, deprecated when its preferred lifetime ends and
// removed when its valid lifetime does (section 5.5.4).

// origin says where an address came from.
type origin uint8

const (
	fromLinkLocal origin = iota + 1
	fromStatic
	fromSLAAC
	fromTemporary // RFC 8981, temp.go
	fromDHCPv6    // leased, Lease
)

// address is one of ours; p.mu guards it.
type address struct {
	prefix netip.Prefix // the address and its prefix length
	origin origin
	state  AddrState
	// dadCounter is RFC 7217's DAD_Counter the identifier was formed
	// with, when stable identifiers are used.
	dadCounter uint8
	// dup is signalled when DAD finds the address in use; dadGen is
	// the DAD run that counts, a later one (the link came up again,
	// link.go) ending an earlier.
	dup    chan struct{}
	dadGen uint64
	// nonce is in every DAD probe for the address (RFC 7527 section
	// 4.1), so that one looped back is known for ours.
	nonce [wire.NDNonceSize]byte
	// preferredUntil and validUntil are zero for an infinite lifetime.
	preferredUntil, validUntil time.Time
	timer                      clock.Timer
	gen                        uint64
	// temp is a temporary address's own state (temp.go).
	temp tempState
}

func (a *address) addr() netip.Addr { return a.prefix.Addr() }

// usable reports whether the address may be a source (RFC 4862 section
// 5.5.4: a deprecated address still may, for existing communication; RFC
// 4429 section 2.1: an optimistic one as a deprecated one).
func (a *address) usable() bool { return a.state.Usable() }

// dadStateLocked is the state an address of origin o is in while DAD runs
// on it: optimistic with Config.OptimisticDAD for an identifier most
// likely unique (RFC 4429 section 3.1: "Optimistic DAD SHOULD NOT be used
// for manually entered addresses"), tentative otherwise.
func (p *Protocol) dadStateLocked(o origin) AddrState {
	if p.cfg.OptimisticDAD && !p.cfg.NoDAD && o != fromStatic {
		return Optimistic
	}
	return Tentative
}

func (a *address) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	a.gen++
}

// iid returns the interface identifier for an address in prefix: RFC
// 7217's stable one when a secret key is configured, the modified EUI-64
// of the MAC otherwise (RFC 4291 appendix A). It returns the DAD counter
// used, which StableIID may have moved past reserved identifiers.
func (p *Protocol) iid(prefix netip.Prefix, dadCounter uint8) (ipv6.IID, uint8, error) {
	if len(p.cfg.SecretKey) == 0 {
		return ipv6.EUI64(p.nic.MAC()), 0, nil
	}
	mac := p.nic.MAC()
	return ipv6.StableIID(&ipv6.StableIIDInputs{
		Prefix:    prefix,
		NetIface:  mac[:],
		NetworkID: p.cfg.NetworkID,
		SecretKey: p.cfg.SecretKey,
	}, dadCounter)
}

// addLinkLocalLocked forms the link-local address (RFC 4862 section 5.3)
// and starts its DAD. p.mu is held.
func (p *Protocol) addLinkLocalLocked(dadCounter uint8) error {
	iid, c, err := p.iid(ipv6.LinkLocalPrefix(), dadCounter)
	if err != nil {
		return fmt.Errorf("ndp: link-local address on %s: %w", p.nic.Name(), err)
	}
	a := p.addAddressLocked(netip.PrefixFrom(ipv6.LinkLocal(iid), 64), fromLinkLocal, Infinite, Infinite)
	a.dadCounter = c
	return nil
}

// AddStatic assigns addr (with its prefix length) with infinite
// lifetimes, through DAD like any other (RFC 4862 section 5.4: "Duplicate
// Address Detection MUST be performed on all unicast addresses prior to
// assigning them to an interface, regardless of whether they are obtained
// through stateless autoconfiguration, DHCPv6, or manual configuration").
func (p *Protocol) AddStatic(addr netip.Prefix) error {
	if !addr.Addr().Is6() || addr.Addr().Is4In6() || addr.Addr().IsMulticast() || addr.Addr().IsUnspecified() || addr.Addr().IsLoopback() {
		return fmt.Errorf("ndp: static address %v on %s: not an IPv6 unicast address", addr, p.nic.Name())
	}
	if p.host == nil {
		return fmt.Errorf("ndp: static address %v on %s: ndp not started", addr, p.nic.Name())
	}
	p.mu.Lock()
	defer p.unlock()
	if _, ok := p.addrs[addr.Addr()]; ok {
		return fmt.Errorf("ndp: static address %v on %s: already assigned", addr, p.nic.Name())
	}
	p.addAddressLocked(addr, fromStatic, Infinite, Infinite)
	return nil
}

// Lease assigns, extends or, with a zero valid lifetime, takes away an
// address DHCPv6 leased (RFC 8415 section 18.2.10.1), with the lifetimes
// the server gave: the server's word, which RFC 4862's two-hour rule does
// not bound. It is a /128: whether its neighbours are on-link is the
// advertisements' to say (RFC 5942 section 4). A new one goes through DAD
// like any other; a duplicate is told Host as Duplicate, for the client to
// decline it.
func (p *Protocol) Lease(addr netip.Addr, valid, preferred time.Duration) error {
	if !addr.Is6() || addr.Is4In6() || addr.IsMulticast() || addr.IsUnspecified() || addr.IsLoopback() || addr.IsLinkLocalUnicast() {
		return fmt.Errorf("ndp: leased address %v on %s: not a global IPv6 unicast address", addr, p.nic.Name())
	}
	p.mu.Lock()
	defer p.unlock()
	a := p.addrs[addr]
	switch {
	case a != nil && a.origin != fromDHCPv6:
		return fmt.Errorf("ndp: leased address %v on %s: assigned already, not by DHCPv6", addr, p.nic.Name())
	case valid == 0:
		if a != nil {
			p.removeAddressLocked(a)
		}
		return nil
	case a == nil:
		p.addAddressLocked(netip.PrefixFrom(addr, 128), fromDHCPv6, valid, min(preferred, valid))
		return nil
	}
	now := p.env.Clock.Now()
	p.setLifetimesLocked(a, valid, min(preferred, valid))
	if a.state.underDAD() || a.state == Duplicate {
		return nil // DAD arms the timer when it ends; a duplicate keeps its own
	}
	st := Preferred
	if !a.preferredUntil.IsZero() && !now.Before(a.preferredUntil) {
		st = Deprecated
	}
	if st != a.state {
		a.state = st
		host := p.host
		p.later(func() { host.SetAddressState(addr, st) })
	}
	p.armLifetimeLocked(a)
	return nil
}

// RemoveStatic unassigns a static address.
func (p *Protocol) RemoveStatic(addr netip.Addr) error {
	p.mu.Lock()
	defer p.unlock()
	a, ok := p.addrs[addr]
	if !ok || a.origin != fromStatic {
		return fmt.Errorf("ndp: static address %v on %s: not assigned", addr, p.nic.Name())
	}
	p.removeAddressLocked(a)
	return nil
}

// addAddressLocked assigns a tentative or optimistic address, joins its
// solicited-node group and starts DAD; valid and preferred are its
// lifetimes, Infinite for ever. p.mu is held.
func (p *Protocol) addAddressLocked(prefix netip.Prefix, o origin, valid, preferred time.Duration) *address {
	st := p.dadStateLocked(o)
	a := &address{prefix: prefix, origin: o, state: st, dup: make(chan struct{}, 1), nonce: p.nonceLocked()}
	p.setLifetimesLocked(a, valid, preferred)
	p.addrs[a.addr()] = a
	host, temporary := p.host, o == fromTemporary
	p.later(func() { host.AddAddress(prefix, st, temporary) })
	// RFC 4862 section 5.4.2: "Before sending a Neighbor Solicitation,
	// an interface MUST join the all-nodes multicast address and the
	// solicited-node multicast address of the tentative address."
	p.joinLocked(ipv6.SolicitedNode(a.addr()))
	if p.cfg.NoDAD {
		p.dadDoneLocked(a)
		return a
	}
	if o == fromLinkLocal && st == Optimistic {
		// Router solicitations may go from it now, without our
		// link-layer address (RFC 4429 section 2.4).
		p.linkLocalReadyLocked()
	}
	p.Stats.DADStarted.Inc()
	p.wg.Add(1)
	go p.dad(a, a.dadGen)
	return a
}

// nonceLocked draws a DAD nonce (RFC 7527 section 4.1: random, of 6
// bytes), one for each address, which its DAD runs all carry. p.mu is
// held.
func (p *Protocol) nonceLocked() [wire.NDNonceSize]byte {
	var n [wire.NDNonceSize]byte
	v := p.env.Rand.Uint64()
	for i := range n {
		n[i] = byte(v >> (8 * i))
	}
	return n
}

// setLifetimesLocked sets an address's lifetimes from now.
func (p *Protocol) setLifetimesLocked(a *address, valid, preferred time.Duration) {
	now := p.env.Clock.Now()
	a.validUntil, a.preferredUntil = until(now, valid), until(now, preferred)
}

// until is the end of a lifetime d from now: the zero time for Infinite.
func until(now time.Time, d time.Duration) time.Time {
	if d == Infinite {
		return time.Time{}
	}
	return now.Add(d)
}

// remaining is the lifetime left at now before t, Infinite for the zero
// time.
func remaining(now, t time.Time) time.Duration {
	if t.IsZero() {
		return Infinite
	}
	return max(t.Sub(now), 0)
}

// dad runs duplicate address detection on a (RFC 4862 section 5.4): after
// a random delay (section 5.4.2, up to MAX_RTR_SOLICITATION_DELAY, so that
// nodes started together do not probe together), DupAddrDetectTransmits
// solicitations from :: to the address's solicited-node group, RetransTimer
// apart; no duplicate reported by then (Handle signals a.dup) and the
// address is preferred. A run that a later one (gen, a.dadGen) replaced
// stops.
func (p *Protocol) dad(a *address, gen uint64) {
	defer p.wg.Done()
	delay := time.Duration(p.env.Rand.IntN(int(MaxRtrSolicitationDelay)))
	if !p.wait(a, delay) {
		return
	}
	for range p.cfg.DupAddrDetectTransmits {
		p.mu.Lock()
		if p.closed || !a.state.underDAD() || a.dadGen != gen {
			p.mu.Unlock()
			return
		}
		retrans := p.params.retrans
		p.mu.Unlock()
		p.send(p.dadProbe(a.addr(), a.nonce))
		if !p.wait(a, retrans) {
			return
		}
	}
	p.mu.Lock()
	defer p.unlock()
	if p.closed || !a.state.underDAD() || p.addrs[a.addr()] != a || a.dadGen != gen {
		return
	}
	p.dadDoneLocked(a)
}

// wait waits d on the clock, reporting false if DAD found a duplicate or
// ndp closed meanwhile.
func (p *Protocol) wait(a *address, d time.Duration) bool {
	t := p.env.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-a.dup:
		return false
	case <-p.done:
		return false
	}
}

// dadDoneLocked makes a tentative or optimistic address preferred (RFC
// 4429 section 3.2), or deprecated if its preferred lifetime ended during
// DAD, and arms its lifetime timer.
func (p *Protocol) dadDoneLocked(a *address) {
	p.Stats.DADSucceeded.Inc()
	if a.origin == fromLinkLocal {
		p.linkLocalReadyLocked()
	}
	a.state = Preferred
	if !a.preferredUntil.IsZero() && !p.env.Clock.Now().Before(a.preferredUntil) {
		a.state = Deprecated
	}
	host, addr, st := p.host, a.addr(), a.state
	p.later(func() { host.SetAddressState(addr, st) })
	p.armLifetimeLocked(a)
}

// duplicateLocked handles a duplicate found for a tentative or optimistic
// address (RFC 4862 section 5.4.5, RFC 4429 section 3.3): the address is
// not used, or no longer, the event counted and logged, and, with stable
// identifiers, a new one formed with the next DAD_Counter (RFC 7217
// section 6), IDGEN_RETRIES times at most. p.mu is held.
func (p *Protocol) duplicateLocked(a *address) {
	p.Stats.DADFailed.Inc()
	a.state = Duplicate
	if a.origin == fromLinkLocal && !retryStable(p, a) {
		// No link-local address to come: solicit routers from ::.
		p.linkLocalReadyLocked()
	}
	// Kept, unused, to the end of its valid lifetime, so that the same
	// prefix advertised again does not form it again.
	p.armLifetimeLocked(a)
	select {
	case a.dup <- struct{}{}:
	default:
	}
	host, addr := p.host, a.addr()
	p.later(func() { host.SetAddressState(addr, Duplicate) })
	p.leaveLocked(ipv6.SolicitedNode(addr))
	if a.origin == fromTemporary {
		p.tempDuplicateLocked(a)
		return
	}
	retry := retryStable(p, a)
	p.later(func() { p.logDuplicate(addr, retry) })
	if !retry {
		return
	}
	p.Stats.DADRetries.Inc()
	prefix := netip.PrefixFrom(a.prefix.Masked().Addr(), a.prefix.Bits())
	iid, c, err := p.iid(prefix, a.dadCounter+1)
	if err != nil {
		return
	}
	na, err := ipv6.FromPrefix(prefix, iid)
	if err != nil || p.addrs[na] != nil {
		return
	}
	now := p.env.Clock.Now()
	b := p.addAddressLocked(netip.PrefixFrom(na, a.prefix.Bits()), a.origin, remaining(now, a.validUntil), remaining(now, a.preferredUntil))
	b.dadCounter = c
}

// armLifetimeLocked sets a's timer for its next lifetime event: the end
// of its preferred lifetime while preferred, of its valid lifetime after.
func (p *Protocol) armLifetimeLocked(a *address) {
	a.stopTimer()
	next := a.validUntil
	if a.state == Preferred && !a.preferredUntil.IsZero() {
		next = a.preferredUntil
		if a.origin == fromTemporary && !a.temp.regenerated {
			next = next.Add(-p.regenAdvance())
		}
	}
	if next.IsZero() {
		return
	}
	gen := a.gen
	a.timer = p.env.Clock.AfterFunc(next.Sub(p.env.Clock.Now()), func() { p.lifetimeTimer(a, gen) })
}

// lifetimeTimer deprecates an address at the end of its preferred
// lifetime and removes it at the end of its valid lifetime (RFC 4862
// section 5.5.4).
func (p *Protocol) lifetimeTimer(a *address, gen uint64) {
	p.mu.Lock()
	defer p.unlock()
	if p.closed || a.gen != gen || p.addrs[a.addr()] != a {
		return
	}
	now := p.env.Clock.Now()
	if !a.validUntil.IsZero() && !now.Before(a.validUntil) {
		p.Stats.AddrsExpired.Inc()
		p.removeAddressLocked(a)
		return
	}
	if a.origin == fromTemporary && a.state == Preferred {
		p.tempRegenerateLocked(a, now)
	}
	if a.state == Preferred && !a.preferredUntil.IsZero() && !now.Before(a.preferredUntil) {
		a.state = Deprecated
		host, addr := p.host, a.addr()
		p.later(func() { host.SetAddressState(addr, Deprecated) })
	}
	p.armLifetimeLocked(a)
}

// removeAddressLocked unassigns a and leaves its solicited-node group.
func (p *Protocol) removeAddressLocked(a *address) {
	a.stopTimer()
	delete(p.addrs, a.addr())
	if a.state != Duplicate {
		p.leaveLocked(ipv6.SolicitedNode(a.addr()))
	}
	a.state = Duplicate // a DAD goroutine still running sees it is over
	select {
	case a.dup <- struct{}{}:
	default:
	}
	host, addr := p.host, a.addr()
	p.later(func() { host.RemoveAddress(addr) })
}

// slaacLocked applies a Prefix Information option with the autonomous
// flag (RFC 4862 section 5.5.3); the caller has checked (a), (b) and (c).
func (p *Protocol) slaacLocked(prefix netip.Prefix, valid, preferred time.Duration) {
	// (e) "If the advertised prefix is equal to the prefix of an address
	// configured by stateless autoconfiguration in the list, the
	// preferred lifetime of the address is reset to the Preferred
	// Lifetime in the received advertisement", and the valid lifetime
	// follows the two-hour rule.
	now := p.env.Clock.Now()
	found := false
	for _, a := range p.addrs {
		if a.origin != fromSLAAC || a.state == Duplicate || a.prefix.Masked() != prefix {
			continue
		}
		found = true
		p.updateLifetimesLocked(a, valid, preferred, now)
	}
	if found {
		p.tempPrefixLocked(prefix, valid, preferred, now)
	}
	if found || valid == 0 {
		return // (d) forms an address only with a nonzero valid lifetime
	}
	// (d) "If the prefix advertised is not equal to the prefix of an
	// address configured by stateless autoconfiguration already in the
	// list of addresses associated with the interface (where "equal"
	// means the two prefix lengths are the same and the first
	// prefix-length bits of the prefixes are identical), and if the Valid
	// Lifetime is not 0, form an address".
	formed := 0
	for _, a := range p.addrs {
		if a.origin == fromSLAAC {
			formed++
		}
	}
	if formed >= p.cfg.MaxAddresses {
		p.Stats.ListsFull.Inc()
		return
	}
	iid, c, err := p.iid(prefix, 0)
	if err != nil {
		p.Stats.PrefixesIgnored.Inc()
		return
	}
	addr, err := ipv6.FromPrefix(prefix, iid)
	if err != nil {
		// "If the sum of the prefix length and interface identifier
		// length does not equal 128 bits, the Prefix Information option
		// MUST be ignored."
		p.Stats.PrefixesIgnored.Inc()
		return
	}
	if p.addrs[addr] != nil {
		return
	}
	p.Stats.SLAACAddrs.Inc()
	a := p.addAddressLocked(netip.PrefixFrom(addr, prefix.Bits()), fromSLAAC, valid, preferred)
	a.dadCounter = c
	p.tempPrefixLocked(prefix, valid, preferred, now)
}

// updateLifetimesLocked is RFC 4862 section 5.5.3 (e) for one address.
func (p *Protocol) updateLifetimesLocked(a *address, valid, preferred time.Duration, now time.Time) {
	a.preferredUntil = until(now, preferred)
	// "1. If the received Valid Lifetime is greater than 2 hours or
	// greater than RemainingLifetime, set the valid lifetime of the
	// corresponding address to the advertised Valid Lifetime.
	// 2. If RemainingLifetime is less than or equal to 2 hours, ignore
	// the Prefix Information option with regards to the valid lifetime,
	// unless ... authenticated ...
	// 3. Otherwise, reset the valid lifetime of the corresponding address
	// to 2 hours."
	left := remaining(now, a.validUntil)
	switch {
	case valid > twoHours || valid > left:
		a.validUntil = until(now, valid)
	case left <= twoHours:
	default:
		a.validUntil = now.Add(twoHours)
	}
	if a.state.underDAD() {
		return // DAD arms the timer when it ends
	}
	st := Preferred
	if !a.preferredUntil.IsZero() && !now.Before(a.preferredUntil) {
		st = Deprecated
	}
	if st != a.state {
		a.state = st
		host, addr := p.host, a.addr()
		p.later(func() { host.SetAddressState(addr, st) })
	}
	p.armLifetimeLocked(a)
}

// Address is one of ours as Addresses reports it.
type Address struct {
	Prefix netip.Prefix
	State  AddrState
	// PreferredUntil and ValidUntil are zero for an infinite lifetime.
	PreferredUntil, ValidUntil time.Time
	// Temporary marks a temporary address (RFC 8981).
	Temporary bool
}

// Addresses returns a snapshot of our addresses, tentative and duplicate
// ones included.
func (p *Protocol) Addresses() []Address {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Address, 0, len(p.addrs))
	for _, a := range p.addrs {
		out = append(out, Address{a.prefix, a.state, a.preferredUntil, a.validUntil, a.origin == fromTemporary})
	}
	return out
}

// retryStable reports whether a duplicate a is followed by a new address
// with the next DAD counter (RFC 7217 section 6): for the stable
// identifiers ndp formed itself (link-local and SLAAC), IDGEN_RETRIES
// times.
func retryStable(p *Protocol, a *address) bool {
	return len(p.cfg.SecretKey) > 0 && (a.origin == fromLinkLocal || a.origin == fromSLAAC) && a.dadCounter < IDGenRetries
}
