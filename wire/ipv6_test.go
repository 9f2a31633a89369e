package wire_test

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

var (
	srcIP6 = addr("2001:db8::1")
	dstIP6 = addr("2001:db8:ffff::7")
)

type ipv6Case struct {
	name     string
	tc       uint8
	flow     uint32
	next     layers.IPProtocol
	hopLimit uint8
	src, dst string
	payload  int
}

var ipv6Cases = []ipv6Case{
	{name: "plain UDP", next: layers.IPProtocolUDP, hopLimit: 64, src: "2001:db8::1", dst: "2001:db8::2", payload: 30},
	{name: "traffic class and flow label", tc: 0xb9, flow: 0xabcde, next: layers.IPProtocolTCP, hopLimit: 1, src: "2001:db8::1", dst: "2001:db8::2", payload: 100},
	{name: "largest flow label", flow: 0xfffff, next: layers.IPProtocolICMPv6, hopLimit: 255, src: "fe80::1", dst: "ff02::1", payload: 8},
	{name: "no next header, hop limit zero", next: layers.IPProtocolNoNextHeader, hopLimit: 0, src: "::", dst: "ff02::1:ff00:1", payload: 2},
	{name: "IPv4-mapped addresses", tc: 0xff, next: layers.IPProtocolUDP, hopLimit: 64, src: "::ffff:192.0.2.1", dst: "::ffff:198.51.100.7", payload: 1},
	{name: "large payload", next: layers.IPProtocolUDP, hopLimit: 64, src: "2001:db8::1", dst: "2001:db8::2", payload: 9000},
}

func (c ipv6Case) gopacket() *layers.IPv6 {
	return &layers.IPv6{Version: 6, TrafficClass: c.tc, FlowLabel: c.flow, NextHeader: c.next,
		HopLimit: c.hopLimit, SrcIP: ip(addr(c.src)), DstIP: ip(addr(c.dst))}
}

func (c ipv6Case) serialize(t testing.TB) []byte {
	return serialize(t, c.gopacket(), gopacketPayload(payload(c.payload)))
}

// checkIPv6Matches compares every field of h with gopacket's decoding g.
func checkIPv6Matches(t testing.TB, h wire.IPv6, g *layers.IPv6) {
	t.Helper()
	if h.TrafficClass() != g.TrafficClass || h.FlowLabel() != g.FlowLabel || h.PayloadLen() != int(g.Length) ||
		h.NextHeader() != uint8(g.NextHeader) || h.HopLimit() != g.HopLimit {
		t.Errorf("tc %#x flow %#x len %d next %d hops %d, gopacket %#x %#x %d %d %d", h.TrafficClass(), h.FlowLabel(), h.PayloadLen(),
			h.NextHeader(), h.HopLimit(), g.TrafficClass, g.FlowLabel, g.Length, g.NextHeader, g.HopLimit)
	}
	if !bytes.Equal(h.Src().AsSlice(), g.SrcIP.To16()) || !bytes.Equal(h.Dst().AsSlice(), g.DstIP.To16()) {
		t.Errorf("src %v dst %v, gopacket %v %v", h.Src(), h.Dst(), g.SrcIP, g.DstIP)
	}
}

func TestParseIPv6DecodesWhatGopacketBuilds(t *testing.T) {
	for _, c := range ipv6Cases {
		t.Run(c.name, func(t *testing.T) {
			g := c.gopacket()
			b := serialize(t, g, gopacketPayload(payload(c.payload)))
			h, e := wire.ParseIPv6(b)
			if e != wire.IPv6OK {
				t.Fatalf("ParseIPv6 = %v", e)
			}
			checkIPv6Matches(t, h, g)
			if !bytes.Equal(h.Payload(), payload(c.payload)) {
				t.Error("Payload differs")
			}
		})
	}
}

