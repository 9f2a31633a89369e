package udp_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/internal/testkit/v6test"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/udp"
)

// readMsg reads one datagram with its packet information, within
// rawtest.Timeout of wall-clock time.
func readMsg(t *testing.T, c *udp.Conn) ([]byte, netip.AddrPort, udp.PacketInfo) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(rawtest.Timeout))
	b := make([]byte, 2048)
	n, from, info, err := c.ReadMsg(b)
	if err != nil {
		t.Fatalf("ReadMsg: %v", err)
	}
	return b[:n], from, info
}

// A wildcard endpoint learns which of the host's addresses each datagram
// was sent to, a broadcast included, and the interface it came in on once
// it asks for that (IP_PKTINFO).
func TestReadMsgTellsWhereADatagramWasSent(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	if err := h.S.AddAddress(rawtest.NIC, netip.PrefixFrom(second, 24)); err != nil {
		t.Fatal(err)
	}
	c := listen(t, h, anyAddr, 7)
	tests := []struct {
		name    string
		dst     netip.Addr
		pktinfo bool
		want    udp.PacketInfo
	}{
		{"first address", rawtest.StackAddr, false, udp.PacketInfo{Addr: rawtest.StackAddr}},
		{"second address", second, false, udp.PacketInfo{Addr: second}},
		{"second address with the interface", second, true, udp.PacketInfo{Addr: second, NIC: rawtest.NIC}},
		{"subnet broadcast with the interface", rawtest.SubnetBroadcast, true, udp.PacketInfo{Addr: rawtest.SubnetBroadcast, NIC: rawtest.NIC}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.SetPacketInfo(tt.pktinfo)
			h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(tt.dst, 7), []byte(tt.name)))
			b, from, info := readMsg(t, c)
			if string(b) != tt.name || from != peer || info != tt.want {
				t.Errorf("read %q from %v with %+v, want %q from %v with %+v", b, from, info, tt.name, peer, tt.want)
			}
		})
	}
}

// An answer sent with the request's address as its source leaves from it,
// not from the route's (RFC 1122 section 4.1.3.5).
func TestWriteMsgSendsFromTheAddressGiven(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	if err := h.S.AddAddress(rawtest.NIC, netip.PrefixFrom(second, 24)); err != nil {
		t.Fatal(err)
	}
	h.Expect(t, rawtest.Timeout)
	h.LearnPeer(t)
	c := listen(t, h, anyAddr, 7)
	for _, info := range []udp.PacketInfo{
		{},
		{Addr: second},
		{Addr: rawtest.StackAddr, NIC: rawtest.NIC},
		{NIC: rawtest.NIC},
	} {
		if _, err := c.WriteMsg([]byte("hi"), peer, info); err != nil {
			t.Fatalf("WriteMsg with %+v: %v", info, err)
		}
		ip, u := rawtest.UDPOf(t, h.Expect(t, rawtest.Timeout))
		want := info.Addr
		if !want.IsValid() {
			want = rawtest.StackAddr // the route's source
		}
		if rawtest.Addr(ip.SrcIP) != want || uint16(u.SrcPort) != 7 || rawtest.Addr(ip.DstIP) != peer.Addr() {
			t.Errorf("with %+v: sent %v:%d > %v:%d, want from %v:7", info, ip.SrcIP, u.SrcPort, ip.DstIP, u.DstPort, want)
		}
	}
}

