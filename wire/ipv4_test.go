package wire_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// Options of RFC 791 and RFC 2113, as gopacket describes them.
var (
	optNOP         = layers.IPv4Option{OptionType: 1}
	optEOL         = layers.IPv4Option{OptionType: 0}
	optRouterAlert = layers.IPv4Option{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}
	optRecordRoute = layers.IPv4Option{OptionType: 0x07, OptionLength: 11, OptionData: []byte{4, 0, 0, 0, 0, 0, 0, 0, 0}}
	optLSRR        = layers.IPv4Option{OptionType: 0x83, OptionLength: 7, OptionData: []byte{4, 198, 51, 100, 7}}
	optSecurity    = layers.IPv4Option{OptionType: 0x82, OptionLength: 11, OptionData: make([]byte, 9)}
)

// ipv4Case is an IPv4 header in gopacket's terms; flags are gopacket's
// three-bit field.
type ipv4Case struct {
	name    string
	tos     uint8
	id      uint16
	flags   layers.IPv4Flag
	fragOff uint16 // in 8-byte units, as on the wire
	ttl     uint8
	proto   layers.IPProtocol
	src     string
	dst     string
	options []layers.IPv4Option
	payload int
}

var ipv4Cases = []ipv4Case{
	{name: "plain UDP", id: 0x1234, ttl: 64, proto: layers.IPProtocolUDP, src: "192.0.2.1", dst: "198.51.100.7", payload: 30},
	{name: "DF with TOS", tos: 0xb8, id: 1, flags: layers.IPv4DontFragment, ttl: 1, proto: layers.IPProtocolTCP, src: "10.0.0.1", dst: "10.0.0.2", payload: 100},
	{name: "first fragment", id: 7, flags: layers.IPv4MoreFragments, ttl: 255, proto: layers.IPProtocolUDP, src: "192.0.2.1", dst: "192.0.2.2", payload: 1480},
	{name: "middle fragment", id: 7, flags: layers.IPv4MoreFragments, fragOff: 185, ttl: 255, proto: layers.IPProtocolUDP, src: "192.0.2.1", dst: "192.0.2.2", payload: 1480},
	{name: "last fragment at the largest offset", id: 7, fragOff: 0x1fff, ttl: 3, proto: layers.IPProtocolICMPv4, src: "192.0.2.1", dst: "192.0.2.2", payload: 7},
	{name: "reserved flag", flags: layers.IPv4EvilBit, ttl: 64, proto: layers.IPProtocolUDP, src: "0.0.0.0", dst: "255.255.255.255", payload: 0},
	{name: "router alert", ttl: 1, proto: layers.IPProtocolIGMP, src: "192.0.2.1", dst: "224.0.0.22", options: []layers.IPv4Option{optRouterAlert}, payload: 8},
	{name: "record route padded with EOL", ttl: 64, proto: layers.IPProtocolICMPv4, src: "192.0.2.1", dst: "198.51.100.7", options: []layers.IPv4Option{optRecordRoute, optEOL}, payload: 64},
	{name: "NOP then LSRR", ttl: 64, proto: layers.IPProtocolUDP, src: "192.0.2.1", dst: "198.51.100.7", options: []layers.IPv4Option{optNOP, optLSRR}, payload: 9},
	{name: "forty bytes of options", ttl: 64, proto: layers.IPProtocolUDP, src: "192.0.2.1", dst: "198.51.100.7",
		options: []layers.IPv4Option{optSecurity, optSecurity, optSecurity, optNOP, optNOP, optNOP, optNOP, optNOP, optNOP, optNOP}, payload: 1},
}

func (c ipv4Case) gopacket() *layers.IPv4 {
	return &layers.IPv4{
		Version: 4, TOS: c.tos, Id: c.id, Flags: c.flags, FragOffset: c.fragOff,
		TTL: c.ttl, Protocol: c.proto, SrcIP: ip(addr(c.src)), DstIP: ip(addr(c.dst)),
		Options: append([]layers.IPv4Option(nil), c.options...),
	}
}

