package wire_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// ndOpt is one ND option: how wire encodes it, and the same option as
// gopacket holds it.
type ndOpt struct {
	len    int
	encode func(b []byte)
	g      layers.ICMPv6Option
}

func slla(m wire.MAC) ndOpt {
	return ndOpt{wire.NDLinkLayerAddrLen, func(b []byte) { wire.EncodeNDLinkLayerAddr(b, wire.NDOptSourceLinkAddr, m) },
		layers.ICMPv6Option{Type: layers.ICMPv6OptSourceAddress, Data: m[:]}}
}

func tlla(m wire.MAC) ndOpt {
	return ndOpt{wire.NDLinkLayerAddrLen, func(b []byte) { wire.EncodeNDLinkLayerAddr(b, wire.NDOptTargetLinkAddr, m) },
		layers.ICMPv6Option{Type: layers.ICMPv6OptTargetAddress, Data: m[:]}}
}

func nonceOpt(n [wire.NDNonceSize]byte) ndOpt {
	return ndOpt{wire.NDNonceLen, func(b []byte) { wire.EncodeNDNonce(b, n) },
		layers.ICMPv6Option{Type: layers.ICMPv6Opt(wire.NDOptNonce), Data: n[:]}}
}

func mtuOpt(mtu uint32) ndOpt {
	return ndOpt{wire.NDMTULen, func(b []byte) { wire.EncodeNDMTU(b, mtu) },
		layers.ICMPv6Option{Type: layers.ICMPv6OptMTU, Data: binary.BigEndian.AppendUint32([]byte{0, 0}, mtu)}}
}

func prefixOpt(f wire.NDPrefixInfoFields) ndOpt {
	d := []byte{byte(f.Prefix.Bits()), 0}
	if f.OnLink {
		d[1] |= 0x80
	}
	if f.Autonomous {
		d[1] |= 0x40
	}
	d = binary.BigEndian.AppendUint32(d, f.ValidLifetime)
	d = binary.BigEndian.AppendUint32(d, f.PreferredLifetime)
	d = append(d, 0, 0, 0, 0)
	d = append(d, f.Prefix.Addr().AsSlice()...)
	return ndOpt{wire.NDPrefixInfoLen, func(b []byte) { wire.EncodeNDPrefixInfo(b, &f) },
		layers.ICMPv6Option{Type: layers.ICMPv6OptPrefixInfo, Data: d}}
}

func rdnssOpt(lifetime uint32, servers ...netip.Addr) ndOpt {
	d := binary.BigEndian.AppendUint32([]byte{0, 0}, lifetime)
	for _, a := range servers {
		d = append(d, a.AsSlice()...)
	}
	return ndOpt{wire.NDRDNSSLen(len(servers)), func(b []byte) { wire.EncodeNDRDNSS(b, lifetime, servers) },
		layers.ICMPv6Option{Type: wire.NDOptRDNSS, Data: d}}
}

// rioOpt builds a Route Information option's data by hand (RFC 4191
// section 2.3): as few bytes of the prefix as its length needs.
func rioOpt(prefix string, prf uint8, lifetime uint32) ndOpt {
	p := netip.MustParsePrefix(prefix)
	d := append([]byte{byte(p.Bits()), prf << 3}, binary.BigEndian.AppendUint32(nil, lifetime)...)
	n := 0
	switch {
	case p.Bits() > 64:
		n = 16
	case p.Bits() > 0:
		n = 8
	}
	d = append(d, p.Addr().AsSlice()[:n]...)
	r := wire.NDRouteInfo{Prefix: p, Preference: wire.RouterPreference(prf), Lifetime: lifetime}
	return ndOpt{len(d) + 2, func(b []byte) { wire.EncodeNDRouteInfo(b, &r) }, layers.ICMPv6Option{Type: wire.NDOptRouteInfo, Data: d}}
}

// dnsslOpt builds the option's data by hand, label by label, as RFC 8106
// section 5.2 lays it out, for gopacket to carry as it is.
func dnsslOpt(lifetime uint32, domains ...string) ndOpt {
	d := binary.BigEndian.AppendUint32([]byte{0, 0}, lifetime)
	for _, name := range domains {
		for _, label := range strings.Split(name, ".") {
			d = append(append(d, byte(len(label))), label...)
		}
		d = append(d, 0)
	}
	for (len(d)+2)%8 != 0 {
		d = append(d, 0)
	}
	return ndOpt{len(d) + 2, func(b []byte) { wire.EncodeNDDNSSL(b, lifetime, domains) },
		layers.ICMPv6Option{Type: wire.NDOptDNSSL, Data: d}}
}

