package ipv6_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

var (
	chainSrc       = netip.MustParseAddr("2001:db8::1")
	chainUnicast   = netip.MustParseAddr("2001:db8::2")
	chainMulticast = netip.MustParseAddr("ff02::1")
)

// datagram builds an IPv6 datagram to dst whose first next header is next,
// followed by the bytes of each part (extension headers, then payload).
func datagram(dst netip.Addr, next uint8, parts ...[]byte) wire.IPv6 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, wire.IPv6HeaderLen, wire.IPv6HeaderLen+n)
	wire.EncodeIPv6(b, &wire.IPv6Fields{PayloadLen: n, NextHeader: next, HopLimit: 64, Src: chainSrc, Dst: dst})
	for _, p := range parts {
		b = append(b, p...)
	}
	h, verr := wire.ParseIPv6(b)
	if verr != wire.IPv6OK {
		panic(verr.String())
	}
	return h
}

// fragment encodes a Fragment header with wire's encoder.
func fragment(next uint8, offset int, more bool, id uint32) []byte {
	b := make([]byte, wire.IPv6FragmentLen)
	wire.EncodeIPv6Fragment(b, &wire.IPv6FragmentFields{NextHeader: next, Offset: offset, MoreFragments: more, ID: id})
	return b
}

// options is a Hop-by-Hop or Destination Options header of 8 bytes holding
// one option of type t with 4 bytes of data.
func options(next, t uint8) []byte {
	return []byte{next, 0, t, 4, 0, 0, 0, 0}
}

// padded is an 8-byte options header of padding alone.
func padded(next uint8) []byte {
	return []byte{next, 0, wire.IPv6OptPadN, 4, 0, 0, 0, 0}
}

// routing is an 8-byte Routing header of type rt with segments left sl.
func routing(next, rt, sl uint8) []byte {
	return []byte{next, 0, rt, sl, 0, 0, 0, 0}
}

// paddedTo is an options header of size bytes, a multiple of 8, filled
// with PadN options of at most 255 data bytes each.
func paddedTo(next uint8, size int) []byte {
	b := make([]byte, size)
	b[0], b[1] = next, uint8(size/8-1)
	for i := 2; i < size; {
		n := min(255, size-i-2)
		if size-i-2-n == 1 {
			n-- // leave no single byte a PadN cannot fill
		}
		b[i], b[i+1] = wire.IPv6OptPadN, uint8(n)
		i += 2 + n
	}
	return b
}

var (
	udp8  = make([]byte, 8)  // a UDP header's worth of bytes
	tcp20 = make([]byte, 20) // a TCP header's worth
)

// Offsets in the test datagrams: the first extension header is at 40,
// the second at 48.
const (
	ext1 = wire.IPv6HeaderLen
	ext2 = ext1 + 8
)

