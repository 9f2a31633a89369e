package arp_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

var (
	candidate = netip.MustParseAddr("10.1.0.50")
	holderMAC = net.HardwareAddr{0x02, 0, 0, 0, 0x50, 0x50}
	zeroAddr  = netip.IPv4Unspecified()
)

// probing is a probe the test runs in a goroutine and drives on the
// virtual clock.
type probing struct {
	h    *rawtest.Host
	done chan error
}

// startProbe runs ARP's Probe, which returns the conflict it finds as an
// *arp.ConflictError.
func startProbe(t *testing.T, h *rawtest.Host, addr netip.Addr) *probing {
	p := &probing{h: h, done: make(chan error, 1)}
	a := mustARP(t, h)
	go func() { p.done <- a.Probe(context.Background(), addr) }()
	return p
}

// fire waits for the probe's timer and moves the clock to its deadline,
// returning how far it moved.
func (p *probing) fire(t *testing.T) time.Duration {
	t.Helper()
	p.h.WaitTimers(t, 1)
	next, ok := p.h.Clock.NextDeadline()
	if !ok {
		t.Fatal("no timer armed")
	}
	d := next.Sub(p.h.Clock.Now())
	p.h.Clock.Set(next)
	return d
}

func (p *probing) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(rawtest.Timeout):
		t.Fatal("the probe did not end")
		return nil
	}
}

func checkProbe(t *testing.T, frame []byte, addr netip.Addr) {
	t.Helper()
	// RFC 5227 section 2.1.1: "'sender hardware address' ... the
	// hardware address of the interface sending the packet, ... 'sender
	// IP address' ... all zeroes ... 'target hardware address' ... all
	// zeroes ... 'target IP address' ... the address being probed".
	checkARP(t, frame, rawtest.BroadcastMAC, layers.ARPRequest, rawtest.StackMAC, zeroAddr, zeroMAC, addr)
}

func checkAnnouncement(t *testing.T, frame []byte, addr netip.Addr) {
	t.Helper()
	// Section 2.3: a request with sender and target IP both the address.
	checkARP(t, frame, rawtest.BroadcastMAC, layers.ARPRequest, rawtest.StackMAC, addr, zeroMAC, addr)
}

func TestProbeSendsTheRFCSequence(t *testing.T) {
	tests := []struct {
		name string
		cfg  arp.ACDConfig
		want arp.ACDConfig // the values in force
	}{
		{"RFC 5227's constants", arp.ACDConfig{},
			arp.ACDConfig{ProbeWait: time.Second, Probes: 3, ProbeMin: time.Second, ProbeMax: 2 * time.Second, AnnounceWait: 2 * time.Second}},
		{"shortened for a test", arp.ACDConfig{ProbeWait: 100 * time.Millisecond, Probes: 4, ProbeMin: 10 * time.Millisecond, ProbeMax: 30 * time.Millisecond, AnnounceWait: 50 * time.Millisecond},
			arp.ACDConfig{ProbeWait: 100 * time.Millisecond, Probes: 4, ProbeMin: 10 * time.Millisecond, ProbeMax: 30 * time.Millisecond, AnnounceWait: 50 * time.Millisecond}},
		{"fixed interval", arp.ACDConfig{ProbeMin: 1500 * time.Millisecond, ProbeMax: 1500 * time.Millisecond},
			arp.ACDConfig{ProbeWait: time.Second, Probes: 3, ProbeMin: 1500 * time.Millisecond, ProbeMax: 1500 * time.Millisecond, AnnounceWait: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{ARP: arp.Config{ACD: tt.cfg}})
			p := startProbe(t, h, candidate)
			w := tt.want
			// PROBE_WAIT: "wait for a random time interval selected
			// uniformly in the range zero to PROBE_WAIT seconds".
			if d := p.fire(t); d < 0 || d > w.ProbeWait {
				t.Errorf("first probe after %v, want within [0, %v]", d, w.ProbeWait)
			}
			for i := range w.Probes {
				checkProbe(t, h.Expect(t, rawtest.Timeout), candidate)
				d := p.fire(t)
				switch {
				case i < w.Probes-1 && (d < w.ProbeMin || d > w.ProbeMax):
					t.Errorf("probe %d followed after %v, want within [%v, %v]", i+2, d, w.ProbeMin, w.ProbeMax)
				case i == w.Probes-1 && d != w.AnnounceWait:
					t.Errorf("probing ended %v after the last probe, want ANNOUNCE_WAIT %v", d, w.AnnounceWait)
				}
			}
			if err := p.result(t); err != nil {
				t.Fatalf("probe of a free address: %v", err)
			}
			if got := h.Counter(t, "ARP.eth0.OutProbes"); got != int64(w.Probes) {
				t.Errorf("OutProbes = %d, want %d", got, w.Probes)
			}
			// A probe claims nothing: no neighbour learnt the address
			// from us, and the stack did not take it.
			h.ExpectNothing(t)
			if h.S.IPv4().IsLocal(candidate) {
				t.Error("the probed address was assigned")
			}
		})
	}
}