func redirHdrOpt(pkt []byte) ndOpt {
	n := wire.NDRedirectedHeaderLen(len(pkt))
	d := append(make([]byte, 6), pkt...)
	d = append(d, make([]byte, n-2-len(d))...)
	return ndOpt{n, func(b []byte) { wire.EncodeNDRedirectedHeader(b, pkt) },
		layers.ICMPv6Option{Type: layers.ICMPv6OptRedirectedHeader, Data: d}}
}

var (
	llSrc  = addr("fe80::200:5eff:fe10:1")
	llDst  = addr("fe80::5054:ff:fe12:3456")
	prefix = wire.NDPrefixInfoFields{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), OnLink: true, Autonomous: true,
		ValidLifetime: 2592000, PreferredLifetime: 604800}
)

// ndCase is an ND message: its fixed part written by wire and described to
// gopacket, the options after it, and checks of the fields wire parses.
type ndCase struct {
	name  string
	typ   uint8
	fixed int
	enc   func(b []byte)
	g     func(opts layers.ICMPv6Options) gopacket.SerializableLayer
	// decoded decodes the body (after the 4-byte ICMPv6 header) with
	// gopacket, checks its fields and returns its options.
	decoded func(t *testing.T, body []byte) layers.ICMPv6Options
	// parsed parses with wire, checks its fields and returns its options.
	parsed func(t *testing.T, b []byte) wire.NDOptions
	opts   []ndOpt
}

func raCase(name string, f wire.RouterAdvertisementFields, flags uint8, opts ...ndOpt) ndCase {
	return ndCase{
		name: name, typ: wire.ICMPv6RouterAdvertisement, fixed: wire.RouterAdvertisementLen, opts: opts,
		enc: func(b []byte) { wire.EncodeRouterAdvertisement(b, &f) },
		g: func(o layers.ICMPv6Options) gopacket.SerializableLayer {
			return &layers.ICMPv6RouterAdvertisement{HopLimit: f.CurHopLimit, Flags: flags, RouterLifetime: f.RouterLifetime,
				ReachableTime: f.ReachableTime, RetransTimer: f.RetransTimer, Options: o}
		},
		decoded: func(t *testing.T, body []byte) layers.ICMPv6Options {
			var g layers.ICMPv6RouterAdvertisement
			decodeLayer(t, &g, body)
			if g.HopLimit != f.CurHopLimit || g.Flags != flags || g.ManagedAddressConfig() != f.Managed || g.OtherConfig() != f.Other ||
				g.RouterLifetime != f.RouterLifetime || g.ReachableTime != f.ReachableTime || g.RetransTimer != f.RetransTimer {
				t.Errorf("gopacket decodes %+v, want %+v flags %#x", g, f, flags)
			}
			return g.Options
		},
		parsed: func(t *testing.T, b []byte) wire.NDOptions {
			m, ok := wire.ParseRouterAdvertisement(b)
			if !ok {
				t.Fatal("ParseRouterAdvertisement rejected it")
			}
			got := wire.RouterAdvertisementFields{CurHopLimit: m.CurHopLimit(), Managed: m.Managed(), Other: m.Other(), Preference: m.Preference(),
				RouterLifetime: m.RouterLifetime(), ReachableTime: m.ReachableTime(), RetransTimer: m.RetransTimer()}
			if got != f || m.Flags() != flags {
				t.Errorf("parsed %+v flags %#x, want %+v %#x", got, m.Flags(), f, flags)
			}
			return m.Options()
		},
	}
}

func naCase(name string, f wire.NeighborAdvertisementFields, flags uint8, opts ...ndOpt) ndCase {
	return ndCase{
		name: name, typ: wire.ICMPv6NeighborAdvertisement, fixed: wire.NeighborAdvertisementLen, opts: opts,
		enc: func(b []byte) { wire.EncodeNeighborAdvertisement(b, &f) },
		g: func(o layers.ICMPv6Options) gopacket.SerializableLayer {
			return &layers.ICMPv6NeighborAdvertisement{Flags: flags, TargetAddress: ip(f.Target), Options: o}
		},
		decoded: func(t *testing.T, body []byte) layers.ICMPv6Options {
			var g layers.ICMPv6NeighborAdvertisement
			decodeLayer(t, &g, body)
			if g.Flags != flags || g.Router() != f.Router || g.Solicited() != f.Solicited || g.Override() != f.Override || !g.TargetAddress.Equal(ip(f.Target)) {
				t.Errorf("gopacket decodes %+v, want %+v", g, f)
			}
			return g.Options
		},
		parsed: func(t *testing.T, b []byte) wire.NDOptions {
			m, ok := wire.ParseNeighborAdvertisement(b)
			if !ok {
				t.Fatal("ParseNeighborAdvertisement rejected it")
			}
			got := wire.NeighborAdvertisementFields{Router: m.Router(), Solicited: m.Solicited(), Override: m.Override(), Target: m.Target()}
			if got != f {
				t.Errorf("parsed %+v, want %+v", got, f)
			}
			return m.Options()
		},
	}
}