func TestWalkChain(t *testing.T) {
	long := make([]byte, 0, 8*9)
	for range 9 {
		long = append(long, padded(wire.ProtoDestOpts)...)
	}
	long[len(long)-8] = wire.ProtoUDP
	eight := append([]byte(nil), long[:8*8]...)
	eight[len(eight)-8] = wire.ProtoUDP

	for _, tc := range []struct {
		name    string
		d       wire.IPv6
		verdict ipv6.Verdict
		proto   uint8
		offset  int
		reason  ipv6.DropReason
		code    uint8
		pointer uint32
	}{
		{name: "NoExtensionHeadersDeliversTheUpperLayer",
			d: datagram(chainUnicast, wire.ProtoUDP, udp8), verdict: ipv6.Deliver, proto: wire.ProtoUDP, offset: ext1},
		{name: "HopByHopFirstIsProcessed",
			d: datagram(chainUnicast, wire.ProtoHopByHop, padded(wire.ProtoTCP), tcp20), verdict: ipv6.Deliver, proto: wire.ProtoTCP, offset: ext2},
		{name: "HopByHopAfterDestOptsIsUnrecognizedNextHeader",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, padded(wire.ProtoHopByHop), padded(wire.ProtoUDP), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonHopByHopNotFirst, code: wire.ICMPv6CodeUnrecognizedNext, pointer: ext1},
		{name: "HopByHopAfterHopByHopPointsAtTheFirstsNextHeader",
			d:       datagram(chainUnicast, wire.ProtoHopByHop, padded(wire.ProtoHopByHop), padded(wire.ProtoUDP), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonHopByHopNotFirst, code: wire.ICMPv6CodeUnrecognizedNext, pointer: ext1},
		{name: "HopByHopAfterFragmentPointsAtTheFragmentHeader",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoHopByHop, 0, false, 1), padded(wire.ProtoUDP), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonHopByHopNotFirst, code: wire.ICMPv6CodeUnrecognizedNext, pointer: ext1},
		{name: "NonZeroPadNIsNotChecked",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, []byte{wire.ProtoUDP, 0, wire.IPv6OptPadN, 4, 0xde, 0xad, 0xbe, 0xef}, udp8),
			verdict: ipv6.Deliver, proto: wire.ProtoUDP, offset: ext2},
		{name: "Pad1OptionsAreSkipped",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, []byte{wire.ProtoUDP, 0, 0, 0, 0, 0, 0, 0}, udp8),
			verdict: ipv6.Deliver, proto: wire.ProtoUDP, offset: ext2},
		{name: "OptionAction00IsSkipped",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, options(wire.ProtoUDP, 0x1e), udp8),
			verdict: ipv6.Deliver, proto: wire.ProtoUDP, offset: ext2},
		{name: "OptionAction01DiscardsSilently",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, options(wire.ProtoUDP, 0x5e), udp8),
			verdict: ipv6.Discard, reason: ipv6.ReasonUnknownOption},
		{name: "OptionAction10SendsCode2AtTheOptionType",
			d:       datagram(chainUnicast, wire.ProtoHopByHop, options(wire.ProtoUDP, 0x9e), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonUnknownOption, code: wire.ICMPv6CodeUnrecognizedOpt, pointer: ext1 + 2},
		{name: "OptionAction10SendsCode2EvenToMulticast",
			d:       datagram(chainMulticast, wire.ProtoHopByHop, options(wire.ProtoUDP, 0x9e), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonUnknownOption, code: wire.ICMPv6CodeUnrecognizedOpt, pointer: ext1 + 2},
		{name: "OptionAction11SendsCode2ToUnicast",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, options(wire.ProtoUDP, 0xde), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonUnknownOption, code: wire.ICMPv6CodeUnrecognizedOpt, pointer: ext1 + 2},
		{name: "OptionAction11DiscardsSilentlyToMulticast",
			d:       datagram(chainMulticast, wire.ProtoDestOpts, options(wire.ProtoUDP, 0xde), udp8),
			verdict: ipv6.Discard, reason: ipv6.ReasonUnknownOption},
		{name: "UnknownOptionPointerCountsThePaddingBeforeIt",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, []byte{wire.ProtoUDP, 0, 0, 0, 0x9e, 2, 0, 0}, udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonUnknownOption, code: wire.ICMPv6CodeUnrecognizedOpt, pointer: ext1 + 4},
		{name: "JumboPayloadIsAnUnknownOptionWithAction11",
			d:       datagram(chainUnicast, wire.ProtoHopByHop, []byte{wire.ProtoUDP, 0, 0xc2, 4, 0, 1, 0, 0}, udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonUnknownOption, code: wire.ICMPv6CodeUnrecognizedOpt, pointer: ext1 + 2},
		{name: "OptionPastItsHeaderIsDiscarded",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, []byte{wire.ProtoUDP, 0, wire.IPv6OptPadN, 5, 0, 0, 0, 0}, udp8),
			verdict: ipv6.Discard, reason: ipv6.ReasonBadOptions},
		{name: "OptionsInTheSecondHeaderPointFromTheDatagramStart",
			d:       datagram(chainUnicast, wire.ProtoHopByHop, padded(wire.ProtoDestOpts), options(wire.ProtoUDP, 0x80), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonUnknownOption, code: wire.ICMPv6CodeUnrecognizedOpt, pointer: ext2 + 2},
		{name: "RoutingUnknownTypeSegmentsLeft0IsSkipped",
			d:       datagram(chainUnicast, wire.ProtoRouting, routing(wire.ProtoUDP, 253, 0), udp8),
			verdict: ipv6.Deliver, proto: wire.ProtoUDP, offset: ext2},
		{name: "RoutingUnknownTypeSegmentsLeftSendsCode0AtTheType",
			d:       datagram(chainUnicast, wire.ProtoRouting, routing(wire.ProtoUDP, 253, 1), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonUnknownRouting, code: wire.ICMPv6CodeErroneousHeader, pointer: ext1 + 2},
		{name: "RoutingType0IsUnknownWithSegmentsLeft",
			d:       datagram(chainUnicast, wire.ProtoHopByHop, padded(wire.ProtoRouting), routing(wire.ProtoUDP, 0, 2), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonUnknownRouting, code: wire.ICMPv6CodeErroneousHeader, pointer: ext2 + 2},
		{name: "RoutingType0WithSegmentsLeft0IsSkipped",
			d:       datagram(chainUnicast, wire.ProtoRouting, routing(wire.ProtoUDP, 0, 0), udp8),
			verdict: ipv6.Deliver, proto: wire.ProtoUDP, offset: ext2},
		{name: "NoNextHeaderDeliversNothing",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, padded(wire.ProtoNoNext), []byte{1, 2, 3}),
			verdict: ipv6.NoNext},
		{name: "NoNextHeaderRightAfterTheFixedHeader",
			d: datagram(chainUnicast, wire.ProtoNoNext), verdict: ipv6.NoNext},
		{name: "UnknownNextHeaderIsForTheUpperLayerDemux",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, padded(253), []byte{1, 2, 3, 4}),
			verdict: ipv6.Deliver, proto: 253, offset: ext2},
		{name: "TruncatedExtensionHeaderIsDiscarded",
			d:       datagram(chainUnicast, wire.ProtoDestOpts, []byte{wire.ProtoUDP, 1, 1, 4, 0, 0, 0, 0}),
			verdict: ipv6.Discard, reason: ipv6.ReasonTruncated},
		{name: "EightExtensionHeadersAreAllowed",
			d: datagram(chainUnicast, wire.ProtoDestOpts, eight, udp8), verdict: ipv6.Deliver, proto: wire.ProtoUDP, offset: ext1 + 64},
		{name: "NineExtensionHeadersAreTooMany",
			d: datagram(chainUnicast, wire.ProtoDestOpts, long, udp8), verdict: ipv6.Discard, reason: ipv6.ReasonTooManyHeaders},
		{name: "ChainPastTheFirst1280BytesIsDiscarded",
			d: datagram(chainUnicast, wire.ProtoDestOpts, paddedTo(wire.ProtoDestOpts, 1240), padded(wire.ProtoUDP), udp8), verdict: ipv6.Discard, reason: ipv6.ReasonChainTooLong},
		{name: "HeaderEndingPastTheFirst1280BytesIsDiscarded",
			d: datagram(chainUnicast, wire.ProtoDestOpts, paddedTo(wire.ProtoUDP, 1248), udp8), verdict: ipv6.Discard, reason: ipv6.ReasonChainTooLong},
		{name: "ChainEndingAt1280BytesIsDelivered",
			d: datagram(chainUnicast, wire.ProtoDestOpts, paddedTo(wire.ProtoUDP, 1240), udp8), verdict: ipv6.Deliver, proto: wire.ProtoUDP, offset: 1280},
		{name: "AtomicFragmentIsProcessedInIsolation",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoDestOpts, 0, false, 7), options(wire.ProtoUDP, 0x9e), udp8),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonUnknownOption, code: wire.ICMPv6CodeUnrecognizedOpt, pointer: ext2 + 2},
		{name: "AtomicFragmentDeliversTheUpperLayer",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoUDP, 0, false, 7), udp8),
			verdict: ipv6.Deliver, proto: wire.ProtoUDP, offset: ext2},
		{name: "FirstFragmentGoesToReassembly",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoUDP, 0, true, 7), make([]byte, 16)),
			verdict: ipv6.Reassemble, proto: wire.ProtoUDP, offset: ext2},
		{name: "FirstFragmentOptionsWaitForReassembly",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoDestOpts, 0, true, 7), options(wire.ProtoUDP, 0x9e), udp8),
			verdict: ipv6.Reassemble, proto: wire.ProtoDestOpts, offset: ext2},
		{name: "FirstFragmentWithoutTheUpperLayerHeaderSendsCode3",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoDestOpts, 0, true, 7), padded(wire.ProtoTCP), make([]byte, 16)),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonIncompleteChain, code: wire.ICMPv6CodeIncompleteChain, pointer: 0},
		{name: "FirstFragmentWithATruncatedHeaderSendsCode3",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoDestOpts, 0, true, 7), []byte{wire.ProtoUDP, 2, 1, 4, 0, 0, 0, 0}),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonIncompleteChain, code: wire.ICMPv6CodeIncompleteChain, pointer: 0},
		{name: "LaterFragmentStopsAtTheFragmentHeader",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoUDP, 1232, false, 7), []byte{0xde, 0xad}),
			verdict: ipv6.Reassemble, proto: wire.ProtoUDP, offset: ext2},
		{name: "FragmentWithMAndLengthNotAMultipleOf8SendsCode0AtPayloadLength",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoUDP, 8, true, 7), make([]byte, 12)),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonBadFragmentLen, code: wire.ICMPv6CodeErroneousHeader, pointer: 4},
		{name: "FragmentPast65535BytesSendsCode0AtFragmentOffset",
			d:       datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoUDP, 65528, false, 7), make([]byte, 16)),
			verdict: ipv6.SendParamProblem, reason: ipv6.ReasonFragmentTooLong, code: wire.ICMPv6CodeErroneousHeader, pointer: ext1 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ipv6.WalkChain(tc.d)
			if c.Verdict != tc.verdict || c.Reason != tc.reason {
				t.Fatalf("verdict %v (%v), want %v (%v)", c.Verdict, c.Reason, tc.verdict, tc.reason)
			}
			switch c.Verdict {
			case ipv6.Deliver, ipv6.Reassemble:
				if c.Proto != tc.proto || c.Offset != tc.offset {
					t.Errorf("protocol %d at %d, want %d at %d", c.Proto, c.Offset, tc.proto, tc.offset)
				}
			case ipv6.SendParamProblem:
				if c.Problem.Code != tc.code || c.Problem.Pointer != tc.pointer {
					t.Errorf("code %d pointer %d, want code %d pointer %d", c.Problem.Code, c.Problem.Pointer, tc.code, tc.pointer)
				}
			}
		})
	}
}

