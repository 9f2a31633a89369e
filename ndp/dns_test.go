package ndp_test

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// rdnssOpt is a Recursive DNS Server option (RFC 8106 section 5.1), built
// by hand.
func rdnssOpt(life uint32, servers ...string) layers.ICMPv6Option {
	d := binary.BigEndian.AppendUint32([]byte{0, 0}, life)
	for _, s := range servers {
		d = append(d, netip.MustParseAddr(s).AsSlice()...)
	}
	return layers.ICMPv6Option{Type: wire.NDOptRDNSS, Data: d}
}

// dnsslOpt is a DNS Search List option (RFC 8106 section 5.2), as wire
// encodes it (its tests check that against one built by hand).
func dnsslOpt(life uint32, domains ...string) layers.ICMPv6Option {
	b := make([]byte, wire.NDDNSSLLen(domains))
	wire.EncodeNDDNSSL(b, life, domains)
	return layers.ICMPv6Option{Type: wire.NDOptDNSSL, Data: b[2:]}
}

func (h *harness) raWith(opts ...layers.ICMPv6Option) {
	h.t.Helper()
	h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{RouterLifetime: 1800, Options: opts})
	h.sync()
}

// hostDNS returns what the host was last told, and how many times it was.
func (h *harness) hostDNS() (d ndp.DNS, calls int) {
	h.host.with(func(f *fakeHost) { d, calls = f.dns, f.dnsCalls })
	return d, calls
}

// wantDNS waits for the host to have been told servers and search: a
// lifetime's end reaches it from a timer's goroutine.
func (h *harness) wantDNS(what string, servers, search []string) {
	h.t.Helper()
	var got []string
	var d ndp.DNS
	deadline := time.Now().Add(timeout)
	for {
		d, _ = h.hostDNS()
		got = got[:0]
		for _, s := range d.Servers {
			got = append(got, s.String())
		}
		if slices.Equal(got, servers) && slices.Equal(d.Search, search) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: the host has servers %q and search %q, want %q and %q", what, got, d.Search, servers, search)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestAdvertisedDNSReachesTheHostAndExpires(t *testing.T) {
	h := newHarness(t, quiet)
	h.raWith(rdnssOpt(60, "2001:db8::53", "fe80::53"), dnsslOpt(90, "example.com", "lab.example.org"))
	// A link-local server is zoned with the NIC, for the resolver to
	// reach it there.
	h.wantDNS("advertised", []string{"2001:db8::53", "fe80::53%eth0"}, []string{"example.com", "lab.example.org"})
	if d := h.p.DNS(); len(d.Servers) != 2 || len(d.Search) != 2 {
		t.Errorf("DNS() = %+v", d)
	}
	h.clk.Advance(60 * time.Second)
	h.wantDNS("the servers' lifetime over", nil, []string{"example.com", "lab.example.org"})
	h.clk.Advance(30 * time.Second)
	h.wantDNS("the domains' lifetime over", nil, nil)
}

func TestAdvertisedDNSRefreshedTellsTheHostOnce(t *testing.T) {
	h := newHarness(t, quiet)
	for range 3 {
		h.raWith(rdnssOpt(60, "2001:db8::53"), dnsslOpt(60, "example.com"))
		h.clk.Advance(30 * time.Second)
		h.sync()
	}
	// Refreshed every 30 s, the lifetime never ran out; the host heard
	// of it once.
	h.wantDNS("refreshed", []string{"2001:db8::53"}, []string{"example.com"})
	if _, calls := h.hostDNS(); calls != 1 {
		t.Errorf("the host was told %d times, want once", calls)
	}
}

func TestAdvertisedDNSLifetimeZeroRemoves(t *testing.T) {
	h := newHarness(t, quiet)
	h.raWith(rdnssOpt(wire.NDInfiniteLifetime, "2001:db8::53", "2001:db8::54"), dnsslOpt(wire.NDInfiniteLifetime, "a.test", "b.test"))
	h.raWith(rdnssOpt(0, "2001:db8::53"), dnsslOpt(0, "b.test"))
	h.wantDNS("lifetime zero", []string{"2001:db8::54"}, []string{"a.test"})
	h.clk.Advance(1000 * time.Hour)
	h.sync()
	h.wantDNS("infinite lifetimes", []string{"2001:db8::54"}, []string{"a.test"})
}

// TestAdvertisedDNSNewestFirstFullListDropsFirstToExpire pins RFC 8106
// section 5.3.1 (the latest received is preferred) and section 6.2 (a
// full list loses the entry with the shortest expiration time).
func TestAdvertisedDNSNewestFirstFullListDropsFirstToExpire(t *testing.T) {
	h := newHarness(t, quiet)
	h.raWith(rdnssOpt(300, "2001:db8::b"))
	h.raWith(rdnssOpt(100, "2001:db8::a"))
	h.raWith(rdnssOpt(200, "2001:db8::c"))
	h.wantDNS("three servers", []string{"2001:db8::c", "2001:db8::a", "2001:db8::b"}, nil)
	h.raWith(rdnssOpt(250, "2001:db8::d"))
	h.wantDNS("a fourth", []string{"2001:db8::d", "2001:db8::c", "2001:db8::b"}, nil)
	// One already listed moves to the front.
	h.raWith(rdnssOpt(250, "2001:db8::b"))
	h.wantDNS("one advertised again", []string{"2001:db8::b", "2001:db8::d", "2001:db8::c"}, nil)
	if n := h.p.Stats.DNSReplaced.Load(); n != 1 {
		t.Errorf("DNSReplaced = %d, want 1", n)
	}

	// Seven domains in one option, all expiring together: the last
	// named, the least preferred, goes.
	h.raWith(dnsslOpt(60, "a.test", "b.test", "c.test", "d.test", "e.test", "f.test", "g.test"))
	h.wantDNS("seven domains", []string{"2001:db8::b", "2001:db8::d", "2001:db8::c"},
		[]string{"a.test", "b.test", "c.test", "d.test", "e.test", "f.test"})
}

func TestAdvertisedDNSInvalidOptionsAreDiscarded(t *testing.T) {
	for _, tt := range []struct {
		name string
		opt  layers.ICMPv6Option
	}{
		{"a multicast server", rdnssOpt(60, "2001:db8::53", "ff02::1")},
		{"the unspecified address", rdnssOpt(60, "::")},
		{"the loopback address", rdnssOpt(60, "::1")},
		{"an IPv4-mapped address", rdnssOpt(60, "::ffff:192.0.2.53")},
		{"a server and a half", layers.ICMPv6Option{Type: wire.NDOptRDNSS, Data: append(rdnssOpt(60, "2001:db8::53").Data, make([]byte, 8)...)}},
		{"a compressed domain", layers.ICMPv6Option{Type: wire.NDOptDNSSL, Data: []byte{0, 0, 0, 0, 0, 60, 3, 'l', 'a', 'b', 0xc0, 6, 0, 0}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, quiet)
			h.raWith(tt.opt)
			if n := h.p.Stats.DNSOptionsIgnored.Load(); n != 1 {
				t.Errorf("DNSOptionsIgnored = %d, want 1", n)
			}
			if d, calls := h.hostDNS(); calls != 0 {
				t.Errorf("the host was told %+v", d)
			}
		})
	}
}