// TestProbeFindsAConflict pins RFC 5227 section 2.1.1's conflicts: from
// the start of probing until ANNOUNCE_WAIT after the last probe, any ARP
// packet with the address as its sender, or another station's probe for
// it; and what is not one.
func TestProbeFindsAConflict(t *testing.T) {
	other := net.HardwareAddr{0x02, 0, 0, 0, 0x60, 0x60}
	tests := []struct {
		name     string
		after    int // probes sent before the packet comes: 0..3
		op       uint16
		sha      net.HardwareAddr
		spa, tpa netip.Addr
		conflict bool
	}{
		{"the holder's reply to our probe", 1, layers.ARPReply, holderMAC, candidate, zeroAddr, true},
		{"the holder's announcement before the first probe", 0, layers.ARPRequest, holderMAC, candidate, candidate, true},
		{"the holder's request for another host", 2, layers.ARPRequest, holderMAC, candidate, rawtest.PeerAddr, true},
		{"the holder's reply during ANNOUNCE_WAIT", 3, layers.ARPReply, holderMAC, candidate, zeroAddr, true},
		{"another station's probe for the address", 1, layers.ARPRequest, other, zeroAddr, candidate, true},
		{"an ordinary request for the address", 1, layers.ARPRequest, other, rawtest.PeerAddr, candidate, false},
		{"another station's probe for another address", 1, layers.ARPRequest, other, zeroAddr, rawtest.PeerAddr, false},
		{"our own probe looped back", 1, layers.ARPRequest, rawtest.StackMAC, zeroAddr, candidate, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			p := startProbe(t, h, candidate)
			for range tt.after {
				p.fire(t)
				checkProbe(t, h.Expect(t, rawtest.Timeout), candidate)
			}
			h.WaitTimers(t, 1) // the probe is registered
			h.Inject(h.ARPFrame(t, tt.op, tt.sha, tt.spa, nil, tt.tpa))
			if !tt.conflict {
				h.Barrier(t) // the dealer has seen the packet
				for i := tt.after; i <= 3; i++ {
					p.fire(t)
				}
				if err := p.result(t); err != nil {
					t.Fatalf("probe: %v, want the address free", err)
				}
				return
			}
			err := p.result(t)
			var ce *arp.ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("probe: %v, want a conflict", err)
			}
			if ce.Addr != candidate || !bytes.Equal(ce.MAC[:], tt.sha) || !ce.Probing || ce.NIC != rawtest.NIC {
				t.Errorf("conflict %+v, want %v held by %v while probing on %s", ce.Conflict, candidate, tt.sha, rawtest.NIC)
			}
			if got := h.Counter(t, "ARP.eth0.ProbeConflicts"); got != 1 {
				t.Errorf("ProbeConflicts = %d, want 1", got)
			}
			// No further probe once the conflict is known.
			if got := h.Counter(t, "ARP.eth0.OutProbes"); got != int64(tt.after) {
				t.Errorf("OutProbes = %d, want %d", got, tt.after)
			}
			if h.Clock.Pending() != 0 {
				t.Errorf("%d timers left armed", h.Clock.Pending())
			}
		})
	}
}

