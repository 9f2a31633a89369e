package ndp_test

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// The router's side (advertise.go): what an advertising interface sends,
// and when.

var (
	guestPrefix = netip.MustParsePrefix("fd00::/64")
	dnsServer   = netip.MustParseAddr("fd00::3")
)

func newRouter(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, ndp.Config{NoDAD: true, NoRouterSolicitation: true})
	err := h.p.Advertise(ndp.RouterConfig{
		Prefixes:   []ndp.AdvPrefix{{Prefix: guestPrefix}},
		DNSServers: []netip.Addr{dnsServer},
		DNSSearch:  []string{"lab.test."},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// nextRA steps the virtual clock by step until the stack sends a Router
// Advertisement, and returns it with the virtual time it went at.
func (h *harness) nextRA(step time.Duration) (*frame, time.Time) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case raw := <-h.frames:
			if f := decode(raw); f.typ() == layers.ICMPv6TypeRouterAdvertisement {
				return f, h.clk.Now()
			}
			continue
		case <-time.After(2 * time.Millisecond):
		}
		h.clk.Advance(step)
	}
	h.t.Fatalf("no router advertisement within %v", timeout)
	return nil, time.Time{}
}

func TestAdvertisementNamesPrefixMTUAndDNSServer(t *testing.T) {
	h := newRouter(t)
	f, _ := h.nextRA(0)
	mac, _ := ipv6.MulticastMAC(ipv6.AllNodes)
	if !f.ip6.SrcIP.Equal(ipOf(stackLL)) || !f.ip6.DstIP.Equal(ipOf(ipv6.AllNodes)) || f.ip6.HopLimit != 255 || string(f.eth.DstMAC) != string(mac[:]) {
		t.Errorf("RA %v > %v (%v) hop limit %d; want from the link-local address to all-nodes, hop limit 255", f.ip6.SrcIP, f.ip6.DstIP, f.eth.DstMAC, f.ip6.HopLimit)
	}
	ra, ok := f.pkt.Layer(layers.LayerTypeICMPv6RouterAdvertisement).(*layers.ICMPv6RouterAdvertisement)
	if !ok {
		t.Fatalf("gopacket does not decode an RA: %v", f.pkt)
	}
	if ra.HopLimit != 64 || ra.RouterLifetime != 1800 || ra.Flags != 0 {
		t.Errorf("RA hop limit %d, router lifetime %d, flags %#x; want 64, 1800 (3 MaxRtrAdvInterval), 0", ra.HopLimit, ra.RouterLifetime, ra.Flags)
	}
	seen := map[layers.ICMPv6Opt]bool{}
	for _, o := range ra.Options {
		seen[o.Type] = true
		switch o.Type {
		case layers.ICMPv6OptSourceAddress:
			if string(o.Data) != string(stackMAC[:]) {
				t.Errorf("source link-layer address %x, want %v", o.Data, stackMAC)
			}
		case layers.ICMPv6OptMTU:
			if mtu := binary.BigEndian.Uint32(o.Data[2:]); mtu != 1500 {
				t.Errorf("MTU option %d, want the NIC's 1500", mtu)
			}
		case layers.ICMPv6OptPrefixInfo:
			d := o.Data
			got := netip.PrefixFrom(netip.AddrFrom16([16]byte(d[14:30])), int(d[0]))
			valid, preferred := binary.BigEndian.Uint32(d[2:]), binary.BigEndian.Uint32(d[6:])
			if got != guestPrefix || d[1] != 0xc0 || valid != 30*24*3600 || preferred != 7*24*3600 {
				t.Errorf("prefix %v flags %#x valid %d preferred %d; want %v, on-link and autonomous, 30 and 7 days", got, d[1], valid, preferred, guestPrefix)
			}
		case wire.NDOptRDNSS:
			life := binary.BigEndian.Uint32(o.Data[2:])
			srv := netip.AddrFrom16([16]byte(o.Data[6:22]))
			if len(o.Data) != 22 || life != 1800 || srv != dnsServer {
				t.Errorf("RDNSS %d bytes lifetime %d server %v; want one server %v for 1800 s", len(o.Data), life, srv, dnsServer)
			}
		case wire.NDOptDNSSL:
			// lab.test as RFC 1035 section 3.1 has it, padded with
			// zeros to 24 bytes with the type and length.
			want := "\x00\x00\x00\x00\x07\x08\x03lab\x04test\x00\x00\x00\x00\x00\x00\x00"
			if string(o.Data) != want {
				t.Errorf("DNSSL %q, want %q (lab.test for 1800 s)", o.Data, want)
			}
		}
	}
	for _, want := range []layers.ICMPv6Opt{layers.ICMPv6OptSourceAddress, layers.ICMPv6OptMTU, layers.ICMPv6OptPrefixInfo, wire.NDOptRDNSS, wire.NDOptDNSSL} {
		if !seen[want] {
			t.Errorf("RA without option %v", want)
		}
	}
}

