package icmpv6_test

import (
	"encoding/binary"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// ports reads the source and destination ports an error quotes.
func ports(b []byte) (uint16, uint16) {
	return binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:])
}

func TestReceivedErrorsReachTheTransportOfTheQuotedDatagram(t *testing.T) {
	tests := []struct {
		name      string
		typ, code uint8
		param     uint32
		kind      ip.ErrorKind
		mtu       int
		in        string // the counter of the type
	}{
		{"no route", wire.ICMPv6DestUnreach, wire.ICMPv6CodeNoRoute, 0, ip.NetUnreachable, 0, "InDestUnreachs"},
		{"prohibited", wire.ICMPv6DestUnreach, wire.ICMPv6CodeAdminProhibited, 0, ip.AdminProhibited, 0, "InDestUnreachs"},
		{"address unreachable", wire.ICMPv6DestUnreach, wire.ICMPv6CodeAddrUnreach, 0, ip.HostUnreachable, 0, "InDestUnreachs"},
		{"port unreachable", wire.ICMPv6DestUnreach, wire.ICMPv6CodePortUnreach, 0, ip.PortUnreachable, 0, "InDestUnreachs"},
		{"packet too big", wire.ICMPv6PacketTooBig, 0, 1400, ip.PacketTooBig, 1400, "InPktTooBigs"},
		{"packet too big below 1280 counts as 1280", wire.ICMPv6PacketTooBig, 0, 576, ip.PacketTooBig, 1280, "InPktTooBigs"},
		{"hop limit", wire.ICMPv6TimeExceeded, 0, 0, ip.TimeExceeded, 0, "InTimeExcds"},
		{"reassembly", wire.ICMPv6TimeExceeded, 1, 0, ip.ReassemblyTimeout, 0, "InTimeExcds"},
		{"parameter problem", wire.ICMPv6ParamProblem, 0, 40, ip.ParameterProblem, 0, "InParmProblems"},
		{"unrecognized next header", wire.ICMPv6ParamProblem, 1, 6, ip.ProtoUnreachable, 0, "InParmProblems"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			orig := udpDatagram(t, ourAddr, farAddr, 5000, 53, 1500)
			h.inject(t, errorAbout(t, peerAddr, ourAddr, tt.typ, tt.code, tt.param, orig))
			errs := h.udp.take()
			if len(errs) != 1 {
				t.Fatalf("UDP got %d errors, want 1", len(errs))
			}
			e := errs[0]
			if e.Kind != tt.kind || e.MTU != tt.mtu {
				t.Errorf("error %v MTU %d, want %v MTU %d", e.Kind, e.MTU, tt.kind, tt.mtu)
			}
			if e.Src != ourAddr || e.Dst != farAddr || !e.DF || e.QuotedLen != len(orig) {
				t.Errorf("error about %v > %v DF %v length %d, want %v > %v DF, %d", e.Src, e.Dst, e.DF, e.QuotedLen, ourAddr, farAddr, len(orig))
			}
			if sp, dp := ports(e.Transport); sp != 5000 || dp != 53 {
				t.Errorf("quoted ports %d > %d, want 5000 > 53", sp, dp)
			}
			pm := h.net.takePMTU()
			if tt.kind == ip.PacketTooBig {
				if len(pm) != 1 || pm[0] != (pmtuReport{farAddr, tt.mtu, len(orig)}) {
					t.Errorf("path MTU reports %+v, want %v at %d for %d bytes", pm, farAddr, tt.mtu, len(orig))
				}
			} else if len(pm) != 0 {
				t.Errorf("path MTU reports %+v, want none", pm)
			}
			checkCounters(t, h, map[string]int64{tt.in: 1, "InErrorsDelivered": 1, "InErrors": 0})
		})
	}
}