func (c ipv4Case) serialize(t testing.TB) []byte {
	return serialize(t, c.gopacket(), gopacketPayload(payload(c.payload)))
}

func TestParseIPv4DecodesWhatGopacketBuilds(t *testing.T) {
	for _, c := range ipv4Cases {
		t.Run(c.name, func(t *testing.T) {
			g := c.gopacket()
			b := serialize(t, g, gopacketPayload(payload(c.payload)))
			h, e := wire.ParseIPv4(b)
			if e != wire.IPv4OK {
				t.Fatalf("ParseIPv4 = %v", e)
			}
			checkIPv4Matches(t, h, g)
			if !bytes.Equal(h.Payload(), payload(c.payload)) {
				t.Errorf("Payload differs")
			}
		})
	}
}

// checkIPv4Matches checks that every field of the view equals gopacket's.
func checkIPv4Matches(t *testing.T, h wire.IPv4, g *layers.IPv4) {
	t.Helper()
	if h.HeaderLen() != int(g.IHL)*4 || h.TotalLen() != int(g.Length) || len(h) != h.TotalLen() {
		t.Errorf("HeaderLen %d TotalLen %d len %d, gopacket IHL %d Length %d", h.HeaderLen(), h.TotalLen(), len(h), g.IHL, g.Length)
	}
	if h.TOS() != g.TOS || h.ID() != g.Id || h.TTL() != g.TTL || h.Protocol() != uint8(g.Protocol) {
		t.Errorf("TOS %#x ID %d TTL %d proto %d, gopacket %#x %d %d %d", h.TOS(), h.ID(), h.TTL(), h.Protocol(), g.TOS, g.Id, g.TTL, g.Protocol)
	}
	if h.Flags() != uint16(g.Flags)<<13 || h.FragmentOffset() != int(g.FragOffset)*8 {
		t.Errorf("Flags %#04x offset %d, gopacket %v %d", h.Flags(), h.FragmentOffset(), g.Flags, g.FragOffset)
	}
	df, mf := g.Flags&layers.IPv4DontFragment != 0, g.Flags&layers.IPv4MoreFragments != 0
	if h.DontFragment() != df || h.MoreFragments() != mf || h.IsFragment() != (mf || g.FragOffset != 0) {
		t.Errorf("DF %v MF %v IsFragment %v, gopacket flags %v offset %d", h.DontFragment(), h.MoreFragments(), h.IsFragment(), g.Flags, g.FragOffset)
	}
	if !bytes.Equal(h.Src().AsSlice(), g.SrcIP.To4()) || !bytes.Equal(h.Dst().AsSlice(), g.DstIP.To4()) {
		t.Errorf("Src %v Dst %v, gopacket %v %v", h.Src(), h.Dst(), g.SrcIP, g.DstIP)
	}
	if got := be16(h[10:12]); got != g.Checksum {
		t.Errorf("checksum field %#04x, gopacket %#04x", got, g.Checksum)
	}
	if len(h.Options()) != h.HeaderLen()-wire.IPv4MinHeaderLen {
		t.Errorf("Options() has %d bytes, header length %d", len(h.Options()), h.HeaderLen())
	}
	var back layers.IPv4
	decodeLayer(t, &back, h)
	if len(back.Options) != len(g.Options) && !(len(g.Options) == 0 && back.Options == nil) {
		t.Errorf("gopacket re-decodes %d options from Options(), want %d", len(back.Options), len(g.Options))
	}
}

func be16(b []byte) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }

func TestEncodeIPv4IsWhatGopacketBuilds(t *testing.T) {
	for _, c := range ipv4Cases {
		t.Run(c.name, func(t *testing.T) {
			want := c.serialize(t)
			ihl := int(want[0]&0xf) * 4
			f := &wire.IPv4Fields{
				TOS: c.tos, TotalLen: len(want), ID: c.id,
				Flags: uint16(c.flags) << 13, FragOff: int(c.fragOff) * 8,
				TTL: c.ttl, Protocol: uint8(c.proto), Src: addr(c.src), Dst: addr(c.dst),
				Options: want[wire.IPv4MinHeaderLen:ihl],
			}
			b := bytes.Repeat([]byte{0xa5}, len(want))
			copy(b[ihl:], want[ihl:])
			if n := f.HeaderLen(); n != ihl {
				t.Errorf("HeaderLen = %d, want %d", n, ihl)
			}
			wire.EncodeIPv4(b, f)
			if !bytes.Equal(b, want) {
				t.Fatalf("EncodeIPv4 header\n%x\ngopacket\n%x", b[:ihl], want[:ihl])
			}
			var g layers.IPv4
			decodeLayer(t, &g, b)
			if gopacketChecksumOK(b[:ihl]) != nil {
				t.Errorf("gopacket finds the header checksum wrong")
			}
			checkIPv4Matches(t, wire.IPv4(b), &g)
		})
	}
}

// gopacketChecksumOK verifies an Internet checksum with gopacket's code.
func gopacketChecksumOK(b []byte) error {
	if c := gopacketFold(b); c != 0 {
		return errChecksum
	}
	return nil
}

func TestParseIPv4ReportsEachReason(t *testing.T) {
	valid := ipv4Cases[0].serialize(t)    // 20-byte header, 30 bytes of payload
	withOpts := ipv4Cases[6].serialize(t) // 24-byte header
	tests := []struct {
		name string
		b    []byte
		want wire.IPv4Error
	}{
		{"valid", valid, wire.IPv4OK},
		{"valid with options", withOpts, wire.IPv4OK},
		{"empty", nil, wire.IPv4Truncated},
		{"one byte short of a header", valid[:19], wire.IPv4Truncated},
		{"version 6", fixChecksum(with(valid, 0, 0x65)), wire.IPv4BadVersion},
		{"version 0", fixChecksum(with(valid, 0, 0x05)), wire.IPv4BadVersion},
		{"version is checked before length", make([]byte, 20), wire.IPv4BadVersion},
		{"IHL 4", with(valid, 0, 0x44), wire.IPv4BadIHL},
		{"IHL 0", with(valid, 0, 0x40), wire.IPv4BadIHL},
		{"IHL beyond what arrived", with(valid, 0, 0x4f)[:50], wire.IPv4BadIHL},
		{"total length below the header", fixChecksum(withU16(valid, 2, 19)), wire.IPv4BadTotalLen},
		{"total length zero", fixChecksum(withU16(valid, 2, 0)), wire.IPv4BadTotalLen},
		{"total length inside the options", fixChecksum(withU16(withOpts, 2, 22)), wire.IPv4BadTotalLen},
		{"total length beyond what arrived", valid[:len(valid)-1], wire.IPv4BadTotalLen},
		{"total length 65535 on a short buffer", fixChecksum(withU16(valid, 2, 65535)), wire.IPv4BadTotalLen},
		{"checksum zeroed", withU16(valid, 10, 0), wire.IPv4BadChecksum},
		{"a flipped bit in the header", with(valid, 15, valid[15]^0x10), wire.IPv4BadChecksum},
		{"a flipped bit in an option", with(withOpts, 22, withOpts[22]^1), wire.IPv4BadChecksum},
		{"a flipped bit in the payload is not the header's business", with(valid, 30, valid[30]^1), wire.IPv4OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, got := wire.ParseIPv4(tt.b)
			if got != tt.want {
				t.Fatalf("ParseIPv4 = %v, want %v", got, tt.want)
			}
			if got != wire.IPv4OK && h != nil {
				t.Errorf("a rejected datagram returned a view")
			}
		})
	}
}

// fixChecksum recomputes the header checksum of an IPv4 datagram, whatever
// its fields say, so that a test reaches the check it aims at.
func fixChecksum(b []byte) []byte {
	ihl := min(max(int(b[0]&0xf)*4, 20), len(b))
	b[10], b[11] = 0, 0
	c := naiveChecksum(b[:ihl], 0)
	b[10], b[11] = byte(c>>8), byte(c)
	return b
}

