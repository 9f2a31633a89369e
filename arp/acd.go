package arp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gonetstack/gonet/wire"
)

// IPv4 Address Conflict Detection (RFC 5227). Before a host uses an
// address it probes for it (section 2.1): ARP requests that ask for the
// address without claiming it, from sender address 0.0.0.0, so that a
// station holding it answers and no cache learns it from us. Once it has
// the address it announces it (section 2.3), and then watches for others
// claiming it and defends it or gives it up (section 2.4). When the link
// comes up again it probes again for the addresses it defends (section
// 2.1: "when a link-state change signals that an Ethernet cable has been
// connected"; Verify).
//
// A probe runs in its caller's goroutine and is told of conflicts by the
// dealer, which sees every ARP packet; defence runs in the dealer.

// ACDConfig holds RFC 5227 section 1.1's constants. Zero fields take the
// RFC's values; tests shorten them.
type ACDConfig struct {
	// ProbeWait bounds the random delay before the first probe (1 s),
	// so that hosts powered on together do not probe in step.
	ProbeWait time.Duration
	// Probes is how many probes are sent (PROBE_NUM, 3), each
	// ProbeMin to ProbeMax apart (1 s, 2 s), chosen at random.
	Probes             int
	ProbeMin, ProbeMax time.Duration
	// AnnounceWait is the wait after the last probe before the address
	// is taken (2 s).
	AnnounceWait time.Duration
	// Announcements is how many announcements are sent once it is
	// taken (ANNOUNCE_NUM, 2), AnnounceInterval apart (2 s).
	Announcements    int
	AnnounceInterval time.Duration
	// DefendInterval is the least time between two defences of an
	// address (10 s), and the window in which a second conflict makes
	// DefendOnce give it up.
	DefendInterval time.Duration
	// MaxConflicts is how many probes may find their address in use
	// (10) before probes start no more often than one every
	// RateLimitInterval (60 s), so that a host looking for a free
	// address on a crowded or hostile link does not flood it.
	MaxConflicts      int
	RateLimitInterval time.Duration
}

func (c *ACDConfig) setDefaults() {
	c.ProbeWait = cmp.Or(c.ProbeWait, time.Second)
	c.Probes = cmp.Or(c.Probes, 3)
	c.ProbeMin = cmp.Or(c.ProbeMin, time.Second)
	c.ProbeMax = max(cmp.Or(c.ProbeMax, 2*time.Second), c.ProbeMin)
	c.AnnounceWait = cmp.Or(c.AnnounceWait, 2*time.Second)
	c.Announcements = cmp.Or(c.Announcements, 2)
	c.AnnounceInterval = cmp.Or(c.AnnounceInterval, 2*time.Second)
	c.DefendInterval = cmp.Or(c.DefendInterval, 10*time.Second)
	c.MaxConflicts = cmp.Or(c.MaxConflicts, 10)
	c.RateLimitInterval = cmp.Or(c.RateLimitInterval, 60*time.Second)
}

// DefendPolicy is what a host does when another station claims an address
// it uses (RFC 5227 section 2.4).
type DefendPolicy uint8

const (
	// DefendOnce is section 2.4 (b): answer the first conflict with one
	// announcement, and give the address up on a second within
	// DefendInterval. It suits an address that may be given up, such as
	// a DHCP lease, which a host must not fight over forever.
	DefendOnce DefendPolicy = iota
	// GiveUp is section 2.4 (a): stop using the address at the first
	// conflict.
	GiveUp
	// Keep is section 2.4 (c): defend the address for good, with at most
	// one announcement every DefendInterval, for an address the host
	// must keep (a router's, a server's static one).
	Keep
)

func (d DefendPolicy) String() string {
	switch d {
	case DefendOnce:
		return "defend once"
	case GiveUp:
		return "give up"
	case Keep:
		return "keep"
	}
	return fmt.Sprintf("DefendPolicy(%d)", uint8(d))
}

// Conflict is another station claiming an address of ours.
type Conflict struct {
	NIC  string
	Addr netip.Addr
	// MAC is the other station's hardware address, as its packet gave
	// it.
	MAC wire.MAC
	// Probing says the conflict was found while probing, before the
	// address was used.
	Probing bool
	// Defended says an announcement answered it and the address is
	// kept; GaveUp says the address is no longer used. Neither: a
	// conflict within DefendInterval of the last defence, which Keep
	// leaves unanswered.
	Defended, GaveUp bool
}

