package wire_test

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// quotedDatagram is the start of a datagram an ICMP error quotes: its IPv4
// header and first eight bytes (RFC 792).
func quotedDatagram(t testing.TB) []byte {
	return serialize(t, gopacketIPv4(srcIP, dstIP, layers.IPProtocolUDP), gopacketPayload(payload(8)))
}

var icmpCases = []struct {
	name      string
	typ, code uint8
	id, seq   uint16 // bytes 4-8, whatever the type calls them
	payload   func(testing.TB) []byte
}{
	{"echo request", wire.ICMPEchoRequest, 0, 0x4a3b, 1, func(testing.TB) []byte { return payload(56) }},
	{"echo reply with odd data", wire.ICMPEchoReply, 0, 0xffff, 0xfffe, func(testing.TB) []byte { return payload(17) }},
	{"echo with no data", wire.ICMPEchoRequest, 0, 0, 0, func(testing.TB) []byte { return nil }},
	{"port unreachable", wire.ICMPDestUnreach, wire.ICMPCodePortUnrch, 0, 0, quotedDatagram},
	{"protocol unreachable", wire.ICMPDestUnreach, wire.ICMPCodeProtoUnrch, 0, 0, quotedDatagram},
	{"fragmentation needed carries the next-hop MTU", wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, 0, 1400, quotedDatagram},
	{"TTL exceeded", wire.ICMPTimeExceeded, wire.ICMPCodeTTL, 0, 0, quotedDatagram},
	{"reassembly time exceeded", wire.ICMPTimeExceeded, wire.ICMPCodeReassembly, 0, 0, quotedDatagram},
	{"parameter problem points at a byte", wire.ICMPParamProblem, 0, 0x0800, 0, quotedDatagram},
}

func TestParseICMPDecodesWhatGopacketBuilds(t *testing.T) {
	for _, c := range icmpCases {
		t.Run(c.name, func(t *testing.T) {
			g := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(c.typ, c.code), Id: c.id, Seq: c.seq}
			pl := c.payload(t)
			b := serialize(t, g, gopacketPayload(pl))
			m, ok := wire.ParseICMP(b)
			if !ok {
				t.Fatal("ParseICMP rejected a valid message")
			}
			if m.Type() != c.typ || m.Code() != c.code || m.Checksum() != g.Checksum {
				t.Errorf("type %d code %d checksum %#04x, want %d %d %#04x", m.Type(), m.Code(), m.Checksum(), c.typ, c.code, g.Checksum)
			}
			if m.Ident() != c.id || m.Seq() != c.seq || m.RestOfHeader() != uint32(c.id)<<16|uint32(c.seq) {
				t.Errorf("ident %d seq %d rest %#08x, want %d %d", m.Ident(), m.Seq(), m.RestOfHeader(), c.id, c.seq)
			}
			if !bytes.Equal(m.Payload(), pl) {
				t.Errorf("Payload = %x, want %x", m.Payload(), pl)
			}
		})
	}
}

func TestEncodeICMPIsWhatGopacketDecodes(t *testing.T) {
	for _, c := range icmpCases {
		t.Run(c.name, func(t *testing.T) {
			pl := c.payload(t)
			b := append(bytes.Repeat([]byte{0xa5}, wire.ICMPHeaderLen), pl...)
			wire.EncodeICMP(b, &wire.ICMPFields{Type: c.typ, Code: c.code, Rest: wire.EchoRest(c.id, c.seq)})
			var g layers.ICMPv4
			decodeLayer(t, &g, b)
			if g.TypeCode.Type() != c.typ || g.TypeCode.Code() != c.code || g.Id != c.id || g.Seq != c.seq {
				t.Errorf("gopacket got %v id %d seq %d", g.TypeCode, g.Id, g.Seq)
			}
			if err, v := g.VerifyChecksum(); err != nil || !v.Valid {
				t.Errorf("gopacket finds the checksum wrong: %#04x, correct %#04x", v.Actual, v.Correct)
			}
			want := serialize(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(c.typ, c.code), Id: c.id, Seq: c.seq}, gopacketPayload(pl))
			if !bytes.Equal(b, want) {
				t.Errorf("EncodeICMP = %x, gopacket = %x", b, want)
			}
			if _, ok := wire.ParseICMP(b); !ok {
				t.Error("ParseICMP rejects what EncodeICMP wrote")
			}
		})
	}
}

func TestParseICMPVerifiesTheChecksum(t *testing.T) {
	echo := serialize(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(wire.ICMPEchoRequest, 0), Id: 1, Seq: 2}, gopacketPayload(payload(9)))
	// An echo whose checksum computes to zero, so that 0xffff is its
	// negative-zero twin.
	zero := make([]byte, 12)
	zero[0] = wire.ICMPEchoRequest
	copy(zero[8:], []byte{0x00, 0x00, 0xf7, 0xff}) // 0x0800 + 0xf7ff = 0xffff
	tests := []struct {
		name   string
		b      []byte
		accept bool
	}{
		{"valid", echo, true},
		{"header only", serialize(t, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(wire.ICMPEchoReply, 0)}), true},
		{"computed zero", zero, true},
		{"computed zero sent as all ones", withU16(zero, 2, 0xffff), true},
		{"shorter than the header", echo[:wire.ICMPHeaderLen-1], false},
		{"empty", nil, false},
		{"flipped bit in the type", with(echo, 0, echo[0]^1), false},
		{"flipped bit in the data", with(echo, 16, echo[16]^0x80), false},
		{"flipped bit in the odd last byte", with(echo, len(echo)-1, echo[len(echo)-1]^1), false},
		{"checksum zeroed", withU16(echo, 2, 0), false},
		{"data cut short", echo[:len(echo)-2], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := wire.ParseICMP(tt.b)
			if checkParse(t, "ParseICMP", m, ok, tt.accept) && len(m) != len(tt.b) {
				t.Errorf("view has %d bytes, want %d", len(m), len(tt.b))
			}
			// gopacket agrees on which checksums are valid.
			var g layers.ICMPv4
			if len(tt.b) >= wire.ICMPHeaderLen {
				decodeLayer(t, &g, tt.b)
				if _, v := g.VerifyChecksum(); v.Valid != tt.accept {
					t.Errorf("gopacket says valid = %v", v.Valid)
				}
			}
		})
	}
}

func TestEchoRest(t *testing.T) {
	tests := []struct {
		ident, seq uint16
		want       uint32
	}{
		{0, 0, 0},
		{1, 2, 0x00010002},
		{0xffff, 0, 0xffff0000},
		{0, 0xffff, 0x0000ffff},
		{0xabcd, 0x1234, 0xabcd1234},
	}
	for _, tt := range tests {
		if got := wire.EchoRest(tt.ident, tt.seq); got != tt.want {
			t.Errorf("EchoRest(%#x, %#x) = %#x, want %#x", tt.ident, tt.seq, got, tt.want)
		}
	}
}
