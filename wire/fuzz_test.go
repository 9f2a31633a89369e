package wire_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// The fuzz targets pin down the promise of the package doc: no decoder
// panics on any input. Each also checks what a successful parse implies and
// that encoding what was parsed gives the same bytes back. Seeds are in the
// f.Add calls and in testdata/fuzz/<FuzzName>.

func FuzzParseEthernet(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, wire.EthernetHeaderLen-1))
	f.Add(serialize(f, &layers.Ethernet{DstMAC: hw(wire.Broadcast), SrcMAC: hw(srcMAC), EthernetType: layers.EthernetTypeARP},
		gopacketARP(wire.ARPRequest, srcMAC, wire.MAC{}, "192.0.2.1", "192.0.2.2")))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, ok := wire.ParseEthernet(data)
		if !checkParse(t, "ParseEthernet", e, ok, len(data) >= wire.EthernetHeaderLen) {
			return
		}
		dst, src := e.Dst(), e.Src()
		if !bytes.Equal(dst[:], data[0:6]) || !bytes.Equal(src[:], data[6:12]) || e.Type() != be16(data[12:14]) {
			t.Fatalf("fields do not match the bytes")
		}
		if dst.IsMulticast() != (data[0]&1 == 1) {
			t.Fatalf("IsMulticast(%v) = %v", dst, dst.IsMulticast())
		}
		if !bytes.Equal(e.Payload(), data[wire.EthernetHeaderLen:]) {
			t.Fatal("Payload is not what follows the header")
		}
		re := make([]byte, len(data))
		copy(re[wire.EthernetHeaderLen:], e.Payload())
		wire.EncodeEthernet(re, &wire.EthernetFields{Dst: dst, Src: src, Type: e.Type()})
		if !bytes.Equal(re, data) {
			t.Fatalf("parse then encode = %x, want %x", re, data)
		}
	})
}

func FuzzParseARP(f *testing.F) {
	f.Add([]byte{})
	f.Add(serialize(f, gopacketARP(wire.ARPRequest, srcMAC, wire.MAC{}, "192.0.2.1", "192.0.2.2")))
	f.Add(serialize(f, gopacketARP(wire.ARPReply, dstMAC, srcMAC, "192.0.2.2", "192.0.2.1"), gopacketPayload(make([]byte, 18))))
	f.Add(with(serialize(f, gopacketARP(wire.ARPReply, dstMAC, srcMAC, "192.0.2.2", "192.0.2.1")), 5, 16))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, ok := wire.ParseARP(data)
		want := len(data) >= wire.ARPLen && bytes.Equal(data[:6], []byte{0, 1, 8, 0, 6, 4})
		if !checkParse(t, "ParseARP", a, ok, want) {
			return
		}
		if !bytes.Equal(a, data[:wire.ARPLen]) {
			t.Fatalf("view %x is not the first %d bytes", a, wire.ARPLen)
		}
		re := make([]byte, wire.ARPLen)
		wire.EncodeARP(re, &wire.ARPFields{Op: a.Op(), SenderMAC: a.SenderMAC(), SenderIP: a.SenderIP(), TargetMAC: a.TargetMAC(), TargetIP: a.TargetIP()})
		if !bytes.Equal(re, a) {
			t.Fatalf("parse then encode = %x, want %x", re, a)
		}
		var g layers.ARP
		decodeLayer(t, &g, data)
		sm, tm := a.SenderMAC(), a.TargetMAC()
		if g.Operation != a.Op() || !bytes.Equal(g.SourceHwAddress, sm[:]) || !bytes.Equal(g.DstHwAddress, tm[:]) ||
			!bytes.Equal(g.SourceProtAddress, a.SenderIP().AsSlice()) || !bytes.Equal(g.DstProtAddress, a.TargetIP().AsSlice()) {
			t.Fatalf("gopacket decodes different fields")
		}
	})
}

// refIPv4Error is ParseIPv4's contract restated with the naive checksum.
func refIPv4Error(b []byte) wire.IPv4Error {
	switch {
	case len(b) < 20:
		return wire.IPv4Truncated
	case b[0]>>4 != 4:
		return wire.IPv4BadVersion
	}
	ihl := int(b[0]&0xf) * 4
	total := int(be16(b[2:4]))
	switch {
	case ihl < 20 || ihl > len(b):
		return wire.IPv4BadIHL
	case total < ihl || total > len(b):
		return wire.IPv4BadTotalLen
	case naiveChecksum(b[:ihl], 0) != 0:
		return wire.IPv4BadChecksum
	}
	return wire.IPv4OK
}

func FuzzParseIPv4(f *testing.F) {
	f.Add([]byte{})
	for _, c := range ipv4Cases {
		f.Add(c.serialize(f))
	}
	f.Add(append(ipv4Cases[0].serialize(f), make([]byte, 20)...))
	f.Add(fixChecksum(withU16(ipv4Cases[6].serialize(f), 2, 22)))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParseIPv4(t, data)
		// A mutated header rarely keeps a valid checksum; parse it again
		// with the checksum made right, so the fuzzer reaches past it.
		if len(data) >= wire.IPv4MinHeaderLen {
			checkParseIPv4(t, fixChecksum(append([]byte(nil), data...)))
		}
	})
}