func rsCase(name string, opts ...ndOpt) ndCase {
	return ndCase{
		name: name, typ: wire.ICMPv6RouterSolicitation, fixed: wire.RouterSolicitationLen, opts: opts,
		enc: wire.EncodeRouterSolicitation,
		g: func(o layers.ICMPv6Options) gopacket.SerializableLayer {
			return &layers.ICMPv6RouterSolicitation{Options: o}
		},
		decoded: func(t *testing.T, body []byte) layers.ICMPv6Options {
			var g layers.ICMPv6RouterSolicitation
			decodeLayer(t, &g, body)
			return g.Options
		},
		parsed: func(t *testing.T, b []byte) wire.NDOptions {
			m, ok := wire.ParseRouterSolicitation(b)
			if !ok {
				t.Fatal("ParseRouterSolicitation rejected it")
			}
			return m.Options()
		},
	}
}

func nsCase(name string, target netip.Addr, opts ...ndOpt) ndCase {
	return ndCase{
		name: name, typ: wire.ICMPv6NeighborSolicitation, fixed: wire.NeighborSolicitationLen, opts: opts,
		enc: func(b []byte) { wire.EncodeNeighborSolicitation(b, target) },
		g: func(o layers.ICMPv6Options) gopacket.SerializableLayer {
			return &layers.ICMPv6NeighborSolicitation{TargetAddress: ip(target), Options: o}
		},
		decoded: func(t *testing.T, body []byte) layers.ICMPv6Options {
			var g layers.ICMPv6NeighborSolicitation
			decodeLayer(t, &g, body)
			if !g.TargetAddress.Equal(ip(target)) {
				t.Errorf("gopacket target %v, want %v", g.TargetAddress, target)
			}
			return g.Options
		},
		parsed: func(t *testing.T, b []byte) wire.NDOptions {
			m, ok := wire.ParseNeighborSolicitation(b)
			if !ok {
				t.Fatal("ParseNeighborSolicitation rejected it")
			}
			if m.Target() != target {
				t.Errorf("target %v, want %v", m.Target(), target)
			}
			return m.Options()
		},
	}
}

func redirectCase(name string, target, dst netip.Addr, opts ...ndOpt) ndCase {
	return ndCase{
		name: name, typ: wire.ICMPv6Redirect, fixed: wire.RedirectLen, opts: opts,
		enc: func(b []byte) { wire.EncodeRedirect(b, target, dst) },
		g: func(o layers.ICMPv6Options) gopacket.SerializableLayer {
			return &layers.ICMPv6Redirect{TargetAddress: ip(target), DestinationAddress: ip(dst), Options: o}
		},
		decoded: func(t *testing.T, body []byte) layers.ICMPv6Options {
			var g layers.ICMPv6Redirect
			decodeLayer(t, &g, body)
			if !g.TargetAddress.Equal(ip(target)) || !g.DestinationAddress.Equal(ip(dst)) {
				t.Errorf("gopacket target %v dst %v, want %v %v", g.TargetAddress, g.DestinationAddress, target, dst)
			}
			return g.Options
		},
		parsed: func(t *testing.T, b []byte) wire.NDOptions {
			m, ok := wire.ParseRedirect(b)
			if !ok {
				t.Fatal("ParseRedirect rejected it")
			}
			if m.Target() != target || m.Dst() != dst {
				t.Errorf("target %v dst %v, want %v %v", m.Target(), m.Dst(), target, dst)
			}
			return m.Options()
		},
	}
}

