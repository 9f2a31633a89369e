package integration

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
)

// The kernel's side of the TAP set down and up is, to GoNet, a cable
// pulled out and plugged in again (link.StateWatcher, from rtnetlink):
// GoNet puts its IPv6 addresses through DAD again (RFC 4862 sections 5.3
// and 5.4) and solicits routers (RFC 4861 section 6.3.7). Here the kernel
// took GoNet's global address while the link was down: the DAD of the link
// coming up finds it, and GoNet gives it up, where without it both would
// answer for it.
func TestLinkDownAndUpFindsAnAddressTakenMeanwhile(t *testing.T) {
	h := newHost6(t, options{}, true)
	counter := func(name string) int64 { return int64(h.stack.Counters()[name]) }
	state := func() ndp.AddrState {
		addrs := h.nd.Addresses() // in no order: one snapshot
		i := slices.IndexFunc(addrs, func(a ndp.Address) bool { return a.Prefix.Addr() == gonetAddr6.Addr() })
		if i < 0 {
			return ndp.AddrState(255)
		}
		return addrs[i].State
	}
	if s := state(); s != ndp.Preferred {
		t.Fatalf("GoNet's address %v at the start", s)
	}
	solicits := counter("NDP." + h.dev + ".OutRouterSolicits")

	h.run(t, 5*time.Second, "ip", "link", "set", "dev", h.dev, "down")
	waitFor(t, "GoNet to see the link down", 5*time.Second, func() bool {
		up, _ := h.stack.LinkUp(h.dev)
		return !up
	})
	// Counted from here: the set-up's own link up may have reached the
	// stack after it was built (the kernel's linkwatch sets a TAP
	// running up to a second after `ip link set up`), but the watcher's
	// one reader told it, and its watchers, before the down just seen.
	ups := counter("NDP." + h.dev + ".LinkUps")
	h.run(t, 5*time.Second, "ip", "-6", "addr", "add", gonetAddr6.String(), "dev", h.dev, "nodad")
	h.run(t, 5*time.Second, "ip", "link", "set", "dev", h.dev, "up")
	waitFor(t, "GoNet to find its address duplicate", 10*time.Second, func() bool { return state() == ndp.Duplicate })
	if n := counter("NDP."+h.dev+".LinkUps") - ups; n != 1 {
		t.Errorf("NDP.%s.LinkUps went up by %d, want 1", h.dev, n)
	}
	// The link-local address passes again, and routers are asked for.
	waitFor(t, "router solicitations after the link came up", 10*time.Second, func() bool {
		return counter("NDP."+h.dev+".OutRouterSolicits") > solicits
	})
	if s := state(); s != ndp.Duplicate {
		t.Errorf("GoNet's address %v, want duplicate", s)
	}
}

// The same for IPv4 with address conflict detection (RFC 5227 section
// 2.1): GoNet probes again for the address it defends when the link comes
// up, keeping it in use meanwhile, and the kernel, which took it while the
// link was down and does not defend it, answers the probe: GoNet gives
// the address up. Its static address, which nothing defends, stays.
func TestLinkDownAndUpFindsAnIPv4AddressTakenMeanwhile(t *testing.T) {
	// RFC 5227's timers shortened: a probe of 3 in about a second.
	acd := arp.ACDConfig{ProbeWait: 100 * time.Millisecond, ProbeMin: 200 * time.Millisecond, ProbeMax: 300 * time.Millisecond, AnnounceWait: 300 * time.Millisecond}
	h := newHost(t, options{stack: stack.Config{ARP: arp.Config{ACD: acd}}})
	defended := netip.MustParsePrefix("10.99.0.50/24")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.stack.AddAddressWith(ctx, h.dev, defended, stack.AddressOptions{ACD: true, Defend: arp.Keep}); err != nil {
		t.Fatal(err)
	}
	counter := func(name string) int64 { return int64(h.stack.Counters()["ARP."+h.dev+"."+name]) }

	h.run(t, 5*time.Second, "ip", "link", "set", "dev", h.dev, "down")
	waitFor(t, "GoNet to see the link down", 5*time.Second, func() bool {
		up, _ := h.stack.LinkUp(h.dev)
		return !up
	})
	verifications := counter("Verifications") // as the IPv6 test's LinkUps
	h.run(t, 5*time.Second, "ip", "addr", "add", defended.String(), "dev", h.dev)
	h.run(t, 5*time.Second, "ip", "link", "set", "dev", h.dev, "up")
	waitFor(t, "GoNet to give up the address the kernel took", 10*time.Second, func() bool {
		return !h.stack.IPv4().IsLocal(defended.Addr())
	})
	if n := counter("Verifications") - verifications; n != 1 {
		t.Errorf("ARP Verifications went up by %d, want 1", n)
	}
	if n := counter("AddressesLost"); n != 1 {
		t.Errorf("ARP AddressesLost = %d, want 1", n)
	}
	if !h.stack.IPv4().IsLocal(gonetAddr.Addr()) {
		t.Errorf("GoNet's static %v was given up too", gonetAddr.Addr())
	}
	// The kernel reaches its own address, and GoNet at its static one.
	h.run(t, 10*time.Second, "ping", "-c", "1", "-W", "2", gonetAddr.Addr().String())
}