// TestStackProbeSaysInUse pins the DHCP client's entry point: a conflict
// is inUse with no error, a free address neither.
func TestStackProbeSaysInUse(t *testing.T) {
	for _, held := range []bool{true, false} {
		h := rawtest.New(t, stack.Config{})
		type result struct {
			inUse bool
			err   error
		}
		done := make(chan result, 1)
		go func() {
			inUse, err := h.S.Probe(context.Background(), rawtest.NIC, candidate)
			done <- result{inUse, err}
		}()
		p := &probing{h: h}
		p.fire(t)
		checkProbe(t, h.Expect(t, rawtest.Timeout), candidate)
		if held {
			h.Inject(h.ARPFrame(t, layers.ARPReply, holderMAC, candidate, rawtest.StackMAC, zeroAddr))
		} else {
			for range 3 {
				p.fire(t)
			}
		}
		if r := <-done; r.inUse != held || r.err != nil {
			t.Errorf("held %v: Probe = %v, %v; want %v, nil", held, r.inUse, r.err, held)
		}
	}
}

func TestProbeRefusesWhatItCannotProbe(t *testing.T) {
	tests := []struct {
		name string
		addr netip.Addr
	}{
		{"an address of the stack", rawtest.StackAddr},
		{"an IPv6 address", netip.MustParseAddr("fe80::1")},
		{"a multicast group", netip.MustParseAddr("224.0.0.1")},
		{"the unspecified address", zeroAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			inUse, err := h.S.Probe(context.Background(), rawtest.NIC, tt.addr)
			if err == nil || inUse {
				t.Fatalf("Probe(%v) = %v, %v; want an error and not in use", tt.addr, inUse, err)
			}
			h.ExpectNothing(t)
		})
	}
}

func TestProbeEndsWithItsContext(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.S.Probe(ctx, rawtest.NIC, candidate)
		done <- err
	}()
	h.WaitTimers(t, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Probe after cancel: %v, want context.Canceled", err)
	}
}

// addWithACD assigns candidate/24 with conflict detection, driving the
// probe's timers, and reads the first announcement.
func addWithACD(t *testing.T, h *rawtest.Host, o stack.AddressOptions) {
	t.Helper()
	o.ACD = true
	done := make(chan error, 1)
	go func() {
		done <- h.S.AddAddressWith(context.Background(), rawtest.NIC, netip.PrefixFrom(candidate, 24), o)
	}()
	p := &probing{h: h}
	for range 4 {
		p.fire(t)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("AddAddressWith: %v", err)
		}
	case <-time.After(rawtest.Timeout):
		t.Fatal("AddAddressWith did not return")
	}
	for range 3 {
		checkProbe(t, h.Expect(t, rawtest.Timeout), candidate)
	}
	checkAnnouncement(t, h.Expect(t, rawtest.Timeout), candidate)
}

func TestAddressWithACDIsAnnouncedTwice(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	addWithACD(t, h, stack.AddressOptions{})
	if !h.S.IPv4().IsLocal(candidate) {
		t.Fatal("address not assigned after a clean probe")
	}
	// ANNOUNCE_NUM 2, ANNOUNCE_INTERVAL 2 s.
	h.Advance(t, 1, 2*time.Second-time.Nanosecond)
	h.ExpectNothing(t)
	h.Clock.Advance(time.Nanosecond)
	checkAnnouncement(t, h.Expect(t, rawtest.Timeout), candidate)
	h.ExpectNothing(t)
	if n := h.Clock.Pending(); n != 0 {
		t.Errorf("%d timers armed after the announcements", n)
	}
}

func TestAddressWithACDInUseIsNotAssigned(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	done := make(chan error, 1)
	go func() {
		done <- h.S.AddAddressWith(context.Background(), rawtest.NIC, netip.PrefixFrom(candidate, 24), stack.AddressOptions{ACD: true})
	}()
	p := &probing{h: h}
	p.fire(t)
	checkProbe(t, h.Expect(t, rawtest.Timeout), candidate)
	h.Inject(h.ARPFrame(t, layers.ARPReply, holderMAC, candidate, rawtest.StackMAC, zeroAddr))
	err := <-done
	var ce *arp.ConflictError
	if !errors.As(err, &ce) || !bytes.Equal(ce.MAC[:], holderMAC) {
		t.Fatalf("AddAddressWith: %v, want a conflict with %v", err, holderMAC)
	}
	if h.S.IPv4().IsLocal(candidate) {
		t.Error("an address in use was assigned")
	}
	h.ExpectNothing(t) // no announcement
}

