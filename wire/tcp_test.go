package wire_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// tcpSeg describes a segment for gopacket to build.
type tcpSeg struct {
	sport, dport   uint16
	seq, ack       uint32
	flags          uint8
	window, urgent uint16
	opts           []layers.TCPOption
	payload        int
}

// layer returns the gopacket layer for s.
func (s *tcpSeg) layer() *layers.TCP {
	l := &layers.TCP{
		SrcPort: layers.TCPPort(s.sport), DstPort: layers.TCPPort(s.dport),
		Seq: s.seq, Ack: s.ack, Window: s.window, Urgent: s.urgent,
		Options: s.opts,
	}
	setGopacketFlags(l, s.flags)
	return l
}

func setGopacketFlags(l *layers.TCP, f uint8) {
	l.FIN = f&wire.TCPFlagFIN != 0
	l.SYN = f&wire.TCPFlagSYN != 0
	l.RST = f&wire.TCPFlagRST != 0
	l.PSH = f&wire.TCPFlagPSH != 0
	l.ACK = f&wire.TCPFlagACK != 0
	l.URG = f&wire.TCPFlagURG != 0
	l.ECE = f&wire.TCPFlagECE != 0
	l.CWR = f&wire.TCPFlagCWR != 0
}

func gopacketFlags(l *layers.TCP) uint8 {
	var f uint8
	for _, b := range []struct {
		set  bool
		flag uint8
	}{
		{l.FIN, wire.TCPFlagFIN}, {l.SYN, wire.TCPFlagSYN}, {l.RST, wire.TCPFlagRST}, {l.PSH, wire.TCPFlagPSH},
		{l.ACK, wire.TCPFlagACK}, {l.URG, wire.TCPFlagURG}, {l.ECE, wire.TCPFlagECE}, {l.CWR, wire.TCPFlagCWR},
	} {
		if b.set {
			f |= b.flag
		}
	}
	return f
}

// gopacketTCP serializes the segment l carrying pl with gopacket, its
// checksum over the pseudo-header of src and dst, and returns it without the
// IP header.
func gopacketTCP(t testing.TB, src, dst netip.Addr, l *layers.TCP, pl []byte) []byte {
	t.Helper()
	return gopacketTransport(t, src, dst, layers.IPProtocolTCP, l, pl)
}

// gopacketTCPValid decodes b with gopacket and verifies its checksum over
// the pseudo-header of src and dst.
func gopacketTCPValid(t testing.TB, b []byte, src, dst netip.Addr) (*layers.TCP, bool) {
	t.Helper()
	var g layers.TCP
	return &g, gopacketTransportValid(t, &g, b, src, dst, layers.IPProtocolTCP)
}

// Options as gopacket builds them.
func tcpOptMSS(v uint16) layers.TCPOption {
	return layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: binary.BigEndian.AppendUint16(nil, v)}
}

func tcpOptWS(s uint8) layers.TCPOption {
	return layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{s}}
}

func tcpOptSACKOK() layers.TCPOption {
	return layers.TCPOption{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2}
}

func tcpOptTS(val, ecr uint32) layers.TCPOption {
	d := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, val), ecr)
	return layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: d}
}

func tcpOptSACK(blocks ...wire.SACKBlock) layers.TCPOption {
	var d []byte
	for _, s := range blocks {
		d = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(d, s.Start), s.End)
	}
	return layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionLength: uint8(2 + len(d)), OptionData: d}
}

func tcpOptNOP() layers.TCPOption {
	return layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1}
}

func tcpOptEOL() layers.TCPOption {
	return layers.TCPOption{OptionType: layers.TCPOptionKindEndList, OptionLength: 1}
}

func tcpOptRaw(kind uint8, data []byte) layers.TCPOption {
	return layers.TCPOption{OptionType: layers.TCPOptionKind(kind), OptionLength: uint8(2 + len(data)), OptionData: data}
}

// optionsFromGopacket is what gopacket's decoded option list means in
// TCPOptions terms, with ok false where an option of a kind GoNet knows has
// the wrong length. gopacket stops at an option whose length byte is
// unusable; the caller checks for that through its Padding.
func optionsFromGopacket(opts []layers.TCPOption) (o wire.TCPOptions, ok bool) {
	for _, g := range opts {
		d := g.OptionData
		switch g.OptionType {
		case layers.TCPOptionKindEndList:
			return o, true
		case layers.TCPOptionKindMSS:
			if len(d) != 2 {
				return o, false
			}
			o.MSS = binary.BigEndian.Uint16(d)
		case layers.TCPOptionKindWindowScale:
			if len(d) != 1 {
				return o, false
			}
			o.WScale, o.HasWScale = d[0], true
		case layers.TCPOptionKindSACKPermitted:
			if len(d) != 0 {
				return o, false
			}
			o.SACKPermitted = true
		case layers.TCPOptionKindTimestamps:
			if len(d) != 8 {
				return o, false
			}
			o.HasTimestamp, o.TSVal, o.TSEcr = true, binary.BigEndian.Uint32(d), binary.BigEndian.Uint32(d[4:])
		case layers.TCPOptionKindSACK:
			if len(d)%8 != 0 {
				return o, false
			}
			for ; len(d) > 0 && len(o.SACK) < wire.TCPMaxSACKBlocks; d = d[8:] {
				o.SACK = append(o.SACK, wire.SACKBlock{Start: binary.BigEndian.Uint32(d), End: binary.BigEndian.Uint32(d[4:])})
			}
		}
	}
	return o, true
}

