package wire_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// The TCP fuzz targets, like those in fuzz_test.go, check that nothing
// panics, that a successful parse means what it promises, that options
// survive parse, encode and parse, and that gopacket reads the same bytes the
// same way. Seeds are in the f.Add calls and in
// testdata/fuzz/FuzzParseTCP and testdata/fuzz/FuzzParseTCPOptions.

// fuzzTCPMaxLen bounds the segments FuzzParseTCP looks at. Past the
// header, length only feeds the checksum, which FuzzChecksum covers; long
// inputs would have the fuzzer spend its time minimizing them.
const fuzzTCPMaxLen = 2048

func FuzzParseTCP(f *testing.F) {
	add := func(b []byte) {
		if len(b) <= fuzzTCPMaxLen {
			f.Add(b, u32(srcIP), u32(dstIP))
		}
	}
	add([]byte{})
	for _, c := range tcpCases {
		add(gopacketTCP(f, srcIP, dstIP, c.seg.layer(), payload(c.seg.payload)))
	}
	for _, c := range tcpEncodeCases {
		add(encodeTCP(&c.f, &c.o, payload(c.pl), srcIP, dstIP))
	}
	add(zeroSumTCP(srcIP, dstIP))
	add(with(gopacketTCP(f, srcIP, dstIP, tcpCases[0].seg.layer(), nil), 12, 0xf0))
	f.Fuzz(func(t *testing.T, data []byte, s, d uint32) {
		if len(data) > fuzzTCPMaxLen {
			return
		}
		src := netip.AddrFrom4([4]byte{byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)})
		dst := netip.AddrFrom4([4]byte{byte(d >> 24), byte(d >> 16), byte(d >> 8), byte(d)})
		checkParseTCP(t, data, src, dst)
		// A mutated segment rarely keeps a valid checksum; check it again
		// with the checksum made right, so the fuzzer reaches past it.
		if len(data) >= wire.TCPMinHeaderLen {
			fixed := append([]byte(nil), data...)
			wire.SetTCPChecksum(fixed, src, dst)
			checkParseTCP(t, fixed, src, dst)
		}
	})
}

