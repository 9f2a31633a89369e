package wire_test

import (
	"bytes"
	"testing"

	"github.com/gonetstack/gonet/wire"
)

// refNDOptionsOK is ParseNDOptions's contract restated from RFC 4861
// section 4.6.
func refNDOptionsOK(b []byte) bool {
	for len(b) > 0 {
		if len(b) < 2 || b[1] == 0 || int(b[1])*8 > len(b) {
			return false
		}
		b = b[int(b[1])*8:]
	}
	return true
}

func FuzzParseNDOptions(f *testing.F) {
	f.Add([]byte{})
	for _, c := range ndCases {
		f.Add(c.build()[c.fixed:])
	}
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 4, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		opts, ok := wire.ParseNDOptions(data)
		if !checkParse(t, "ParseNDOptions", opts, ok, refNDOptionsOK(data)) {
			return
		}
		total := 0
		for len(opts) > 0 {
			var o wire.NDOption
			o, opts = opts.Next()
			if o.Len() == 0 || o.Len()%8 != 0 || o.Len() != int(o[1])*8 || len(o.Body()) != o.Len()-2 {
				t.Fatalf("option %x: Len %d", []byte(o), o.Len())
			}
			total += o.Len()
			checkNDOptionRoundTrip(t, o)
		}
		if total != len(data) {
			t.Fatalf("options cover %d bytes of %d", total, len(data))
		}
	})
}

// checkNDOptionRoundTrip encodes again what an option's accessor read and
// compares, reserved fields aside.
func checkNDOptionRoundTrip(t *testing.T, o wire.NDOption) {
	t.Helper()
	re := make([]byte, o.Len())
	if m, ok := o.LinkLayerAddr(); ok {
		wire.EncodeNDLinkLayerAddr(re, o.Type(), m)
		if !bytes.Equal(re, o) {
			t.Fatalf("link-layer address option %x encodes as %x", []byte(o), re)
		}
	}
	if n, ok := o.Nonce(); ok && len(n) == wire.NDNonceSize {
		wire.EncodeNDNonce(re, [wire.NDNonceSize]byte(n))
		if !bytes.Equal(re, o) {
			t.Fatalf("nonce option %x encodes as %x", []byte(o), re)
		}
	}
	if mtu, ok := o.MTU(); ok {
		wire.EncodeNDMTU(re, mtu)
		if !bytes.Equal(re[:2], o[:2]) || !bytes.Equal(re[4:], o[4:]) {
			t.Fatalf("MTU option %x encodes as %x", []byte(o), re)
		}
	}
	if p, ok := o.PrefixInfo(); ok && p.Prefix().IsValid() {
		wire.EncodeNDPrefixInfo(re, &wire.NDPrefixInfoFields{Prefix: p.Prefix(), OnLink: p.OnLink(), Autonomous: p.Autonomous(),
			ValidLifetime: p.ValidLifetime(), PreferredLifetime: p.PreferredLifetime()})
		if !bytes.Equal(re[:3], o[:3]) || re[3] != o[3]&0xc0 || !bytes.Equal(re[4:12], o[4:12]) || !bytes.Equal(re[16:], o[16:]) {
			t.Fatalf("prefix information option %x encodes as %x", []byte(o), re)
		}
	}
	if life, servers, ok := o.RDNSS(); ok {
		wire.EncodeNDRDNSS(re, life, servers)
		if !bytes.Equal(re[:2], o[:2]) || !bytes.Equal(re[4:], o[4:]) {
			t.Fatalf("RDNSS option %x encodes as %x", []byte(o), re)
		}
	}
	// A DNSSL option padded past the next multiple of 8 octets is read,
	// but encodes shorter.
	if life, domains, ok := o.DNSSL(); ok && wire.NDDNSSLLen(domains) == o.Len() {
		wire.EncodeNDDNSSL(re, life, domains)
		if !bytes.Equal(re[:2], o[:2]) || !bytes.Equal(re[4:], o[4:]) {
			t.Fatalf("DNSSL option %x (%q) encodes as %x", []byte(o), domains, re)
		}
	}
	// A Route Information option longer than its prefix needs is read,
	// but encodes shorter.
	if r, ok := o.RouteInfo(); ok && wire.NDRouteInfoLen(r.Prefix.Bits()) == o.Len() {
		wire.EncodeNDRouteInfo(re, &r)
		got, _ := wire.NDOption(re).RouteInfo()
		if got != r || !bytes.Equal(re[:3], o[:3]) || re[3] != o[3]&0x18 || !bytes.Equal(re[4:8], o[4:8]) {
			t.Fatalf("route information option %x encodes as %x", []byte(o), re)
		}
	}
	if pkt, ok := o.RedirectedHeader(); ok {
		wire.EncodeNDRedirectedHeader(re, pkt)
		if !bytes.Equal(re[:2], o[:2]) || !bytes.Equal(re[8:], o[8:]) {
			t.Fatalf("redirected header option %x encodes as %x", []byte(o), re)
		}
	}
}