// sameOptions compares two TCPOptions, treating nil and empty SACK alike.
func sameOptions(a, b *wire.TCPOptions) bool {
	x, y := *a, *b
	if len(x.SACK) == 0 && len(y.SACK) == 0 {
		x.SACK, y.SACK = nil, nil
	}
	return reflect.DeepEqual(x, y)
}

var (
	synOpts    = []layers.TCPOption{tcpOptMSS(1460), tcpOptSACKOK(), tcpOptTS(0x01020304, 0), tcpOptNOP(), tcpOptWS(7)}
	synAckOpts = []layers.TCPOption{tcpOptMSS(1400), tcpOptNOP(), tcpOptNOP(), tcpOptSACKOK(), tcpOptNOP(), tcpOptWS(14)}
	block1     = wire.SACKBlock{Start: 1000, End: 2000}
	block2     = wire.SACKBlock{Start: 0xfffffff0, End: 0x10} // across the wrap
	block3     = wire.SACKBlock{Start: 5000, End: 6000}
	block4     = wire.SACKBlock{Start: 8000, End: 9000}
)

var tcpCases = []struct {
	name string
	seg  tcpSeg
}{
	{"SYN as Linux sends it", tcpSeg{40000, 80, 0x12345678, 0, wire.TCPFlagSYN, 64240, 0, synOpts, 0}},
	{"SYN-ACK without timestamps", tcpSeg{80, 40000, 0xfffffff0, 0x12345679, wire.TCPFlagSYN | wire.TCPFlagACK, 65535, 0, synAckOpts, 0}},
	{"bare ACK", tcpSeg{1, 2, 100, 200, wire.TCPFlagACK, 502, 0, nil, 0}},
	{"data with timestamps", tcpSeg{443, 50000, 1 << 31, 0xffffffff, wire.TCPFlagACK | wire.TCPFlagPSH, 1000, 0,
		[]layers.TCPOption{tcpOptNOP(), tcpOptNOP(), tcpOptTS(0xdeadbeef, 0xcafef00d)}, 1448}},
	{"odd payload", tcpSeg{9, 9, 7, 7, wire.TCPFlagACK, 1, 0, nil, 1}},
	{"ACK with three SACK blocks", tcpSeg{80, 40000, 3, 4, wire.TCPFlagACK, 300, 0,
		[]layers.TCPOption{tcpOptNOP(), tcpOptNOP(), tcpOptTS(1, 2), tcpOptNOP(), tcpOptNOP(), tcpOptSACK(block1, block2, block3)}, 0}},
	{"four SACK blocks, no timestamps", tcpSeg{80, 40000, 3, 4, wire.TCPFlagACK, 300, 0,
		[]layers.TCPOption{tcpOptNOP(), tcpOptNOP(), tcpOptSACK(block1, block2, block3, block4)}, 0}},
	{"every flag", tcpSeg{65535, 65535, 0xffffffff, 0xffffffff, 0xff, 0xffff, 0xffff, nil, 3}},
	{"URG with a pointer", tcpSeg{23, 1023, 55, 66, wire.TCPFlagURG | wire.TCPFlagACK, 8, 1, nil, 10}},
	{"RST", tcpSeg{80, 40000, 77, 0, wire.TCPFlagRST, 0, 0, nil, 0}},
	{"FIN-ACK with ECN bits", tcpSeg{80, 40000, 77, 88, wire.TCPFlagFIN | wire.TCPFlagACK | wire.TCPFlagECE | wire.TCPFlagCWR, 10, 0, nil, 0}},
	{"unknown options are skipped", tcpSeg{1, 2, 3, 4, wire.TCPFlagSYN, 5, 0,
		[]layers.TCPOption{tcpOptRaw(19, make([]byte, 16)), tcpOptMSS(536), tcpOptRaw(254, []byte{0xf9, 0x89}), tcpOptRaw(34, nil), tcpOptWS(0)}, 0}},
	{"EOL ends the list", tcpSeg{1, 2, 3, 4, wire.TCPFlagSYN, 5, 0,
		[]layers.TCPOption{tcpOptMSS(9000), tcpOptEOL()}, 0}},
	{"options in an unusual order", tcpSeg{1, 2, 3, 4, wire.TCPFlagSYN, 5, 0,
		[]layers.TCPOption{tcpOptWS(3), tcpOptTS(9, 8), tcpOptSACKOK(), tcpOptMSS(1200)}, 7}},
	{"forty bytes of options", tcpSeg{1, 2, 3, 4, wire.TCPFlagACK, 5, 0,
		[]layers.TCPOption{tcpOptMSS(1), tcpOptTS(2, 3), tcpOptSACK(block4, block1), tcpOptSACKOK(), tcpOptWS(2), tcpOptNOP(), tcpOptNOP(), tcpOptNOP()}, 0}},
	{"jumbo payload", tcpSeg{1, 2, 3, 4, wire.TCPFlagACK, 5, 0, nil, 8960}},
}

