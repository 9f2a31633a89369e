package icmpv6_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/wire"
)

// The echo forwarder (forward.go): an echo request to a foreign address
// goes to the hook, which answers it as it likes, from any goroutine.

var foreign = netip.MustParseAddr("2001:db8:77::7")

func TestEchoToAForeignAddressGoesToTheHookNotAnsweredByTheStack(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	h.inject(t, echo(t, peerAddr, foreign, wire.ICMPv6EchoRequest, 1, 2, data(8)))
	if out := h.net.takeSent(); len(out) != 0 {
		t.Fatalf("sent %d datagrams without a hook; an echo to a foreign address is not the stack's to answer", len(out))
	}
	checkCounters(t, h, map[string]int64{"InEchos": 1, "InEchoForeign": 1, "EchoForwarded": 0, "OutEchoReplies": 0})
}

func TestEchoForwarderRepliesAndErrsAsTheHookDecides(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(r *icmpv6.EchoRequest)
		src    netip.Addr // of what is sent
		typ    uint8
		code   uint8
	}{
		{"a reply comes from the address pinged", func(r *icmpv6.EchoRequest) { r.Reply() }, foreign, wire.ICMPv6EchoReply, 0},
		{"an error comes from the host's address, as a router's", func(r *icmpv6.EchoRequest) {
			r.Error(wire.ICMPv6DestUnreach, wire.ICMPv6CodeAdminProhibited)
		}, ourAddr, wire.ICMPv6DestUnreach, wire.ICMPv6CodeAdminProhibited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			var got *icmpv6.EchoRequest
			h.p.SetEchoForwarder(func(r *icmpv6.EchoRequest) { got = r })
			h.inject(t, echo(t, peerAddr, foreign, wire.ICMPv6EchoRequest, 0x1234, 0x5678, data(100)))
			if got == nil {
				t.Fatal("the hook was not offered the request")
			}
			if got.Src != peerAddr || got.Dst != foreign || got.Ident != 0x1234 || got.Seq != 0x5678 || !bytes.Equal(got.Payload, data(100)) {
				t.Fatalf("request %v > %v ident %#x seq %#x %d bytes; want the datagram's", got.Src, got.Dst, got.Ident, got.Seq, len(got.Payload))
			}
			tc.answer(got)
			out := h.net.takeSent()
			if len(out) != 1 {
				t.Fatalf("sent %d datagrams, want one", len(out))
			}
			d := decode(t, out[0])
			if addr(d.ip.SrcIP) != tc.src || addr(d.ip.DstIP) != peerAddr || d.m.TypeCode.Type() != tc.typ || d.m.TypeCode.Code() != tc.code {
				t.Errorf("sent %v > %v %v; want %v > %v type %d code %d", d.ip.SrcIP, d.ip.DstIP, d.m.TypeCode, tc.src, peerAddr, tc.typ, tc.code)
			}
			if tc.typ == wire.ICMPv6EchoReply && (d.echo == nil || d.echo.Identifier != 0x1234 || d.echo.SeqNumber != 0x5678 || !bytes.Equal(d.body, data(100))) {
				t.Errorf("reply %+v with %d bytes; want the request's identifier, sequence number and data", d.echo, len(d.body))
			}
			checkCounters(t, h, map[string]int64{"InEchoForeign": 1, "EchoForwarded": 1})
		})
	}
}