// withU16 returns a copy of b with a big-endian v at b[i:i+2].
func withU16(b []byte, i int, v uint16) []byte {
	return with(with(b, i, byte(v>>8)), i+1, byte(v))
}

func TestIPv4ErrorString(t *testing.T) {
	tests := []struct {
		e    wire.IPv4Error
		want string
	}{
		{wire.IPv4OK, "ok"},
		{wire.IPv4Truncated, "truncated"},
		{wire.IPv4BadVersion, "version not 4"},
		{wire.IPv4BadIHL, "header length out of range"},
		{wire.IPv4BadTotalLen, "total length out of range"},
		{wire.IPv4BadChecksum, "bad header checksum"},
		{wire.IPv4BadChecksum + 1, "IPv4Error(6)"},
		{255, "IPv4Error(255)"},
	}
	for _, tt := range tests {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("IPv4Error(%d).String() = %q, want %q", uint8(tt.e), got, tt.want)
		}
	}
}

func TestParseIPv4TrimsLinkPaddingToTotalLength(t *testing.T) {
	tests := []struct {
		name    string
		c       ipv4Case
		padding int
	}{
		// A 26-byte datagram in a minimum Ethernet frame carries 20 bytes of padding.
		{"short datagram in a minimum frame", ipv4Case{ttl: 64, proto: layers.IPProtocolUDP, src: "192.0.2.1", dst: "192.0.2.2", payload: 6}, 20},
		{"options and padding", ipv4Case{ttl: 64, proto: layers.IPProtocolUDP, src: "192.0.2.1", dst: "192.0.2.2", options: []layers.IPv4Option{optRouterAlert}, payload: 1}, 21},
		{"header only", ipv4Case{ttl: 64, proto: layers.IPProtocolUDP, src: "192.0.2.1", dst: "192.0.2.2"}, 26},
		{"no padding", ipv4Case{ttl: 64, proto: layers.IPProtocolUDP, src: "192.0.2.1", dst: "192.0.2.2", payload: 100}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dgram := tt.c.serialize(t)
			b := append(append([]byte(nil), dgram...), bytes.Repeat([]byte{0xee}, tt.padding)...)
			h, e := wire.ParseIPv4(b)
			if e != wire.IPv4OK {
				t.Fatalf("ParseIPv4 = %v", e)
			}
			if !bytes.Equal(h, dgram) {
				t.Errorf("got %d bytes, want the %d-byte datagram", len(h), len(dgram))
			}
			if !bytes.Equal(h.Payload(), payload(tt.c.payload)) {
				t.Errorf("Payload = %x, want %x", h.Payload(), payload(tt.c.payload))
			}
		})
	}
}

func TestIPv4FragmentFields(t *testing.T) {
	tests := []struct {
		name       string
		flags      uint16
		offset     int
		df, mf     bool
		isFragment bool
	}{
		{"unfragmented", 0, 0, false, false, false},
		{"DF only", wire.IPv4FlagDF, 0, true, false, false},
		{"first fragment", wire.IPv4FlagMF, 0, false, true, true},
		{"middle fragment", wire.IPv4FlagMF, 1480, false, true, true},
		{"last fragment", 0, 2960, false, false, true},
		{"largest offset", 0, 0x1fff * 8, false, false, true},
		{"DF and MF together", wire.IPv4FlagDF | wire.IPv4FlagMF, 8, true, true, true},
		{"reserved bit is kept but means nothing", 0x8000, 0, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, 28)
			wire.EncodeIPv4(b, &wire.IPv4Fields{TotalLen: 28, Flags: tt.flags, FragOff: tt.offset, TTL: 9, Protocol: wire.ProtoUDP, Src: srcIP, Dst: dstIP})
			h, e := wire.ParseIPv4(b)
			if e != wire.IPv4OK {
				t.Fatalf("ParseIPv4 = %v", e)
			}
			if h.Flags() != tt.flags || h.FragmentOffset() != tt.offset || h.DontFragment() != tt.df ||
				h.MoreFragments() != tt.mf || h.IsFragment() != tt.isFragment {
				t.Errorf("Flags %#04x offset %d DF %v MF %v IsFragment %v", h.Flags(), h.FragmentOffset(), h.DontFragment(), h.MoreFragments(), h.IsFragment())
			}
			var g layers.IPv4
			decodeLayer(t, &g, b)
			if uint16(g.Flags)<<13 != tt.flags || int(g.FragOffset)*8 != tt.offset {
				t.Errorf("gopacket decodes flags %v offset %d", g.Flags, g.FragOffset)
			}
		})
	}
}