func TestParseTCPDecodesWhatGopacketBuilds(t *testing.T) {
	for _, c := range tcpCases {
		t.Run(c.name, func(t *testing.T) {
			pl := payload(c.seg.payload)
			b := gopacketTCP(t, srcIP, dstIP, c.seg.layer(), pl)
			seg, ok := wire.ParseTCP(b)
			if !ok {
				t.Fatal("ParseTCP rejected a valid segment")
			}
			g, valid := gopacketTCPValid(t, b, srcIP, dstIP)
			if !valid {
				t.Fatal("setup: gopacket's own checksum does not verify")
			}
			checkTCPMatches(t, seg, g)
			if seg.SrcPort() != c.seg.sport || seg.DstPort() != c.seg.dport || seg.Seq() != c.seg.seq || seg.Ack() != c.seg.ack ||
				seg.Flags() != c.seg.flags || seg.Window() != c.seg.window || seg.Urgent() != c.seg.urgent {
				t.Errorf("fields differ from what was built: %+v", c.seg)
			}
			if !bytes.Equal(seg.Payload(), pl) {
				t.Error("Payload differs")
			}
			if !seg.ChecksumValid(srcIP, dstIP) {
				t.Error("ChecksumValid = false on gopacket's checksum")
			}
			var o wire.TCPOptions
			if !wire.ParseTCPOptions(seg.Options(), &o) {
				t.Fatalf("ParseTCPOptions rejected %x", seg.Options())
			}
			want, _ := optionsFromGopacket(g.Options)
			if !sameOptions(&o, &want) {
				t.Errorf("ParseTCPOptions = %+v\ngopacket's options mean %+v", o, want)
			}
			want2, _ := optionsFromGopacket(c.seg.opts)
			if !sameOptions(&o, &want2) {
				t.Errorf("ParseTCPOptions = %+v, built from %+v", o, want2)
			}
		})
	}
}

// checkTCPMatches compares every header field of seg with gopacket's
// decoding of the same bytes.
func checkTCPMatches(t *testing.T, seg wire.TCP, g *layers.TCP) {
	t.Helper()
	if seg.SrcPort() != uint16(g.SrcPort) || seg.DstPort() != uint16(g.DstPort) {
		t.Errorf("ports %d>%d, gopacket %d>%d", seg.SrcPort(), seg.DstPort(), g.SrcPort, g.DstPort)
	}
	if seg.Seq() != g.Seq || seg.Ack() != g.Ack {
		t.Errorf("seq %d ack %d, gopacket %d %d", seg.Seq(), seg.Ack(), g.Seq, g.Ack)
	}
	if seg.DataOffset() != int(g.DataOffset)*4 || len(seg.Options()) != len(g.Contents)-wire.TCPMinHeaderLen {
		t.Errorf("data offset %d, gopacket %d", seg.DataOffset(), int(g.DataOffset)*4)
	}
	if seg.Flags() != gopacketFlags(g) {
		t.Errorf("flags %#02x, gopacket %#02x", seg.Flags(), gopacketFlags(g))
	}
	for _, f := range []struct {
		name string
		bit  uint8
		g    bool
	}{
		{"FIN", wire.TCPFlagFIN, g.FIN}, {"SYN", wire.TCPFlagSYN, g.SYN}, {"RST", wire.TCPFlagRST, g.RST}, {"PSH", wire.TCPFlagPSH, g.PSH},
		{"ACK", wire.TCPFlagACK, g.ACK}, {"URG", wire.TCPFlagURG, g.URG}, {"ECE", wire.TCPFlagECE, g.ECE}, {"CWR", wire.TCPFlagCWR, g.CWR},
	} {
		if (seg.Flags()&f.bit != 0) != f.g {
			t.Errorf("%s = %v, gopacket %v", f.name, seg.Flags()&f.bit != 0, f.g)
		}
	}
	if seg.Window() != g.Window || seg.Checksum() != g.Checksum || seg.Urgent() != g.Urgent {
		t.Errorf("window %d checksum %#04x urgent %d, gopacket %d %#04x %d", seg.Window(), seg.Checksum(), seg.Urgent(), g.Window, g.Checksum, g.Urgent)
	}
	if !bytes.Equal(seg.Payload(), g.Payload) {
		t.Errorf("payload of %d bytes, gopacket %d", len(seg.Payload()), len(g.Payload))
	}
}

// encodeTCP builds a segment the way the TCP engine will: options, fixed
// header, payload, checksum.
func encodeTCP(f *wire.TCPFields, o *wire.TCPOptions, pl []byte, src, dst netip.Addr) []byte {
	n := wire.TCPOptionsLen(o)
	b := bytes.Repeat([]byte{0xa5}, wire.TCPMinHeaderLen+n+len(pl))
	if got := wire.EncodeTCPOptions(b[wire.TCPMinHeaderLen:], o); got != n {
		panic("EncodeTCPOptions and TCPOptionsLen disagree")
	}
	f.OptionsLen = n
	wire.EncodeTCP(b, f)
	copy(b[wire.TCPMinHeaderLen+n:], pl)
	wire.SetTCPChecksum(b, src, dst)
	return b
}

// fitted returns o as it is after encoding: SACK blocks beyond what fits in
// 40 bytes dropped from the end.
func fitted(o wire.TCPOptions, blocks int) wire.TCPOptions {
	o.SACK = o.SACK[:blocks]
	return o
}

