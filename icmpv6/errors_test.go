package icmpv6_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ratelimit"
	"github.com/gonetstack/gonet/wire"
)

func TestErrorsCarryTypeCodeParamAndAQuoteWithin1280Bytes(t *testing.T) {
	kinds := []struct {
		name       string
		typ, code  uint8
		param      uint32
		outCounter string
	}{
		{"no route", wire.ICMPv6DestUnreach, wire.ICMPv6CodeNoRoute, 0, "OutDestUnreachs"},
		{"administratively prohibited", wire.ICMPv6DestUnreach, wire.ICMPv6CodeAdminProhibited, 0, "OutDestUnreachs"},
		{"beyond scope", wire.ICMPv6DestUnreach, wire.ICMPv6CodeBeyondScope, 0, "OutDestUnreachs"},
		{"address unreachable", wire.ICMPv6DestUnreach, wire.ICMPv6CodeAddrUnreach, 0, "OutDestUnreachs"},
		{"port unreachable", wire.ICMPv6DestUnreach, wire.ICMPv6CodePortUnreach, 0, "OutDestUnreachs"},
		{"source policy", wire.ICMPv6DestUnreach, wire.ICMPv6CodeSrcPolicyFailed, 0, "OutDestUnreachs"},
		{"reject route", wire.ICMPv6DestUnreach, wire.ICMPv6CodeRejectRoute, 0, "OutDestUnreachs"},
		{"packet too big", wire.ICMPv6PacketTooBig, 0, 1400, "OutPktTooBigs"},
		{"hop limit", wire.ICMPv6TimeExceeded, wire.ICMPv6CodeHopLimitExceeded, 0, "OutTimeExcds"},
		{"reassembly", wire.ICMPv6TimeExceeded, wire.ICMPv6CodeReassemblyTime, 0, "OutTimeExcds"},
		{"erroneous header", wire.ICMPv6ParamProblem, wire.ICMPv6CodeErroneousHeader, 4, "OutParmProblems"},
		{"unrecognized next header", wire.ICMPv6ParamProblem, wire.ICMPv6CodeUnrecognizedNext, 6, "OutParmProblems"},
		{"unrecognized option", wire.ICMPv6ParamProblem, wire.ICMPv6CodeUnrecognizedOpt, 42, "OutParmProblems"},
	}
	// Datagrams of these lengths, IPv6 header included: the quote is the
	// whole datagram up to 1232 bytes, so that the error's 40 + 8 + 1232
	// are the minimum MTU (section 2.4 (c)).
	lengths := []int{48, 100, 1232, 1233, 1500, 9000}
	for _, k := range kinds {
		for _, n := range lengths {
			t.Run(fmt.Sprintf("%s about %d bytes", k.name, n), func(t *testing.T) {
				h := newHarness(t, icmpv6.Config{})
				orig := udpDatagram(t, peerAddr, ourAddr, 4000, 9, n-48)
				h.p.SendError(ipv6.ICMPError{Type: k.typ, Code: k.code, Param: k.param, Orig: orig})
				out := h.net.takeSent()
				if len(out) != 1 {
					t.Fatalf("sent %d datagrams, want the error", len(out))
				}
				d := decode(t, out[0])
				if d.m.TypeCode.Type() != k.typ || d.m.TypeCode.Code() != k.code || d.rest != k.param {
					t.Errorf("sent type %d code %d param %d, want %d %d %d", d.m.TypeCode.Type(), d.m.TypeCode.Code(), d.rest, k.typ, k.code, k.param)
				}
				want := min(n, wire.ICMPv6MaxErrorQuote)
				if !bytes.Equal(d.body, orig[:want]) {
					t.Errorf("quoted %d bytes, want the first %d of the datagram", len(d.body), want)
				}
				if len(out[0].b) > wire.IPv6MinMTU {
					t.Errorf("error of %d bytes exceeds the minimum MTU", len(out[0].b))
				}
				if addr(d.ip.SrcIP) != ourAddr || addr(d.ip.DstIP) != peerAddr {
					t.Errorf("error %v > %v, want %v > %v", d.ip.SrcIP, d.ip.DstIP, ourAddr, peerAddr)
				}
				checkCounters(t, h, map[string]int64{"OutMsgs": 1, k.outCounter: 1})
			})
		}
	}
}