var ndCases = []ndCase{
	rsCase("router solicitation, no options"),
	rsCase("router solicitation with source link-layer address", slla(srcMAC)),
	raCase("router advertisement, SLAAC", wire.RouterAdvertisementFields{CurHopLimit: 64, RouterLifetime: 1800}, 0, slla(dstMAC), mtuOpt(1500), prefixOpt(prefix)),
	raCase("router advertisement, managed, high preference", wire.RouterAdvertisementFields{CurHopLimit: 255, Managed: true, Preference: wire.RouterPrefHigh,
		RouterLifetime: 0xffff, ReachableTime: 30000, RetransTimer: 1000}, 0x88),
	raCase("router advertisement, other config, low preference", wire.RouterAdvertisementFields{Other: true, Preference: wire.RouterPrefLow,
		ReachableTime: 0xffffffff, RetransTimer: 0xffffffff}, 0x58, prefixOpt(wire.NDPrefixInfoFields{Prefix: netip.MustParsePrefix("2001:db8::/48"),
		ValidLifetime: wire.NDInfiniteLifetime, PreferredLifetime: wire.NDInfiniteLifetime})),
	raCase("router advertisement, reserved preference, not a default router", wire.RouterAdvertisementFields{Managed: true, Other: true,
		Preference: wire.RouterPrefReserved}, 0xd0, prefixOpt(prefix), prefixOpt(wire.NDPrefixInfoFields{Prefix: netip.MustParsePrefix("fd00::/8"), OnLink: true})),
	nsCase("neighbor solicitation with source link-layer address", llDst, slla(srcMAC)),
	nsCase("DAD probe without options", addr("2001:db8:1::5054:ff:fe12:3456")),
	naCase("solicited neighbor advertisement", wire.NeighborAdvertisementFields{Solicited: true, Override: true, Target: llSrc}, 0x60, tlla(srcMAC)),
	naCase("router's unsolicited advertisement", wire.NeighborAdvertisementFields{Router: true, Override: true, Target: srcIP6}, 0xa0, tlla(dstMAC)),
	naCase("every flag", wire.NeighborAdvertisementFields{Router: true, Solicited: true, Override: true, Target: llDst}, 0xe0),
	naCase("no flags", wire.NeighborAdvertisementFields{Target: llDst}, 0),
	redirectCase("redirect with target link-layer address and the packet", llDst, dstIP6, tlla(dstMAC), redirHdrOpt(payload(45))),
	redirectCase("redirect quoting a multiple of 8 bytes", llDst, dstIP6, redirHdrOpt(payload(48))),
	redirectCase("redirect to the destination itself", dstIP6, dstIP6),
	raCase("router advertisement, SLAAC and two DNS servers", wire.RouterAdvertisementFields{CurHopLimit: 64, RouterLifetime: 1800}, 0, slla(dstMAC),
		prefixOpt(prefix), rdnssOpt(1800, addr("fd00::3"), addr("2001:db8::53"))),
	raCase("router advertisement with a DNS search list", wire.RouterAdvertisementFields{RouterLifetime: 1800}, 0,
		rdnssOpt(wire.NDInfiniteLifetime, addr("fe80::1")), dnsslOpt(600, "example.com", "lab.example.org"), dnsslOpt(0, "x")),
	raCase("router advertisement with routes of every length", wire.RouterAdvertisementFields{RouterLifetime: 1800}, 0,
		rioOpt("::/0", 1, 1800), rioOpt("2001:db8:77::/48", 3, 600), rioOpt("2001:db8:78::/64", 0, 0), rioOpt("2001:db8:79::8/125", 1, wire.NDInfiniteLifetime)),
	// Last, so that the indices TestParseNDRejectsMalformedMessages
	// takes stay.
	nsCase("DAD probe with a nonce (RFC 7527)", addr("2001:db8:1::5054:ff:fe12:3456"), nonceOpt([6]byte{1, 2, 3, 4, 5, 6})),
}

// build writes c with wire: fixed part, options, checksum.
func (c ndCase) build() []byte {
	n := c.fixed
	for _, o := range c.opts {
		n += o.len
	}
	b := bytes.Repeat([]byte{0xa5}, n)
	c.enc(b)
	off := c.fixed
	for _, o := range c.opts {
		o.encode(b[off : off+o.len])
		off += o.len
	}
	wire.SetICMPv6Checksum(b, llSrc, llDst)
	return b
}

// gopacketOpts returns the options for gopacket to serialize: in reverse,
// because gopacket prepends each in turn.
func (c ndCase) gopacketOpts() layers.ICMPv6Options {
	var opts layers.ICMPv6Options
	for i := len(c.opts) - 1; i >= 0; i-- {
		opts = append(opts, c.opts[i].g)
	}
	return opts
}

func (c ndCase) serialize(t testing.TB) []byte {
	return gopacketICMPv6(t, llSrc, llDst, c.typ, 0, c.g(c.gopacketOpts()))
}