var tcpEncodeCases = []struct {
	name   string
	f      wire.TCPFields
	o      wire.TCPOptions
	blocks int // SACK blocks that fit
	pl     int
}{
	{"SYN", wire.TCPFields{SrcPort: 40000, DstPort: 80, Seq: 0xfffffffe, Flags: wire.TCPFlagSYN, Window: 64240},
		wire.TCPOptions{MSS: 1460, SACKPermitted: true, HasTimestamp: true, TSVal: 77, HasWScale: true, WScale: 7}, 0, 0},
	{"SYN without timestamps", wire.TCPFields{SrcPort: 40000, DstPort: 80, Seq: 1, Flags: wire.TCPFlagSYN, Window: 65535},
		wire.TCPOptions{MSS: 536, SACKPermitted: true, HasWScale: true}, 0, 0},
	{"SYN, MSS only", wire.TCPFields{SrcPort: 1, DstPort: 2, Seq: 3, Flags: wire.TCPFlagSYN | wire.TCPFlagACK, Ack: 9, Window: 4},
		wire.TCPOptions{MSS: 65535}, 0, 0},
	{"no options", wire.TCPFields{SrcPort: 5, DstPort: 6, Seq: 7, Ack: 8, Flags: wire.TCPFlagACK, Window: 9},
		wire.TCPOptions{}, 0, 100},
	{"timestamps", wire.TCPFields{SrcPort: 443, DstPort: 50000, Seq: 1 << 31, Ack: 0xffffffff, Flags: wire.TCPFlagACK | wire.TCPFlagPSH, Window: 1000},
		wire.TCPOptions{HasTimestamp: true, TSVal: 0xdeadbeef, TSEcr: 0xcafef00d}, 0, 1448},
	{"timestamps and three SACK blocks, all fit", wire.TCPFields{SrcPort: 1, DstPort: 2, Flags: wire.TCPFlagACK},
		wire.TCPOptions{HasTimestamp: true, TSVal: 1, TSEcr: 2, SACK: []wire.SACKBlock{block1, block2, block3}}, 3, 0},
	{"timestamps and four SACK blocks: one dropped", wire.TCPFields{SrcPort: 1, DstPort: 2, Flags: wire.TCPFlagACK},
		wire.TCPOptions{HasTimestamp: true, TSVal: 1, TSEcr: 2, SACK: []wire.SACKBlock{block1, block2, block3, block4}}, 3, 1},
	{"four SACK blocks alone fit", wire.TCPFields{SrcPort: 1, DstPort: 2, Flags: wire.TCPFlagACK},
		wire.TCPOptions{SACK: []wire.SACKBlock{block4, block3, block2, block1}}, 4, 0},
	{"every option and four blocks: two dropped", wire.TCPFields{SrcPort: 1, DstPort: 2, Flags: wire.TCPFlagACK, Urgent: 3},
		wire.TCPOptions{MSS: 1, HasWScale: true, WScale: 14, SACKPermitted: true, HasTimestamp: true, TSVal: 5, TSEcr: 6,
			SACK: []wire.SACKBlock{block1, block2, block3, block4}}, 2, 9},
	{"every flag, odd payload", wire.TCPFields{SrcPort: 65535, DstPort: 65535, Seq: 0xffffffff, Ack: 0xffffffff, Flags: 0xff, Window: 0xffff, Urgent: 0xffff},
		wire.TCPOptions{HasWScale: true}, 0, 1501},
}

func TestEncodeTCPIsWhatGopacketBuilds(t *testing.T) {
	for _, c := range tcpEncodeCases {
		t.Run(c.name, func(t *testing.T) {
			pl := payload(c.pl)
			b := encodeTCP(&c.f, &c.o, pl, srcIP, dstIP)
			if len(b) > wire.TCPMaxHeaderLen+len(pl) {
				t.Fatalf("header of %d bytes", len(b)-len(pl))
			}
			g, valid := gopacketTCPValid(t, b, srcIP, dstIP)
			if !valid {
				t.Errorf("gopacket finds checksum %#04x wrong", g.Checksum)
			}
			if uint16(g.SrcPort) != c.f.SrcPort || uint16(g.DstPort) != c.f.DstPort || g.Seq != c.f.Seq || g.Ack != c.f.Ack ||
				gopacketFlags(g) != c.f.Flags || g.NS || g.Window != c.f.Window || g.Urgent != c.f.Urgent || !bytes.Equal(g.Payload, pl) {
				t.Errorf("gopacket decodes %+v", g)
			}
			if len(g.Padding) != 0 {
				t.Errorf("gopacket finds %d bytes of padding or an unparsable option", len(g.Padding))
			}
			got, ok := optionsFromGopacket(g.Options)
			if want := fitted(c.o, c.blocks); !ok || !sameOptions(&got, &want) {
				t.Errorf("gopacket decodes options %+v (ok %v), want %+v", got, ok, want)
			}

			// gopacket, given the options it decoded, builds the same bytes,
			// checksum included.
			l := &layers.TCP{
				SrcPort: g.SrcPort, DstPort: g.DstPort, Seq: g.Seq, Ack: g.Ack,
				Window: g.Window, Urgent: g.Urgent, Options: g.Options,
			}
			setGopacketFlags(l, c.f.Flags)
			if want := gopacketTCP(t, srcIP, dstIP, l, pl); !bytes.Equal(b, want) {
				t.Errorf("encoded\n%x\ngopacket\n%x", b, want)
			}

			seg, ok := wire.ParseTCP(b)
			if !ok || !seg.ChecksumValid(srcIP, dstIP) {
				t.Fatal("the encoded segment does not parse and verify")
			}
			var o wire.TCPOptions
			if want := fitted(c.o, c.blocks); !wire.ParseTCPOptions(seg.Options(), &o) || !sameOptions(&o, &want) {
				t.Errorf("parse after encode = %+v, want %+v", o, want)
			}
		})
	}
}

