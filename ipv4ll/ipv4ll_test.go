package ipv4ll_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/ipv4ll"
	"github.com/gonetstack/gonet/stack"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var mac = net.HardwareAddr{0x02, 0, 0x5e, 0x10, 0, 1}

// TestCandidatesAreInTheRangeAndRepeatable pins RFC 3927 section 2.1: the
// addresses are drawn from 169.254.1.0 to 169.254.254.255 ("the first 256
// and last 256 addresses ... are reserved and MUST NOT be selected"), by a
// generator seeded from the MAC, so that a host tries the same ones in
// the same order after a restart and two hosts different ones.
func TestCandidatesAreInTheRangeAndRepeatable(t *testing.T) {
	lo, hi := netip.MustParseAddr("169.254.1.0"), netip.MustParseAddr("169.254.254.255")
	a, b := ipv4ll.Candidates(mac), ipv4ll.Candidates(mac)
	other := ipv4ll.Candidates(net.HardwareAddr{0x02, 0, 0x5e, 0x10, 0, 2})
	seen := map[netip.Addr]bool{}
	differ := false
	for i := range 20000 {
		x := a()
		if x.Less(lo) || hi.Less(x) {
			t.Fatalf("candidate %d: %v, outside %v-%v", i, x, lo, hi)
		}
		if y := b(); y != x {
			t.Fatalf("candidate %d: %v, then %v from the same MAC", i, x, y)
		}
		differ = differ || other() != x
		seen[x] = true
	}
	if !differ {
		t.Error("two MACs draw the same sequence")
	}
	// 20000 draws over 65024 addresses: about 17400 distinct ones; far
	// fewer would be a generator covering part of the range.
	if len(seen) < 15000 {
		t.Errorf("%d distinct candidates in 20000 draws", len(seen))
	}
}

// fakeStack is a NIC whose link holds some addresses already.
type fakeStack struct {
	mu       sync.Mutex
	held     map[netip.Addr]bool // by other hosts
	probed   []netip.Addr
	assigned map[netip.Addr]stack.AddressOptions
	prefixes []netip.Prefix
	removed  []netip.Addr
}

func newFake(held ...netip.Addr) *fakeStack {
	f := &fakeStack{held: map[netip.Addr]bool{}, assigned: map[netip.Addr]stack.AddressOptions{}}
	for _, a := range held {
		f.held[a] = true
	}
	return f
}

func (f *fakeStack) HardwareAddr(string) (net.HardwareAddr, error) { return mac, nil }
func (f *fakeStack) AddStats(string, any)                          {}
func (f *fakeStack) Logger() *slog.Logger                          { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (f *fakeStack) Probe(ctx context.Context, _ string, a netip.Addr) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probed = append(f.probed, a)
	return f.held[a], nil
}

func (f *fakeStack) AddAddressWith(_ context.Context, _ string, p netip.Prefix, o stack.AddressOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assigned[p.Addr()] = o
	f.prefixes = append(f.prefixes, p)
	return nil
}

func (f *fakeStack) RemoveAddress(_ string, a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, a)
	delete(f.assigned, a)
	return nil
}

// takeAway has another host claim a twice: the defence gives it up.
func (f *fakeStack) takeAway(a netip.Addr) {
	f.mu.Lock()
	o := f.assigned[a]
	delete(f.assigned, a)
	f.held[a] = true
	f.mu.Unlock()
	o.OnConflict(arp.Conflict{NIC: "eth0", Addr: a, GaveUp: true})
}

func wait(t *testing.T, c *ipv4ll.Client) netip.Addr {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := c.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestClaimsTheFirstCandidateNobodyHolds pins sections 2.2 to 2.5: a
// candidate another host answers for is passed over; the next is assigned
// on 169.254/16, probed already, and defended once (2.5 (b)).
func TestClaimsTheFirstCandidateNobodyHolds(t *testing.T) {
	next := ipv4ll.Candidates(mac)
	first, second := next(), next()
	f := newFake(first)
	c, err := ipv4ll.Start(f, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := wait(t, c); got != second {
		t.Fatalf("claimed %v, want %v (the first, %v, being held)", got, second, first)
	}
	f.mu.Lock()
	o, probed, prefixes := f.assigned[second], slices.Clone(f.probed), slices.Clone(f.prefixes)
	f.mu.Unlock()
	if !slices.Equal(probed, []netip.Addr{first, second}) {
		t.Errorf("probed %v, want %v then %v", probed, first, second)
	}
	if len(prefixes) != 1 || prefixes[0] != netip.PrefixFrom(second, 16) || !o.ACD || !o.Probed || o.Defend != arp.DefendOnce {
		t.Errorf("assigned %v with %+v, want %v/16 by ACD, probed, defended once", prefixes, o, second)
	}
	if c.Stats.Probes.Load() != 2 || c.Stats.InUse.Load() != 1 || c.Stats.Claimed.Load() != 1 || c.Stats.Addresses.Load() != 1 {
		t.Errorf("Probes %d InUse %d Claimed %d Addresses %d, want 2, 1, 1, 1",
			c.Stats.Probes.Load(), c.Stats.InUse.Load(), c.Stats.Claimed.Load(), c.Stats.Addresses.Load())
	}
}

// TestAnAddressLostIsReplaced pins section 2.5: an address the defence
// gives up is no longer used, and a new one is chosen.
func TestAnAddressLostIsReplaced(t *testing.T) {
	next := ipv4ll.Candidates(mac)
	first, second := next(), next()
	f := newFake()
	c, err := ipv4ll.Start(f, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := wait(t, c); got != first {
		t.Fatalf("claimed %v, want %v", got, first)
	}
	f.takeAway(first)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if a, ok := c.Address(); ok && a == second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("holding %v after losing %v, want %v", first, first, second)
		}
		time.Sleep(time.Millisecond)
	}
	if c.Stats.Lost.Load() != 1 || c.Stats.Claimed.Load() != 2 || c.Stats.Addresses.Load() != 1 {
		t.Errorf("Lost %d Claimed %d Addresses %d, want 1, 2, 1", c.Stats.Lost.Load(), c.Stats.Claimed.Load(), c.Stats.Addresses.Load())
	}
}

func TestCloseTakesTheAddressAway(t *testing.T) {
	f := newFake()
	c, err := ipv4ll.Start(f, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	a := wait(t, c)
	c.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.removed, []netip.Addr{a}) {
		t.Errorf("removed %v at Close, want %v", f.removed, a)
	}
	if _, ok := c.Address(); ok {
		t.Error("an address held after Close")
	}
}