func checkParseIPv4(t *testing.T, data []byte) {
	t.Helper()
	orig := append([]byte(nil), data...)
	h, e := wire.ParseIPv4(data)
	if want := refIPv4Error(data); e != want {
		t.Fatalf("ParseIPv4 = %v, want %v", e, want)
	}
	if e.String() == "" {
		t.Fatal("empty error text")
	}
	if !bytes.Equal(data, orig) {
		t.Fatal("ParseIPv4 wrote to its input")
	}
	if e != wire.IPv4OK {
		if h != nil {
			t.Fatal("a rejected datagram returned a view")
		}
		return
	}
	hl := h.HeaderLen()
	if hl < wire.IPv4MinHeaderLen || hl > wire.IPv4MaxHeaderLen || hl > h.TotalLen() {
		t.Fatalf("HeaderLen %d, TotalLen %d", hl, h.TotalLen())
	}
	if h.TotalLen() != len(h) || len(h) > len(data) || &h[0] != &data[0] {
		t.Fatalf("view of %d bytes, TotalLen %d, input %d: not the input trimmed to its total length", len(h), h.TotalLen(), len(data))
	}
	if len(h.Payload()) != h.TotalLen()-hl || len(h.Options()) != hl-wire.IPv4MinHeaderLen {
		t.Fatalf("Payload %d and Options %d bytes do not fit HeaderLen %d TotalLen %d", len(h.Payload()), len(h.Options()), hl, h.TotalLen())
	}
	if h.IsFragment() != (h.MoreFragments() || h.FragmentOffset() != 0) || h.FragmentOffset()%8 != 0 {
		t.Fatal("fragment fields disagree")
	}

	// Parse, encode, parse: the header comes back byte for byte, but
	// for a checksum sent as 0xffff that computes to 0x0000.
	re := append([]byte(nil), h...)
	rf := wire.IPv4Fields{
		TOS: h.TOS(), TotalLen: h.TotalLen(), ID: h.ID(), Flags: h.Flags(), FragOff: h.FragmentOffset(),
		TTL: h.TTL(), Protocol: h.Protocol(), Src: h.Src(), Dst: h.Dst(), Options: h.Options(),
	}
	if n := rf.HeaderLen(); n != hl {
		t.Fatalf("HeaderLen = %d, want %d", n, hl)
	}
	wire.EncodeIPv4(re, &rf)
	if !sameModChecksumZero(re, h, 10) {
		t.Fatalf("parse then encode\n%x\nwant\n%x", re[:hl], h[:hl])
	}
	if _, e := wire.ParseIPv4(re); e != wire.IPv4OK {
		t.Fatalf("ParseIPv4 of the re-encoded header = %v", e)
	}

	// SetTTL keeps the header valid and changes nothing else.
	ttl := h.TTL() - 1
	h.SetTTL(ttl)
	if h2, e := wire.ParseIPv4(data); e != wire.IPv4OK || h2.TTL() != ttl {
		t.Fatalf("after SetTTL(%d): %v", ttl, e)
	}
	copy(data, orig)

	opts := h.CopiedOptions(nil)
	if len(opts)%4 != 0 || len(opts) > len(h.Options()) {
		t.Fatalf("CopiedOptions = %d bytes from %d", len(opts), len(h.Options()))
	}
	for i := 0; i < len(opts) && opts[i] != 0; i += int(opts[i+1]) {
		if opts[i]&0x80 == 0 || opts[i+1] < 2 {
			t.Fatalf("CopiedOptions kept %x", opts)
		}
	}

	// gopacket, where it manages, decodes the same fields.
	var g layers.IPv4
	if g.DecodeFromBytes(data, &feedback{}) == nil {
		checkIPv4Matches(t, h, &g)
	}
}

// sameModChecksumZero reports whether a and b are equal, allowing the
// 16-bit checksum at offset off to be 0x0000 in one and 0xffff in the other:
// the two zeros of ones' complement, both of which verify.
func sameModChecksumZero(a, b []byte, off int) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if len(a) != len(b) || !bytes.Equal(a[:off], b[:off]) || !bytes.Equal(a[off+2:], b[off+2:]) {
		return false
	}
	x, y := be16(a[off:]), be16(b[off:])
	return x^y == 0xffff && (x == 0 || y == 0)
}

func FuzzParseICMP(f *testing.F) {
	f.Add([]byte{})
	for _, c := range icmpCases {
		f.Add(serialize(f, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(c.typ, c.code), Id: c.id, Seq: c.seq}, gopacketPayload(c.payload(f))))
	}
	f.Add([]byte{8, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xf7, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParseICMP(t, data)
		// Again with the checksum made right, to reach past it.
		if len(data) >= wire.ICMPHeaderLen {
			fixed := withU16(data, 2, 0)
			c := naiveChecksum(fixed, 0)
			checkParseICMP(t, withU16(fixed, 2, c))
		}
	})
}

