package ipv6_test

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// The layer as transports see it (ip.Network): ReportError maps the
// neutral kinds to RFC 4443's messages, under the layer's own rules.

func TestReportErrorSendsTheICMPv6MessageOfEachKind(t *testing.T) {
	tests := []struct {
		kind      ip.ErrorKind
		typ, code uint8
		param     uint32
	}{
		{ip.NetUnreachable, wire.ICMPv6DestUnreach, wire.ICMPv6CodeNoRoute, 0},
		{ip.HostUnreachable, wire.ICMPv6DestUnreach, wire.ICMPv6CodeAddrUnreach, 0},
		{ip.PortUnreachable, wire.ICMPv6DestUnreach, wire.ICMPv6CodePortUnreach, 0},
		{ip.AdminProhibited, wire.ICMPv6DestUnreach, wire.ICMPv6CodeAdminProhibited, 0},
		{ip.PacketTooBig, wire.ICMPv6PacketTooBig, 0, wire.IPv6MinMTU},
		{ip.TimeExceeded, wire.ICMPv6TimeExceeded, wire.ICMPv6CodeHopLimitExceeded, 0},
		{ip.ReassemblyTimeout, wire.ICMPv6TimeExceeded, wire.ICMPv6CodeReassemblyTime, 0},
		// The pointer names the fixed header's Next Header field (byte 6).
		{ip.ProtoUnreachable, wire.ICMPv6ParamProblem, wire.ICMPv6CodeUnrecognizedNext, 6},
		{ip.ParameterProblem, wire.ICMPv6ParamProblem, wire.ICMPv6CodeErroneousHeader, 0},
	}
	h := newHarness(t, ipv6.Config{})
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			h.p.ReportError(whole(t, peerAddr, ourAddr, protoUDP, data(8)), tt.kind)
			errs := h.icmp.take()
			if len(errs) != 1 {
				t.Fatalf("%d errors sent, want 1", len(errs))
			}
			e := errs[0]
			if e.Type != tt.typ || e.Code != tt.code || e.Param != tt.param || e.In != h.eth0 {
				t.Errorf("type %d code %d param %d in %v, want %d %d %d eth0", e.Type, e.Code, e.Param, e.In, tt.typ, tt.code, tt.param)
			}
		})
	}
}

func TestReportErrorKeepsRFC4443Rules(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	// No error about a datagram to a multicast group (section 2.4 e.3).
	h.p.ReportError(whole(t, peerAddr, ipv6.AllNodes, protoUDP, data(8)), ip.PortUnreachable)
	// None about one from the unspecified address (e.6).
	h.p.ReportError(whole(t, netip.IPv6Unspecified(), ourAddr, protoUDP, data(8)), ip.PortUnreachable)
	if errs := h.icmp.take(); len(errs) != 0 {
		t.Errorf("sent %d errors, want none", len(errs))
	}
	if got := h.counters()["ErrorsSuppressed"]; got != 2 {
		t.Errorf("ErrorsSuppressed %d, want 2", got)
	}
}

func TestNetworkFacts(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	var nw ip.Network = h.p
	if nw.HeaderLen() != 40 {
		t.Errorf("HeaderLen %d, want 40", nw.HeaderLen())
	}
	if nw.IsBroadcast(netip.MustParseAddr("ff02::1")) || nw.IsBroadcast(ourAddr) {
		t.Error("IPv6 has no broadcast")
	}
	if !nw.IsHostDst(ourAddr) || nw.IsHostDst(peerAddr) {
		t.Error("IsHostDst: ours is the host's, the peer's is not")
	}
	r, err := nw.Route(netip.MustParseAddr("fe80::1%eth0"))
	must(t, err)
	if r.Src != ourLL.WithZone("eth0") || r.MTU != mtu || r.Iface != h.eth0 {
		t.Errorf("link-local route: src %v MTU %d iface %v", r.Src, r.MTU, r.Iface)
	}
	r, err = nw.Route(ourAddr)
	must(t, err)
	if !r.Local || r.MTU != 65575 {
		t.Errorf("local route: local %v MTU %d, want true 65575", r.Local, r.MTU)
	}
}