func TestEncodeTCPOptionsLinuxLayout(t *testing.T) {
	ts := []byte{0, 0, 0, 1, 0, 0, 0, 2} // TSVal 1, TSEcr 2
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name string
		o    wire.TCPOptions
		want []byte
	}{
		{"none", wire.TCPOptions{}, []byte{}},
		// What Linux puts on a SYN: MSS, SACK-permitted folded into the
		// timestamps word, window scale.
		{"SYN", wire.TCPOptions{MSS: 1460, SACKPermitted: true, HasTimestamp: true, TSVal: 1, TSEcr: 2, HasWScale: true, WScale: 7},
			cat([]byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10}, ts, []byte{1, 3, 3, 7})},
		{"SYN without SACK", wire.TCPOptions{MSS: 1460, HasTimestamp: true, TSVal: 1, TSEcr: 2, HasWScale: true, WScale: 7},
			cat([]byte{2, 4, 0x05, 0xb4, 1, 1, 8, 10}, ts, []byte{1, 3, 3, 7})},
		{"SYN without timestamps", wire.TCPOptions{MSS: 1460, SACKPermitted: true, HasWScale: true, WScale: 0},
			[]byte{2, 4, 0x05, 0xb4, 1, 1, 4, 2, 1, 3, 3, 0}},
		{"timestamps", wire.TCPOptions{HasTimestamp: true, TSVal: 1, TSEcr: 2}, cat([]byte{1, 1, 8, 10}, ts)},
		{"timestamps and a SACK block", wire.TCPOptions{HasTimestamp: true, TSVal: 1, TSEcr: 2, SACK: []wire.SACKBlock{{0x01020304, 0xa0b0c0d0}}},
			cat([]byte{1, 1, 8, 10}, ts, []byte{1, 1, 5, 10, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0})},
		{"an empty SACK list writes nothing", wire.TCPOptions{SACK: []wire.SACKBlock{}}, []byte{}},
		{"MSS zero is absent", wire.TCPOptions{MSS: 0, HasWScale: true, WScale: 14}, []byte{1, 3, 3, 14}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := wire.TCPOptionsLen(&tt.o); n != len(tt.want) {
				t.Errorf("TCPOptionsLen = %d, want %d", n, len(tt.want))
			}
			b := bytes.Repeat([]byte{0xa5}, wire.TCPMaxOptionsLen+4)
			n := wire.EncodeTCPOptions(b, &tt.o)
			if !bytes.Equal(b[:n], tt.want) {
				t.Errorf("EncodeTCPOptions\n%x\nwant\n%x", b[:n], tt.want)
			}
			if !bytes.Equal(b[n:], bytes.Repeat([]byte{0xa5}, len(b)-n)) {
				t.Error("EncodeTCPOptions wrote past its length")
			}
		})
	}
}

func TestEncodeTCPOptionsStaysWithin40Bytes(t *testing.T) {
	many := []wire.SACKBlock{block1, block2, block3, block4, {1, 2}, {3, 4}, {5, 6}}
	for mask := range 16 {
		for n := 0; n <= len(many); n++ {
			o := wire.TCPOptions{SACK: many[:n]}
			base := 0
			if mask&1 != 0 {
				o.MSS = 1460
				base += 4
			}
			if mask&2 != 0 {
				o.HasWScale, o.WScale = true, 9
				base += 4
			}
			if mask&4 != 0 {
				o.HasTimestamp, o.TSVal, o.TSEcr = true, 10, 20
				base += 12
			}
			if mask&8 != 0 {
				o.SACKPermitted = true
				if !o.HasTimestamp {
					base += 4
				}
			}
			// The most blocks that fit with the rest: each costs 8 bytes,
			// the option 4 more (NOP, NOP, kind, length).
			blocks := 0
			for k := n; k > 0; k-- {
				if base+4+8*k <= wire.TCPMaxOptionsLen {
					blocks = k
					break
				}
			}
			wantLen := base
			if blocks > 0 {
				wantLen += 4 + 8*blocks
			}
			b := make([]byte, wire.TCPMaxOptionsLen)
			got := wire.EncodeTCPOptions(b, &o)
			if got != wantLen || wire.TCPOptionsLen(&o) != wantLen || got%4 != 0 || got > wire.TCPMaxOptionsLen {
				t.Fatalf("%+v: wrote %d bytes, TCPOptionsLen %d, want %d", o, got, wire.TCPOptionsLen(&o), wantLen)
			}
			var back wire.TCPOptions
			if want := fitted(o, blocks); !wire.ParseTCPOptions(b[:got], &back) || !sameOptions(&back, &want) {
				t.Fatalf("%+v: parsed back as %+v", want, back)
			}
			hdr := make([]byte, wire.TCPMinHeaderLen+got)
			copy(hdr[wire.TCPMinHeaderLen:], b[:got])
			wire.EncodeTCP(hdr, &wire.TCPFields{Flags: wire.TCPFlagACK, OptionsLen: got})
			var g layers.TCP
			decodeLayer(t, &g, hdr)
			gg, ok := optionsFromGopacket(g.Options)
			if want := fitted(o, blocks); !ok || !sameOptions(&gg, &want) || len(g.Padding) != 0 {
				t.Fatalf("gopacket decodes %+v, want %+v", gg, want)
			}
		}
	}
}