func checkParseICMP(t *testing.T, data []byte) {
	t.Helper()
	m, ok := wire.ParseICMP(data)
	want := len(data) >= wire.ICMPHeaderLen && naiveChecksum(data, 0) == 0
	if !checkParse(t, "ParseICMP", m, ok, want) {
		return
	}
	if len(m) != len(data) || m.Checksum() != be16(data[2:4]) || len(m.Payload()) != len(data)-wire.ICMPHeaderLen {
		t.Fatal("view does not match the input")
	}
	if m.RestOfHeader() != wire.EchoRest(m.Ident(), m.Seq()) {
		t.Fatal("RestOfHeader is not Ident and Seq")
	}
	re := append([]byte(nil), m...)
	wire.EncodeICMP(re, &wire.ICMPFields{Type: m.Type(), Code: m.Code(), Rest: m.RestOfHeader()})
	if !sameModChecksumZero(re, m, 2) {
		t.Fatalf("parse then encode = %x, want %x", re, m)
	}
	if _, ok := wire.ParseICMP(re); !ok {
		t.Fatal("ParseICMP rejects the re-encoded message")
	}
}

func FuzzParseUDP(f *testing.F) {
	f.Add([]byte{}, uint32(0), uint32(0))
	for _, c := range udpCases {
		f.Add(gopacketUDP(f, c.src, c.dst, c.sport, c.dport, payload(c.payload)), u32(c.src), u32(c.dst))
	}
	f.Add(zeroSumUDP(srcIP, dstIP), u32(srcIP), u32(dstIP))
	f.Add(withU16(zeroSumUDP(srcIP, dstIP), 6, 0), u32(srcIP), u32(dstIP))
	f.Add(withU16(gopacketUDP(f, srcIP, dstIP, 1, 2, payload(9)), 4, 7), u32(srcIP), u32(dstIP))
	f.Fuzz(func(t *testing.T, data []byte, s, d uint32) {
		src := netip.AddrFrom4([4]byte{byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)})
		dst := netip.AddrFrom4([4]byte{byte(d >> 24), byte(d >> 16), byte(d >> 8), byte(d)})
		u, ok := wire.ParseUDP(data)
		want := len(data) >= 8 && int(be16(data[4:6])) >= 8 && int(be16(data[4:6])) <= len(data)
		if !checkParse(t, "ParseUDP", u, ok, want) {
			return
		}
		if len(u) != u.Length() || &u[0] != &data[0] || len(u.Payload()) != u.Length()-wire.UDPHeaderLen {
			t.Fatalf("view of %d bytes, Length %d", len(u), u.Length())
		}
		ph := naivePseudoHeader(src, dst, wire.ProtoUDP, len(u))
		wantValid := u.Checksum() == 0 || naiveChecksum(append(ph, u...), 0) == 0
		valid := u.ChecksumValid(src, dst)
		if valid != wantValid {
			t.Fatalf("ChecksumValid = %v, want %v", valid, wantValid)
		}
		re := append([]byte(nil), u...)
		wire.EncodeUDP(re, &wire.UDPFields{SrcPort: u.SrcPort(), DstPort: u.DstPort()})
		wire.SetUDPChecksum(re, src, dst)
		ru, ok := wire.ParseUDP(re)
		if !ok || !ru.ChecksumValid(src, dst) || ru.Checksum() == 0 {
			t.Fatalf("re-encoded datagram %x: ok %v", re, ok)
		}
		if !bytes.Equal(re[:6], u[:6]) || !bytes.Equal(re[8:], u[8:]) {
			t.Fatalf("parse then encode = %x, want %x", re, u)
		}
		// A valid checksum that was computed is the one EncodeUDP computes.
		if valid && u.Checksum() != 0 && ru.Checksum() != u.Checksum() {
			t.Fatalf("EncodeUDP checksum %#04x, valid original %#04x", ru.Checksum(), u.Checksum())
		}
	})
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func FuzzChecksum(f *testing.F) {
	f.Add([]byte{}, uint32(0), uint16(0))
	f.Add([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, uint32(0), uint16(4))
	f.Add(bytes.Repeat([]byte{0xff}, 129), uint32(0xffffffff), uint16(64))
	f.Add(payload(1501), uint32(0x2ffff), uint16(700))
	f.Fuzz(func(t *testing.T, data []byte, initial uint32, cut uint16) {
		got := wire.Checksum(data, initial)
		if want := naiveChecksum(data, initial); got != want {
			t.Fatalf("Checksum = %#04x, naive = %#04x", got, want)
		}
		if ^wire.Fold(wire.Sum(data, initial)) != got {
			t.Fatal("Checksum is not the complement of the folded Sum")
		}
		c := int(cut) % (len(data) + 1) &^ 1
		if split := wire.Checksum(data[c:], wire.Sum(data[:c], initial)); split != got {
			t.Fatalf("split at %d: %#04x, whole: %#04x", c, split, got)
		}
		// Appending the checksum makes the whole verify: the receiver's test.
		if len(data)%2 == 0 {
			v := append(append([]byte(nil), data...), byte(got>>8), byte(got))
			if wire.Checksum(v, initial) != 0 {
				t.Fatal("data followed by its checksum does not verify")
			}
		}
	})
}