func TestEncodeIPv6IsWhatGopacketDecodes(t *testing.T) {
	for _, c := range ipv6Cases {
		t.Run(c.name, func(t *testing.T) {
			b := append(bytes.Repeat([]byte{0xa5}, wire.IPv6HeaderLen), payload(c.payload)...)
			wire.EncodeIPv6(b, &wire.IPv6Fields{TrafficClass: c.tc, FlowLabel: c.flow, PayloadLen: c.payload,
				NextHeader: uint8(c.next), HopLimit: c.hopLimit, Src: addr(c.src), Dst: addr(c.dst)})
			var g layers.IPv6
			decodeLayer(t, &g, b)
			if g.Version != 6 {
				t.Errorf("gopacket version %d", g.Version)
			}
			h, e := wire.ParseIPv6(b)
			if e != wire.IPv6OK {
				t.Fatalf("ParseIPv6 of what EncodeIPv6 wrote = %v", e)
			}
			checkIPv6Matches(t, h, &g)
			if want := c.serialize(t); !bytes.Equal(b, want) {
				t.Errorf("EncodeIPv6 = %x\ngopacket = %x", b[:wire.IPv6HeaderLen], want[:wire.IPv6HeaderLen])
			}
		})
	}
}

func TestEncodeIPv6SendsOnlyTwentyFlowLabelBits(t *testing.T) {
	b := make([]byte, wire.IPv6HeaderLen)
	wire.EncodeIPv6(b, &wire.IPv6Fields{TrafficClass: 0x12, FlowLabel: 0xfff12345, Src: srcIP6, Dst: dstIP6})
	h, e := wire.ParseIPv6(b)
	if e != wire.IPv6OK || h.FlowLabel() != 0x12345 || h.TrafficClass() != 0x12 {
		t.Errorf("ParseIPv6 = %v, flow %#x tc %#x, want flow 0x12345 tc 0x12", e, h.FlowLabel(), h.TrafficClass())
	}
}

func TestParseIPv6RejectsMalformedPackets(t *testing.T) {
	good := ipv6Cases[0].serialize(t)
	tests := []struct {
		name string
		b    []byte
		want wire.IPv6Error
		len  int // of the view, when accepted
	}{
		{"valid", good, wire.IPv6OK, len(good)},
		{"link-layer padding trimmed", append(append([]byte(nil), good...), 0, 0, 0, 0), wire.IPv6OK, len(good)},
		{"payload length zero", withU16(good, 4, 0), wire.IPv6OK, wire.IPv6HeaderLen},
		{"empty", nil, wire.IPv6Truncated, 0},
		{"one byte short of the header", good[:wire.IPv6HeaderLen-1], wire.IPv6Truncated, 0},
		{"version 4", with(good, 0, 0x45), wire.IPv6BadVersion, 0},
		{"version 0", with(good, 0, 0x0f), wire.IPv6BadVersion, 0},
		{"payload length one past the buffer", withU16(good, 4, uint16(len(good)-wire.IPv6HeaderLen+1)), wire.IPv6BadPayloadLen, 0},
		{"payload length largest", withU16(good, 4, 0xffff), wire.IPv6BadPayloadLen, 0},
		{"payload cut short", good[:len(good)-1], wire.IPv6BadPayloadLen, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, e := wire.ParseIPv6(tt.b)
			if e != tt.want {
				t.Fatalf("ParseIPv6 = %v, want %v", e, tt.want)
			}
			if e != wire.IPv6OK {
				if h != nil {
					t.Fatal("a rejected packet returned a view")
				}
				return
			}
			if len(h) != tt.len {
				t.Errorf("view of %d bytes, want %d", len(h), tt.len)
			}
		})
	}
}

func TestIPv6ErrorSaysWhatFailed(t *testing.T) {
	tests := []struct {
		e    wire.IPv6Error
		want string
	}{
		{wire.IPv6OK, "ok"},
		{wire.IPv6Truncated, "shorter than the 40-byte header"},
		{wire.IPv6BadVersion, "version not 6"},
		{wire.IPv6BadPayloadLen, "payload length past the end of the packet"},
		{wire.IPv6Error(200), "IPv6Error(200)"},
	}
	for _, tt := range tests {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("IPv6Error(%d).String() = %q, want %q", tt.e, got, tt.want)
		}
	}
}

var fragmentCases = []struct {
	name   string
	next   layers.IPProtocol
	offset int
	more   bool
	id     uint32
}{
	{"first fragment", layers.IPProtocolUDP, 0, true, 0x01020304},
	{"middle fragment", layers.IPProtocolTCP, 1232, true, 1},
	{"last fragment at the largest offset", layers.IPProtocolICMPv6, 0xfff8, false, 0xffffffff},
	{"atomic fragment", layers.IPProtocolUDP, 0, false, 7},
}