// ConflictError is the error of a probe that found the address in use.
type ConflictError struct{ Conflict }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("arp: %s: address %v is in use by %v (RFC 5227 probe answered)", e.NIC, e.Addr, e.MAC)
}

// ErrProbing is returned by Probe for an address already being probed on
// the NIC.
var ErrProbing = errors.New("arp: address already being probed")

// probe is one running Probe or Verify, which the dealer tells of a
// conflict.
type probe struct {
	conflict chan wire.MAC // buffered: the first conflict is kept
	// held: the address is ours and in use while it is probed (Verify):
	// another station's probe for it is answered as any request, not
	// taken for a conflict, and no defence is made meanwhile.
	held bool
}

// probeLimit is RFC 5227 section 2.1.1's rate limit on probing, for the
// NIC; Protocol.mu guards it.
type probeLimit struct {
	conflicts int       // probes that found their address in use
	lastStart time.Time // when the last probe started
}

// defence is an address in use that the dealer defends.
type defence struct {
	policy     DefendPolicy
	onConflict func(Conflict)
	lastSeen   time.Time // the last conflict answered, zero before any
}

// Probe checks whether another station on the link holds addr, as RFC
// 5227 section 2.1.1 says: after a random delay of up to ProbeWait, it
// sends Probes ARP probes (requests for addr from sender 0.0.0.0) ProbeMin
// to ProbeMax apart, and waits AnnounceWait after the last. Any ARP packet
// giving addr as its sender, or another station's probe for addr, during
// that time means addr is in use: Probe returns a *ConflictError naming
// the station's MAC. It returns nil when addr is free, and an error
// wrapping ctx's if ctx ends first. Once MaxConflicts probes on the NIC
// have found their address in use, a probe first waits until
// RateLimitInterval has passed since the last one started. The caller
// then assigns addr and calls AnnounceAndDefend; addr must not be
// assigned while probed.
func (p *Protocol) Probe(ctx context.Context, addr netip.Addr) error {
	return p.probe(ctx, addr, false)
}

// probe is Probe, or Verify's probing with held.
func (p *Protocol) probe(ctx context.Context, addr netip.Addr, held bool) error {
	if !addr.Is4() || addr.IsUnspecified() || addr.IsMulticast() {
		return fmt.Errorf("arp: %s: probe %v: not a unicast IPv4 address", p.nic.Name(), addr)
	}
	pr := &probe{conflict: make(chan wire.MAC, 1), held: held}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("arp: %s: probe %v: closed", p.nic.Name(), addr)
	}
	if p.probes[addr] != nil {
		p.mu.Unlock()
		return fmt.Errorf("arp: %s: probe %v: %w", p.nic.Name(), addr, ErrProbing)
	}
	p.probes[addr] = pr
	c := &p.cfg.ACD
	now := p.env.Clock.Now()
	wait := time.Duration(0)
	if p.probeLimit.conflicts >= c.MaxConflicts {
		// "limit the rate at which it probes for new addresses to no
		// more than one new address per RATE_LIMIT_INTERVAL".
		wait = max(p.probeLimit.lastStart.Add(c.RateLimitInterval).Sub(now), 0)
	}
	p.probeLimit.lastStart = now.Add(wait)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.probes, addr)
		p.mu.Unlock()
	}()
	if wait > 0 {
		p.Stats.ProbesRateLimited.Inc()
	}
	timer := p.env.Clock.NewTimer(wait + p.random(0, c.ProbeWait))
	defer timer.Stop()
	for sent := 0; ; {
		select {
		case mac := <-pr.conflict:
			p.Stats.ProbeConflicts.Inc()
			p.mu.Lock()
			p.probeLimit.conflicts++
			p.mu.Unlock()
			cf := Conflict{NIC: p.nic.Name(), Addr: addr, MAC: mac, Probing: true}
			p.log.acd(cf)
			return &ConflictError{cf}
		case <-ctx.Done():
			return fmt.Errorf("arp: %s: probe %v: %w", p.nic.Name(), addr, ctx.Err())
		case <-p.done:
			return fmt.Errorf("arp: %s: probe %v: closed", p.nic.Name(), addr)
		case <-timer.C():
		}
		if sent == c.Probes {
			return nil // ANNOUNCE_WAIT passed with no conflict
		}
		p.send(wire.ARPFields{Op: wire.ARPRequest, SenderMAC: p.nic.MAC(), SenderIP: netip.IPv4Unspecified(), TargetIP: addr}, wire.Broadcast)
		p.Stats.OutProbes.Inc()
		sent++
		if sent < c.Probes {
			timer.Reset(p.random(c.ProbeMin, c.ProbeMax))
		} else {
			timer.Reset(c.AnnounceWait)
		}
	}
}