func TestWalkChainReportsTheFragmentHeader(t *testing.T) {
	for _, tc := range []struct {
		name          string
		frag          []byte
		first, atomic bool
		offset        int
	}{
		{"Atomic", fragment(wire.ProtoUDP, 0, false, 0xabcdef01), false, true, 0},
		{"First", fragment(wire.ProtoUDP, 0, true, 0xabcdef01), true, false, 0},
		{"Later", fragment(wire.ProtoUDP, 1280, true, 0xabcdef01), false, false, 1280},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ipv6.WalkChain(datagram(chainUnicast, wire.ProtoHopByHop, padded(wire.ProtoFragment), tc.frag, make([]byte, 16))).Frag
			if !f.Present() || f.At != ext2 || f.ID != 0xabcdef01 || f.Offset != tc.offset {
				t.Fatalf("fragment %+v, want one at %d, offset %d, id 0xabcdef01", f, ext2, tc.offset)
			}
			if f.First() != tc.first || f.Atomic() != tc.atomic {
				t.Errorf("first %v atomic %v, want %v %v", f.First(), f.Atomic(), tc.first, tc.atomic)
			}
		})
	}
	if f := ipv6.WalkChain(datagram(chainUnicast, wire.ProtoUDP, udp8)).Frag; f.Present() {
		t.Errorf("fragment %+v in a datagram without one", f)
	}
}

