package ipv4_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/wire"
)

// Forwarding interfaces (forward.go): which destinations one takes, and
// which source addresses the stack may send from.

func TestForwardingInterfaceTakesForeignUnicastOnly(t *testing.T) {
	for _, tc := range []struct {
		dst     string
		foreign bool // taken as foreign; else refused as not ours
	}{
		{"192.0.2.1", true},
		{"8.8.8.8", true},
		{"10.1.0.77", true}, // on our subnet but not ours: a guest's neighbour
		{"0.1.2.3", false},  // "this network", RFC 1812 5.3.7
		{"127.0.0.1", false},
		{"169.254.1.1", false}, // link-local, RFC 3927 2.7
		{"224.0.0.251", false},
		{"240.0.0.1", false},
	} {
		t.Run(tc.dst, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			if err := h.S.SetForwarding(rawtest.NIC, true); err != nil {
				t.Fatal(err)
			}
			dst := netip.AddrPortFrom(netip.MustParseAddr(tc.dst), 9)
			h.Inject(h.UDPFrame(t, netip.AddrPortFrom(rawtest.PeerAddr, 9), dst, []byte("x")))
			h.Barrier(t)
			foreign, refused := h.Counter(t, "IPv4.InForeign"), h.Counter(t, "IPv4.InAddrErrors")+h.Counter(t, "IPv4.InNoGroup")
			if tc.foreign && (foreign != 1 || refused != 0) || !tc.foreign && (foreign != 0 || refused != 1) {
				t.Errorf("InForeign = %d, InAddrErrors = %d; want foreign %v", foreign, refused, tc.foreign)
			}
		})
	}
}

func TestForwardingInterfaceKeepsBroadcastsAsTheHosts(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	if err := h.S.SetForwarding(rawtest.NIC, true); err != nil {
		t.Fatal(err)
	}
	c, err := h.S.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 9))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h.Inject(h.UDPFrame(t, netip.AddrPortFrom(rawtest.PeerAddr, 9), netip.AddrPortFrom(rawtest.SubnetBroadcast, 9), []byte("x")))
	h.Barrier(t)
	if n := h.Counter(t, "IPv4.InForeign"); n != 0 {
		t.Errorf("IPv4.InForeign = %d for our subnet's broadcast, want 0", n)
	}
	if n := h.Counter(t, "UDP.InDatagrams"); n != 1 {
		t.Errorf("UDP.InDatagrams = %d, want the broadcast delivered", n)
	}
}

func TestForeignSourceLeavesOnlyAForwardingInterface(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	v4 := h.S.IPv4()
	foreign := netip.MustParseAddr("192.0.2.1")
	send := func() error {
		pk := h.S.Pool().Get(wire.UDPHeaderLen)
		wire.EncodeUDP(pk.Bytes(), &wire.UDPFields{SrcPort: 9, DstPort: 9})
		wire.SetUDPChecksum(pk.Bytes(), foreign, rawtest.PeerAddr)
		return v4.Send(pk, ip.SendParams{Src: foreign, Dst: rawtest.PeerAddr, Proto: wire.ProtoUDP})
	}
	if err := send(); !errors.Is(err, ipv4.ErrForeignSource) {
		t.Errorf("Send from %v on a NIC that does not forward: %v, want ErrForeignSource", foreign, err)
	}
	if n := h.Counter(t, "IPv4.OutSrcDenied"); n != 1 {
		t.Errorf("IPv4.OutSrcDenied = %d, want 1", n)
	}
	h.ExpectNothing(t)
	if err := h.S.SetForwarding(rawtest.NIC, true); err != nil {
		t.Fatal(err)
	}
	if err := send(); err != nil {
		t.Fatalf("Send from %v on a forwarding NIC: %v", foreign, err)
	}
	f, _ := rawtest.UDPOf(t, h.Expect(t, rawtest.Timeout))
	if rawtest.Addr(f.SrcIP) != foreign || f.Protocol != layers.IPProtocolUDP {
		t.Errorf("sent from %v, want %v", f.SrcIP, foreign)
	}
	if n := h.Counter(t, "IPv4.OutForeign"); n != 1 {
		t.Errorf("IPv4.OutForeign = %d, want 1", n)
	}
}