// Verify probes again for addr, an address of ours that AnnounceAndDefend
// defends, because the link came up and may be another (RFC 5227 section
// 2.1): the probes of Probe, with the address kept in use meanwhile, as a
// DHCP client keeps its lease while it verifies it (RFC 2131 section
// 3.2), so that a flap of the link costs no connection. The probes find
// a station that holds the address and does not defend it, as Linux's
// does not, which an announcement alone would not. A station answering,
// or any packet giving addr as its sender, is a conflict: the address is
// given up whatever its policy (section 2.1.1: the host "MUST NOT use"
// it), its defence ends, and onConflict is told with GaveUp, as a
// defence giving it up would; Verify returns the *ConflictError. No
// conflict: addr is announced again (section 2.3), and nil returned. It
// returns an error, having done nothing, when addr is not defended, and
// ctx's error when ctx ends first, the defence going on.
func (p *Protocol) Verify(ctx context.Context, addr netip.Addr) error {
	if _, ok := p.Defended(addr); !ok {
		return fmt.Errorf("arp: %s: verify %v: not an address defended", p.nic.Name(), addr)
	}
	p.Stats.Verifications.Inc()
	err := p.probe(ctx, addr, true)
	ce := (*ConflictError)(nil)
	if !errors.As(err, &ce) {
		if err == nil {
			p.announceAgain(addr)
		}
		return err
	}
	p.mu.Lock()
	d := p.defended[addr]
	delete(p.defended, addr)
	p.mu.Unlock()
	if d == nil {
		return err // stopped defending meanwhile
	}
	cf := ce.Conflict
	cf.Probing, cf.GaveUp = false, true
	p.Stats.AddressesLost.Inc()
	p.log.acd(cf)
	if d.onConflict != nil {
		d.onConflict(cf)
	}
	return err
}

// verification is a LinkUp's verifications, running until done closes.
type verification struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// LinkUp is told that the link came up: every address defended is
// verified (Verify), each in a goroutine of its own, once the
// verifications of an earlier LinkUp, cancelled, have ended.
func (p *Protocol) LinkUp() {
	ctx, cancel := context.WithCancel(context.Background())
	v := &verification{cancel: cancel, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cancel()
		return
	}
	prev := p.verifying
	p.verifying = v
	addrs := slices.SortedFunc(maps.Keys(p.defended), netip.Addr.Compare)
	p.wg.Add(1)
	p.mu.Unlock()
	if prev != nil {
		prev.cancel()
	}
	go func() {
		defer p.wg.Done()
		defer close(v.done)
		defer cancel()
		if prev != nil {
			<-prev.done // its probes gone, so that ours may start
		}
		var wg sync.WaitGroup
		for _, a := range addrs {
			wg.Go(func() { p.Verify(ctx, a) })
		}
		wg.Wait()
	}()
}

// LinkDown is told that the link went down: verifications still running
// end, the addresses kept and defended; the next LinkUp verifies them.
func (p *Protocol) LinkDown() {
	p.mu.Lock()
	v := p.verifying
	p.mu.Unlock()
	if v != nil {
		v.cancel()
	}
}

// announceAgain sends addr's announcements again, as AnnounceAndDefend
// did, while it is defended.
func (p *Protocol) announceAgain(addr netip.Addr) {
	p.mu.Lock()
	_, ok := p.defended[addr]
	ok = ok && !p.closed
	if ok {
		p.wg.Add(1)
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	p.Announce(addr)
	go p.announce(addr)
}

// random returns a duration drawn uniformly from [lo, hi].
func (p *Protocol) random(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(p.env.Rand.Uint64()%uint64(hi-lo+1))
}

// AnnounceAndDefend starts using addr, now assigned to the NIC: it sends
// Announcements ARP announcements AnnounceInterval apart (RFC 5227
// section 2.3), the first at once, and from then on defends addr by
// policy against stations that claim it (section 2.4). Each conflict
// defended or given up in is passed to onConflict (nil: none), in the
// dealer's goroutine: it must not block, and removes addr when the
// conflict says GaveUp. The defence ends with StopDefending, when addr is
// given up, or at the first conflict after addr was removed from the NIC.
func (p *Protocol) AnnounceAndDefend(addr netip.Addr, policy DefendPolicy, onConflict func(Conflict)) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.defended[addr] = &defence{policy: policy, onConflict: onConflict}
	p.wg.Add(1)
	p.mu.Unlock()
	p.Announce(addr)
	go p.announce(addr)
}