func TestParseTCPOptionsRejectsMalformed(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		kept wire.TCPOptions // what was parsed before the fault
	}{
		{"length zero", []byte{2, 4, 1, 0, 30, 0, 0, 0}, wire.TCPOptions{MSS: 256}},
		{"length one", []byte{99, 1, 0, 0}, wire.TCPOptions{}},
		{"length byte missing", []byte{1, 1, 1, 3}, wire.TCPOptions{}},
		{"kind alone at the end", []byte{2}, wire.TCPOptions{}},
		{"length past the end", []byte{1, 3, 3, 7, 8, 10, 0, 0, 0, 1, 0, 0}, wire.TCPOptions{HasWScale: true, WScale: 7}},
		{"unknown option past the end", []byte{254, 6, 1, 2}, wire.TCPOptions{}},
		{"MSS of length 3", []byte{2, 3, 5, 1}, wire.TCPOptions{}},
		{"MSS of length 6", []byte{2, 6, 5, 0xb4, 0, 0}, wire.TCPOptions{}},
		{"MSS cut short", []byte{1, 1, 2, 4, 5}, wire.TCPOptions{}},
		{"window scale of length 2", []byte{3, 2, 1, 1}, wire.TCPOptions{}},
		{"window scale of length 4", []byte{3, 4, 7, 0}, wire.TCPOptions{}},
		{"SACK-permitted of length 3", []byte{4, 3, 0, 1}, wire.TCPOptions{}},
		{"SACK-permitted of length 4", []byte{2, 4, 0, 9, 4, 4, 0, 0}, wire.TCPOptions{MSS: 9}},
		{"timestamps of length 8", []byte{8, 8, 0, 0, 0, 1, 0, 0}, wire.TCPOptions{}},
		{"timestamps of length 12", []byte{8, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0}, wire.TCPOptions{}},
		{"SACK of length 3", []byte{5, 3, 0, 1}, wire.TCPOptions{}},
		{"SACK of length 9", append([]byte{5, 9}, make([]byte, 10)...), wire.TCPOptions{}},
		{"SACK of length 12", append([]byte{1, 1, 5, 12}, make([]byte, 12)...), wire.TCPOptions{}},
		{"SACK block past the end", []byte{1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0}, wire.TCPOptions{}},
		{"second SACK option malformed, first kept", append(append([]byte{5, 10}, 0, 0, 0, 1, 0, 0, 0, 2), 5, 11),
			wire.TCPOptions{SACK: []wire.SACKBlock{{1, 2}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o wire.TCPOptions
			if wire.ParseTCPOptions(tt.b, &o) {
				t.Fatalf("ParseTCPOptions(%x) = true, %+v", tt.b, o)
			}
			if !sameOptions(&o, &tt.kept) {
				t.Errorf("kept %+v, want %+v", o, tt.kept)
			}
			// gopacket agrees the options are malformed, where it can
			// hold them: it stops early, or decodes a known kind with the
			// wrong length.
			if len(tt.b)%4 != 0 {
				return
			}
			hdr := append(make([]byte, wire.TCPMinHeaderLen), tt.b...)
			wire.EncodeTCP(hdr, &wire.TCPFields{OptionsLen: len(tt.b)})
			var g layers.TCP
			decodeLayer(t, &g, hdr)
			if _, ok := optionsFromGopacket(g.Options); ok && len(g.Padding) == 0 {
				t.Errorf("gopacket decodes %v without fault", g.Options)
			}
		})
	}
}

func TestParseTCPOptionsAccepts(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want wire.TCPOptions
	}{
		{"nothing", nil, wire.TCPOptions{}},
		{"NOPs", []byte{1, 1, 1, 1}, wire.TCPOptions{}},
		{"EOL ends parsing, what follows is ignored", []byte{2, 4, 1, 0, 0, 2, 0, 99}, wire.TCPOptions{MSS: 256}},
		{"EOL first", []byte{0, 3, 1, 14}, wire.TCPOptions{}},
		{"unknown kinds skipped by length", []byte{254, 4, 0xf9, 0x89, 34, 2, 3, 3, 2, 1}, wire.TCPOptions{HasWScale: true, WScale: 2}},
		{"an unknown option may run to the end", []byte{3, 3, 5, 99, 4, 0, 0}, wire.TCPOptions{HasWScale: true, WScale: 5}},
		{"window scale above 14 is reported as sent", []byte{1, 3, 3, 200}, wire.TCPOptions{HasWScale: true, WScale: 200}},
		{"MSS zero", []byte{2, 4, 0, 0}, wire.TCPOptions{}},
		{"the last of a repeated option wins", []byte{2, 4, 0, 1, 2, 4, 0, 2}, wire.TCPOptions{MSS: 2}},
		{"a SACK option with no blocks", []byte{1, 1, 5, 2}, wire.TCPOptions{}},
		{"blocks of two SACK options add up", []byte{5, 10, 0, 0, 0, 1, 0, 0, 0, 2, 5, 10, 0, 0, 0, 3, 0, 0, 0, 4},
			wire.TCPOptions{SACK: []wire.SACKBlock{{1, 2}, {3, 4}}}},
		{"no more than four blocks are kept", append([]byte{5, 42}, make([]byte, 40)...),
			wire.TCPOptions{SACK: make([]wire.SACKBlock, 4)}},
		{"timestamps", []byte{1, 1, 8, 10, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, wire.TCPOptions{HasTimestamp: true, TSVal: 0xffffffff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o wire.TCPOptions
			if !wire.ParseTCPOptions(tt.b, &o) {
				t.Fatalf("ParseTCPOptions(%x) = false", tt.b)
			}
			if !sameOptions(&o, &tt.want) {
				t.Errorf("got %+v, want %+v", o, tt.want)
			}
		})
	}
}

