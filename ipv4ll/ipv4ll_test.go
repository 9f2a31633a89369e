package ipv4ll_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
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

// TestRememberedAddressIsProbedFirst pins section 2.1: "hosts with a
// previously recorded address SHOULD use that address as their first
// candidate when probing"; one another host holds now is passed over for
// the MAC's sequence, and one outside the range a host may choose from
// is never probed for.
func TestRememberedAddressIsProbedFirst(t *testing.T) {
	seq := ipv4ll.Candidates(mac)()
	remembered := netip.MustParseAddr("169.254.33.7")
	for _, tt := range []struct {
		name       string
		remembered netip.Addr
		held       []netip.Addr
		probed     []netip.Addr
	}{
		{"free", remembered, nil, []netip.Addr{remembered}},
		{"held by another host", remembered, []netip.Addr{remembered}, []netip.Addr{remembered, seq}},
		{"none", netip.Addr{}, nil, []netip.Addr{seq}},
		{"in the reserved first 256", netip.MustParseAddr("169.254.0.9"), nil, []netip.Addr{seq}},
		{"in the reserved last 256", netip.MustParseAddr("169.254.255.1"), nil, []netip.Addr{seq}},
		{"routable", netip.MustParseAddr("10.0.0.2"), nil, []netip.Addr{seq}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(tt.held...)
			var mu sync.Mutex
			var claimed []netip.Addr
			c, err := ipv4ll.StartWith(f, "eth0", ipv4ll.Config{Remembered: tt.remembered, OnClaim: func(a netip.Addr) {
				mu.Lock()
				claimed = append(claimed, a)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			want := tt.probed[len(tt.probed)-1]
			if got := wait(t, c); got != want {
				t.Fatalf("claimed %v, want %v", got, want)
			}
			f.mu.Lock()
			probed := slices.Clone(f.probed)
			f.mu.Unlock()
			if !slices.Equal(probed, tt.probed) {
				t.Errorf("probed %v, want %v", probed, tt.probed)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(claimed, []netip.Addr{want}) {
				t.Errorf("OnClaim called with %v, want %v", claimed, want)
			}
		})
	}
}

// TestOnClaimReportsTheReplacement: an address lost to another host
// (section 2.5) and replaced is reported again, for the caller to
// remember the new one rather than the one another host now holds.
func TestOnClaimReportsTheReplacement(t *testing.T) {
	remembered := netip.MustParseAddr("169.254.33.7")
	f := newFake()
	claimed := make(chan netip.Addr, 2)
	c, err := ipv4ll.StartWith(f, "eth0", ipv4ll.Config{Remembered: remembered, OnClaim: func(a netip.Addr) { claimed <- a }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if a := <-claimed; a != remembered {
		t.Fatalf("first claim %v, want %v", a, remembered)
	}
	f.takeAway(remembered)
	select {
	case a := <-claimed:
		if want := ipv4ll.Candidates(mac)(); a != want {
			t.Errorf("replacement %v, want %v, the MAC's first", a, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no claim after the address was lost")
	}
}

// TestAddressFileKeepsTheAddress: SaveAddress and LoadAddress give the
// address back; a file missing says so (fs.ErrNotExist), and one that
// holds no address a host may choose is refused.
func TestAddressFileKeepsTheAddress(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ipv4ll")
	if _, err := ipv4ll.LoadAddress(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadAddress of no file: %v, want fs.ErrNotExist", err)
	}
	a := netip.MustParseAddr("169.254.33.7")
	for range 2 { // the second replaces the first
		if err := ipv4ll.SaveAddress(path, a); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := ipv4ll.LoadAddress(path); err != nil || got != a {
		t.Errorf("LoadAddress = %v, %v; want %v", got, err, a)
	}
	for _, bad := range []string{"", "nonsense\n", "10.0.0.2\n", "169.254.0.1\n", "fe80::1\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ipv4ll.LoadAddress(path); err == nil {
			t.Errorf("LoadAddress of %q = %v, want an error", bad, got)
		}
	}
}
