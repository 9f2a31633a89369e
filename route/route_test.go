package route_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/gonetstack/gonet/route"
)

// nic is an interface by name; "" is none.
type nic string

func (n nic) Name() string { return string(n) }

type rt = route.Route[nic]

func r(dst, gw string, iface nic, pref route.Preference) rt {
	x := rt{Dst: netip.MustParsePrefix(dst), Iface: iface, Preference: pref}
	if gw != "" {
		x.Gateway = netip.MustParseAddr(gw)
	}
	return x
}

func table(rs ...rt) route.Table[nic] {
	var t route.Table[nic]
	for _, x := range rs {
		t.Add(x)
	}
	return t
}

func TestRoutesAreSearchedLongestPrefixThenPreferenceThenAge(t *testing.T) {
	defLow := r("::/0", "fe80::1", "eth0", route.PreferenceLow)
	defHigh := r("::/0", "fe80::2", "eth1", route.PreferenceHigh)
	defMedium1 := r("::/0", "fe80::3", "eth0", route.PreferenceMedium)
	defMedium2 := r("::/0", "fe80::4", "eth1", route.PreferenceMedium)
	onLink := r("2001:db8:1::/64", "", "eth0", route.PreferenceMedium)
	wide := r("2001:db8::/32", "fe80::5", "eth1", route.PreferenceLow)
	got := table(defLow, defMedium1, wide, defHigh, onLink, defMedium2).All()
	want := []rt{onLink, wide, defHigh, defMedium1, defMedium2, defLow}
	if !slices.Equal(got, want) {
		t.Errorf("search order\n%v\nwant\n%v", got, want)
	}
}

func TestAddReplacesTheSameRouteOfAnotherPreference(t *testing.T) {
	low := r("::/0", "fe80::1", "eth0", route.PreferenceLow)
	other := r("::/0", "fe80::2", "eth0", route.PreferenceMedium)
	tb := table(low, other)
	high := low
	high.Preference = route.PreferenceHigh
	tb.Add(high)
	if got, want := tb.All(), []rt{high, other}; !slices.Equal(got, want) {
		t.Errorf("after a new preference: %v, want %v", got, want)
	}
	// The same route again keeps its place among its ties.
	tb = table(other, low, r("::/0", "fe80::9", "eth0", route.PreferenceMedium))
	tb.Add(other)
	if got := tb.All(); got[0] != other || tb.Len() != 3 {
		t.Errorf("after adding a route held already: %v, want %v first of 3", got, other)
	}
}

func TestAddAndRemoveTakeTheDestinationMasked(t *testing.T) {
	tb := table(r("10.1.2.3/24", "", "eth0", 0))
	if got := tb.All()[0].Dst; got != netip.MustParsePrefix("10.1.2.0/24") {
		t.Errorf("destination %v, want 10.1.2.0/24", got)
	}
	if !tb.Remove(r("10.1.2.99/24", "", "eth0", 0)) || tb.Len() != 0 {
		t.Errorf("Remove of the same prefix unmasked left %v", tb.All())
	}
}