func checkParseTCP(t *testing.T, data []byte, src, dst netip.Addr) {
	t.Helper()
	orig := append([]byte(nil), data...)
	seg, ok := wire.ParseTCP(data)
	want := len(data) >= wire.TCPMinHeaderLen && int(data[12]>>4)*4 >= wire.TCPMinHeaderLen && int(data[12]>>4)*4 <= len(data)
	var g layers.TCP
	gerr := g.DecodeFromBytes(data, &feedback{})
	if (gerr == nil) != ok {
		t.Fatalf("ParseTCP ok = %v, gopacket: %v", ok, gerr)
	}
	if !checkParse(t, "ParseTCP", seg, ok, want) {
		return
	}
	if len(seg) != len(data) || &seg[0] != &data[0] {
		t.Fatalf("view of %d bytes is not the input of %d", len(seg), len(data))
	}
	off := seg.DataOffset()
	if off < wire.TCPMinHeaderLen || off > wire.TCPMaxHeaderLen || off > len(seg) || off%4 != 0 {
		t.Fatalf("DataOffset %d on %d bytes", off, len(seg))
	}
	if len(seg.Options()) != off-wire.TCPMinHeaderLen || !bytes.Equal(seg.Options(), data[wire.TCPMinHeaderLen:off]) {
		t.Fatal("Options is not what lies between the fixed header and the data offset")
	}
	if len(seg.Payload()) != len(seg)-off || !bytes.Equal(seg.Payload(), data[off:]) {
		t.Fatal("Payload is not what follows the header")
	}
	if seg.SrcPort() != be16(data[0:]) || seg.DstPort() != be16(data[2:]) || seg.Seq() != be32(data[4:]) || seg.Ack() != be32(data[8:]) ||
		seg.Flags() != data[13] || seg.Window() != be16(data[14:]) || seg.Checksum() != be16(data[16:]) || seg.Urgent() != be16(data[18:]) {
		t.Fatal("fields do not match the bytes")
	}
	checkTCPMatches(t, seg, &g)

	valid := seg.ChecksumValid(src, dst)
	ph := naivePseudoHeader(src, dst, wire.ProtoTCP, len(seg))
	if want := naiveChecksum(append(ph, seg...), 0) == 0; valid != want {
		t.Fatalf("ChecksumValid = %v, naive %v", valid, want)
	}
	if err := g.SetNetworkLayerForChecksum(gopacketIPv4(src, dst, layers.IPProtocolTCP)); err != nil {
		t.Fatal(err)
	}
	if err, v := g.VerifyChecksum(); err != nil || v.Valid != valid {
		t.Fatalf("ChecksumValid = %v, gopacket %v (%v)", valid, v.Valid, err)
	}
	if !bytes.Equal(data, orig) {
		t.Fatal("parsing wrote to the input")
	}

	// Parse, encode, parse: the same bytes but for the reserved bits,
	// which EncodeTCP clears, and a valid checksum's choice of zero.
	re := make([]byte, len(seg))
	wire.EncodeTCP(re, &wire.TCPFields{
		SrcPort: seg.SrcPort(), DstPort: seg.DstPort(), Seq: seg.Seq(), Ack: seg.Ack(),
		Flags: seg.Flags(), Window: seg.Window(), Urgent: seg.Urgent(),
		OptionsLen: off - wire.TCPMinHeaderLen,
	})
	copy(re[wire.TCPMinHeaderLen:], seg[wire.TCPMinHeaderLen:])
	wire.SetTCPChecksum(re, src, dst)
	if rs, ok := wire.ParseTCP(re); !ok || !rs.ChecksumValid(src, dst) || rs.DataOffset() != off {
		t.Fatalf("re-encoded segment %x does not parse and verify", re[:off])
	}
	cleared := with(seg, 12, seg[12]&0xf0)
	if !bytes.Equal(re[:16], cleared[:16]) || !bytes.Equal(re[18:], cleared[18:]) {
		t.Fatalf("parse then encode\n%x\nwant\n%x", re[:off], cleared[:off])
	}
	if valid && cleared[12] == seg[12] && !sameModChecksumZero(re, seg, 16) {
		t.Fatalf("EncodeTCP checksum %#04x, valid original %#04x", be16(re[16:]), seg.Checksum())
	}

	checkTCPOptions(t, seg.Options())
}

func FuzzParseTCPOptions(f *testing.F) {
	f.Add([]byte{})
	for _, c := range tcpCases {
		b := gopacketTCP(f, srcIP, dstIP, c.seg.layer(), nil)
		f.Add(b[wire.TCPMinHeaderLen:])
	}
	for _, c := range tcpEncodeCases {
		b := make([]byte, wire.TCPMaxOptionsLen)
		f.Add(b[:wire.EncodeTCPOptions(b, &c.o)])
	}
	f.Add([]byte{1, 1, 5, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3})
	f.Add([]byte{2, 4, 5})
	f.Add(append([]byte{5, 42}, make([]byte, 40)...))
	f.Add([]byte{30, 2, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Option areas hold at most 40 bytes; a little more reaches what
		// only a direct caller can pass (five SACK blocks), and no more
		// keeps the fuzzer from spending its time minimizing long inputs.
		if len(data) > 2*wire.TCPMaxOptionsLen {
			return
		}
		checkTCPOptions(t, data)
	})
}

