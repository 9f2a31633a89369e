package wire_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

func FuzzParseICMPv6(f *testing.F) {
	f.Add([]byte{}, srcIP6.AsSlice(), dstIP6.AsSlice())
	for _, c := range icmpv6Cases {
		f.Add(gopacketICMPv6(f, srcIP6, dstIP6, c.typ, c.code, gopacketPayload(append(restBytes(c.rest), c.payload(f)...))), srcIP6.AsSlice(), dstIP6.AsSlice())
	}
	f.Add(gopacketICMPv6(f, srcIP6, dstIP6, wire.ICMPv6EchoReply, 0, &layers.ICMPv6Echo{Identifier: 1}), dstIP6.AsSlice(), srcIP6.AsSlice())
	f.Fuzz(func(t *testing.T, data, s, d []byte) {
		if len(s) < 16 || len(d) < 16 {
			return
		}
		src, dst := netip.AddrFrom16([16]byte(s)), netip.AddrFrom16([16]byte(d))
		checkParseICMPv6(t, data, src, dst)
		// Again with the checksum made right, to reach past it.
		if len(data) >= wire.ICMPv6HeaderLen {
			fixed := append([]byte(nil), data...)
			wire.SetICMPv6Checksum(fixed, src, dst)
			checkParseICMPv6(t, fixed, src, dst)
		}
	})
}

func checkParseICMPv6(t *testing.T, data []byte, src, dst netip.Addr) {
	t.Helper()
	m, ok := wire.ParseICMPv6(data)
	if !checkParse(t, "ParseICMPv6", m, ok, len(data) >= wire.ICMPv6HeaderLen) {
		return
	}
	if len(m) != len(data) || m.Checksum() != be16(data[2:4]) || len(m.Payload()) != len(data)-wire.ICMPv6HeaderLen {
		t.Fatal("view does not match the input")
	}
	if m.RestOfHeader() != wire.EchoRest(m.Ident(), m.Seq()) || m.MTU() != m.RestOfHeader() || m.Pointer() != m.RestOfHeader() {
		t.Fatal("RestOfHeader is not Ident and Seq, MTU, Pointer")
	}
	s, d := src.As16(), dst.As16()
	n := len(m)
	ph := append(append(s[:], d[:]...), byte(n>>24), byte(n>>16), byte(n>>8), byte(n), 0, 0, 0, wire.ProtoICMPv6)
	valid := m.ChecksumValid(src, dst)
	if want := naiveChecksum(append(ph, m...), 0) == 0; valid != want {
		t.Fatalf("ChecksumValid = %v, naive %v", valid, want)
	}
	re := append([]byte(nil), m...)
	wire.EncodeICMPv6(re, &wire.ICMPv6Fields{Type: m.Type(), Code: m.Code(), Rest: m.RestOfHeader()})
	wire.SetICMPv6Checksum(re, src, dst)
	if valid && !sameModChecksumZero(re, m, 2) || !bytes.Equal(re[:2], m[:2]) || !bytes.Equal(re[4:], m[4:]) {
		t.Fatalf("parse then encode = %x, want %x", re, []byte(m))
	}
	if rm, _ := wire.ParseICMPv6(re); !rm.ChecksumValid(src, dst) {
		t.Fatal("the re-encoded message does not verify")
	}
}
