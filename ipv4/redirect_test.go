package ipv4_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/wire"
)

// ICMP Redirects (RFC 1122 section 3.2.2.2). The stack's default router is
// the peer; a second router, 10.1.0.9, sits on the same subnet.

var (
	router2    = netip.MustParseAddr("10.1.0.9")
	router2MAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x09}
	farHost    = netip.MustParseAddr("198.51.100.7")
)

// redirectFrame is a Redirect from src with code, naming gw for datagrams
// to dst, quoting one the stack sent there.
func redirectFrame(t *testing.T, h *rawtest.Host, src netip.Addr, code uint8, dst, gw netip.Addr) []byte {
	t.Helper()
	quoted := make([]byte, wire.IPv4MinHeaderLen+8)
	wire.EncodeIPv4(quoted, &wire.IPv4Fields{TotalLen: 200, TTL: 63, Protocol: wire.ProtoUDP, Src: rawtest.StackAddr, Dst: dst})
	g := gw.As4()
	rest := uint32(g[0])<<24 | uint32(g[1])<<16 | uint32(g[2])<<8 | uint32(g[3])
	msg := rawtest.ICMPBytes(t, wire.ICMPRedirect, code, rest, quoted)
	return h.IPFrame(t, rawtest.IPv4Header(src, rawtest.StackAddr, layers.IPProtocolICMPv4), rawtest.Payload(msg))
}

// redirectHost returns a stack routing by default through the peer, with
// both routers' MACs known.
func redirectHost(t *testing.T) *rawtest.Host {
	t.Helper()
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	h.Learn(t, router2, router2MAC)
	if err := h.S.AddRoute(netip.MustParsePrefix("0.0.0.0/0"), rawtest.PeerAddr, rawtest.NIC); err != nil {
		t.Fatal(err)
	}
	return h
}

// hostRoute reports whether the stack routes dst through gw by a host
// route.
func hostRoute(h *rawtest.Host, dst, gw netip.Addr) bool {
	for _, r := range h.S.Routes() {
		if r.Dst == netip.PrefixFrom(dst, 32) && r.Gateway == gw {
			return true
		}
	}
	return false
}

// sendsTo sends a datagram from the stack to dst and returns the MAC its
// frame went to.
func sendsTo(t *testing.T, h *rawtest.Host, dst netip.Addr) net.HardwareAddr {
	t.Helper()
	c, err := h.S.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteToUDPAddrPort([]byte("x"), netip.AddrPortFrom(dst, 9)); err != nil {
		t.Fatal(err)
	}
	return net.HardwareAddr(h.Expect(t, rawtest.Timeout)[0:6])
}

func TestRedirectFollowsRFC1122(t *testing.T) {
	tests := []struct {
		name  string
		src   netip.Addr // the Redirect's source
		code  uint8
		dst   netip.Addr
		gw    netip.Addr
		taken bool
	}{
		{"from the first hop: taken", rawtest.PeerAddr, 1, farHost, router2, true},
		{"a network redirect taken for the host", rawtest.PeerAddr, 0, farHost, router2, true},
		{"with TOS", rawtest.PeerAddr, 3, farHost, router2, true},
		{"not from the first hop", netip.MustParseAddr("10.1.0.5"), 1, farHost, router2, false},
		{"a gateway off the subnet", rawtest.PeerAddr, 1, farHost, netip.MustParseAddr("10.2.0.9"), false},
		{"the stack's own address as gateway", rawtest.PeerAddr, 1, farHost, rawtest.StackAddr, false},
		{"the redirecting router as gateway", rawtest.PeerAddr, 1, farHost, rawtest.PeerAddr, false},
		{"a multicast destination", rawtest.PeerAddr, 1, netip.MustParseAddr("239.1.1.1"), router2, false},
		{"an on-link destination", rawtest.PeerAddr, 1, netip.MustParseAddr("10.1.0.77"), router2, false},
		{"a link-local destination, always on the link", netip.MustParseAddr("169.254.9.9"), 1, netip.MustParseAddr("169.254.9.9"), router2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := redirectHost(t)
			h.Inject(redirectFrame(t, h, tt.src, tt.code, tt.dst, tt.gw))
			counter := "IPv4.RedirectsRefused"
			if tt.taken {
				counter = "IPv4.RedirectsTaken"
			}
			h.WaitCounter(t, counter, 1)
			if got := hostRoute(h, tt.dst, tt.gw); got != tt.taken {
				t.Fatalf("host route to %v via %v: %v, want %v", tt.dst, tt.gw, got, tt.taken)
			}
			if !tt.taken || !tt.dst.Is4() || tt.dst.IsMulticast() {
				return
			}
			if mac := sendsTo(t, h, tt.dst); mac.String() != router2MAC.String() {
				t.Fatalf("a datagram to %v went to %v, want the new gateway's %v", tt.dst, mac, router2MAC)
			}
		})
	}
}

// A forwarding interface is a router's, which takes no Redirect, as
// Linux's accept_redirects is off once an interface forwards.
func TestAForwardingInterfaceTakesNoRedirect(t *testing.T) {
	h := redirectHost(t)
	if err := h.S.SetForwarding(rawtest.NIC, true); err != nil {
		t.Fatal(err)
	}
	h.Inject(redirectFrame(t, h, rawtest.PeerAddr, 1, farHost, router2))
	h.WaitCounter(t, "IPv4.RedirectsRefused", 1)
	if hostRoute(h, farHost, router2) {
		t.Fatal("a forwarding interface took a Redirect")
	}
}

func TestARedirectsRouteExpires(t *testing.T) {
	h := redirectHost(t)
	h.Inject(redirectFrame(t, h, rawtest.PeerAddr, 1, farHost, router2))
	h.WaitCounter(t, "IPv4.RedirectsTaken", 1)
	h.Clock.Advance(route.RedirectLifetime + time.Second)
	for deadline := time.Now().Add(rawtest.Timeout); hostRoute(h, farHost, router2); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the redirect's route outlived its lifetime")
		}
	}
}

func TestAMalformedRedirectIsCounted(t *testing.T) {
	h := redirectHost(t)
	h.Inject(redirectFrame(t, h, rawtest.PeerAddr, 4, farHost, router2)) // no code 4
	h.WaitCounter(t, "ICMP.InErrors", 1)
	if hostRoute(h, farHost, router2) {
		t.Fatal("a Redirect of code 4 was taken")
	}
}
