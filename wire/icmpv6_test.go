package wire_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// quotedIPv6 is the start of a packet an ICMPv6 error quotes.
func quotedIPv6(t testing.TB) []byte { return ipv6Cases[0].serialize(t) }

var icmpv6Cases = []struct {
	name      string
	typ, code uint8
	rest      uint32
	payload   func(testing.TB) []byte
}{
	{"echo request", wire.ICMPv6EchoRequest, 0, wire.EchoRest(0x4a3b, 1), func(testing.TB) []byte { return payload(56) }},
	{"echo reply with odd data", wire.ICMPv6EchoReply, 0, wire.EchoRest(0xffff, 0xfffe), func(testing.TB) []byte { return payload(17) }},
	{"echo with no data", wire.ICMPv6EchoRequest, 0, 0, func(testing.TB) []byte { return nil }},
	{"no route", wire.ICMPv6DestUnreach, wire.ICMPv6CodeNoRoute, 0, quotedIPv6},
	{"administratively prohibited", wire.ICMPv6DestUnreach, wire.ICMPv6CodeAdminProhibited, 0, quotedIPv6},
	{"beyond the scope of the source", wire.ICMPv6DestUnreach, wire.ICMPv6CodeBeyondScope, 0, quotedIPv6},
	{"address unreachable", wire.ICMPv6DestUnreach, wire.ICMPv6CodeAddrUnreach, 0, quotedIPv6},
	{"port unreachable", wire.ICMPv6DestUnreach, wire.ICMPv6CodePortUnreach, 0, quotedIPv6},
	{"source address failed policy", wire.ICMPv6DestUnreach, wire.ICMPv6CodeSrcPolicyFailed, 0, quotedIPv6},
	{"reject route", wire.ICMPv6DestUnreach, wire.ICMPv6CodeRejectRoute, 0, quotedIPv6},
	{"packet too big carries the MTU", wire.ICMPv6PacketTooBig, 0, 1280, quotedIPv6},
	{"hop limit exceeded", wire.ICMPv6TimeExceeded, wire.ICMPv6CodeHopLimitExceeded, 0, quotedIPv6},
	{"reassembly time exceeded", wire.ICMPv6TimeExceeded, wire.ICMPv6CodeReassemblyTime, 0, quotedIPv6},
	{"erroneous header field points at it", wire.ICMPv6ParamProblem, wire.ICMPv6CodeErroneousHeader, 4, quotedIPv6},
	{"unrecognized next header", wire.ICMPv6ParamProblem, wire.ICMPv6CodeUnrecognizedNext, 6, quotedIPv6},
	{"unrecognized option", wire.ICMPv6ParamProblem, wire.ICMPv6CodeUnrecognizedOpt, 42, quotedIPv6},
	{"incomplete header chain", wire.ICMPv6ParamProblem, wire.ICMPv6CodeIncompleteChain, 0, quotedIPv6},
}

// gopacketICMPv6 serializes an ICMPv6 message with gopacket over an IPv6
// header from src to dst, checksum computed, and returns the message.
func gopacketICMPv6(t testing.TB, src, dst netip.Addr, typ, code uint8, body ...gopacket.SerializableLayer) []byte {
	t.Helper()
	ipl := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: 255, SrcIP: ip(src), DstIP: ip(dst)}
	m := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, code)}
	if err := m.SetNetworkLayerForChecksum(ipl); err != nil {
		t.Fatal(err)
	}
	return serialize(t, append([]gopacket.SerializableLayer{ipl, m}, body...)...)[wire.IPv6HeaderLen:]
}

// gopacketICMPv6Valid decodes b with gopacket and reports whether its
// checksum over the pseudo-header of src and dst is right.
func gopacketICMPv6Valid(t testing.TB, b []byte, src, dst netip.Addr) (*layers.ICMPv6, bool) {
	t.Helper()
	var g layers.ICMPv6
	decodeLayer(t, &g, b)
	ipl := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, SrcIP: ip(src), DstIP: ip(dst)}
	if err := g.SetNetworkLayerForChecksum(ipl); err != nil {
		t.Fatal(err)
	}
	err, v := g.VerifyChecksum()
	if err != nil {
		t.Fatal(err)
	}
	return &g, v.Valid
}

func restBytes(r uint32) []byte { return binary.BigEndian.AppendUint32(nil, r) }

func TestParseICMPv6DecodesWhatGopacketBuilds(t *testing.T) {
	for _, c := range icmpv6Cases {
		t.Run(c.name, func(t *testing.T) {
			pl := c.payload(t)
			b := gopacketICMPv6(t, srcIP6, dstIP6, c.typ, c.code, gopacketPayload(append(restBytes(c.rest), pl...)))
			m, ok := wire.ParseICMPv6(b)
			if !ok {
				t.Fatal("ParseICMPv6 rejected a valid message")
			}
			g, _ := gopacketICMPv6Valid(t, b, srcIP6, dstIP6)
			if m.Type() != c.typ || m.Code() != c.code || m.Checksum() != g.Checksum || m.RestOfHeader() != c.rest {
				t.Errorf("type %d code %d checksum %#04x rest %#x, want %d %d %#04x %#x", m.Type(), m.Code(), m.Checksum(), m.RestOfHeader(), c.typ, c.code, g.Checksum, c.rest)
			}
			if m.Ident() != uint16(c.rest>>16) || m.Seq() != uint16(c.rest) || m.MTU() != c.rest || m.Pointer() != c.rest {
				t.Errorf("ident %d seq %d MTU %d pointer %d from rest %#x", m.Ident(), m.Seq(), m.MTU(), m.Pointer(), c.rest)
			}
			if m.IsError() != (c.typ < 128) {
				t.Errorf("IsError = %v", m.IsError())
			}
			if !m.ChecksumValid(srcIP6, dstIP6) {
				t.Error("ChecksumValid rejects gopacket's checksum")
			}
			if !bytes.Equal(m.Payload(), pl) {
				t.Errorf("Payload = %x, want %x", m.Payload(), pl)
			}
		})
	}
}