func TestRemove(t *testing.T) {
	gw := r("::/0", "fe80::1", "eth0", route.PreferenceHigh)
	for _, c := range []struct {
		name  string
		rm    rt
		found bool
	}{
		{"whatever its preference", r("::/0", "fe80::1", "eth0", route.PreferenceLow), true},
		{"not through another gateway", r("::/0", "fe80::2", "eth0", route.PreferenceHigh), false},
		{"not out of another interface", r("::/0", "fe80::1", "eth1", route.PreferenceHigh), false},
		{"not to another prefix", r("2000::/3", "fe80::1", "eth0", route.PreferenceHigh), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := table(gw)
			removed := tb.Remove(c.rm)
			if gone := tb.Len() == 0; removed != c.found || gone != c.found {
				t.Errorf("Remove(%v) = %v leaving %v, want %v", c.rm, removed, tb.All(), c.found)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	tb := table(
		r("0.0.0.0/0", "10.0.0.1", "eth0", 0),
		r("10.0.0.0/24", "", "eth0", 0),
		r("10.1.0.0/16", "", "eth1", 0),
		r("10.1.2.0/24", "10.0.0.9", "eth0", 0),
	)
	for _, c := range []struct {
		dst  string
		only nic
		want string // the route's String; "" none
	}{
		{"10.1.2.3", "", "10.1.2.0/24 via 10.0.0.9 dev eth0"},
		{"10.1.2.3", "eth1", "10.1.0.0/16 dev eth1"},
		{"10.0.0.7", "", "10.0.0.0/24 dev eth0"},
		{"192.0.2.1", "", "0.0.0.0/0 via 10.0.0.1 dev eth0"},
		{"192.0.2.1", "eth1", ""},
		{"192.0.2.1", "eth9", ""},
	} {
		got, ok := tb.Lookup(netip.MustParseAddr(c.dst), c.only)
		if s := got.String(); ok != (c.want != "") || ok && s != c.want {
			t.Errorf("Lookup(%s, %q) = %q %v, want %q", c.dst, c.only, s, ok, c.want)
		}
	}
	var all []string
	for _, x := range tb.Searched() {
		all = append(all, x.String())
	}
	want := []string{"10.0.0.0/24 dev eth0", "10.1.2.0/24 via 10.0.0.9 dev eth0", "10.1.0.0/16 dev eth1", "0.0.0.0/0 via 10.0.0.1 dev eth0"}
	if !slices.Equal(all, want) {
		t.Errorf("Searched() = %q, want %q", all, want)
	}
}

func TestOnLink(t *testing.T) {
	tb := table(r("10.0.0.0/24", "", "eth0", 0), r("10.9.0.0/16", "10.0.0.1", "eth0", 0))
	for _, c := range []struct {
		a     string
		iface nic
		want  bool
	}{
		{"10.0.0.5", "eth0", true},
		{"10.0.0.5", "eth1", false},
		{"10.9.0.5", "eth0", false}, // through a gateway, not on-link
	} {
		if got := tb.OnLink(netip.MustParseAddr(c.a), c.iface); got != c.want {
			t.Errorf("OnLink(%s, %s) = %v, want %v", c.a, c.iface, got, c.want)
		}
	}
}

func TestACloneIsChangedAlone(t *testing.T) {
	tb := table(r("10.0.0.0/24", "", "eth0", 0), r("10.1.0.0/24", "", "eth0", 0))
	c := tb.Clone()
	c.Remove(r("10.0.0.0/24", "", "eth0", 0))
	c.Add(r("10.2.0.0/16", "", "eth1", 0))
	if tb.Len() != 2 || tb.All()[0].Dst != netip.MustParsePrefix("10.0.0.0/24") {
		t.Errorf("the original changed with its clone: %v", tb.All())
	}
}

func TestRouteString(t *testing.T) {
	for _, c := range []struct {
		r    rt
		want string
	}{
		{r("10.0.0.0/24", "", "eth0", 0), "10.0.0.0/24 dev eth0"},
		{r("::/0", "fe80::1", "eth0", route.PreferenceMedium), "::/0 via fe80::1 dev eth0"},
		{r("::/0", "fe80::1", "eth0", route.PreferenceHigh), "::/0 via fe80::1 dev eth0 pref high"},
		{r("::/0", "fe80::1", "eth0", route.PreferenceLow), "::/0 via fe80::1 dev eth0 pref low"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

func TestPreferenceFromBits(t *testing.T) {
	for bits, want := range map[uint8]route.Preference{0: route.PreferenceMedium, 1: route.PreferenceHigh, 2: route.PreferenceMedium, 3: route.PreferenceLow} {
		if got := route.PreferenceFromBits(bits); got != want {
			t.Errorf("PreferenceFromBits(%02b) = %v, want %v", bits, got, want)
		}
	}
}

// Whatever routers advertise and withdraw, in whatever order, the table
// stays in search order with one route per prefix, gateway and interface,
// and the oldest of equals first.
func TestAnySequenceOfChangesKeepsTheSearchOrder(t *testing.T) {
	prefixes := []string{"::/0", "2001:db8::/32", "2001:db8:1::/48", "2001:db8:1::/64", "fd00::/8"}
	gateways := []string{"", "fe80::1", "fe80::2", "fe80::3"}
	ifaces := []nic{"eth0", "eth1"}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var tb route.Table[nic]
		age := map[string]int{} // the step each route was added at, preference aside
		key := func(x rt) string { return fmt.Sprint(x.Dst, x.Gateway, x.Iface) }
		for step := range 50 {
			x := r(prefixes[rng.IntN(len(prefixes))], gateways[rng.IntN(len(gateways))],
				ifaces[rng.IntN(len(ifaces))], route.Preference(rng.IntN(3)-1))
			if rng.IntN(3) == 0 {
				if tb.Remove(x) {
					delete(age, key(x))
				}
				continue
			}
			if !tb.Has(x) {
				age[key(x)] = step
			}
			tb.Add(x)
		}
		rs := tb.Searched()
		if len(rs) != len(age) {
			t.Fatalf("round %d: %d routes, want %d: %v", round, len(rs), len(age), rs)
		}
		for i := 1; i < len(rs); i++ {
			a, b := rs[i-1], rs[i]
			switch {
			case a.Dst.Bits() < b.Dst.Bits():
				t.Fatalf("round %d: %v before the longer %v", round, a, b)
			case a.Dst.Bits() == b.Dst.Bits() && a.Preference < b.Preference:
				t.Fatalf("round %d: %v before the preferred %v", round, a, b)
			case a.Dst.Bits() == b.Dst.Bits() && a.Preference == b.Preference && age[key(a)] > age[key(b)]:
				t.Fatalf("round %d: %v before the older %v", round, a, b)
			}
		}
	}
}