func checkGopacketOptions(t *testing.T, got layers.ICMPv6Options, want []ndOpt) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("gopacket decodes %d options, want %d", len(got), len(want))
	}
	for i, o := range got {
		if o.Type != want[i].g.Type || !bytes.Equal(o.Data, want[i].g.Data) {
			t.Errorf("option %d: gopacket decodes %v %x, want %v %x", i, o.Type, o.Data, want[i].g.Type, want[i].g.Data)
		}
	}
}

// checkWireOptions walks opts with wire and checks each against the option
// gopacket holds, through the accessor its type has.
func checkWireOptions(t *testing.T, opts wire.NDOptions, want []ndOpt) {
	t.Helper()
	i := 0
	for ; len(opts) > 0; i++ {
		var o wire.NDOption
		o, opts = opts.Next()
		if i >= len(want) {
			t.Fatalf("more options than the %d built", len(want))
		}
		w := want[i].g
		if o.Type() != uint8(w.Type) || !bytes.Equal(o.Body(), w.Data) || o.Len() != want[i].len {
			t.Errorf("option %d: type %d len %d body %x, want %d %d %x", i, o.Type(), o.Len(), o.Body(), w.Type, want[i].len, w.Data)
		}
		switch o.Type() {
		case wire.NDOptSourceLinkAddr, wire.NDOptTargetLinkAddr:
			if m, ok := o.LinkLayerAddr(); !ok || !bytes.Equal(m[:], w.Data) {
				t.Errorf("option %d: LinkLayerAddr = %v, %v", i, m, ok)
			}
		case wire.NDOptMTU:
			if mtu, ok := o.MTU(); !ok || mtu != binary.BigEndian.Uint32(w.Data[2:]) {
				t.Errorf("option %d: MTU = %d, %v", i, mtu, ok)
			}
		case wire.NDOptNonce:
			if n, ok := o.Nonce(); !ok || !bytes.Equal(n, w.Data) {
				t.Errorf("option %d: Nonce = %x, %v", i, n, ok)
			}
		case wire.NDOptRedirectedHeader:
			if pkt, ok := o.RedirectedHeader(); !ok || !bytes.Equal(pkt, w.Data[6:]) {
				t.Errorf("option %d: RedirectedHeader = %x, %v", i, pkt, ok)
			}
		case wire.NDOptPrefixInfo:
			p, ok := o.PrefixInfo()
			if !ok {
				t.Fatalf("option %d: not a prefix information option", i)
			}
			d := w.Data
			if int(p.PrefixLen()) != int(d[0]) || p.Prefix().Bits() != int(d[0]) || !bytes.Equal(p.Prefix().Addr().AsSlice(), d[14:30]) ||
				p.OnLink() != (d[1]&0x80 != 0) || p.Autonomous() != (d[1]&0x40 != 0) ||
				p.ValidLifetime() != binary.BigEndian.Uint32(d[2:]) || p.PreferredLifetime() != binary.BigEndian.Uint32(d[6:]) {
				t.Errorf("option %d: prefix %v L %v A %v valid %d preferred %d, gopacket data %x", i, p.Prefix(), p.OnLink(), p.Autonomous(),
					p.ValidLifetime(), p.PreferredLifetime(), d)
			}
		}
	}
	if i != len(want) {
		t.Errorf("%d options, want %d", i, len(want))
	}
}

func TestEncodeNDIsWhatGopacketDecodes(t *testing.T) {
	for _, c := range ndCases {
		t.Run(c.name, func(t *testing.T) {
			b := c.build()
			g, valid := gopacketICMPv6Valid(t, b, llSrc, llDst)
			if !valid || g.TypeCode.Type() != c.typ || g.TypeCode.Code() != 0 {
				t.Errorf("gopacket: %v, checksum valid %v", g.TypeCode, valid)
			}
			checkGopacketOptions(t, c.decoded(t, g.Payload), c.opts)
			if want := c.serialize(t); !bytes.Equal(b, want) {
				t.Errorf("wire encodes\n%x\ngopacket\n%x", b, want)
			}
		})
	}
}

func TestParseNDDecodesWhatGopacketBuilds(t *testing.T) {
	for _, c := range ndCases {
		t.Run(c.name, func(t *testing.T) {
			b := c.serialize(t)
			m, ok := wire.ParseICMPv6(b)
			if !ok || m.Type() != c.typ || !m.ChecksumValid(llSrc, llDst) {
				t.Fatalf("ParseICMPv6 ok %v type %d checksum valid %v", ok, m.Type(), m.ChecksumValid(llSrc, llDst))
			}
			checkWireOptions(t, c.parsed(t, b), c.opts)
		})
	}
}