func TestReceivedErrorsWalkTheQuotedExtensionHeaders(t *testing.T) {
	udp := &layers.UDP{SrcPort: 7000, DstPort: 443}
	_ = udp.SetNetworkLayerForChecksum(ipHeader(ourAddr, farAddr, layers.IPProtocolUDP))
	hbh := &layers.IPv6HopByHop{}
	hbh.NextHeader = layers.IPProtocolIPv6Destination
	hbh.Options = []*layers.IPv6HopByHopOption{{OptionType: 1, OptionLength: 4, OptionData: make([]byte, 4)}}
	dst := &layers.IPv6Destination{}
	dst.NextHeader = layers.IPProtocolIPv6Fragment
	dst.Options = []*layers.IPv6DestinationOption{{OptionType: 1, OptionLength: 4, OptionData: make([]byte, 4)}}
	tests := []struct {
		name    string
		orig    []byte
		deliver bool
	}{
		{"hop-by-hop, destination options, first fragment", serialize(t, ipHeader(ourAddr, farAddr, layers.IPProtocolIPv6HopByHop), hbh, dst,
			&layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP, MoreFragments: true, Identification: 1},
			udp, gopacket.Payload(data(1200))), true},
		{"a later fragment has no transport header", serialize(t, ipHeader(ourAddr, farAddr, layers.IPProtocolIPv6Fragment),
			&layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP, FragmentOffset: 150, Identification: 1},
			gopacket.Payload(data(1000))), false},
		{"authentication header", raw(t, 51, append([]byte{wire.ProtoUDP, 4}, make([]byte, 22)...)), true},
		{"eight destination options headers", raw(t, wire.ProtoDestOpts, destOpts(8)), true},
		{"nine destination options headers, past the walk's bound", raw(t, wire.ProtoDestOpts, destOpts(9)), false},
		{"cut inside the transport header", udpDatagram(t, ourAddr, farAddr, 7000, 443, 0)[:wire.IPv6HeaderLen+4], false},
		{"cut inside the IPv6 header", udpDatagram(t, ourAddr, farAddr, 7000, 443, 0)[:39], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			h.inject(t, errorAbout(t, peerAddr, ourAddr, wire.ICMPv6DestUnreach, wire.ICMPv6CodePortUnreach, 0, tt.orig))
			errs := h.udp.take()
			if !tt.deliver {
				if len(errs) != 0 {
					t.Fatalf("UDP got %d errors, want none", len(errs))
				}
				checkCounters(t, h, map[string]int64{"InBadQuotes": 1, "InErrors": 1, "InErrorsDelivered": 0})
				return
			}
			if len(errs) != 1 {
				t.Fatalf("UDP got %d errors, want 1", len(errs))
			}
			if sp, dp := ports(errs[0].Transport); sp != 7000 || dp != 443 {
				t.Errorf("quoted ports %d > %d, want 7000 > 443", sp, dp)
			}
		})
	}
}

// raw is a UDP datagram from ourAddr:7000 to farAddr:443 behind the
// extension headers ext, the first of type next.
func raw(t *testing.T, next uint8, ext []byte) []byte {
	udp := []byte{7000 >> 8, 7000 & 0xff, 443 >> 8, 443 & 0xff, 0, 8, 0, 0}
	d := make([]byte, wire.IPv6HeaderLen, wire.IPv6HeaderLen+len(ext)+len(udp))
	wire.EncodeIPv6(d, &wire.IPv6Fields{PayloadLen: len(ext) + len(udp), NextHeader: next, HopLimit: 64, Src: ourAddr, Dst: farAddr})
	return append(append(d, ext...), udp...)
}

// destOpts is n empty Destination Options headers, the last naming UDP.
func destOpts(n int) []byte {
	var b []byte
	for i := range n {
		next := byte(wire.ProtoDestOpts)
		if i == n-1 {
			next = wire.ProtoUDP
		}
		b = append(b, next, 0, wire.IPv6OptPadN, 4, 0, 0, 0, 0)
	}
	return b
}

func TestReceivedErrorsGoByTheQuotedProtocol(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	ipl := ipHeader(ourAddr, farAddr, layers.IPProtocolTCP)
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: 12345, SYN: true}
	_ = tcp.SetNetworkLayerForChecksum(ipl)
	h.inject(t, errorAbout(t, peerAddr, ourAddr, wire.ICMPv6DestUnreach, 0, 0, serialize(t, ipl, tcp)))
	if got := h.tcp.take(); len(got) != 1 || binary.BigEndian.Uint32(got[0].Transport[4:]) != 12345 {
		t.Errorf("TCP got %+v, want the error with the quoted sequence number", got)
	}
	if got := h.udp.take(); len(got) != 0 {
		t.Errorf("UDP got %d errors about a TCP segment", len(got))
	}
	// A protocol with no transport, or one that takes no errors.
	h.inject(t, errorAbout(t, peerAddr, ourAddr, wire.ICMPv6DestUnreach, 0, 0, serialize(t, ipHeader(ourAddr, farAddr, 253), gopacket.Payload(data(20)))))
	checkCounters(t, h, map[string]int64{"InErrorsDelivered": 1, "InErrorsNoHandler": 1})
}

func TestReceivedErrorAboutALinkLocalDatagramCarriesTheZone(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	h.inject(t, errorAbout(t, peerLL, ourLL, wire.ICMPv6DestUnreach, wire.ICMPv6CodePortUnreach, 0, udpDatagram(t, ourLL, peerLL, 1, 2, 0)))
	errs := h.udp.take()
	if len(errs) != 1 || errs[0].Src != ourLL.WithZone(zone) || errs[0].Dst != peerLL.WithZone(zone) {
		t.Fatalf("UDP got %+v, want one error about %v > %v", errs, ourLL.WithZone(zone), peerLL.WithZone(zone))
	}
}