func TestParseTCPOptionsResetsAndReusesTheSACKArray(t *testing.T) {
	var arr [wire.TCPMaxSACKBlocks]wire.SACKBlock
	o := wire.TCPOptions{SACK: arr[:0]}
	full := []byte{2, 4, 5, 0xb4, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 5, 18, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4}
	if !wire.ParseTCPOptions(full, &o) || len(o.SACK) != 2 || &o.SACK[0] != &arr[0] {
		t.Fatalf("first parse %+v", o)
	}
	if arr[1] != (wire.SACKBlock{Start: 3, End: 4}) {
		t.Errorf("caller's array holds %+v", arr)
	}
	if !wire.ParseTCPOptions([]byte{5, 10, 0, 0, 0, 9, 0, 0, 0, 10}, &o) {
		t.Fatal("second parse failed")
	}
	want := wire.TCPOptions{SACK: []wire.SACKBlock{{9, 10}}}
	if !sameOptions(&o, &want) || &o.SACK[0] != &arr[0] {
		t.Errorf("second parse left %+v, want %+v in the same array", o, want)
	}
	if !wire.ParseTCPOptions(nil, &o) || !sameOptions(&o, &wire.TCPOptions{}) || cap(o.SACK) != len(arr) {
		t.Errorf("empty options left %+v, capacity %d", o, cap(o.SACK))
	}
}

func TestParseTCPChecksTheDataOffset(t *testing.T) {
	good := gopacketTCP(t, srcIP, dstIP, tcpCases[0].seg.layer(), payload(25)) // 40-byte header
	tests := []struct {
		name    string
		b       []byte
		ok      bool
		off     int
		payload int
	}{
		{"valid", good, true, 40, 25},
		{"header only", good[:40], true, 40, 0},
		{"no options", with(good, 12, 5<<4), true, 20, 45},
		{"sixty-byte header", with(good, 12, 15<<4), true, 60, 5},
		{"sixty-byte header, no payload", with(good, 12, 15<<4)[:60], true, 60, 0},
		{"reserved bits are not part of the offset", with(good, 12, 10<<4|0x0f), true, 40, 25},
		{"empty", nil, false, 0, 0},
		{"shorter than a header", good[:19], false, 0, 0},
		{"offset past what arrived", good[:39], false, 0, 0},
		{"offset 60 on 45 bytes", with(good, 12, 15<<4)[:45], false, 0, 0},
		{"offset 16", with(good, 12, 4<<4), false, 0, 0},
		{"offset 0", with(good, 12, 0), false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seg, ok := wire.ParseTCP(tt.b)
			if !checkParse(t, "ParseTCP", seg, ok, tt.ok) {
				return
			}
			if len(seg) != len(tt.b) || seg.DataOffset() != tt.off || len(seg.Options()) != tt.off-20 || len(seg.Payload()) != tt.payload {
				t.Errorf("len %d offset %d options %d payload %d", len(seg), seg.DataOffset(), len(seg.Options()), len(seg.Payload()))
			}
		})
	}
}

// zeroSumTCP returns a segment whose checksum computes to zero: the last
// two payload bytes are chosen to make the sum all ones.
func zeroSumTCP(src, dst netip.Addr) []byte {
	b := encodeTCP(&wire.TCPFields{SrcPort: 1, DstPort: 2, Flags: wire.TCPFlagACK}, &wire.TCPOptions{}, []byte{0xde, 0xad, 0, 0}, src, dst)
	c := be16(b[16:18])
	b[22], b[23] = byte(c>>8), byte(c)
	wire.SetTCPChecksum(b, src, dst)
	return b
}