func TestParseNDRejectsMalformedMessages(t *testing.T) {
	ra := ndCases[2].build()        // RA with SLLA, MTU, prefix information
	ns := ndCases[6].build()        // NS with SLLA
	rs := ndCases[0].build()        // RS, no options
	redirect := ndCases[13].build() // Redirect with a redirected header
	parsers := map[uint8]func([]byte) bool{
		wire.ICMPv6RouterSolicitation:    func(b []byte) bool { m, ok := wire.ParseRouterSolicitation(b); return ok == (m != nil) && ok },
		wire.ICMPv6RouterAdvertisement:   func(b []byte) bool { m, ok := wire.ParseRouterAdvertisement(b); return ok == (m != nil) && ok },
		wire.ICMPv6NeighborSolicitation:  func(b []byte) bool { m, ok := wire.ParseNeighborSolicitation(b); return ok == (m != nil) && ok },
		wire.ICMPv6NeighborAdvertisement: func(b []byte) bool { m, ok := wire.ParseNeighborAdvertisement(b); return ok == (m != nil) && ok },
		wire.ICMPv6Redirect:              func(b []byte) bool { m, ok := wire.ParseRedirect(b); return ok == (m != nil) && ok },
	}
	tests := []struct {
		name   string
		parser uint8
		b      []byte
		accept bool
	}{
		{"valid RA", wire.ICMPv6RouterAdvertisement, ra, true},
		{"valid NS", wire.ICMPv6NeighborSolicitation, ns, true},
		{"valid RS", wire.ICMPv6RouterSolicitation, rs, true},
		{"valid redirect", wire.ICMPv6Redirect, redirect, true},
		{"RA's first option of length zero", wire.ICMPv6RouterAdvertisement, with(ra, wire.RouterAdvertisementLen+1, 0), false},
		{"RA's last option of length zero", wire.ICMPv6RouterAdvertisement, with(ra, len(ra)-wire.NDPrefixInfoLen+1, 0), false},
		{"NS option of length zero", wire.ICMPv6NeighborSolicitation, with(ns, wire.NeighborSolicitationLen+1, 0), false},
		{"option longer than the message", wire.ICMPv6RouterAdvertisement, with(ra, len(ra)-wire.NDPrefixInfoLen+1, 5), false},
		{"option cut short", wire.ICMPv6RouterAdvertisement, ra[:len(ra)-1], false},
		{"a lone byte of option", wire.ICMPv6RouterSolicitation, append(append([]byte(nil), rs...), 1), false},
		{"RA shorter than its fixed part", wire.ICMPv6RouterAdvertisement, ra[:wire.RouterAdvertisementLen-1], false},
		{"NS without its whole target", wire.ICMPv6NeighborSolicitation, ns[:wire.NeighborSolicitationLen-1], false},
		{"redirect without its destination", wire.ICMPv6Redirect, redirect[:wire.RedirectLen-1], false},
		{"RS shorter than the ICMPv6 header", wire.ICMPv6RouterSolicitation, rs[:7], false},
		{"empty", wire.ICMPv6NeighborAdvertisement, nil, false},
		{"NS parsed as an NA", wire.ICMPv6NeighborAdvertisement, ns, false},
		{"RA parsed as an RS", wire.ICMPv6RouterSolicitation, ra, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parsers[tt.parser](tt.b); got != tt.accept {
				t.Errorf("accepted = %v, want %v", got, tt.accept)
			}
		})
	}
}

func TestNDOptionAccessorsRejectOtherOptions(t *testing.T) {
	b := make([]byte, wire.NDPrefixInfoLen)
	wire.EncodeNDPrefixInfo(b, &prefix)
	pi := wire.NDOption(b)
	m := make([]byte, wire.NDMTULen)
	wire.EncodeNDMTU(m, 1280)
	mtu := wire.NDOption(m)
	long := wire.NDOption(append([]byte{wire.NDOptSourceLinkAddr, 2}, make([]byte, 14)...))
	if _, ok := pi.LinkLayerAddr(); ok {
		t.Error("a prefix information option read as a link-layer address")
	}
	if _, ok := long.LinkLayerAddr(); ok {
		t.Error("a 16-byte link-layer address option read as Ethernet's")
	}
	if _, ok := pi.MTU(); ok {
		t.Error("a prefix information option read as an MTU")
	}
	if _, ok := mtu.Nonce(); ok {
		t.Error("an MTU option read as a nonce")
	}
	if _, ok := mtu.PrefixInfo(); ok {
		t.Error("an MTU option read as prefix information")
	}
	if _, ok := mtu.RedirectedHeader(); ok {
		t.Error("an MTU option read as a redirected header")
	}
	if _, ok := wire.NDOption(append([]byte{wire.NDOptPrefixInfo, 3}, make([]byte, 22)...)).PrefixInfo(); ok {
		t.Error("a 24-byte prefix information option accepted")
	}
	bad := wire.NDPrefixInfo(with(b, 2, 129))
	if bad.Prefix().IsValid() || bad.PrefixLen() != 129 {
		t.Errorf("prefix length 129: Prefix %v, PrefixLen %d", bad.Prefix(), bad.PrefixLen())
	}
}