func TestFirstAdvertisementsComeFasterThenWithinTheIntervals(t *testing.T) {
	h := newRouter(t)
	_, last := h.nextRA(0)
	for i := 1; i <= ndp.MaxInitialRtrAdvertisements+2; i++ {
		_, at := h.nextRA(time.Second)
		gap := at.Sub(last)
		lo, hi := 198*time.Second, 600*time.Second
		if i < ndp.MaxInitialRtrAdvertisements {
			hi = ndp.MaxInitialRtrAdvertInterval
			lo = min(lo, hi)
		}
		if gap < lo || gap > hi+time.Second {
			t.Errorf("advertisement %d came %v after the one before; want from %v to %v (RFC 4861 6.2.4)", i, gap, lo, hi)
		}
		last = at
	}
}

func TestSolicitationIsAnsweredNoSoonerThanMinDelayBetweenRAs(t *testing.T) {
	h := newRouter(t)
	_, first := h.nextRA(0)
	h.inject(msg{src: peerLL, dst: ipv6.AllRouters}, layers.ICMPv6TypeRouterSolicitation,
		&layers.ICMPv6RouterSolicitation{Options: layers.ICMPv6Options{llOpt(layers.ICMPv6OptSourceAddress, peerMAC)}})
	_, at := h.nextRA(50 * time.Millisecond)
	if gap := at.Sub(first); gap < ndp.MinDelayBetweenRAs || gap > ndp.MinDelayBetweenRAs+ndp.MaxRADelayTime+50*time.Millisecond {
		t.Errorf("answer to a solicitation %v after the last advertisement; want MIN_DELAY_BETWEEN_RAS (3 s) and at most MAX_RA_DELAY_TIME more (RFC 4861 6.2.6)", gap)
	}
	if st := h.state(peerLL); st != ndp.Stale {
		t.Errorf("soliciting host's cache entry %v, want STALE from its source link-layer address (6.2.6)", st)
	}
}

func TestRouterAnswersSolicitationsWithTheRouterFlag(t *testing.T) {
	h := newRouter(t)
	h.injectNS(msg{src: peerLL, dst: ipv6.SolicitedNode(stackLL)}, stackLL, llOpt(layers.ICMPv6OptSourceAddress, peerMAC))
	f := h.next(layers.ICMPv6TypeNeighborAdvertisement)
	na := f.pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if na.Flags&naRouter == 0 || na.Flags&naSolicited == 0 {
		t.Errorf("NA flags %#x; want Router and Solicited (RFC 4861 7.2.4)", na.Flags)
	}
}

func TestRouterTakesNothingFromOtherRoutersAdvertisements(t *testing.T) {
	h := newRouter(t)
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 1800,
		Options: layers.ICMPv6Options{prefixInfo{prefix1, true, true, 3600, 3600}.opt()}})
	h.sync()
	if n := h.p.Stats.InOtherRouterAds.Load(); n != 1 {
		t.Errorf("InOtherRouterAds = %d, want 1", n)
	}
	if r := h.p.Routers(); len(r) != 0 {
		t.Errorf("default routers %v; a router takes none from advertisements (6.2.7)", r)
	}
}

func TestAdvertiseRefusesWhatRFC4861Forbids(t *testing.T) {
	for name, cfg := range map[string]ndp.RouterConfig{
		"MaxRtrAdvInterval under 4 s":              {MaxRtrAdvInterval: 3 * time.Second},
		"MinRtrAdvInterval over 0.75 max":          {MaxRtrAdvInterval: 100 * time.Second, MinRtrAdvInterval: 80 * time.Second},
		"router lifetime over 9000 s":              {DefaultLifetime: 9001 * time.Second},
		"link MTU under 1280":                      {LinkMTU: 1000},
		"link-local prefix":                        {Prefixes: []ndp.AdvPrefix{{Prefix: netip.MustParsePrefix("fe80::/64")}}},
		"preferred past valid":                     {Prefixes: []ndp.AdvPrefix{{Prefix: guestPrefix, ValidLifetime: time.Hour, PreferredLife: 2 * time.Hour}}},
		"multicast DNS server":                     {DNSServers: []netip.Addr{ipv6.AllNodes}},
		"search domain with an empty label":        {DNSSearch: []string{"lab..test"}},
		"search domain's label of 64 bytes":        {DNSSearch: []string{strings.Repeat("x", 64) + ".test"}},
		"more search domains than an option holds": {DNSSearch: slices.Repeat([]string{strings.Repeat("x", 63) + ".test"}, 30)},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, ndp.Config{NoDAD: true, NoRouterSolicitation: true})
			if err := h.p.Advertise(cfg); err == nil {
				t.Error("Advertise accepted it")
			}
		})
	}
}

func TestClosingRouterAdvertisesALifetimeOfZero(t *testing.T) {
	h := newRouter(t)
	h.nextRA(0)
	h.p.Close()
	f := h.next(layers.ICMPv6TypeRouterAdvertisement)
	ra := f.pkt.Layer(layers.LayerTypeICMPv6RouterAdvertisement).(*layers.ICMPv6RouterAdvertisement)
	if ra.RouterLifetime != 0 {
		t.Errorf("final advertisement's router lifetime %d, want 0 (RFC 4861 6.2.5)", ra.RouterLifetime)
	}
}