func TestTCPChecksum(t *testing.T) {
	good := gopacketTCP(t, srcIP, dstIP, tcpCases[5].seg.layer(), payload(11))
	zero := zeroSumTCP(srcIP, dstIP)
	checkChecksumValid(t, layers.IPProtocolTCP, []checksumCase{
		{"valid", good, srcIP, dstIP, true},
		{"zero is not 'no checksum' as in UDP", withU16(good, 16, 0), srcIP, dstIP, false},
		{"damaged payload", with(good, len(good)-3, good[len(good)-3]^0x01), srcIP, dstIP, false},
		{"damaged odd last byte", with(good, len(good)-1, good[len(good)-1]^0x80), srcIP, dstIP, false},
		{"damaged option", with(good, 30, good[30]^0x04), srcIP, dstIP, false},
		{"damaged flags", with(good, 13, good[13]^wire.TCPFlagFIN), srcIP, dstIP, false},
		{"wrong source address", good, addr("192.0.2.2"), dstIP, false},
		{"wrong destination address", good, srcIP, addr("198.51.100.8"), false},
		{"swapped addresses still sum the same", good, dstIP, srcIP, true},
		{"a computed zero is sent as zero", zero, srcIP, dstIP, true},
		{"and all ones verifies too (RFC 1071)", withU16(zero, 16, 0xffff), srcIP, dstIP, true},
	})
	if be16(zero[16:18]) != 0 {
		t.Fatalf("setup: zeroSumTCP has checksum %#04x", be16(zero[16:18]))
	}
	// gopacket also sends a computed zero as zero.
	var g layers.TCP
	decodeLayer(t, &g, zero)
	l := &layers.TCP{SrcPort: 1, DstPort: 2, ACK: true}
	if want := gopacketTCP(t, srcIP, dstIP, l, g.Payload); !bytes.Equal(zero, want) {
		t.Errorf("SetTCPChecksum = %x, gopacket %x", zero, want)
	}
}

func TestSetTCPChecksumIgnoresTheOldValue(t *testing.T) {
	b := encodeTCP(&wire.TCPFields{SrcPort: 7, DstPort: 8, Flags: wire.TCPFlagSYN}, &wire.TCPOptions{MSS: 1460}, payload(3), srcIP, dstIP)
	want := be16(b[16:18])
	b[16], b[17] = 0x12, 0x34
	wire.SetTCPChecksum(b, srcIP, dstIP)
	if got := be16(b[16:18]); got != want {
		t.Errorf("checksum %#04x over a stale field, want %#04x", got, want)
	}
}

func TestEncodeTCPClearsReservedBitsAndChecksum(t *testing.T) {
	b := bytes.Repeat([]byte{0xff}, 24)
	wire.EncodeTCP(b, &wire.TCPFields{Flags: wire.TCPFlagSYN, OptionsLen: 4})
	if b[12] != 6<<4 || b[13] != wire.TCPFlagSYN || b[16] != 0 || b[17] != 0 {
		t.Errorf("header %x", b[:20])
	}
	if !bytes.Equal(b[20:], []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Error("EncodeTCP wrote into the options")
	}
}

// hotPathSegment is a data segment with timestamps and SACK, as the TCP
// engine receives and sends them.
func hotPathSegment() (wire.TCPFields, wire.TCPOptions, []byte) {
	f := wire.TCPFields{SrcPort: 443, DstPort: 50000, Seq: 1, Ack: 2, Flags: wire.TCPFlagACK, Window: 512}
	o := wire.TCPOptions{HasTimestamp: true, TSVal: 3, TSEcr: 4, SACK: []wire.SACKBlock{block1, block2, block3}}
	return f, o, make([]byte, wire.TCPMaxHeaderLen+1448)
}

func TestTCPHotPathDoesNotAllocate(t *testing.T) {
	f, o, b := hotPathSegment()
	var arr [wire.TCPMaxSACKBlocks]wire.SACKBlock
	in := wire.TCPOptions{SACK: arr[:0]}
	allocs := testing.AllocsPerRun(1000, func() {
		f.OptionsLen = wire.EncodeTCPOptions(b[wire.TCPMinHeaderLen:], &o)
		wire.EncodeTCP(b, &f)
		n := f.OptionsLen
		seg := b[:wire.TCPMinHeaderLen+n+1448]
		wire.SetTCPChecksum(seg, srcIP, dstIP)
		p, ok := wire.ParseTCP(seg)
		if !ok || !p.ChecksumValid(srcIP, dstIP) || !wire.ParseTCPOptions(p.Options(), &in) || len(in.SACK) != 3 {
			t.Fatal("round trip failed")
		}
	})
	if allocs > 0 {
		t.Errorf("%.2f allocations per segment, want 0", allocs)
	}
}

func BenchmarkParseTCPOptions(b *testing.B) {
	_, o, buf := hotPathSegment()
	n := wire.EncodeTCPOptions(buf, &o)
	opts := buf[:n]
	var arr [wire.TCPMaxSACKBlocks]wire.SACKBlock
	in := wire.TCPOptions{SACK: arr[:0]}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if !wire.ParseTCPOptions(opts, &in) {
			b.Fatal("parse failed")
		}
		sink ^= uint16(in.TSVal)
	}
}

func BenchmarkEncodeTCP(b *testing.B) {
	f, o, buf := hotPathSegment()
	b.Run("header and options", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f.OptionsLen = wire.EncodeTCPOptions(buf[wire.TCPMinHeaderLen:], &o)
			wire.EncodeTCP(buf, &f)
			sink ^= uint16(buf[12])
		}
	})
	b.Run("with checksum over 1448 bytes", func(b *testing.B) {
		b.ReportAllocs()
		f.OptionsLen = wire.TCPOptionsLen(&o)
		seg := buf[:wire.TCPMinHeaderLen+f.OptionsLen+1448]
		b.SetBytes(int64(len(seg)))
		for b.Loop() {
			wire.EncodeTCPOptions(seg[wire.TCPMinHeaderLen:], &o)
			wire.EncodeTCP(seg, &f)
			wire.SetTCPChecksum(seg, srcIP, dstIP)
			sink ^= uint16(seg[16])
		}
	})
}