func TestIPv6FragmentAgreesWithGopacket(t *testing.T) {
	for _, c := range fragmentCases {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Repeat([]byte{0xa5}, wire.IPv6FragmentLen)
			wire.EncodeIPv6Fragment(b, &wire.IPv6FragmentFields{NextHeader: uint8(c.next), Offset: c.offset, MoreFragments: c.more, ID: c.id})
			var g layers.IPv6Fragment
			decodeLayer(t, &g, b)
			if g.NextHeader != c.next || int(g.FragmentOffset)*8 != c.offset || g.MoreFragments != c.more ||
				g.Identification != c.id || g.Reserved1 != 0 || g.Reserved2 != 0 {
				t.Errorf("gopacket decodes %+v", g)
			}
			gb := serialize(t, &layers.IPv6Fragment{NextHeader: c.next, FragmentOffset: uint16(c.offset / 8), MoreFragments: c.more, Identification: c.id})
			if !bytes.Equal(b, gb) {
				t.Errorf("EncodeIPv6Fragment = %x, gopacket = %x", b, gb)
			}
			x, ok := wire.ParseIPv6Fragment(append(gb, 0xee))
			if !ok {
				t.Fatal("ParseIPv6Fragment rejected gopacket's header")
			}
			if len(x) != wire.IPv6FragmentLen || x.NextHeader() != uint8(c.next) || x.Offset() != c.offset ||
				x.MoreFragments() != c.more || x.ID() != c.id || x.IsAtomic() != (c.offset == 0 && !c.more) {
				t.Errorf("parsed next %d offset %d more %v id %#x atomic %v", x.NextHeader(), x.Offset(), x.MoreFragments(), x.ID(), x.IsAtomic())
			}
		})
	}
	if _, ok := wire.ParseIPv6Fragment(make([]byte, wire.IPv6FragmentLen-1)); ok {
		t.Error("ParseIPv6Fragment accepted 7 bytes")
	}
}

// opt is a gopacket Hop-by-Hop or Destination option.
func opt(typ uint8, data ...byte) *layers.IPv6HopByHopOption {
	return &layers.IPv6HopByHopOption{OptionType: typ, OptionLength: uint8(len(data)), OptionData: data}
}