// randomIPv4 encodes a random valid header with a canonical checksum.
func randomIPv4(r *rand.Rand) []byte {
	opts := randomBytes(r, 4*r.IntN(11))
	hl := wire.IPv4MinHeaderLen + len(opts)
	b := make([]byte, hl+r.IntN(40))
	var s, d [4]byte
	for i := range s {
		s[i], d[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	wire.EncodeIPv4(b, &wire.IPv4Fields{
		TOS: uint8(r.Uint32()), TotalLen: len(b), ID: uint16(r.Uint32()),
		Flags: uint16(r.Uint32()) & 0xe000, FragOff: 8 * r.IntN(0x2000),
		TTL: uint8(r.Uint32()), Protocol: uint8(r.Uint32()),
		Src: addrFrom4(s), Dst: addrFrom4(d), Options: opts,
	})
	return b
}

func TestSetTTLIncrementalChecksumEqualsFullRecompute(t *testing.T) {
	r := rand.New(rand.NewPCG(1624, 791))
	for i := 0; i < 3000; i++ {
		b := randomIPv4(r)
		h, e := wire.ParseIPv4(b)
		if e != wire.IPv4OK {
			t.Fatalf("ParseIPv4 of an encoded header = %v", e)
		}
		ttl := uint8(r.Uint32())
		if i < 256 {
			ttl = uint8(i) // every value at least once
		}
		before := append([]byte(nil), h...)
		h.SetTTL(ttl)
		if h.TTL() != ttl {
			t.Fatalf("TTL = %d after SetTTL(%d)", h.TTL(), ttl)
		}
		full := append([]byte(nil), h...)
		full[10], full[11] = 0, 0
		want := wire.Checksum(full[:h.HeaderLen()], 0)
		if got := be16(h[10:12]); got != want {
			t.Fatalf("header %x: SetTTL(%d) checksum %#04x, full recompute %#04x", before[:h.HeaderLen()], ttl, got, want)
		}
		if gopacketChecksumOK(h[:h.HeaderLen()]) != nil {
			t.Fatalf("gopacket finds the checksum wrong after SetTTL")
		}
		// Only the TTL and checksum bytes change.
		for j := range h {
			if j != 8 && j != 10 && j != 11 && h[j] != before[j] {
				t.Fatalf("SetTTL changed byte %d", j)
			}
		}
	}
}

func TestSetTTLDecrementingToZeroStaysValid(t *testing.T) {
	b := ipv4Cases[7].serialize(t)
	h, _ := wire.ParseIPv4(b)
	for ttl := 255; ttl >= 0; ttl-- {
		h.SetTTL(uint8(ttl))
		if _, e := wire.ParseIPv4(b); e != wire.IPv4OK {
			t.Fatalf("after SetTTL(%d): %v", ttl, e)
		}
	}
}

// zeroChecksumID returns the ID that makes the header f describes sum to
// ones' complement zero, so that its computed checksum is 0x0000.
func zeroChecksumID(f wire.IPv4Fields) uint16 {
	b := make([]byte, f.HeaderLen())
	f.ID = 0
	wire.EncodeIPv4(b, &f)
	b[10], b[11] = 0, 0
	return ^wire.Fold(wire.Sum(b, 0))
}

func TestSetTTLAtTheZeroEdgesEqualsFullRecompute(t *testing.T) {
	// RFC 1624 section 3: the older incremental update of RFC 1141 gives
	// 0xffff where a full recompute gives 0x0000. Pin the edge both ways.
	tests := []struct {
		name          string
		from, to      uint8
		zeroAtOldTTL  bool // which header has the 0x0000 checksum
		withRouterOpt bool
	}{
		{"new checksum is zero", 64, 63, false, false},
		{"old checksum is zero", 64, 63, true, false},
		{"new checksum is zero, TTL to 0", 1, 0, false, false},
		{"new checksum is zero, TTL up to 255", 0, 255, false, true},
		{"old checksum is zero, with options", 255, 1, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := wire.IPv4Fields{TotalLen: 24, TTL: tt.to, Protocol: wire.ProtoUDP, Src: srcIP, Dst: dstIP}
			if tt.withRouterOpt {
				f.Options = []byte{0x94, 4, 0, 0}
				f.TotalLen = 28
			}
			if tt.zeroAtOldTTL {
				f.TTL = tt.from
			}
			f.ID = zeroChecksumID(f)
			f.TTL = tt.from
			b := make([]byte, f.TotalLen)
			wire.EncodeIPv4(b, &f)
			f.TTL = tt.to
			want := make([]byte, f.TotalLen)
			wire.EncodeIPv4(want, &f)
			zero := b
			if !tt.zeroAtOldTTL {
				zero = want
			}
			if c := be16(zero[10:12]); c != 0 {
				t.Fatalf("setup: checksum %#04x, want 0", c)
			}
			wire.IPv4(b).SetTTL(tt.to)
			if !bytes.Equal(b, want) {
				t.Errorf("SetTTL(%d) checksum %#04x, full recompute %#04x", tt.to, be16(b[10:12]), be16(want[10:12]))
			}
		})
	}
}

func TestParseIPv4AcceptsEitherZeroAsChecksum(t *testing.T) {
	// Pick the ID so that the header sums to ones' complement zero: the
	// computed checksum is then 0x0000, and 0xffff (negative zero) is as
	// good (RFC 1624 section 3).
	b := make([]byte, 20)
	f := &wire.IPv4Fields{TotalLen: 20, TTL: 64, Protocol: wire.ProtoUDP, Src: srcIP, Dst: dstIP}
	f.ID = zeroChecksumID(*f)
	wire.EncodeIPv4(b, f)
	if c := be16(b[10:12]); c != 0 {
		t.Fatalf("setup: checksum %#04x, want 0", c)
	}
	for _, c := range []uint16{0x0000, 0xffff} {
		hb := withU16(b, 10, c)
		h, e := wire.ParseIPv4(hb)
		if e != wire.IPv4OK {
			t.Fatalf("checksum %#04x: ParseIPv4 = %v", c, e)
		}
		for _, ttl := range []uint8{64, 63, 0, 255} {
			h.SetTTL(ttl)
			if _, e := wire.ParseIPv4(hb); e != wire.IPv4OK {
				t.Errorf("checksum %#04x, SetTTL(%d): %v", c, ttl, e)
			}
		}
	}
}

func TestCopiedOptions(t *testing.T) {
	ra := []byte{0x94, 0x04, 0x00, 0x00}
	lsrr := []byte{0x83, 0x07, 0x04, 198, 51, 100, 7}
	sec := append([]byte{0x82, 0x0b}, make([]byte, 9)...)
	rr := []byte{0x07, 0x07, 0x04, 0, 0, 0, 0}
	ts := []byte{0x44, 0x08, 0x05, 0x00, 0, 0, 0, 0}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name    string
		options []byte
		dst     []byte
		want    []byte
	}{
		{"no options", nil, nil, nil},
		{"router alert is copied", ra, nil, ra},
		{"record route is not", cat(rr, []byte{0}), nil, nil},
		{"timestamp is not", ts, nil, nil},
		{"NOPs are dropped", cat([]byte{1, 1}, ra, []byte{1, 1}), nil, ra},
		{"security is padded to four bytes", cat(sec, []byte{0}), nil, cat(sec, []byte{0})},
		{"LSRR is padded", cat([]byte{1}, lsrr), nil, cat(lsrr, []byte{0})},
		{"only the copied of a mix", cat(rr, ra, lsrr, []byte{1, 0, 0}), nil, cat(ra, lsrr, []byte{0})},
		{"EOL ends the list", cat([]byte{0, 0, 0, 0}, ra), nil, nil},
		{"length below 2 ends the scan", cat(ra, []byte{0x94, 0x01, 0, 0}), nil, ra},
		{"length past the header ends the scan", cat(ra, []byte{0x94, 0x05, 0, 0}), nil, ra},
		{"length zero ends the scan", []byte{0x83, 0x00, 0, 0}, nil, nil},
		{"appends to dst and pads what it added", ra[:], []byte{0xaa, 0xbb, 0xcc}, cat([]byte{0xaa, 0xbb, 0xcc}, ra)},
		{"appends padding after dst", cat(lsrr, []byte{1}), []byte{0xaa}, cat([]byte{0xaa}, lsrr, []byte{0})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, wire.IPv4MinHeaderLen+len(tt.options))
			wire.EncodeIPv4(b, &wire.IPv4Fields{TotalLen: len(b), TTL: 1, Protocol: wire.ProtoUDP, Src: srcIP, Dst: dstIP, Options: tt.options})
			h, e := wire.ParseIPv4(b)
			if e != wire.IPv4OK {
				t.Fatalf("ParseIPv4 = %v", e)
			}
			got := h.CopiedOptions(append([]byte(nil), tt.dst...))
			if !bytes.Equal(got, tt.want) {
				t.Errorf("CopiedOptions = %x, want %x", got, tt.want)
			}
			if (len(got)-len(tt.dst))%4 != 0 {
				t.Errorf("added %d bytes, not a multiple of 4", len(got)-len(tt.dst))
			}
			// Where gopacket can parse the options, the copied ones it sees
			// are the ones CopiedOptions kept, in order.
			var g layers.IPv4
			if g.DecodeFromBytes(b, &feedback{}) == nil {
				var want []byte
				for _, o := range g.Options {
					if o.OptionType&0x80 != 0 {
						want = append(append(want, o.OptionType, o.OptionLength), o.OptionData...)
					}
				}
				added := got[len(tt.dst):]
				pad := len(added) - len(want)
				if pad < 0 || pad > 3 || !bytes.Equal(added[:len(want)], want) || !bytes.Equal(added[len(want):], make([]byte, pad)) {
					t.Errorf("CopiedOptions added %x, gopacket's copied options are %x", added, want)
				}
			}
		})
	}
}

