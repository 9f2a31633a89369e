package ipv6_test

import (
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// The datagrams here are built by gopacket, apart from wire's encoders and
// the byte literals of chain_test.go, so that a misreading of the header
// layouts shared by the builders and WalkChain would show.

// gopacketDatagram serializes ip and the extension headers after it, with a
// UDP header's worth of payload, and hands the bytes to wire.ParseIPv6.
func gopacketDatagram(t *testing.T, dst string, ext ...gopacket.SerializableLayer) wire.IPv6 {
	t.Helper()
	ip := &layers.IPv6{Version: 6, HopLimit: 64, SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP(dst)}
	ls := append([]gopacket.SerializableLayer{ip}, ext...)
	ls = append(ls, gopacket.Payload(udp8))
	// Each header's next header names the one after it.
	ip.NextHeader = protoOf(t, ls[1])
	for i := 1; i < len(ls)-1; i++ {
		next := protoOf(t, ls[i+1])
		switch l := ls[i].(type) {
		case *layers.IPv6HopByHop:
			l.NextHeader = next
		case *layers.IPv6Destination:
			l.NextHeader = next
		case *layers.IPv6Routing:
			l.NextHeader = next
		case *layers.IPv6Fragment:
			l.NextHeader = next
		}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	d, verr := wire.ParseIPv6(buf.Bytes())
	if verr != wire.IPv6OK {
		t.Fatal(verr)
	}
	return d
}

func protoOf(t *testing.T, l gopacket.SerializableLayer) layers.IPProtocol {
	t.Helper()
	switch l.(type) {
	case *layers.IPv6HopByHop:
		return layers.IPProtocolIPv6HopByHop
	case *layers.IPv6Destination:
		return layers.IPProtocolIPv6Destination
	case *layers.IPv6Routing:
		return layers.IPProtocolIPv6Routing
	case *layers.IPv6Fragment:
		return layers.IPProtocolIPv6Fragment
	case gopacket.Payload:
		return layers.IPProtocolUDP
	}
	t.Fatalf("no protocol for %T", l)
	return 0
}

func hopByHop(optType uint8) *layers.IPv6HopByHop {
	return &layers.IPv6HopByHop{Options: []*layers.IPv6HopByHopOption{{OptionType: optType, OptionData: make([]byte, 4)}}}
}

func destOpts(optType uint8) *layers.IPv6Destination {
	return &layers.IPv6Destination{Options: []*layers.IPv6DestinationOption{{OptionType: optType, OptionData: make([]byte, 4)}}}
}

func TestWalkChainOnGopacketDatagrams(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dst     string
		ext     []gopacket.SerializableLayer
		verdict ipv6.Verdict
		offset  int
		code    uint8
		pointer uint32
	}{
		{name: "HopByHopDestOptsRoutingFragmentInRFCOrderDeliver", dst: "2001:db8::2",
			ext:     []gopacket.SerializableLayer{hopByHop(0x1e), destOpts(0x1e), &layers.IPv6Routing{RoutingType: 4}, &layers.IPv6Fragment{Identification: 9}, destOpts(0x1e)},
			verdict: ipv6.Deliver, offset: 40 + 8*5},
		{name: "OptionAction10PointsAtTheOptionType", dst: "ff02::1",
			ext:     []gopacket.SerializableLayer{hopByHop(0x1e), destOpts(0x80)},
			verdict: ipv6.SendParamProblem, code: wire.ICMPv6CodeUnrecognizedOpt, pointer: 48 + 2},
		{name: "OptionAction11ToMulticastIsSilent", dst: "ff02::1",
			ext: []gopacket.SerializableLayer{destOpts(0xc2)}, verdict: ipv6.Discard},
		{name: "OptionAction11ToUnicastPointsAtTheOptionType", dst: "2001:db8::2",
			ext:     []gopacket.SerializableLayer{hopByHop(0xc2)},
			verdict: ipv6.SendParamProblem, code: wire.ICMPv6CodeUnrecognizedOpt, pointer: 40 + 2},
		{name: "HopByHopSecondIsUnrecognizedNextHeader", dst: "2001:db8::2",
			ext:     []gopacket.SerializableLayer{destOpts(0x1e), hopByHop(0x1e)},
			verdict: ipv6.SendParamProblem, code: wire.ICMPv6CodeUnrecognizedNext, pointer: 40},
		{name: "RoutingType0WithSegmentsLeftPointsAtTheType", dst: "2001:db8::2",
			ext:     []gopacket.SerializableLayer{&layers.IPv6Routing{RoutingType: 0, SegmentsLeft: 1, SourceRoutingIPs: []net.IP{net.ParseIP("2001:db8::3")}}},
			verdict: ipv6.SendParamProblem, code: wire.ICMPv6CodeErroneousHeader, pointer: 40 + 2},
		{name: "LaterFragmentGoesToReassembly", dst: "2001:db8::2",
			ext:     []gopacket.SerializableLayer{&layers.IPv6Fragment{FragmentOffset: 10, Identification: 9}},
			verdict: ipv6.Reassemble, offset: 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ipv6.WalkChain(gopacketDatagram(t, tc.dst, tc.ext...))
			if c.Verdict != tc.verdict {
				t.Fatalf("verdict %v (%v), want %v", c.Verdict, c.Reason, tc.verdict)
			}
			switch c.Verdict {
			case ipv6.Deliver, ipv6.Reassemble:
				if c.Proto != wire.ProtoUDP || c.Offset != tc.offset {
					t.Errorf("protocol %d at %d, want UDP at %d", c.Proto, c.Offset, tc.offset)
				}
			case ipv6.SendParamProblem:
				if c.Problem.Code != tc.code || c.Problem.Pointer != tc.pointer {
					t.Errorf("code %d pointer %d, want code %d pointer %d", c.Problem.Code, c.Problem.Pointer, tc.code, tc.pointer)
				}
			}
		})
	}
}