func TestIPv6OptionsWalkWhatGopacketBuilds(t *testing.T) {
	tests := []struct {
		name    string
		opts    []*layers.IPv6HopByHopOption
		actions []wire.IPv6OptAction
	}{
		{"router alert padded by PadN", []*layers.IPv6HopByHopOption{opt(5, 0, 0), opt(wire.IPv6OptPadN)}, []wire.IPv6OptAction{0, 0}},
		{"Pad1s", []*layers.IPv6HopByHopOption{opt(wire.IPv6OptPad1), opt(wire.IPv6OptPad1), opt(wire.IPv6OptPadN, 0, 0)}, []wire.IPv6OptAction{0, 0, 0}},
		{"unknown option: skip", []*layers.IPv6HopByHopOption{opt(0x1e, 1, 2, 3, 4)}, []wire.IPv6OptAction{wire.IPv6OptSkip}},
		{"unknown option: discard", []*layers.IPv6HopByHopOption{opt(0x5e, 1, 2, 3, 4)}, []wire.IPv6OptAction{wire.IPv6OptDiscard}},
		{"unknown option: discard and send ICMP", []*layers.IPv6HopByHopOption{opt(0x9e, 1, 2, 3, 4)}, []wire.IPv6OptAction{wire.IPv6OptDiscardICMP}},
		{"unknown option: discard and send ICMP unless multicast", []*layers.IPv6HopByHopOption{opt(0xfe, 1, 2, 3, 4)}, []wire.IPv6OptAction{wire.IPv6OptDiscardICMPUnicast}},
		{"jumbo payload with changing data", []*layers.IPv6HopByHopOption{opt(0xc2, 0, 1, 0, 0)}, []wire.IPv6OptAction{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := serialize(t, &layers.IPv6HopByHop{Options: tt.opts}, gopacketPayload(payload(3)))
			var g layers.IPv6HopByHop
			if err := g.DecodeFromBytes(b, &feedback{}); err != nil {
				t.Fatalf("gopacket decode: %v", err)
			}
			x, ok := wire.ParseIPv6ExtHdr(b)
			if !ok {
				t.Fatal("ParseIPv6ExtHdr rejected gopacket's header")
			}
			if x.Len() != g.ActualLength || x.Len()%8 != 0 || len(x) != x.Len() || x.NextHeader() != uint8(g.NextHeader) {
				t.Fatalf("Len %d next %d, gopacket %d %d", x.Len(), x.NextHeader(), g.ActualLength, g.NextHeader)
			}
			opts, ok := wire.ParseIPv6Options(x.Data())
			if !ok {
				t.Fatal("ParseIPv6Options rejected gopacket's options")
			}
			var got []wire.IPv6Option
			for len(opts) > 0 {
				var o wire.IPv6Option
				o, opts = opts.Next()
				got = append(got, o)
			}
			// gopacket pads the header to 8 octets with options of its own.
			if len(got) < len(tt.opts) || len(got) != len(g.Options) {
				t.Fatalf("%d options, gopacket decodes %d, built %d", len(got), len(g.Options), len(tt.opts))
			}
			for i, o := range got {
				gi := g.Options[i]
				if o.Type() != gi.OptionType || o.Len() != gi.ActualLength || !bytes.Equal(o.Data(), gi.OptionData) {
					t.Errorf("option %d: type %#x len %d data %x, gopacket %#x %d %x", i, o.Type(), o.Len(), o.Data(), gi.OptionType, gi.ActualLength, gi.OptionData)
				}
				if i < len(tt.actions) && o.Action() != tt.actions[i] {
					t.Errorf("option %d: Action = %d, want %d", i, o.Action(), tt.actions[i])
				}
				if o.MayChange() != (o.Type()&0x20 != 0) {
					t.Errorf("option %d: MayChange = %v", i, o.MayChange())
				}
			}
		})
	}
}

func TestIPv6ExtensionHeadersRejectTruncation(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"smallest header", []byte{17, 0, 1, 4, 0, 0, 0, 0}, true},
		{"empty", nil, false},
		{"shorter than 8 bytes", []byte{17, 0, 1, 4, 0, 0, 0}, false},
		{"length past the buffer", []byte{17, 1, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, ok := wire.ParseIPv6ExtHdr(tt.b)
			checkParse(t, "ParseIPv6ExtHdr", x, ok, tt.ok)
		})
	}
	opts := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"none", nil, true},
		{"Pad1 alone", []byte{0}, true},
		{"PadN of no data", []byte{1, 0}, true},
		{"type without length", []byte{1}, false},
		{"data past the end", []byte{1, 4, 0, 0, 0}, false},
		{"good option then a cut one", []byte{0, 1, 0, 0x1e, 2, 0}, false},
	}
	for _, tt := range opts {
		t.Run("options "+tt.name, func(t *testing.T) {
			o, ok := wire.ParseIPv6Options(tt.b)
			if ok != tt.ok || (!ok && o != nil) {
				t.Fatalf("ParseIPv6Options ok = %v with %x, want %v", ok, []byte(o), tt.ok)
			}
		})
	}
}

// ipv6Transport serializes l carrying pl over IPv6 with gopacket, which
// computes its checksum over the RFC 8200 pseudo-header, and returns the
// upper-layer packet.
func ipv6Transport(t testing.TB, next layers.IPProtocol, l gopacket.SerializableLayer, pl []byte) []byte {
	t.Helper()
	ipl := &layers.IPv6{Version: 6, NextHeader: next, HopLimit: 64, SrcIP: ip(srcIP6), DstIP: ip(dstIP6)}
	if c, ok := l.(interface {
		SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
	}); ok {
		if err := c.SetNetworkLayerForChecksum(ipl); err != nil {
			t.Fatal(err)
		}
	}
	ls := []gopacket.SerializableLayer{ipl, l}
	if e, ok := l.(*layers.ICMPv6); ok && e.TypeCode.Type() == layers.ICMPv6TypeEchoRequest {
		ls = append(ls, &layers.ICMPv6Echo{Identifier: 0x77, SeqNumber: 3})
	}
	return serialize(t, append(ls, gopacketPayload(pl))...)[wire.IPv6HeaderLen:]
}