// announce sends the announcements after the first, while addr is still
// defended.
func (p *Protocol) announce(addr netip.Addr) {
	defer p.wg.Done()
	c := &p.cfg.ACD
	if c.Announcements < 2 {
		return
	}
	timer := p.env.Clock.NewTimer(c.AnnounceInterval)
	defer timer.Stop()
	for sent := 1; sent < c.Announcements; sent++ {
		select {
		case <-timer.C():
		case <-p.done:
			return
		}
		p.mu.RLock()
		_, ok := p.defended[addr]
		p.mu.RUnlock()
		if !ok {
			return // given up or removed meanwhile
		}
		p.Announce(addr)
		timer.Reset(c.AnnounceInterval)
	}
}

// StopDefending ends addr's defence.
func (p *Protocol) StopDefending(addr netip.Addr) {
	p.mu.Lock()
	delete(p.defended, addr)
	p.mu.Unlock()
}

// Defended reports whether addr is defended, and by which policy.
func (p *Protocol) Defended(addr netip.Addr) (DefendPolicy, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	d, ok := p.defended[addr]
	if !ok {
		return 0, false
	}
	return d.policy, true
}

// checkConflict runs in the dealer on each ARP packet from another
// station (sha is not ours): it tells a probe of a conflict (RFC 5227
// section 2.1.1), and defends addresses in use (section 2.4). It reports
// whether the packet claims an address of ours that is defended, which
// must then not be answered as an ordinary request.
func (p *Protocol) checkConflict(op uint16, sha wire.MAC, spa, tpa netip.Addr) bool {
	p.mu.RLock()
	pr := p.probes[spa]
	if q := p.probes[tpa]; pr == nil && q != nil && !q.held && op == wire.ARPRequest && spa.IsUnspecified() {
		// "any ARP Probe where the packet's 'target IP address' is the
		// address being probed for": another host probing for it too.
		pr = q
	}
	_, isDefended := p.defended[spa]
	p.mu.RUnlock()
	if pr != nil {
		select {
		case pr.conflict <- sha:
		default: // the probe was told already
		}
		if pr.held && isDefended {
			return true // Verify gives it up: no defence meanwhile
		}
	}
	if !isDefended {
		if spa.IsValid() && p.addrs.HasAddress(spa) {
			// No defence asked: counted and logged only, as Linux
			// leaves a static address be.
			p.Stats.Conflicts.Inc()
			p.conflicted(spa, sha)
		}
		return false
	}
	p.defend(spa, sha)
	return true
}

// defend applies the address's policy to a conflicting packet (RFC 5227
// section 2.4).
func (p *Protocol) defend(addr netip.Addr, sha wire.MAC) {
	now := p.env.Clock.Now()
	p.mu.Lock()
	d := p.defended[addr]
	if d == nil {
		p.mu.Unlock()
		return
	}
	if !p.addrs.HasAddress(addr) {
		// Removed without StopDefending: nothing left to defend.
		delete(p.defended, addr)
		p.mu.Unlock()
		return
	}
	p.Stats.Conflicts.Inc()
	cf := Conflict{NIC: p.nic.Name(), Addr: addr, MAC: sha}
	recent := !d.lastSeen.IsZero() && now.Sub(d.lastSeen) < p.cfg.ACD.DefendInterval
	switch {
	case d.policy == GiveUp, d.policy == DefendOnce && recent:
		// (a), or (b)'s second conflict: "the host MUST immediately
		// cease using this address".
		delete(p.defended, addr)
		cf.GaveUp = true
	case recent:
		// (c): "MUST NOT send ... more than one ARP Announcement
		// every DEFEND_INTERVAL".
	default:
		// (b), (c): "record the time that the conflicting ARP packet
		// was received, and then broadcast one single ARP
		// Announcement".
		d.lastSeen = now
		cf.Defended = true
	}
	onConflict := d.onConflict
	p.mu.Unlock()
	switch {
	case cf.GaveUp:
		p.Stats.AddressesLost.Inc()
	case cf.Defended:
		p.Stats.Defences.Inc()
		p.Announce(addr)
	default:
		p.conflicted(addr, sha)
		return
	}
	p.log.acd(cf)
	if onConflict != nil {
		onConflict(cf)
	}
}