// FuzzParseND parses its input as each of the five ND messages; each that
// accepts it must encode back to the same fixed part, reserved bits aside.
func FuzzParseND(f *testing.F) {
	f.Add([]byte{})
	for _, c := range ndCases {
		f.Add(c.build())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		optsOK := func(n int) bool { return len(data) >= n && refNDOptionsOK(data[n:]) }
		typ := uint8(0)
		if len(data) > 0 {
			typ = data[0]
		}
		re := make([]byte, len(data))
		copy(re, data)
		if m, ok := wire.ParseRouterSolicitation(data); checkParse(t, "ParseRouterSolicitation", m, ok, typ == wire.ICMPv6RouterSolicitation && optsOK(wire.RouterSolicitationLen)) {
			wire.EncodeRouterSolicitation(re)
			checkNDFixed(t, re, data, wire.RouterSolicitationLen, nil)
		}
		if m, ok := wire.ParseRouterAdvertisement(data); checkParse(t, "ParseRouterAdvertisement", m, ok, typ == wire.ICMPv6RouterAdvertisement && optsOK(wire.RouterAdvertisementLen)) {
			wire.EncodeRouterAdvertisement(re, &wire.RouterAdvertisementFields{CurHopLimit: m.CurHopLimit(), Managed: m.Managed(), Other: m.Other(),
				Preference: m.Preference(), RouterLifetime: m.RouterLifetime(), ReachableTime: m.ReachableTime(), RetransTimer: m.RetransTimer()})
			checkNDFixed(t, re, data, wire.RouterAdvertisementLen, map[int]byte{5: 0xd8})
		}
		if m, ok := wire.ParseNeighborSolicitation(data); checkParse(t, "ParseNeighborSolicitation", m, ok, typ == wire.ICMPv6NeighborSolicitation && optsOK(wire.NeighborSolicitationLen)) {
			wire.EncodeNeighborSolicitation(re, m.Target())
			checkNDFixed(t, re, data, wire.NeighborSolicitationLen, nil)
		}
		if m, ok := wire.ParseNeighborAdvertisement(data); checkParse(t, "ParseNeighborAdvertisement", m, ok, typ == wire.ICMPv6NeighborAdvertisement && optsOK(wire.NeighborAdvertisementLen)) {
			wire.EncodeNeighborAdvertisement(re, &wire.NeighborAdvertisementFields{Router: m.Router(), Solicited: m.Solicited(), Override: m.Override(), Target: m.Target()})
			checkNDFixed(t, re, data, wire.NeighborAdvertisementLen, map[int]byte{4: 0xe0})
		}
		if m, ok := wire.ParseRedirect(data); checkParse(t, "ParseRedirect", m, ok, typ == wire.ICMPv6Redirect && optsOK(wire.RedirectLen)) {
			wire.EncodeRedirect(re, m.Target(), m.Dst())
			checkNDFixed(t, re, data, wire.RedirectLen, nil)
		}
	})
}

// checkNDFixed compares the message re encodes with the original, then
// restores re: code, checksum and the reserved word are zero, the bytes of
// keep are the original's masked, the rest (addresses, RA fields past the
// flags, options) the original's.
func checkNDFixed(t *testing.T, re, orig []byte, n int, keep map[int]byte) {
	t.Helper()
	want := append([]byte(nil), orig...)
	clear(want[1:8])
	if n == wire.RouterAdvertisementLen {
		want[4], want[6], want[7] = orig[4], orig[6], orig[7] // hop limit, router lifetime
	}
	for i, mask := range keep {
		want[i] = orig[i] & mask
	}
	if !bytes.Equal(re, want) {
		t.Fatalf("encodes as %x, want %x (from %x)", re[:n], want[:n], orig[:n])
	}
	copy(re, orig)
}