func TestWriteMsgErrors(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 0)
	bound := listen(t, h, anyAddr, 0)
	if err := bound.BindToDevice(rawtest.NIC); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		c    *udp.Conn
		info udp.PacketInfo
		want error
	}{
		{"a source not the host's", c, udp.PacketInfo{Addr: netip.MustParseAddr("10.1.0.9")}, syscall.EINVAL},
		{"a broadcast source", c, udp.PacketInfo{Addr: rawtest.SubnetBroadcast}, syscall.EINVAL},
		{"a group as the source", c, udp.PacketInfo{Addr: netip.MustParseAddr("224.0.0.1")}, syscall.EINVAL},
		{"a source of the other family", c, udp.PacketInfo{Addr: netip.MustParseAddr("fe80::1")}, syscall.EINVAL},
		{"an interface the host has not", c, udp.PacketInfo{NIC: "eth9"}, syscall.ENETUNREACH},
		{"an interface other than the bound one", bound, udp.PacketInfo{NIC: "eth9"}, syscall.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.WriteMsg([]byte("x"), peer, tt.info)
			var oe *net.OpError
			if !errors.Is(err, tt.want) || !errors.As(err, &oe) || oe.Op != "write" {
				t.Errorf("WriteMsg = %v, want *net.OpError wrapping %v", err, tt.want)
			}
		})
	}
	h.ExpectNothing(t)
}

// Over IPv6: a request to the host's second global address is answered
// from it, and one to the link-local address is told with its zone.
func TestPacketInfoOverIPv6(t *testing.T) {
	a, b := v6test.Pair(t, v6test.Options{})
	third := netip.MustParseAddr("2001:db8:1::3")
	if err := b.IPv6.AddAddress(b.If6, netip.PrefixFrom(third, 64), ipv6.Preferred); err != nil {
		t.Fatal(err)
	}
	srv := listenOn(t, b.UDP, "[::]:53")
	srv.SetPacketInfo(true)
	cli := listenOn(t, a.UDP, "[::]:0")
	for _, dst := range []netip.Addr{third, v6test.LLB.WithZone(v6test.IfName)} {
		to := netip.AddrPortFrom(dst, 53)
		if _, err := cli.WriteToUDPAddrPort([]byte("q"), to); err != nil {
			t.Fatal(err)
		}
		_, from, info := readMsg(t, srv)
		if want := (udp.PacketInfo{Addr: dst, NIC: v6test.IfName}); info != want {
			t.Errorf("request to %v told %+v, want %+v", dst, info, want)
		}
		if _, err := srv.WriteMsg([]byte("a"), from, udp.PacketInfo{Addr: info.Addr}); err != nil {
			t.Fatal(err)
		}
		if _, from, _ := readMsg(t, cli); from != to {
			t.Errorf("answer to a request to %v came from %v", to, from)
		}
	}
}

// A relay takes what queued up behind a datagram in one batch, the
// peer's alone, in order, no more than it asked for; the batch costs no
// allocation.
func TestReadDatagramsTakesWhatIsQueued(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 7)
	conn, err := c.Connect(peer)
	if err != nil {
		t.Fatal(err)
	}
	stranger := netip.AddrPortFrom(netip.MustParseAddr("10.1.0.9"), 5353)
	local := netip.AddrPortFrom(rawtest.StackAddr, 7)
	for i, from := range []netip.AddrPort{peer, peer, stranger, peer, peer, peer} {
		h.Inject(h.UDPFrame(t, from, local, []byte{byte('a' + i)}))
	}
	h.WaitCounter(t, "UDP.InDatagrams", 6)
	var got []string
	read := func(max int) {
		t.Helper()
		if err := conn.ReadDatagrams(max, func(payloads [][]byte) {
			var s string
			for _, p := range payloads {
				s += string(p)
			}
			got = append(got, s)
		}); err != nil {
			t.Fatal(err)
		}
	}
	read(2)
	read(udp.MaxBatch + 1)
	if want := []string{"ab", "def"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("batches %q, want %q (the stranger's c left out)", got, want)
	}
	frame := h.UDPFrame(t, peer, local, []byte("x"))
	for range 51 {
		h.Inject(frame)
	}
	h.WaitCounter(t, "UDP.InDatagrams", 6+51)
	took := 0
	count := func(payloads [][]byte) { took += len(payloads) }
	allocs := testing.AllocsPerRun(50, func() {
		if err := conn.ReadDatagrams(1, count); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || took != 51 {
		t.Errorf("%.1f allocations per batch, %d datagrams taken of 51", allocs, took)
	}
}