func TestErrorSourceAndDestination(t *testing.T) {
	eth0 := newInterface(t, zone)
	tests := []struct {
		name         string
		origSrc      netip.Addr
		origDst      netip.Addr
		typ          uint8
		in           *ipv6.Interface
		wantSrc      netip.Addr
		wantDstZoned netip.Addr
	}{
		// Section 2.2 (a): a message sent to one of the host's unicast
		// addresses is answered from that address.
		{"to our address", peerAddr, ourAddr, wire.ICMPv6DestUnreach, eth0, ourAddr, peerAddr},
		{"to our other address", peerAddr, ourOther, wire.ICMPv6DestUnreach, eth0, ourOther, peerAddr},
		{"to our link-local address", peerLL, ourLL, wire.ICMPv6DestUnreach, eth0, ourLL, peerLL.WithZone(zone)},
		// (b): one sent to a group is answered from the address the
		// route picks, the outgoing interface's for a link-local source.
		{"to a group", peerLL, allNodes, wire.ICMPv6PacketTooBig, eth0, ourLL, peerLL.WithZone(zone)},
		{"to a group from afar", farAddr, netip.MustParseAddr("ff0e::1:2"), wire.ICMPv6PacketTooBig, eth0, ourAddr, farAddr},
		// (d): one the host took without holding its destination.
		{"to an address not ours", peerAddr, farAddr, wire.ICMPv6TimeExceeded, eth0, ourAddr, peerAddr},
		// The host's own datagram, with no interface it came in on.
		{"from the host itself", ourAddr, ourOther, wire.ICMPv6DestUnreach, nil, ourOther, ourAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			orig := udpDatagram(t, tt.origSrc, tt.origDst, 1, 2, 10)
			h.p.SendError(ipv6.ICMPError{Type: tt.typ, Orig: orig, In: tt.in})
			out := h.net.takeSent()
			if tt.in == nil {
				// Sent to the host itself: it came back in, as an
				// error quoting a UDP datagram of ours.
				if len(out) != 1 || len(h.udp.take()) != 1 {
					t.Fatalf("sent %d, want one error looped back to UDP", len(out))
				}
			}
			if len(out) != 1 {
				t.Fatalf("sent %d datagrams, want the error", len(out))
			}
			if out[0].sp.Src != tt.wantSrc || out[0].sp.Dst != tt.wantDstZoned {
				t.Errorf("error %v > %v, want %v > %v", out[0].sp.Src, out[0].sp.Dst, tt.wantSrc, tt.wantDstZoned)
			}
			decode(t, out[0])
		})
	}
}

