package ipv6_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
)

// Forwarding interfaces (forward.go): which destinations one takes, and
// which source addresses the stack may send from.

func TestForwardingInterfaceTakesForeignUnicastOfMoreThanLinkScope(t *testing.T) {
	for _, tc := range []struct {
		dst     string
		foreign bool // taken as foreign; else refused as not ours
	}{
		{"2001:db8:9::9", true},
		{"2001:db8:1::77", true}, // in our prefix, not ours: a guest's neighbour
		{"fd00::1", true},
		{"fe80::77", false}, // link-local, RFC 4291 2.5.6
		{"::1", false},
		{"::", false},
	} {
		t.Run(tc.dst, func(t *testing.T) {
			h := newHarness(t, ipv6.Config{})
			h.eth0.SetForwarding(true)
			h.inject(t, h.eth0, whole(t, peerAddr, netip.MustParseAddr(tc.dst), protoTest, data(8)))
			c := h.counters()
			delivered := len(h.tr.take())
			switch {
			case tc.foreign && (c["InForeign"] != 1 || delivered != 1):
				t.Errorf("InForeign = %d, delivered %d; want it taken", c["InForeign"], delivered)
			case !tc.foreign && (c["InForeign"] != 0 || delivered != 0):
				t.Errorf("InForeign = %d, delivered %d; want it refused", c["InForeign"], delivered)
			}
		})
	}
}

func TestInterfaceNotForwardingRefusesForeignUnicast(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	h.inject(t, h.eth0, whole(t, peerAddr, farAddr, protoTest, data(8)))
	if c := h.counters(); c["InAddrErrors"] != 1 || c["InForeign"] != 0 || len(h.tr.take()) != 0 {
		t.Errorf("InAddrErrors = %d, InForeign = %d; want it refused as not ours", c["InAddrErrors"], c["InForeign"])
	}
}

func TestForeignSourceLeavesOnlyAForwardingInterface(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	sp := ip.SendParams{Src: farAddr, Dst: peerAddr, Proto: protoTest}
	if err := h.send(t, data(8), sp); !errors.Is(err, ipv6.ErrNoSource) {
		t.Fatalf("from a foreign source out of a host's interface: %v, want ErrNoSource", err)
	}
	h.eth0.SetForwarding(true)
	if err := h.send(t, data(8), sp); err != nil {
		t.Fatalf("from a foreign source out of a forwarding interface: %v", err)
	}
	out := h.takeSent()
	if len(out) != 1 || out[0].iface != "eth0" {
		t.Fatalf("sent %v, want one datagram on eth0", out)
	}
	if c := h.counters(); c["OutForeign"] != 1 {
		t.Errorf("OutForeign = %d, want 1", c["OutForeign"])
	}
	if !h.p.IsHostDst(ourAddr) || h.p.IsHostDst(farAddr) {
		t.Error("IsHostDst: want the host's own address only, not the foreign one")
	}
}
