package wire_test

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// refIPv6Error is ParseIPv6's contract restated.
func refIPv6Error(b []byte) wire.IPv6Error {
	switch {
	case len(b) < 40:
		return wire.IPv6Truncated
	case b[0]>>4 != 6:
		return wire.IPv6BadVersion
	case 40+int(be16(b[4:6])) > len(b):
		return wire.IPv6BadPayloadLen
	}
	return wire.IPv6OK
}

func FuzzParseIPv6(f *testing.F) {
	f.Add([]byte{})
	for _, c := range ipv6Cases {
		f.Add(c.serialize(f))
	}
	f.Add(append(ipv6Cases[0].serialize(f), 0, 0, 0))
	f.Add(withU16(ipv6Cases[0].serialize(f), 4, 0xffff))
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := append([]byte(nil), data...)
		h, e := wire.ParseIPv6(data)
		if want := refIPv6Error(data); e != want {
			t.Fatalf("ParseIPv6 = %v, want %v", e, want)
		}
		if !bytes.Equal(data, orig) {
			t.Fatal("ParseIPv6 wrote to its input")
		}
		if e != wire.IPv6OK {
			if h != nil {
				t.Fatal("a rejected packet returned a view")
			}
			return
		}
		if len(h) != wire.IPv6HeaderLen+h.PayloadLen() || &h[0] != &data[0] || len(h.Payload()) != h.PayloadLen() {
			t.Fatalf("view of %d bytes, PayloadLen %d: not the input trimmed to its payload length", len(h), h.PayloadLen())
		}
		if h.FlowLabel() > 0xfffff {
			t.Fatalf("FlowLabel %#x is wider than 20 bits", h.FlowLabel())
		}
		// Parse, encode: the header comes back byte for byte.
		re := append([]byte(nil), h...)
		wire.EncodeIPv6(re, &wire.IPv6Fields{TrafficClass: h.TrafficClass(), FlowLabel: h.FlowLabel(), PayloadLen: h.PayloadLen(),
			NextHeader: h.NextHeader(), HopLimit: h.HopLimit(), Src: h.Src(), Dst: h.Dst()})
		if !bytes.Equal(re, h) {
			t.Fatalf("parse then encode\n%x\nwant\n%x", re[:40], []byte(h[:40]))
		}
		// gopacket, where it manages, decodes the same fields.
		var g layers.IPv6
		if g.DecodeFromBytes(data, &feedback{}) == nil && h.PayloadLen() != 0 {
			checkIPv6Matches(t, h, &g)
		}
	})
}

// FuzzParseIPv6ExtHdr walks an extension header as the IPv6 layer will: the
// generic view, its options, and the same bytes as a Fragment header.
func FuzzParseIPv6ExtHdr(f *testing.F) {
	f.Add([]byte{})
	f.Add(serialize(f, &layers.IPv6HopByHop{Options: []*layers.IPv6HopByHopOption{opt(5, 0, 0), opt(wire.IPv6OptPadN)}}))
	f.Add(serialize(f, &layers.IPv6HopByHop{Options: []*layers.IPv6HopByHopOption{opt(0xfe, 1, 2, 3, 4)}}))
	f.Add([]byte{17, 0, 0, 1, 0x9e, 3, 1, 2})
	f.Add([]byte{17, 0, 0, 1, 0x9e, 4, 1, 2})
	f.Add(serialize(f, &layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP, FragmentOffset: 3, MoreFragments: true, Identification: 9}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if fr, ok := wire.ParseIPv6Fragment(data); checkParse(t, "ParseIPv6Fragment", fr, ok, len(data) >= 8) {
			re := make([]byte, wire.IPv6FragmentLen)
			wire.EncodeIPv6Fragment(re, &wire.IPv6FragmentFields{NextHeader: fr.NextHeader(), Offset: fr.Offset(), MoreFragments: fr.MoreFragments(), ID: fr.ID()})
			// Only the reserved fields may differ: the encoder zeroes them.
			if fr.Offset()%8 != 0 || re[0] != fr[0] || re[2]&0xf9 != fr[2]&0xf9 || re[3]&0xf9 != fr[3]&0xf9 || !bytes.Equal(re[4:], fr[4:]) {
				t.Fatalf("parse then encode = %x, want %x", re, []byte(fr))
			}
		}
		x, ok := wire.ParseIPv6ExtHdr(data)
		want := len(data) >= 8 && (int(data[1])+1)*8 <= len(data)
		if !checkParse(t, "ParseIPv6ExtHdr", x, ok, want) {
			return
		}
		if len(x) != x.Len() || x.Len()%8 != 0 || len(x.Data()) != x.Len()-2 {
			t.Fatalf("view %d bytes, Len %d, Data %d", len(x), x.Len(), len(x.Data()))
		}
		opts, ok := wire.ParseIPv6Options(x.Data())
		// Walk by the RFC 8200 section 4.2 rules to know whether the
		// options should have parsed.
		fits := true
		for b := x.Data(); len(b) > 0; {
			if b[0] == 0 {
				b = b[1:]
				continue
			}
			if len(b) < 2 || 2+int(b[1]) > len(b) {
				fits = false
				break
			}
			b = b[2+int(b[1]):]
		}
		if !checkParse(t, "ParseIPv6Options", opts, ok, fits) {
			return
		}
		total := 0
		for len(opts) > 0 {
			var o wire.IPv6Option
			o, opts = opts.Next()
			if o.Type() == wire.IPv6OptPad1 && o.Len() != 1 || o.Type() != wire.IPv6OptPad1 && o.Len() != 2+len(o.Data()) {
				t.Fatalf("option %x: Len %d, Data %d bytes", []byte(o), o.Len(), len(o.Data()))
			}
			if o.Action() > 3 || uint8(o.Action()) != o.Type()>>6 {
				t.Fatalf("option type %#x: Action %d", o.Type(), o.Action())
			}
			total += o.Len()
		}
		if total != len(x.Data()) {
			t.Fatalf("options cover %d bytes of %d", total, len(x.Data()))
		}
	})
}
