package ndp_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

var tempConfig = ndp.Config{NoDAD: true, NoRouterSolicitation: true, TempAddresses: true}

// temporaries returns the temporary addresses ndp holds, and the host was
// told were temporary.
func (h *harness) temporaries() (held []ndp.Address, told []netip.Addr) {
	for _, a := range h.p.Addresses() {
		if a.Temporary {
			held = append(held, a)
		}
	}
	h.host.with(func(f *fakeHost) { told = slices.Clone(f.temporary) })
	return held, told
}

func (h *harness) raPrefix(valid, preferred uint32) {
	h.t.Helper()
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 0, Options: layers.ICMPv6Options{
		prefixInfo{prefix1, true, true, valid, preferred}.opt(),
	}})
	h.sync()
}

// regenAdvance is REGEN_ADVANCE with one DAD transmission and RetransTimer
// 1 s: 2 + 3 s.
const regenAdvance = 5 * time.Second

func TestTemporaryAddressBesideThePublicOneRenewedADayAtATime(t *testing.T) {
	h := newHarness(t, tempConfig)
	h.raPrefix(3*24*3600, 2*24*3600)
	eventually(t, "the public address", func() bool { s, _ := h.host.addr(slaac1); return s == ndp.Preferred })
	var first ndp.Address
	eventually(t, "a temporary address", func() bool {
		held, told := h.temporaries()
		if len(held) != 1 || len(told) != 1 || held[0].State != ndp.Preferred {
			return false
		}
		first = held[0]
		return told[0] == first.Prefix.Addr()
	})
	a := first.Prefix.Addr()
	if !prefix1.Contains(a) || a == slaac1 || first.Prefix.Bits() != 64 {
		t.Fatalf("temporary address %v, want another address in %v", first.Prefix, prefix1)
	}
	// RFC 8981 section 3.4: valid for TEMP_VALID_LIFETIME (2 days, less
	// than the prefix's 3), preferred for TEMP_PREFERRED_LIFETIME (1 day)
	// less a DESYNC_FACTOR of at most 0.4 of it.
	if got := first.ValidUntil.Sub(start); got != ndp.TempValidLifetime {
		t.Errorf("valid for %v, want %v", got, ndp.TempValidLifetime)
	}
	if got := first.PreferredUntil.Sub(start); got > ndp.TempPreferredLifetime || got < ndp.TempPreferredLifetime-ndp.MaxDesyncFactor {
		t.Errorf("preferred for %v, want from %v to %v", got, ndp.TempPreferredLifetime-ndp.MaxDesyncFactor, ndp.TempPreferredLifetime)
	}

	// The same prefix advertised again forms no second one.
	h.raPrefix(3*24*3600, 2*24*3600)
	if held, _ := h.temporaries(); len(held) != 1 {
		t.Errorf("%d temporary addresses after the prefix's refresh, want 1", len(held))
	}

	// REGEN_ADVANCE before its deprecation, its successor.
	h.clk.Set(first.PreferredUntil.Add(-regenAdvance))
	var second ndp.Address
	eventually(t, "the successor", func() bool {
		held, _ := h.temporaries()
		for _, x := range held {
			if x.Prefix.Addr() != a && x.State == ndp.Preferred {
				second = x
				return true
			}
		}
		return false
	})
	if s, _ := h.host.addr(a); s != ndp.Preferred {
		t.Errorf("the first is %v before its preferred lifetime ends, want preferred", s)
	}
	// Its preferred lifetime over: deprecated, still held.
	h.clk.Set(first.PreferredUntil)
	eventually(t, "the first to be deprecated", func() bool { s, _ := h.host.addr(a); return s == ndp.Deprecated })
	// Its valid lifetime over: gone; the successor stays.
	h.clk.Set(first.ValidUntil)
	eventually(t, "the first to go", func() bool { _, ok := h.host.addr(a); return !ok })
	if _, ok := h.host.addr(second.Prefix.Addr()); !ok {
		t.Error("the successor went with it")
	}
	if n := h.p.Stats.TempAddrs.Load(); n < 2 {
		t.Errorf("TempAddrs = %d, want at least 2", n)
	}
}

func TestNoTemporaryAddressOutlivingOnlyREGEN_ADVANCE(t *testing.T) {
	h := newHarness(t, tempConfig)
	h.raPrefix(3600, uint32(regenAdvance/time.Second)) // "MUST NOT be configured"
	eventually(t, "the public address", func() bool { s, _ := h.host.addr(slaac1); return s == ndp.Preferred })
	if held, _ := h.temporaries(); len(held) != 0 {
		t.Errorf("temporary addresses %v, want none", held)
	}
}

func TestTemporaryAddressFollowsAShorterAdvertisedLifetime(t *testing.T) {
	h := newHarness(t, tempConfig)
	h.raPrefix(3600, 1800)
	var held []ndp.Address
	eventually(t, "a temporary address", func() bool { held, _ = h.temporaries(); return len(held) == 1 })
	if v, p := held[0].ValidUntil.Sub(start), held[0].PreferredUntil.Sub(start); v != time.Hour || p != 30*time.Minute {
		t.Errorf("valid %v preferred %v, want the prefix's 1h and 30m", v, p)
	}
	// Without TempAddresses, none.
	h2 := newHarness(t, quiet)
	h2.raPrefix(3600, 1800)
	eventually(t, "the public address", func() bool { s, _ := h2.host.addr(slaac1); return s == ndp.Preferred })
	if held, _ := h2.temporaries(); len(held) != 0 {
		t.Errorf("temporary addresses %v without Config.TempAddresses", held)
	}
}

// TestTemporaryDuplicateIsReplaced pins RFC 8981 section 3.4: a temporary
// address DAD finds in use is replaced by a new random one.
func TestTemporaryDuplicateIsReplaced(t *testing.T) {
	cfg := withDAD
	cfg.TempAddresses = true
	h := newHarness(t, cfg)
	h.raPrefix(3600, 1800)
	var first netip.Addr
	eventually(t, "a tentative temporary address", func() bool {
		_, told := h.temporaries()
		if len(told) == 1 {
			first = told[0]
		}
		return len(told) == 1
	})
	other := wire.MAC{0x02, 0, 0, 0, 0, 0x44}
	h.injectNA(msg{src: first, dst: ipv6.AllNodes}, first, naOverride, llOpt(layers.ICMPv6OptTargetAddress, other))
	eventually(t, "the duplicate's replacement", func() bool {
		_, told := h.temporaries()
		return len(told) == 2 && told[1] != first
	})
	if s := h.addrState(first); s != ndp.Duplicate {
		t.Errorf("the first is %v, want duplicate", s)
	}
	if n := h.p.Stats.TempAddrs.Load(); n != 2 {
		t.Errorf("TempAddrs = %d, want 2", n)
	}
}