func TestErrorQuotingAForeignDatagramIsDroppedAndLowersNoPathMTU(t *testing.T) {
	for _, typ := range []uint8{wire.ICMPv6PacketTooBig, wire.ICMPv6DestUnreach} {
		h := newHarness(t, icmpv6.Config{})
		// A forged error quoting a datagram from another host to farAddr.
		orig := udpDatagram(t, peerAddr, farAddr, 5000, 53, 1400)
		h.inject(t, errorAbout(t, farAddr, ourAddr, typ, 0, 1280, orig))
		if got := h.udp.take(); len(got) != 0 {
			t.Errorf("type %d: UDP got %d errors about another host's datagram", typ, len(got))
		}
		if pm := h.net.takePMTU(); len(pm) != 0 {
			t.Errorf("type %d: path MTU reports %+v, want none", typ, pm)
		}
		checkCounters(t, h, map[string]int64{"InErrorsForeign": 1, "InErrorsDelivered": 0})
	}
}

func TestPacketTooBigQuotingALaterFragmentStillLowersThePathMTU(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	orig := serialize(t, ipHeader(ourAddr, farAddr, layers.IPProtocolIPv6Fragment),
		&layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP, FragmentOffset: 181, Identification: 3},
		gopacket.Payload(data(1400)))
	h.inject(t, errorAbout(t, peerAddr, ourAddr, wire.ICMPv6PacketTooBig, 0, 1300, orig))
	if pm := h.net.takePMTU(); len(pm) != 1 || pm[0].dst != farAddr || pm[0].mtu != 1300 {
		t.Errorf("path MTU reports %+v, want %v at 1300", pm, farAddr)
	}
	checkCounters(t, h, map[string]int64{"InPktTooBigs": 1, "InBadQuotes": 1})
}

func TestMalformedMessagesAreCountedAndDropped(t *testing.T) {
	tests := []struct {
		name   string
		d      func(t *testing.T) []byte
		reason string
	}{
		{"shorter than the header", func(t *testing.T) []byte {
			d := serialize(t, ipHeader(peerAddr, ourAddr, layers.IPProtocolICMPv6), gopacket.Payload([]byte{128, 0, 0, 0, 0, 0, 0}))
			return d
		}, "InTooShort"},
		{"bad checksum", func(t *testing.T) []byte {
			d := echo(t, peerAddr, ourAddr, wire.ICMPv6EchoRequest, 1, 1, data(20))
			d[len(d)-1] ^= 0xff
			return d
		}, "InCsumErrors"},
		{"error quoting no IPv6 datagram", func(t *testing.T) []byte {
			return icmpv6Datagram(t, peerAddr, ourAddr, wire.ICMPv6DestUnreach, 0, make([]byte, 60))
		}, "InBadQuotes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			h.inject(t, tt.d(t))
			if out := h.net.takeSent(); len(out) != 0 {
				t.Errorf("sent %d datagrams in answer", len(out))
			}
			checkCounters(t, h, map[string]int64{"InMsgs": 1, "InErrors": 1, tt.reason: 1})
		})
	}
}

// TestNDAndMLDOnlyCounted pins what ICMPv6 does with neighbour discovery
// and MLD that reach it, which happens only on an interface without
// neighbour discovery (the IPv6 layer hands them to ndp otherwise):
// counted by type and in InNoHandler, never answered; unknown types are
// dropped (RFC 4443 section 2.4 (a) and (b)).
func TestNDAndMLDOnlyCounted(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	for _, typ := range []uint8{130, 131, 132, 143, 133, 134, 135, 136, 137} {
		h.inject(t, icmpv6Datagram(t, peerLL, allNodes, typ, 0, make([]byte, 20)))
	}
	h.inject(t, icmpv6Datagram(t, peerLL, allNodes, 200, 0, make([]byte, 20)))
	h.inject(t, icmpv6Datagram(t, peerLL, allNodes, 100, 0, make([]byte, 60)))
	checkCounters(t, h, map[string]int64{
		"InGroupMembQueries": 1, "InGroupMembResponses": 1, "InGroupMembReductions": 1, "InMLDv2Reports": 1,
		"InRouterSolicits": 1, "InRouterAdvertisements": 1, "InNeighborSolicits": 1, "InNeighborAdvertisements": 1,
		"InRedirects": 1, "InNoHandler": 9, "InUnknownInfos": 1, "InUnknownErrors": 1,
	})
	if out := h.net.takeSent(); len(out) != 0 {
		t.Errorf("sent %d datagrams in answer", len(out))
	}
}