// TestDefence pins RFC 5227 section 2.4's three policies against a
// station that claims the address once it is in use.
func TestDefence(t *testing.T) {
	type want struct {
		defended, gaveUp bool
	}
	tests := []struct {
		name   string
		policy arp.DefendPolicy
		at     []time.Duration // when conflicting packets come, after the address is taken
		want   []want
	}{
		{"(a) give up at the first conflict", arp.GiveUp, []time.Duration{5 * time.Second},
			[]want{{gaveUp: true}}},
		{"(b) defend once, give up on a second within DEFEND_INTERVAL", arp.DefendOnce, []time.Duration{5 * time.Second, 9 * time.Second},
			[]want{{defended: true}, {gaveUp: true}}},
		{"(b) defend again after DEFEND_INTERVAL", arp.DefendOnce, []time.Duration{5 * time.Second, 15 * time.Second},
			[]want{{defended: true}, {defended: true}}},
		{"(c) keep: at most one defence every DEFEND_INTERVAL", arp.Keep, []time.Duration{5 * time.Second, 9 * time.Second, 15 * time.Second},
			[]want{{defended: true}, {}, {defended: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{ARP: arp.Config{ACD: arp.ACDConfig{Announcements: 1}}})
			events := make(chan arp.Conflict, 4)
			addWithACD(t, h, stack.AddressOptions{Defend: tt.policy, OnConflict: func(c arp.Conflict) { events <- c }})
			start := h.Clock.Now()
			for i, at := range tt.at {
				h.Clock.Set(start.Add(at))
				// The other station's gratuitous ARP claiming it.
				h.Inject(h.ARPFrame(t, layers.ARPRequest, holderMAC, candidate, nil, candidate))
				seen := h.Barrier(t)
				w := tt.want[i]
				switch {
				case w.defended && (len(seen) != 1 || !isAnnouncement(t, seen[0])):
					t.Fatalf("conflict %d at %v: sent %d frames, want one announcement", i+1, at, len(seen))
				case !w.defended && len(seen) != 0:
					t.Fatalf("conflict %d at %v: sent %s, want nothing", i+1, at, rawtest.Describe(seen[0]))
				}
				if !w.defended && !w.gaveUp {
					continue
				}
				var c arp.Conflict
				select {
				case c = <-events:
				case <-time.After(rawtest.Timeout):
					t.Fatalf("conflict %d not reported", i+1)
				}
				if c.Defended != w.defended || c.GaveUp != w.gaveUp || c.Addr != candidate || !bytes.Equal(c.MAC[:], holderMAC) {
					t.Errorf("conflict %d reported as %+v, want defended %v, gave up %v, by %v", i+1, c, w.defended, w.gaveUp, holderMAC)
				}
				if w.gaveUp && h.S.IPv4().IsLocal(candidate) {
					t.Errorf("address still assigned after giving it up")
				}
			}
			last := tt.want[len(tt.want)-1]
			if !last.gaveUp && !h.S.IPv4().IsLocal(candidate) {
				t.Errorf("address removed while defended")
			}
			if got, want := h.Counter(t, "ARP.eth0.Conflicts"), int64(len(tt.at)); got != want {
				t.Errorf("Conflicts = %d, want %d", got, want)
			}
			lost := int64(0)
			if last.gaveUp {
				lost = 1
			}
			if got := h.Counter(t, "ARP.eth0.AddressesLost"); got != lost {
				t.Errorf("AddressesLost = %d, want %d", got, lost)
			}
			// The static address is never defended: a claim on it is
			// counted and logged, not answered with an announcement.
			h.Inject(h.ARPFrame(t, layers.ARPRequest, holderMAC, rawtest.StackAddr, nil, rawtest.StackAddr))
			for _, f := range h.Barrier(t) {
				if isAnnouncementOf(t, f, rawtest.StackAddr) {
					t.Errorf("the static address was defended: %s", rawtest.Describe(f))
				}
			}
			if got, want := h.Counter(t, "ARP.eth0.Conflicts"), int64(len(tt.at)+1); got != want {
				t.Errorf("Conflicts = %d after a claim on the static address, want %d", got, want)
			}
		})
	}
}