func TestNoErrorAboutAnICMPv6Error(t *testing.T) {
	icmp := func(typ uint8) []byte {
		return icmpv6Datagram(t, peerAddr, ourAddr, typ, 0, make([]byte, 60))
	}
	behind := func(t *testing.T, typ uint8) []byte {
		// An ICMPv6 message behind a Destination Options header.
		ipl := ipHeader(peerAddr, ourAddr, layers.IPProtocolIPv6Destination)
		opts := &layers.IPv6Destination{}
		opts.NextHeader = layers.IPProtocolICMPv6
		opts.Options = []*layers.IPv6DestinationOption{{OptionType: 1, OptionLength: 4, OptionData: make([]byte, 4)}}
		m := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
		_ = m.SetNetworkLayerForChecksum(ipl)
		return serialize(t, ipl, opts, m, gopacket.Payload(make([]byte, 20)))
	}
	laterFragment := serialize(t, ipHeader(peerAddr, ourAddr, layers.IPProtocolIPv6Fragment),
		&layers.IPv6Fragment{NextHeader: layers.IPProtocolICMPv6, FragmentOffset: 100, Identification: 9},
		gopacket.Payload(make([]byte, 64)))
	truncated := icmp(wire.ICMPv6EchoRequest)[:wire.IPv6HeaderLen]
	tests := []struct {
		name string
		orig []byte
		sent bool
	}{
		{"destination unreachable", icmp(wire.ICMPv6DestUnreach), false},
		{"packet too big", icmp(wire.ICMPv6PacketTooBig), false},
		{"time exceeded", icmp(wire.ICMPv6TimeExceeded), false},
		{"parameter problem", icmp(wire.ICMPv6ParamProblem), false},
		{"an unknown error type", icmp(100), false},
		{"an error behind an extension header", behind(t, wire.ICMPv6TimeExceeded), false},
		{"a later fragment of ICMPv6, whose type it does not show", laterFragment, false},
		{"ICMPv6 cut before its type", truncated, false},
		// Informational messages may be answered with errors (an echo
		// request with an option to refuse, a neighbour solicitation
		// with a bad header field).
		{"echo request", icmp(wire.ICMPv6EchoRequest), true},
		{"echo request behind an extension header", behind(t, wire.ICMPv6EchoRequest), true},
		{"neighbour solicitation", icmp(wire.ICMPv6NeighborSolicitation), true},
		{"an unknown informational type", icmp(200), true},
		{"UDP", udpDatagram(t, peerAddr, ourAddr, 1, 2, 10), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			h.p.SendError(ipv6.ICMPError{Type: wire.ICMPv6ParamProblem, Code: wire.ICMPv6CodeErroneousHeader, Orig: tt.orig})
			out := h.net.takeSent()
			if got := len(out) == 1; got != tt.sent {
				t.Fatalf("sent %d errors, want sent = %v (RFC 4443 section 2.4 (e.1))", len(out), tt.sent)
			}
			suppressed := int64(1)
			if tt.sent {
				suppressed = 0
			}
			checkCounters(t, h, map[string]int64{"OutErrorsAboutErr": suppressed, "OutRateLimitHost": 0})
		})
	}
}

func TestErrorRateLimitIsATokenBucketOnTheStacksClock(t *testing.T) {
	h := newHarness(t, icmpv6.Config{ErrorRate: 2, ErrorBurst: 3})
	orig := udpDatagram(t, peerAddr, ourAddr, 1, 2, 10)
	errors := func(n int) int {
		for range n {
			h.p.SendError(ipv6.ICMPError{Type: wire.ICMPv6DestUnreach, Code: wire.ICMPv6CodePortUnreach, Orig: orig})
		}
		return len(h.net.takeSent())
	}
	steps := []struct {
		wait time.Duration
		want int
	}{
		{0, 3},                      // the burst
		{100 * time.Millisecond, 0}, // a fifth of a token
		{400 * time.Millisecond, 1}, // two a second
		{time.Second, 2},
		{time.Hour, 3}, // refilled to the burst, no more
	}
	limited := int64(0)
	for i, s := range steps {
		h.clk.Advance(s.wait)
		if got := errors(10); got != s.want {
			t.Errorf("step %d, after %v: sent %d of 10, want %d", i, s.wait, got, s.want)
		}
		limited += int64(10 - s.want)
	}
	checkCounters(t, h, map[string]int64{"OutRateLimitHost": limited, "OutDestUnreachs": 9})
}

func TestErrorRateLimitSharedWithAnotherFamily(t *testing.T) {
	// The bucket runs on a clock of its own, which never moves here.
	shared := ratelimit.New(1, 2, clock.NewVirtual(time.Unix(0, 0)))
	h2 := newHarness(t, icmpv6.Config{Limiter: shared})
	if !shared.Allow() { // the other family's error
		t.Fatal("a new bucket is empty")
	}
	orig := udpDatagram(t, peerAddr, ourAddr, 1, 2, 10)
	for range 3 {
		h2.p.SendError(ipv6.ICMPError{Type: wire.ICMPv6DestUnreach, Orig: orig})
	}
	if got := len(h2.net.takeSent()); got != 1 {
		t.Errorf("sent %d errors from a shared bucket of 2 with one taken, want 1", got)
	}
}

