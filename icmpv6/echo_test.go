package icmpv6_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/wire"
)

func TestEchoReplyReturnsTheDataWholeFromTheAddressAsked(t *testing.T) {
	tests := []struct {
		from, to netip.Addr
		size     int
	}{
		{peerAddr, ourAddr, 0},
		{peerAddr, ourAddr, 56},
		{peerAddr, ourAddr, 1452},  // a full 1500-byte datagram
		{peerAddr, ourAddr, 65000}, // reassembled by the layer below
		{peerAddr, ourAddr, 65488}, // the most a stack's buffer reassembles (buffer.MaxSize)
		{peerAddr, ourOther, 56},   // not the address the route would pick (section 2.2 (a))
		{peerLL, ourLL, 56},        // link-local, zoned
		{farAddr, ourAddr, 1},      // odd length: the checksum pads
		{ourAddr, ourAddr, 100},    // the host to itself
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v to %v %d bytes", tt.from, tt.to, tt.size), func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			req := echo(t, tt.from, tt.to, wire.ICMPv6EchoRequest, 0x1234, 0x5678, data(tt.size))
			req[1] = 0x2c // traffic class 0xc2 across the first two bytes
			req[0] = 0x6c
			fixChecksum(req)
			h.inject(t, req)
			out := h.net.takeSent()
			if len(out) != 1 {
				t.Fatalf("sent %d datagrams, want the reply", len(out))
			}
			d := decode(t, out[0])
			if addr(d.ip.SrcIP) != tt.to || addr(d.ip.DstIP) != tt.from {
				t.Errorf("reply %v > %v, want %v > %v", d.ip.SrcIP, d.ip.DstIP, tt.to, tt.from)
			}
			if d.m.TypeCode.Type() != wire.ICMPv6EchoReply || d.m.TypeCode.Code() != 0 {
				t.Errorf("reply type %v", d.m.TypeCode)
			}
			if d.echo == nil || d.echo.Identifier != 0x1234 || d.echo.SeqNumber != 0x5678 {
				t.Errorf("reply echo header %+v, want the request's identifier and sequence number", d.echo)
			}
			if !bytes.Equal(d.body, data(tt.size)) {
				t.Errorf("reply carries %d bytes, not the %d sent (RFC 4443 section 4.2: entirely and unmodified)", len(d.body), tt.size)
			}
			if d.ip.TrafficClass != 0xc2 {
				t.Errorf("reply traffic class %#x, want the request's 0xc2", d.ip.TrafficClass)
			}
			if linkScoped(tt.from) && out[0].sp.Dst.Zone() != zone {
				t.Errorf("reply to %v without the interface's zone", out[0].sp.Dst)
			}
			want := map[string]int64{"InMsgs": 1, "InEchos": 1, "OutMsgs": 1, "OutEchoReplies": 1, "InErrors": 0, "OutErrors": 0}
			if tt.from == tt.to {
				// The reply came back in: an echo reply no ping waits for.
				want = map[string]int64{"InMsgs": 2, "InEchos": 1, "InEchoReplies": 1, "InEchoRepUnknown": 1, "OutEchoReplies": 1}
			}
			checkCounters(t, h, want)
		})
	}
}

// fixChecksum recomputes the checksum of the ICMPv6 message in the
// datagram d, after a test changed it.
func fixChecksum(d []byte) {
	g := wire.IPv6(d)
	wire.SetICMPv6Checksum(d[wire.IPv6HeaderLen:], g.Src(), g.Dst())
}

func TestEchoToMulticastIsAnsweredFromAUnicastAddress(t *testing.T) {
	tests := []struct {
		name    string
		from    netip.Addr
		ignore  bool
		wantSrc netip.Addr
	}{
		{"from link-local", peerLL, false, ourLL},
		{"from a global address", peerAddr, false, ourAddr},
		{"ignored when configured", peerLL, true, netip.Addr{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{IgnoreEchoMulticast: tt.ignore})
			h.inject(t, echo(t, tt.from, allNodes, wire.ICMPv6EchoRequest, 7, 8, data(32)))
			out := h.net.takeSent()
			if tt.ignore {
				if len(out) != 0 {
					t.Fatalf("sent %d datagrams, want none", len(out))
				}
				checkCounters(t, h, map[string]int64{"InEchos": 1, "InEchoIgnored": 1, "OutEchoReplies": 0})
				return
			}
			if len(out) != 1 {
				t.Fatalf("sent %d datagrams, want the reply", len(out))
			}
			d := decode(t, out[0])
			// Section 4.2: "the Source Address of the reply MUST be a
			// unicast address belonging to the interface on which the
			// Echo Request message was received".
			if addr(d.ip.SrcIP) != tt.wantSrc || addr(d.ip.DstIP) != tt.from {
				t.Errorf("reply %v > %v, want %v > %v", d.ip.SrcIP, d.ip.DstIP, tt.wantSrc, tt.from)
			}
			if out[0].sp.Dst.Zone() != zone {
				t.Errorf("reply routed to %v, not on the interface the request came in on", out[0].sp.Dst)
			}
			if !bytes.Equal(d.body, data(32)) || d.echo.Identifier != 7 || d.echo.SeqNumber != 8 {
				t.Errorf("reply %+v %x", d.echo, d.body)
			}
			checkCounters(t, h, map[string]int64{"InEchos": 1, "InEchoIgnored": 0, "OutEchoReplies": 1})
		})
	}
}

func TestEchoWithAChecksumLeftToTheLinkIsAnsweredWithAWholeOne(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	req := echo(t, peerAddr, ourAddr, wire.ICMPv6EchoRequest, 1, 2, data(100))
	req[wire.IPv6HeaderLen+2], req[wire.IPv6HeaderLen+3] = 0x12, 0x34 // a partial sum, as the local kernel leaves it
	h.injectOffload(t, req, buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: wire.IPv6HeaderLen, CsumOffset: 2})
	out := h.net.takeSent()
	if len(out) != 1 {
		t.Fatalf("sent %d datagrams, want the reply", len(out))
	}
	decode(t, out[0]) // checks the checksum
}

func TestEchoWithoutARouteBackIsCounted(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	h.net.setNoRoute(true)
	h.inject(t, echo(t, farAddr, ourAddr, wire.ICMPv6EchoRequest, 1, 2, data(8)))
	if out := h.net.takeSent(); len(out) != 0 {
		t.Fatalf("sent %d datagrams", len(out))
	}
	checkCounters(t, h, map[string]int64{"InEchos": 1, "OutErrors": 1, "OutEchoReplies": 0})
}