func isAnnouncement(t *testing.T, frame []byte) bool { return isAnnouncementOf(t, frame, candidate) }

func isAnnouncementOf(t *testing.T, frame []byte, addr netip.Addr) bool {
	t.Helper()
	_, a := rawtest.ARPOf(t, frame)
	return a.Operation == layers.ARPRequest && rawtest.Addr(a.SourceProtAddress) == addr &&
		rawtest.Addr(a.DstProtAddress) == addr && bytes.Equal(a.SourceHwAddress, rawtest.StackMAC)
}

// TestProbesAreRateLimitedAfterMaxConflicts pins RFC 5227 section
// 2.1.1: once MAX_CONFLICTS probes have found their address in use, a
// host probes for no more than one new address per RATE_LIMIT_INTERVAL.
func TestProbesAreRateLimitedAfterMaxConflicts(t *testing.T) {
	const maxConflicts = 2
	const interval = 60 * time.Second
	h := rawtest.New(t, stack.Config{ARP: arp.Config{ACD: arp.ACDConfig{MaxConflicts: maxConflicts, RateLimitInterval: interval}}})
	var lastStart time.Time
	for i := range maxConflicts + 1 {
		addr := netip.AddrFrom4([4]byte{10, 1, 0, byte(60 + i)})
		start := h.Clock.Now()
		p := startProbe(t, h, addr)
		d := p.fire(t)
		switch {
		case i < maxConflicts && d > time.Second:
			t.Fatalf("probe %d: first probe after %v, want within PROBE_WAIT", i+1, d)
		case i == maxConflicts && (start.Add(d).Before(lastStart.Add(interval)) || start.Add(d).After(lastStart.Add(interval+time.Second))):
			t.Fatalf("probe %d: first probe %v after the previous probe started, want RATE_LIMIT_INTERVAL %v (and PROBE_WAIT at most)",
				i+1, start.Add(d).Sub(lastStart), interval)
		}
		lastStart = start
		checkProbe(t, h.Expect(t, rawtest.Timeout), addr)
		h.Inject(h.ARPFrame(t, layers.ARPReply, holderMAC, addr, rawtest.StackMAC, zeroAddr))
		var ce *arp.ConflictError
		if err := p.result(t); !errors.As(err, &ce) {
			t.Fatalf("probe %d: %v, want a conflict", i+1, err)
		}
		h.Clock.Advance(time.Second)
	}
	if got := h.Counter(t, "ARP.eth0.ProbesRateLimited"); got != 1 {
		t.Errorf("ProbesRateLimited = %d, want 1", got)
	}
}

func TestAddressProbedAlreadyIsAnnouncedAtOnce(t *testing.T) {
	h := rawtest.New(t, stack.Config{ARP: arp.Config{ACD: arp.ACDConfig{Announcements: 1}}})
	p := startProbe(t, h, candidate)
	for range 4 {
		p.fire(t)
	}
	if err := p.result(t); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		checkProbe(t, h.Expect(t, rawtest.Timeout), candidate)
	}
	o := stack.AddressOptions{ACD: true, Probed: true}
	if err := h.S.AddAddressWith(context.Background(), rawtest.NIC, netip.PrefixFrom(candidate, 24), o); err != nil {
		t.Fatal(err)
	}
	checkAnnouncement(t, h.Expect(t, rawtest.Timeout), candidate)
	if policy, ok := mustARP(t, h).Defended(candidate); !ok || policy != arp.DefendOnce {
		t.Errorf("Defended = %v, %v; want defend once", policy, ok)
	}
	h.ExpectNothing(t)
}

func mustARP(t *testing.T, h *rawtest.Host) *arp.Protocol {
	t.Helper()
	a, err := h.S.ARP(rawtest.NIC)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