func TestParamProblemToMulticastOnlyForCode2(t *testing.T) {
	for code, want := range map[uint8]bool{
		wire.ICMPv6CodeErroneousHeader:  false,
		wire.ICMPv6CodeUnrecognizedNext: false,
		wire.ICMPv6CodeUnrecognizedOpt:  true,
		wire.ICMPv6CodeIncompleteChain:  false,
	} {
		if got := (ipv6.ParamProblem{Code: code}).ToMulticast(); got != want {
			t.Errorf("code %d: ToMulticast %v, want %v", code, got, want)
		}
	}
}

var sinkChain ipv6.Chain

// WalkChain runs for every datagram received, so it must not allocate.
func TestWalkChainDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    wire.IPv6
	}{
		{"Options", datagram(chainUnicast, wire.ProtoHopByHop, padded(wire.ProtoDestOpts), options(wire.ProtoUDP, 0x1e), udp8)},
		{"ParamProblem", datagram(chainUnicast, wire.ProtoRouting, routing(wire.ProtoUDP, 253, 1), udp8)},
		{"FirstFragment", datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoDestOpts, 0, true, 7), padded(wire.ProtoUDP), udp8)},
	} {
		if allocs := testing.AllocsPerRun(1000, func() { sinkChain = ipv6.WalkChain(tc.d) }); allocs > 0 {
			t.Errorf("%s: %.2f allocations per call, want 0", tc.name, allocs)
		}
	}
}