func TestNDRedirectedHeaderLenPadsToEightOctets(t *testing.T) {
	tests := []struct{ n, want int }{{0, 8}, {1, 16}, {8, 16}, {9, 24}, {1232, 1240}}
	for _, tt := range tests {
		if got := wire.NDRedirectedHeaderLen(tt.n); got != tt.want {
			t.Errorf("NDRedirectedHeaderLen(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

func TestNDParseDoesNotAllocate(t *testing.T) {
	ra := ndCases[2].build()
	allocs := testing.AllocsPerRun(1000, func() {
		m, _ := wire.ParseRouterAdvertisement(ra)
		_, _ = m.Preference(), m.RouterLifetime()
		for opts := m.Options(); len(opts) > 0; {
			var o wire.NDOption
			o, opts = opts.Next()
			if p, ok := o.PrefixInfo(); ok {
				_ = p.Prefix()
			}
			_, _ = o.LinkLayerAddr()
			_, _ = o.MTU()
		}
	})
	if allocs != 0 {
		t.Errorf("parsing a router advertisement allocates %v times", allocs)
	}
}

func TestNDRDNSSReadsWhatItEncodes(t *testing.T) {
	servers := []netip.Addr{netip.MustParseAddr("fd00::3"), netip.MustParseAddr("2001:db8::53")}
	b := make([]byte, wire.NDRDNSSLen(len(servers)))
	wire.EncodeNDRDNSS(b, 1800, servers)
	opts, ok := wire.ParseNDOptions(b)
	if !ok {
		t.Fatalf("ParseNDOptions(%x) failed", b)
	}
	o, _ := opts.Next()
	life, got, ok := o.RDNSS()
	if !ok || life != 1800 || !slices.Equal(got, servers) {
		t.Errorf("RDNSS() = %d, %v, %v; want 1800, %v, true", life, got, ok, servers)
	}
	if _, _, ok := wire.NDOption(b[:8]).RDNSS(); ok {
		t.Error("RDNSS() of an option naming no server succeeded; RFC 8106 5.1's minimum length is 3")
	}
}

func TestNDDNSSLReadsWhatItEncodes(t *testing.T) {
	for _, domains := range [][]string{
		{"example.com"},
		{"a", "b.c", "lab.example.org"},
		{strings.Repeat("x", 63) + ".test"}, // the longest label
		{strings.Repeat(strings.Repeat("x", 62)+".", 3) + strings.Repeat("y", 61)}, // 255 bytes encoded, the longest name
	} {
		b := make([]byte, wire.NDDNSSLLen(domains))
		wire.EncodeNDDNSSL(b, 1200, domains)
		opts, ok := wire.ParseNDOptions(b)
		if !ok || len(b)%wire.NDOptUnit != 0 {
			t.Fatalf("ParseNDOptions(%x) failed", b)
		}
		o, _ := opts.Next()
		life, got, ok := o.DNSSL()
		if !ok || life != 1200 || !slices.Equal(got, domains) {
			t.Errorf("DNSSL() = %d, %q, %v; want 1200, %q, true", life, got, ok, domains)
		}
	}
}

// TestNDDNSOptionsMalformedAreRefused pins RFC 8106 section 5.3.1's
// validity checks: an option that fails them is discarded whole.
func TestNDDNSOptionsMalformedAreRefused(t *testing.T) {
	unit := func(typ uint8, body ...byte) wire.NDOption {
		b := append([]byte{typ, 0, 0, 0, 0, 0, 0x0e, 0x10}, body...)
		for len(b)%8 != 0 {
			b = append(b, 0)
		}
		b[1] = byte(len(b) / 8)
		return wire.NDOption(b)
	}
	server := netip.MustParseAddr("2001:db8::53").AsSlice()
	tests := []struct {
		name string
		o    wire.NDOption
		ok   bool
	}{
		{"RDNSS with one server", unit(wire.NDOptRDNSS, server...), true},
		{"RDNSS with no server (length 1)", unit(wire.NDOptRDNSS), false},
		{"RDNSS of even length 4: a server and half of another", unit(wire.NDOptRDNSS, append(server, make([]byte, 8)...)...), false},
		{"DNSSL with one name", unit(wire.NDOptDNSSL, 3, 'l', 'a', 'b', 0), true},
		{"DNSSL of padding alone", unit(wire.NDOptDNSSL, 0, 0, 0), false},
		{"DNSSL whose name runs into the end", unit(wire.NDOptDNSSL, 7, 'l', 'a', 'b', 'l', 'a', 'b', 'l'), false},
		{"DNSSL with a label longer than the option", unit(wire.NDOptDNSSL, 12, 'l', 'a', 'b'), false},
		{"DNSSL with a dot inside a label", unit(wire.NDOptDNSSL, 3, 'a', '.', 'b', 0), false},
		{"DNSSL with a compression pointer", unit(wire.NDOptDNSSL, 3, 'l', 'a', 'b', 0xc0, 0x08), false},
		{"DNSSL with a label of 64 bytes", unit(wire.NDOptDNSSL, append([]byte{64}, bytes.Repeat([]byte{'x'}, 64)...)...), false},
		{"DNSSL whose padding is not zeros", unit(wire.NDOptDNSSL, 3, 'l', 'a', 'b', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7), false},
		{"DNSSL of a name over 255 bytes", unit(wire.NDOptDNSSL, slices.Concat(
			slices.Repeat(append([]byte{63}, bytes.Repeat([]byte{'x'}, 63)...), 4), []byte{0})...), false},
		{"DNSSL too short to have a name (length 1)", wire.NDOption{wire.NDOptDNSSL, 1, 0, 0, 0, 0, 0, 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := wire.ParseNDOptions(tt.o); !ok {
				t.Fatalf("the option %x is not even well formed as an ND option", []byte(tt.o))
			}
			var ok bool
			if tt.o.Type() == wire.NDOptRDNSS {
				_, _, ok = tt.o.RDNSS()
			} else {
				_, _, ok = tt.o.DNSSL()
			}
			if ok != tt.ok {
				t.Errorf("accepted = %v, want %v (option %x)", ok, tt.ok, []byte(tt.o))
			}
		})
	}
}

func TestNDRouteInfoReadsWhatItEncodesAndRefusesTheMalformed(t *testing.T) {
	for _, prefix := range []string{"::/0", "2001:db8:77::/48", "2001:db8:78::/64", "2001:db8:79::8/125", "2001:db8::1/128"} {
		o := rioOpt(prefix, 3, 600)
		b := make([]byte, o.len)
		o.encode(b)
		r, ok := wire.NDOption(b).RouteInfo()
		if !ok || r.Prefix != netip.MustParsePrefix(prefix) || r.Preference != wire.RouterPrefLow || r.Lifetime != 600 {
			t.Errorf("%s: RouteInfo() = %+v, %v", prefix, r, ok)
		}
	}
	// The bits past the prefix length are ignored (RFC 4191 section 2.3).
	b := make([]byte, 16)
	wire.EncodeNDRouteInfo(b, &wire.NDRouteInfo{Prefix: netip.MustParsePrefix("2001:db8:77::/48")})
	b[8+7] = 0xff
	if r, ok := wire.NDOption(b).RouteInfo(); !ok || r.Prefix != netip.MustParsePrefix("2001:db8:77::/48") {
		t.Errorf("RouteInfo() with bits past the length = %+v, %v", r, ok)
	}
	for _, tt := range []struct {
		name string
		o    []byte
	}{
		{"a /64 in one unit", []byte{wire.NDOptRouteInfo, 1, 64, 0, 0, 0, 0, 60}},
		{"a /65 in two units", append([]byte{wire.NDOptRouteInfo, 2, 65, 0, 0, 0, 0, 60}, make([]byte, 8)...)},
		{"a /129", append([]byte{wire.NDOptRouteInfo, 3, 129, 0, 0, 0, 0, 60}, make([]byte, 16)...)},
		{"the reserved preference", []byte{wire.NDOptRouteInfo, 1, 0, 2 << 3, 0, 0, 0, 60}},
		{"four units", append([]byte{wire.NDOptRouteInfo, 4, 0, 0, 0, 0, 0, 60}, make([]byte, 24)...)},
	} {
		if r, ok := wire.NDOption(tt.o).RouteInfo(); ok {
			t.Errorf("%s: RouteInfo() = %+v, accepted", tt.name, r)
		}
	}
}