func TestIPv4FieldsHeaderLen(t *testing.T) {
	for _, n := range []int{0, 4, 8, 40} {
		f := wire.IPv4Fields{Options: make([]byte, n)}
		if got := f.HeaderLen(); got != 20+n {
			t.Errorf("HeaderLen with %d option bytes = %d", n, got)
		}
	}
}

// SetChecksum makes a header whose fields changed valid again, options
// included.
func TestIPv4SetChecksumValidatesAChangedHeader(t *testing.T) {
	for _, opts := range [][]byte{nil, {148, 4, 0, 0}} {
		f := wire.IPv4Fields{TotalLen: 100, ID: 7, TTL: 64, Protocol: wire.ProtoUDP, Options: opts,
			Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}
		b := make([]byte, 100)
		wire.EncodeIPv4(b, &f)
		binary.BigEndian.PutUint16(b[2:], 60) // total length
		binary.BigEndian.PutUint16(b[4:], 8)  // identification
		if _, err := wire.ParseIPv4(b[:60]); err != wire.IPv4BadChecksum {
			t.Fatalf("options %v: the changed header parses as %v before SetChecksum, want a bad checksum", opts, err)
		}
		wire.IPv4(b[:f.HeaderLen()]).SetChecksum()
		if h, err := wire.ParseIPv4(b[:60]); err != wire.IPv4OK || h.TotalLen() != 60 || h.ID() != 8 {
			t.Fatalf("options %v: after SetChecksum %v", opts, err)
		}
	}
}
