package ipv6_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

var tentative = netip.MustParseAddr("2001:db8:1::77")

func TestReceiveValidatesAndCountsEachDropByReason(t *testing.T) {
	ok := whole(t, peerAddr, ourAddr, protoTest, data(16))
	tests := []struct {
		name  string
		in    string // interface: eth0 unless eth1
		dg    []byte
		setup func(t testing.TB, h *harness)
		// want is the counters that move; deliveredAs the header the
		// transport sees when the datagram is delivered.
		want        map[string]int64
		deliveredAs *ip.Header
	}{
		{name: "to our address", dg: ok,
			want:        map[string]int64{"InReceives": 1, "InDelivers": 1},
			deliveredAs: &ip.Header{Src: peerAddr, Dst: ourAddr, TTL: 64, Off: 40, In: "eth0"}},
		{name: "link padding after the payload length", dg: append(bytes.Clone(ok), 0, 0, 0, 0, 0, 0),
			want:        map[string]int64{"InDelivers": 1},
			deliveredAs: &ip.Header{Src: peerAddr, Dst: ourAddr, TTL: 64, Off: 40, In: "eth0"}},
		{name: "shorter than the fixed header", dg: ok[:39],
			want: map[string]int64{"InHdrErrors": 1, "InShortHeader": 1}},
		{name: "version 4", dg: append([]byte{0x45}, ok[1:]...),
			want: map[string]int64{"InHdrErrors": 1, "InBadVersion": 1}},
		{name: "payload length past the frame", dg: ok[:len(ok)-1],
			want: map[string]int64{"InTruncatedPkts": 1}},
		{name: "from a multicast source", dg: whole(t, ipv6.AllNodes, ourAddr, protoTest, data(8)),
			want: map[string]int64{"InHdrErrors": 1, "InMartians": 1}},
		{name: "from the loopback address on a link", dg: whole(t, netip.IPv6Loopback(), ourAddr, protoTest, data(8)),
			want: map[string]int64{"InHdrErrors": 1, "InMartians": 1}},
		{name: "from an IPv4-mapped address", dg: whole(t, netip.MustParseAddr("::ffff:10.0.0.1"), ourAddr, protoTest, data(8)),
			want: map[string]int64{"InHdrErrors": 1, "InMartians": 1}},
		{name: "to an IPv4-mapped address", dg: whole(t, peerAddr, netip.MustParseAddr("::ffff:10.0.0.2"), protoTest, data(8)),
			want: map[string]int64{"InHdrErrors": 1, "InMartians": 1}},
		{name: "to the loopback address on a link", dg: whole(t, peerAddr, netip.IPv6Loopback(), protoTest, data(8)),
			want: map[string]int64{"InAddrErrors": 1}},
		{name: "to another host", dg: whole(t, peerAddr, netip.MustParseAddr("2001:db8:1::99"), protoTest, data(8)),
			want: map[string]int64{"InAddrErrors": 1}},
		{name: "to a tentative address", dg: whole(t, peerAddr, tentative, protoTest, data(8)),
			want: map[string]int64{"InAddrErrors": 1}},
		{name: "to our link-local address on another interface", in: "eth1", dg: whole(t, peerLL, ourLL, protoTest, data(8)),
			want: map[string]int64{"InAddrErrors": 1}},
		{name: "to our link-local address, zoned", dg: whole(t, peerLL, ourLL, protoTest, data(8)),
			want:        map[string]int64{"InDelivers": 1},
			deliveredAs: &ip.Header{Src: peerLL.WithZone("eth0"), Dst: ourLL.WithZone("eth0"), TTL: 64, Off: 40, In: "eth0"}},
		{name: "to all-nodes", dg: whole(t, peerLL, ipv6.AllNodes, protoTest, data(8)),
			want:        map[string]int64{"InDelivers": 1, "InMcastPkts": 1},
			deliveredAs: &ip.Header{Src: peerLL.WithZone("eth0"), Dst: ipv6.AllNodes.WithZone("eth0"), TTL: 64, Off: 40, In: "eth0"}},
		{name: "from the unspecified address to a tentative address's solicited-node group (DAD)",
			dg:          whole(t, netip.IPv6Unspecified(), ipv6.SolicitedNode(tentative), protoTest, data(8)),
			want:        map[string]int64{"InDelivers": 1, "InMcastPkts": 1},
			deliveredAs: &ip.Header{Src: netip.IPv6Unspecified(), Dst: ipv6.SolicitedNode(tentative).WithZone("eth0"), TTL: 64, Off: 40, In: "eth0"}},
		{name: "to a solicited-node group of another interface", in: "eth1", dg: whole(t, peerLL, ipv6.SolicitedNode(ourAddr), protoTest, data(8)),
			want: map[string]int64{"InNoGroup": 1}},
		{name: "to a group not joined", dg: whole(t, peerLL, netip.MustParseAddr("ff02::fb"), protoTest, data(8)),
			want: map[string]int64{"InNoGroup": 1}},
		{name: "to a group joined", dg: whole(t, peerLL, netip.MustParseAddr("ff02::fb"), protoTest, data(8)),
			setup: func(t testing.TB, h *harness) { must(t, h.p.JoinGroup(h.eth0, netip.MustParseAddr("ff02::fb"))) },
			want:  map[string]int64{"InDelivers": 1, "InMcastPkts": 1}},
		{name: "to interface-local all-nodes from a link", dg: whole(t, peerLL, netip.MustParseAddr("ff01::1"), protoTest, data(8)),
			want: map[string]int64{"InNoGroup": 1}},
		{name: "traffic class and hop limit reach the transport",
			dg: func() []byte {
				b := bytes.Clone(ok)
				b[0], b[1], b[7] = 0x6b, 0x80, 3 // traffic class 0xb8 (EF)
				return b
			}(),
			want:        map[string]int64{"InDelivers": 1},
			deliveredAs: &ip.Header{Src: peerAddr, Dst: ourAddr, TOS: 0xb8, TTL: 3, Off: 40, In: "eth0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, ipv6.Config{})
			must(t, h.p.AddAddress(h.eth0, netip.PrefixFrom(tentative, 64), ipv6.Tentative))
			if tt.setup != nil {
				tt.setup(t, h)
			}
			in := h.eth0
			if tt.in == "eth1" {
				in = h.eth1
			}
			h.inject(t, in, tt.dg)
			checkCounters(t, h.counters(), tt.want)
			got := h.tr.take()
			if tt.want["InDelivers"] == 0 {
				if len(got) != 0 {
					t.Errorf("delivered %d datagrams, want none", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("delivered %d datagrams, want 1", len(got))
			}
			if tt.deliveredAs != nil && got[0].h != *tt.deliveredAs {
				t.Errorf("header %+v, want %+v", got[0].h, *tt.deliveredAs)
			}
			if n := wire.IPv6HeaderLen + int(tt.dg[4])<<8 + int(tt.dg[5]); !bytes.Equal(got[0].b, tt.dg[:n]) {
				t.Errorf("delivered bytes differ from the datagram's %d", n)
			}
			if errs := h.icmp.take(); len(errs) != 0 {
				t.Errorf("asked for errors %+v", errs)
			}
		})
	}
}

// The extension header chain decides: deliver past it, drop, or answer
// with Parameter Problem pointing where RFC 8200 section 4 says, within
// RFC 4443 section 2.4 (e).
func TestExtensionChainsAreDeliveredOrAnswered(t *testing.T) {
	const unknown = 200
	tests := []struct {
		name    string
		src     netip.Addr
		dst     netip.Addr
		next    uint8
		parts   [][]byte
		counter string // the drop counter; "" when delivered
		off     int    // where the transport header is, when delivered
		// err is the Parameter Problem asked for: code and pointer.
		err *[2]int
	}{
		{name: "destination options before the upper layer", next: wire.ProtoDestOpts,
			parts: [][]byte{padded(protoTest), udp8}, off: 48},
		{name: "hop-by-hop, destination options, routing with no segments left", next: wire.ProtoHopByHop,
			parts: [][]byte{padded(wire.ProtoDestOpts), padded(wire.ProtoRouting), routing(protoTest, 4, 0), udp8}, off: 64},
		{name: "routing type 0 with segments left (RFC 5095)", next: wire.ProtoRouting,
			parts: [][]byte{routing(protoTest, 0, 1), udp8}, counter: "InUnknownRouting", err: &[2]int{0, 42}},
		{name: "unknown option, action skip", next: wire.ProtoDestOpts,
			parts: [][]byte{options(protoTest, 0x1e), udp8}, off: 48},
		{name: "unknown option, action discard", next: wire.ProtoDestOpts,
			parts: [][]byte{options(protoTest, 0x5e), udp8}, counter: "InUnknownOptions"},
		{name: "unknown option, action discard and answer", next: wire.ProtoDestOpts,
			parts: [][]byte{options(protoTest, 0x9e), udp8}, counter: "InUnknownOptions", err: &[2]int{2, 42}},
		{name: "unknown option, action 10, to all-nodes: answered (RFC 4443 2.4 e.3)", dst: ipv6.AllNodes, next: wire.ProtoDestOpts,
			parts: [][]byte{options(protoTest, 0x9e), udp8}, counter: "InUnknownOptions", err: &[2]int{2, 42}},
		{name: "unknown option, action 11, to all-nodes: dropped silently", dst: ipv6.AllNodes, next: wire.ProtoDestOpts,
			parts: [][]byte{options(protoTest, 0xde), udp8}, counter: "InUnknownOptions"},
		{name: "hop-by-hop not first", next: wire.ProtoDestOpts,
			parts: [][]byte{padded(wire.ProtoHopByHop), padded(protoTest), udp8}, counter: "InHopByHopNotFirst", err: &[2]int{1, 40}},
		{name: "unknown upper layer", next: unknown,
			parts: [][]byte{udp8}, counter: "InUnknownProtos", err: &[2]int{1, 6}},
		{name: "unknown upper layer after an extension header", next: wire.ProtoDestOpts,
			parts: [][]byte{padded(unknown), udp8}, counter: "InUnknownProtos", err: &[2]int{1, 40}},
		{name: "unknown upper layer to all-nodes: no error (RFC 4443 2.4 e.3)", dst: ipv6.AllNodes, next: unknown,
			parts: [][]byte{udp8}, counter: "InUnknownProtos"},
		{name: "unknown upper layer from the unspecified address: no error (RFC 4443 2.4 e.6)", src: netip.IPv6Unspecified(), next: unknown,
			parts: [][]byte{udp8}, counter: "InUnknownProtos"},
		{name: "no next header", next: wire.ProtoDestOpts,
			parts: [][]byte{padded(wire.ProtoNoNext)}, counter: "InNoNextHeader"},
		{name: "extension header truncated", next: wire.ProtoDestOpts,
			parts: [][]byte{padded(protoTest)[:6]}, counter: "InExtTruncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, ipv6.Config{})
			src, dst := tt.src, tt.dst
			if !src.IsValid() {
				src = peerAddr
			}
			if !dst.IsValid() {
				dst = ourAddr
			}
			var payload []byte
			for _, p := range tt.parts {
				payload = append(payload, p...)
			}
			dg := whole(t, src, dst, tt.next, payload)
			h.inject(t, h.eth0, dg)
			c := h.counters()
			got := h.tr.take()
			errs := h.icmp.take()
			if tt.counter == "" {
				if len(got) != 1 || got[0].h.Off != tt.off {
					t.Fatalf("delivered %+v, want one datagram with the transport at %d", got, tt.off)
				}
				checkCounters(t, c, map[string]int64{"InDelivers": 1})
				return
			}
			if len(got) != 0 {
				t.Errorf("delivered %d datagrams, want none", len(got))
			}
			if c[tt.counter] != 1 {
				t.Errorf("%s = %d, want 1", tt.counter, c[tt.counter])
			}
			if tt.err == nil {
				if len(errs) != 0 {
					t.Errorf("asked for %+v, want no error", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("asked for %d errors, want 1", len(errs))
			}
			e := errs[0]
			if e.Type != wire.ICMPv6ParamProblem || int(e.Code) != tt.err[0] || int(e.Param) != tt.err[1] {
				t.Errorf("error type %d code %d pointer %d, want Parameter Problem code %d pointer %d", e.Type, e.Code, e.Param, tt.err[0], tt.err[1])
			}
			if !bytes.Equal(e.Orig, dg) || e.In != h.eth0 {
				t.Errorf("error quotes %d bytes from %v, want the datagram from eth0", len(e.Orig), e.In)
			}
		})
	}
}

func TestLinkScopedErrorsSuppressedCounted(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	h.inject(t, h.eth0, whole(t, peerLL, ipv6.AllNodes, 200, udp8))
	if c := h.counters(); c["ErrorsSuppressed"] != 1 || c["InUnknownProtos"] != 1 {
		t.Errorf("ErrorsSuppressed = %d, InUnknownProtos = %d, want 1 and 1", c["ErrorsSuppressed"], c["InUnknownProtos"])
	}
}