func TestPseudoHeaderSum6GivesGopacketsChecksums(t *testing.T) {
	tests := []struct {
		name     string
		next     layers.IPProtocol
		l        gopacket.SerializableLayer
		checkOff int
		pl       int
	}{
		{"UDP", layers.IPProtocolUDP, &layers.UDP{SrcPort: 5353, DstPort: 53}, 6, 33},
		{"UDP, even payload", layers.IPProtocolUDP, &layers.UDP{SrcPort: 1, DstPort: 2}, 6, 1452},
		{"TCP", layers.IPProtocolTCP, &layers.TCP{SrcPort: 443, DstPort: 50000, Seq: 1, Ack: 2, ACK: true, Window: 65535}, 16, 1220},
		{"TCP SYN without data", layers.IPProtocolTCP, &layers.TCP{SrcPort: 1, DstPort: 80, SYN: true, Window: 1}, 16, 0},
		{"ICMPv6 echo", layers.IPProtocolICMPv6, &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}, 2, 56},
		{"ICMPv6 large", layers.IPProtocolICMPv6, &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}, 2, 60000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := ipv6Transport(t, tt.next, tt.l, payload(tt.pl))
			ph := wire.PseudoHeaderSum6(srcIP6, dstIP6, uint8(tt.next), len(b))
			if wire.Checksum(b, ph) != 0 {
				t.Fatalf("gopacket's packet does not verify over PseudoHeaderSum6")
			}
			want := be16(b[tt.checkOff:])
			z := withU16(b, tt.checkOff, 0)
			if got := wire.Checksum(z, ph); got != want {
				t.Errorf("checksum over PseudoHeaderSum6 = %#04x, gopacket %#04x", got, want)
			}
			// The naive reference: the pseudo-header written out as RFC 8200
			// section 8.1 draws it.
			s, d := srcIP6.As16(), dstIP6.As16()
			n := len(b)
			ph6 := append(append(s[:], d[:]...), byte(n>>24), byte(n>>16), byte(n>>8), byte(n), 0, 0, 0, uint8(tt.next))
			if got := naiveChecksum(append(ph6, z...), 0); got != want {
				t.Errorf("naive checksum = %#04x, gopacket %#04x", got, want)
			}
		})
	}
}

func TestPseudoHeaderSum6CountsLengthsPast16Bits(t *testing.T) {
	// A jumbogram's upper-layer length (RFC 2675) takes all 32 bits.
	base := wire.PseudoHeaderSum6(srcIP6, dstIP6, wire.ProtoUDP, 0)
	if got := wire.PseudoHeaderSum6(srcIP6, dstIP6, wire.ProtoUDP, 0x12345); wire.Fold(got) != wire.Fold(base+0x1+0x2345) {
		t.Errorf("sum with length 0x12345 = %#x, base %#x", got, base)
	}
}

func TestIPv6ParseDoesNotAllocate(t *testing.T) {
	b := ipv6Cases[1].serialize(t)
	hbh := serialize(t, &layers.IPv6HopByHop{Options: []*layers.IPv6HopByHopOption{opt(5, 0, 0), opt(0x9e, 1, 2, 3, 4, 5, 6, 7, 8)}})
	allocs := testing.AllocsPerRun(1000, func() {
		h, _ := wire.ParseIPv6(b)
		_, _, _ = h.Src(), h.Dst(), h.FlowLabel()
		x, _ := wire.ParseIPv6ExtHdr(hbh)
		opts, _ := wire.ParseIPv6Options(x.Data())
		for len(opts) > 0 {
			var o wire.IPv6Option
			o, opts = opts.Next()
			_ = o.Action()
		}
		f, _ := wire.ParseIPv6Fragment(b[:8])
		_ = f.Offset()
		_ = wire.PseudoHeaderSum6(h.Src(), h.Dst(), h.NextHeader(), h.PayloadLen())
	})
	if allocs != 0 {
		t.Errorf("parsing IPv6 allocates %v times", allocs)
	}
}