// checkTCPOptions parses opts and checks the result against gopacket, and
// that encoding it and parsing again gives it back.
func checkTCPOptions(t *testing.T, opts []byte) {
	t.Helper()
	var arr [wire.TCPMaxSACKBlocks]wire.SACKBlock
	o := wire.TCPOptions{SACK: arr[:0]}
	ok := wire.ParseTCPOptions(opts, &o)
	if len(o.SACK) > wire.TCPMaxSACKBlocks || len(o.SACK) > 0 && &o.SACK[0] != &arr[0] {
		t.Fatalf("%d SACK blocks, or not in the caller's array", len(o.SACK))
	}
	// Parsing again into options left dirty gives the same answer.
	dirty := wire.TCPOptions{MSS: 1, WScale: 2, HasWScale: true, SACKPermitted: true, HasTimestamp: true, TSVal: 3, TSEcr: 4,
		SACK: []wire.SACKBlock{{5, 6}}}
	if ok2 := wire.ParseTCPOptions(opts, &dirty); ok2 != ok || !sameOptions(&dirty, &o) {
		t.Fatalf("a second parse gives %v %+v, the first %v %+v", ok2, dirty, ok, o)
	}

	// gopacket can hold up to 40 bytes of options, in words. Shorter
	// options are padded with EOL, which changes nothing for options that
	// parsed: they ended cleanly.
	if len(opts) <= wire.TCPMaxOptionsLen && (len(opts)%4 == 0 || ok) {
		padded := make([]byte, (len(opts)+3)&^3)
		copy(padded, opts)
		checkTCPOptionsWithGopacket(t, padded, &o, ok)
	}

	if !ok {
		return
	}
	var buf [wire.TCPMaxOptionsLen + 8]byte
	for i := range buf {
		buf[i] = 0xa5
	}
	n := wire.EncodeTCPOptions(buf[:], &o)
	if n != wire.TCPOptionsLen(&o) || n%4 != 0 || n > wire.TCPMaxOptionsLen {
		t.Fatalf("EncodeTCPOptions wrote %d bytes, TCPOptionsLen %d", n, wire.TCPOptionsLen(&o))
	}
	if !bytes.Equal(buf[n:], bytes.Repeat([]byte{0xa5}, len(buf)-n)) {
		t.Fatal("EncodeTCPOptions wrote past its length")
	}
	want := fitted(o, sackBlocksThatFit(&o))
	var back wire.TCPOptions
	if !wire.ParseTCPOptions(buf[:n], &back) || !sameOptions(&back, &want) {
		t.Fatalf("parse, encode, parse: %+v, want %+v", back, want)
	}
	checkTCPOptionsWithGopacket(t, buf[:n], &want, true)
}

// sackBlocksThatFit is how many of o's SACK blocks fit in 40 bytes with the
// other options in the layout EncodeTCPOptions uses.
func sackBlocksThatFit(o *wire.TCPOptions) int {
	base := 0
	if o.MSS != 0 {
		base += 4
	}
	if o.HasTimestamp {
		base += 12
	} else if o.SACKPermitted {
		base += 4
	}
	if o.HasWScale {
		base += 4
	}
	for k := len(o.SACK); k > 0; k-- {
		if base+4+8*k <= wire.TCPMaxOptionsLen {
			return k
		}
	}
	return 0
}

// checkTCPOptionsWithGopacket decodes opts, a multiple of 4 bytes, with
// gopacket and checks that it finds the options in o and agrees on whether
// they are well formed.
func checkTCPOptionsWithGopacket(t *testing.T, opts []byte, o *wire.TCPOptions, ok bool) {
	t.Helper()
	hdr := make([]byte, wire.TCPMinHeaderLen+len(opts))
	copy(hdr[wire.TCPMinHeaderLen:], opts)
	wire.EncodeTCP(hdr, &wire.TCPFields{OptionsLen: len(opts)})
	var g layers.TCP
	if err := g.DecodeFromBytes(hdr, &feedback{}); err != nil {
		t.Fatalf("gopacket: %v", err)
	}
	// gopacket stops at an option it cannot follow and keeps the rest as
	// Padding, as it does after EOL.
	stopped := len(g.Padding) > 0 && (len(g.Options) == 0 || g.Options[len(g.Options)-1].OptionType != layers.TCPOptionKindEndList)
	if stopped && g.Padding[0] == layers.TCPOptionKindMultipathTCP {
		return // gopacket checks MPTCP's own lengths; to GoNet it is an unknown kind
	}
	want, wantOK := optionsFromGopacket(g.Options)
	wantOK = wantOK && !stopped
	if ok != wantOK || !sameOptions(o, &want) {
		t.Fatalf("ParseTCPOptions(%x) = %v %+v\ngopacket: %v %+v from %v", opts, ok, *o, wantOK, want, g.Options)
	}
}

func be32(b []byte) uint32 { return uint32(be16(b))<<16 | uint32(be16(b[2:])) }