func FuzzWalkChain(f *testing.F) {
	f.Add([]byte(datagram(chainUnicast, wire.ProtoHopByHop, padded(wire.ProtoDestOpts), options(wire.ProtoUDP, 0xde), udp8)))
	f.Add([]byte(datagram(chainMulticast, wire.ProtoRouting, routing(wire.ProtoFragment, 0, 1), fragment(wire.ProtoUDP, 0, true, 1), udp8)))
	f.Add([]byte(datagram(chainUnicast, wire.ProtoFragment, fragment(wire.ProtoDestOpts, 0, true, 7), padded(wire.ProtoTCP), udp8)))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, verr := wire.ParseIPv6(b)
		if verr != wire.IPv6OK {
			return
		}
		c := ipv6.WalkChain(d)
		switch c.Verdict {
		case ipv6.SendParamProblem:
			if int(c.Problem.Pointer) >= len(d) {
				t.Fatalf("pointer %d past the %d-byte datagram", c.Problem.Pointer, len(d))
			}
			if c.Reason == ipv6.ReasonNone {
				t.Fatal("parameter problem without a reason")
			}
			// RFC 4443 section 2.4 (e.3): the sender stops every
			// error to a multicast destination but code 2 for an
			// option whose action bits are 10, so WalkChain must ask
			// for code 2 to one in no other case.
			if d.Dst().IsMulticast() && c.Problem.ToMulticast() {
				if a := d[c.Problem.Pointer] >> 6; a != 2 {
					t.Fatalf("code 2 to multicast for an option with action %02b", a)
				}
			}
		case ipv6.Discard:
			if c.Reason == ipv6.ReasonNone {
				t.Fatal("discard without a reason")
			}
		case ipv6.Deliver, ipv6.Reassemble:
			if c.Offset < wire.IPv6HeaderLen || c.Offset > len(d) || c.Offset > ipv6.MaxChainLen {
				t.Fatalf("upper layer at %d in a %d-byte datagram", c.Offset, len(d))
			}
			if c.Verdict == ipv6.Reassemble && (!c.Frag.Present() || c.Frag.Atomic()) {
				t.Fatalf("reassembly asked for fragment %+v", c.Frag)
			}
		}
	})
}

func BenchmarkWalkChain(b *testing.B) {
	for _, bc := range []struct {
		name string
		d    wire.IPv6
	}{
		{"NoExtensionHeaders", datagram(chainUnicast, wire.ProtoUDP, udp8)},
		{"HopByHopDestOptsFragment", datagram(chainUnicast, wire.ProtoHopByHop, padded(wire.ProtoDestOpts), options(wire.ProtoFragment, 0x1e), fragment(wire.ProtoUDP, 0, false, 1), udp8)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkChain = ipv6.WalkChain(bc.d)
			}
		})
	}
}