func TestErrorWithoutARouteIsCounted(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	h.net.setNoRoute(true)
	h.p.SendError(ipv6.ICMPError{Type: wire.ICMPv6DestUnreach, Orig: udpDatagram(t, farAddr, ourAddr, 1, 2, 10)})
	if out := h.net.takeSent(); len(out) != 0 {
		t.Fatalf("sent %d", len(out))
	}
	checkCounters(t, h, map[string]int64{"OutErrors": 1, "OutMsgs": 0})
}

func TestTypeCodeAndErrorKindOfAreInverses(t *testing.T) {
	tests := []struct {
		kind      ip.ErrorKind
		typ, code uint8
	}{
		{ip.NetUnreachable, wire.ICMPv6DestUnreach, wire.ICMPv6CodeNoRoute},
		{ip.HostUnreachable, wire.ICMPv6DestUnreach, wire.ICMPv6CodeAddrUnreach},
		{ip.ProtoUnreachable, wire.ICMPv6ParamProblem, wire.ICMPv6CodeUnrecognizedNext},
		{ip.PortUnreachable, wire.ICMPv6DestUnreach, wire.ICMPv6CodePortUnreach},
		{ip.AdminProhibited, wire.ICMPv6DestUnreach, wire.ICMPv6CodeAdminProhibited},
		{ip.PacketTooBig, wire.ICMPv6PacketTooBig, 0},
		{ip.TimeExceeded, wire.ICMPv6TimeExceeded, wire.ICMPv6CodeHopLimitExceeded},
		{ip.ReassemblyTimeout, wire.ICMPv6TimeExceeded, wire.ICMPv6CodeReassemblyTime},
		{ip.ParameterProblem, wire.ICMPv6ParamProblem, wire.ICMPv6CodeErroneousHeader},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			typ, code := ipv6.ICMPTypeCode(tt.kind)
			if typ != tt.typ || code != tt.code {
				t.Errorf("TypeCode = %d/%d, want %d/%d", typ, code, tt.typ, tt.code)
			}
			if k, ok := icmpv6.ErrorKindOf(typ, code); !ok || k != tt.kind {
				t.Errorf("ErrorKindOf(%d, %d) = %v, %v", typ, code, k, ok)
			}
		})
	}
}

func TestErrorKindOfGroupsCodesAsLinux(t *testing.T) {
	tests := []struct {
		typ, code uint8
		kind      ip.ErrorKind
		ok        bool
	}{
		{wire.ICMPv6DestUnreach, wire.ICMPv6CodeBeyondScope, ip.HostUnreachable, true},
		{wire.ICMPv6DestUnreach, wire.ICMPv6CodeSrcPolicyFailed, ip.AdminProhibited, true},
		{wire.ICMPv6DestUnreach, wire.ICMPv6CodeRejectRoute, ip.AdminProhibited, true},
		{wire.ICMPv6DestUnreach, 99, ip.HostUnreachable, true},
		{wire.ICMPv6PacketTooBig, 5, ip.PacketTooBig, true},
		{wire.ICMPv6ParamProblem, wire.ICMPv6CodeUnrecognizedOpt, ip.ParameterProblem, true},
		{wire.ICMPv6ParamProblem, wire.ICMPv6CodeIncompleteChain, ip.ParameterProblem, true},
		{wire.ICMPv6EchoRequest, 0, 0, false},
		{100, 0, 0, false},
	}
	for _, tt := range tests {
		if k, ok := icmpv6.ErrorKindOf(tt.typ, tt.code); k != tt.kind || ok != tt.ok {
			t.Errorf("ErrorKindOf(%d, %d) = %v, %v; want %v, %v", tt.typ, tt.code, k, ok, tt.kind, tt.ok)
		}
	}
}