func TestEncodeICMPv6IsWhatGopacketDecodes(t *testing.T) {
	for _, c := range icmpv6Cases {
		t.Run(c.name, func(t *testing.T) {
			pl := c.payload(t)
			b := append(bytes.Repeat([]byte{0xa5}, wire.ICMPv6HeaderLen), pl...)
			wire.EncodeICMPv6(b, &wire.ICMPv6Fields{Type: c.typ, Code: c.code, Rest: c.rest})
			wire.SetICMPv6Checksum(b, srcIP6, dstIP6)
			g, valid := gopacketICMPv6Valid(t, b, srcIP6, dstIP6)
			if g.TypeCode.Type() != c.typ || g.TypeCode.Code() != c.code || !bytes.Equal(g.Payload[:4], restBytes(c.rest)) {
				t.Errorf("gopacket got %v rest %x", g.TypeCode, g.Payload[:4])
			}
			if !valid {
				t.Error("gopacket finds the checksum wrong")
			}
			if c.typ == wire.ICMPv6EchoRequest || c.typ == wire.ICMPv6EchoReply {
				var e layers.ICMPv6Echo
				decodeLayer(t, &e, g.Payload)
				if e.Identifier != uint16(c.rest>>16) || e.SeqNumber != uint16(c.rest) {
					t.Errorf("gopacket echo id %d seq %d", e.Identifier, e.SeqNumber)
				}
			}
			want := gopacketICMPv6(t, srcIP6, dstIP6, c.typ, c.code, gopacketPayload(append(restBytes(c.rest), pl...)))
			if !bytes.Equal(b, want) {
				t.Errorf("EncodeICMPv6 = %x, gopacket = %x", b, want)
			}
		})
	}
}

func TestICMPv6ChecksumCoversThePseudoHeader(t *testing.T) {
	echo := gopacketICMPv6(t, srcIP6, dstIP6, wire.ICMPv6EchoRequest, 0, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 2}, gopacketPayload(payload(9)))
	tests := []struct {
		name     string
		b        []byte
		src, dst netip.Addr
		valid    bool
	}{
		{"valid", echo, srcIP6, dstIP6, true},
		{"another source", echo, addr("2001:db8::2"), dstIP6, false},
		{"addresses swapped", echo, dstIP6, srcIP6, true}, // the sum does not depend on the order
		{"flipped bit in the data", with(echo, 12, echo[12]^0x80), srcIP6, dstIP6, false},
		{"flipped bit in the code", with(echo, 1, 1), srcIP6, dstIP6, false},
		{"checksum zeroed: not 'none' as in UDP", withU16(echo, 2, 0), srcIP6, dstIP6, false},
		{"data cut short", echo[:len(echo)-1], srcIP6, dstIP6, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := wire.ParseICMPv6(tt.b)
			if !ok {
				t.Fatal("ParseICMPv6 rejected the message")
			}
			if got := m.ChecksumValid(tt.src, tt.dst); got != tt.valid {
				t.Errorf("ChecksumValid = %v, want %v", got, tt.valid)
			}
			if _, v := gopacketICMPv6Valid(t, tt.b, tt.src, tt.dst); v != tt.valid {
				t.Errorf("gopacket says valid = %v", v)
			}
		})
	}
}

func TestParseICMPv6RejectsShortMessages(t *testing.T) {
	for n := 0; n < wire.ICMPv6HeaderLen; n++ {
		m, ok := wire.ParseICMPv6(make([]byte, n))
		checkParse(t, "ParseICMPv6", m, ok, false)
	}
	m, ok := wire.ParseICMPv6(make([]byte, wire.ICMPv6HeaderLen))
	checkParse(t, "ParseICMPv6", m, ok, true)
}

func TestICMPv6MaxErrorQuoteFitsTheMinimumMTU(t *testing.T) {
	if got := wire.ICMPv6MaxErrorQuote + wire.ICMPv6HeaderLen + wire.IPv6HeaderLen; got != 1280 {
		t.Errorf("an error quoting ICMPv6MaxErrorQuote bytes is a %d-byte packet, want 1280", got)
	}
}

func TestICMPv6ParseDoesNotAllocate(t *testing.T) {
	b := gopacketICMPv6(t, srcIP6, dstIP6, wire.ICMPv6EchoRequest, 0, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 2}, gopacketPayload(payload(56)))
	allocs := testing.AllocsPerRun(1000, func() {
		m, _ := wire.ParseICMPv6(b)
		_, _, _ = m.Type(), m.Ident(), m.Seq()
		_ = m.ChecksumValid(srcIP6, dstIP6)
	})
	if allocs != 0 {
		t.Errorf("parsing ICMPv6 allocates %v times", allocs)
	}
}
