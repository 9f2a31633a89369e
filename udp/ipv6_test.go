package udp_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/internal/testkit/v6test"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/udp"
	"github.com/gonetstack/gonet/wire"
)

// UDP over IPv6, on two hosts whose IPv6 layers are joined by v6test's
// link.

func listenOn(t *testing.T, u *udp.Protocol, addr string) *udp.Conn {
	t.Helper()
	c, err := u.Listen(netip.MustParseAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readOne(t *testing.T, c *udp.Conn) ([]byte, netip.AddrPort) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 70000)
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n], from
}

// fragTap counts the IPv6 fragments the link carries, and checks with
// gopacket that every UDP datagram carries a checksum, mandatory over
// IPv6 (RFC 8200 section 8.1).
type fragTap struct {
	mu        sync.Mutex
	frags     int
	noCsum    int
	datagrams int
}

func (f *fragTap) tap(_ bool, b []byte, _ buffer.Offload) {
	p := gopacket.NewPacket(b, layers.LayerTypeIPv6, gopacket.Default)
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.Layer(layers.LayerTypeIPv6Fragment) != nil {
		f.frags++
		return
	}
	if u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); ok {
		f.datagrams++
		if u.Checksum == 0 {
			f.noCsum++
		}
	}
}

func TestUDPOverIPv6Sizes(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		wantFrags bool
	}{
		{"one byte", 1, false},
		{"fills the MTU: 1500 - 40 - 8", 1452, false},
		{"one byte over, fragmented", 1453, true},
		{"30000 bytes, fragmented and reassembled", 30000, true},
		// Not MaxPayload6: the reassembled datagram must fit the stack's
		// largest buffer (buffer.MaxSize, 65536 bytes), 48 bytes short.
		{"65000 bytes", 65000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ft fragTap
			a, b := v6test.Pair(t, v6test.Options{Tap: ft.tap})
			srv := listenOn(t, b.UDP, "[::]:53")
			cli := listenOn(t, a.UDP, "[::]:0")
			data := bytes.Repeat([]byte{0x5a, 0xa5, 1}, tt.size/3+1)[:tt.size]
			if _, err := cli.WriteToUDPAddrPort(data, netip.MustParseAddrPort("[2001:db8:1::2]:53")); err != nil {
				t.Fatal(err)
			}
			got, from := readOne(t, srv)
			if !bytes.Equal(got, data) {
				t.Errorf("received %d bytes, not the %d sent", len(got), len(data))
			}
			if want := netip.AddrPortFrom(v6test.AddrA, cli.LocalAddrPort().Port()); from != want {
				t.Errorf("from %v, want %v", from, want)
			}
			ft.mu.Lock()
			defer ft.mu.Unlock()
			if (ft.frags > 0) != tt.wantFrags {
				t.Errorf("%d fragments on the link, want fragments %v", ft.frags, tt.wantFrags)
			}
			if ft.noCsum != 0 {
				t.Errorf("%d datagrams without a checksum", ft.noCsum)
			}
		})
	}
}

func TestUDPOverIPv6TooLong(t *testing.T) {
	a, _ := v6test.Pair(t, v6test.Options{})
	cli := listenOn(t, a.UDP, "[::]:0")
	_, err := cli.WriteToUDPAddrPort(make([]byte, udp.MaxPayload6+1), netip.MustParseAddrPort("[2001:db8:1::2]:53"))
	if !errors.Is(err, syscall.EMSGSIZE) {
		t.Errorf("write %d bytes: %v, want EMSGSIZE", udp.MaxPayload6+1, err)
	}
}

// RFC 8200 section 8.1: "IPv6 receivers must discard UDP packets
// containing a zero checksum", and the drop is counted.
func TestUDPOverIPv6ZeroChecksumDropped(t *testing.T) {
	_, b := v6test.Pair(t, v6test.Options{})
	srv := listenOn(t, b.UDP, "[::]:53")
	for _, csum := range []bool{false, true} {
		ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: 64, SrcIP: v6test.AddrA.AsSlice(), DstIP: v6test.AddrB.AsSlice()}
		u := &layers.UDP{SrcPort: 1000, DstPort: 53}
		u.SetNetworkLayerForChecksum(ip6)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: csum}, ip6, u, gopacket.Payload("hello")); err != nil {
			t.Fatal(err)
		}
		pk := b.Env.Pool.Get(len(buf.Bytes()))
		copy(pk.Bytes(), buf.Bytes())
		batch := buffer.GetBatch()
		batch.Pkts = append(batch.Pkts, pk)
		b.If6.Deliver(batch)
	}
	if err := b.IPv6.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := readOne(t, srv); string(got) != "hello" {
		t.Errorf("read %q", got)
	}
	if got := b.UDP.Stats.InNoChecksum6.Load(); got != 1 {
		t.Errorf("InNoChecksum6 %d, want 1", got)
	}
	if got := b.UDP.Stats.InCsumErrors.Load(); got != 1 {
		t.Errorf("InCsumErrors %d, want 1", got)
	}
	if got := b.UDP.Stats.InDatagrams.Load(); got != 1 {
		t.Errorf("InDatagrams %d: the datagram without a checksum was delivered", got)
	}
}

// A datagram from a link-local address is read with the zone of the
// interface it came in on, and answered through it.
func TestUDPLinkLocalSourceHasItsZone(t *testing.T) {
	a, b := v6test.Pair(t, v6test.Options{})
	srv := listenOn(t, b.UDP, "[::]:53")
	cli := listenOn(t, a.UDP, "[fe80::1%eth0]:0")
	if _, err := cli.WriteToUDPAddrPort([]byte("q"), netip.MustParseAddrPort("[fe80::2%eth0]:53")); err != nil {
		t.Fatal(err)
	}
	_, from := readOne(t, srv)
	if from.Addr() != v6test.LLA.WithZone("eth0") {
		t.Errorf("from %v, want fe80::1%%eth0", from)
	}
	var ua net.Addr
	if _, err := cli.WriteToUDPAddrPort([]byte("q"), netip.MustParseAddrPort("[fe80::2]:53")); err != nil {
		t.Fatal(err)
	}
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, ua, err := srv.ReadFrom(make([]byte, 10))
	if err != nil {
		t.Fatal(err)
	}
	if z := ua.(*net.UDPAddr).Zone; z != "eth0" {
		t.Errorf("ReadFrom's address %v has zone %q, want eth0", ua, z)
	}
	if _, err := srv.WriteTo([]byte("a"), ua); err != nil {
		t.Fatal(err)
	}
	if got, from := readOne(t, cli); string(got) != "a" || from.Addr() != v6test.LLB.WithZone("eth0") {
		t.Errorf("answer %q from %v", got, from)
	}
	if got := cli.LocalAddr().(*net.UDPAddr).Zone; got != "eth0" {
		t.Errorf("local address zone %q", got)
	}
}

// A wildcard endpoint on :: takes both families, its IPv4 peers with plain
// IPv4 addresses; a V6Only one IPv6 alone, beside an IPv4 one on its port.
func TestUDPDualStackAndV6Only(t *testing.T) {
	a, b := v6test.Pair(t, v6test.Options{IPv4: true})
	cli := listenOn(t, a.UDP, "[::]:0")
	srv := listenOn(t, b.UDP, "[::]:53")
	for _, to := range []string{"10.0.0.2:53", "[2001:db8:1::2]:53"} {
		if _, err := cli.WriteToUDPAddrPort([]byte("x"), netip.MustParseAddrPort(to)); err != nil {
			t.Fatal(err)
		}
		_, from := readOne(t, srv)
		if want := netip.MustParseAddrPort(to).Addr().Is4(); from.Addr().Is4() != want || from.Addr().Is4In6() {
			t.Errorf("to %s: from %v", to, from)
		}
	}
	srv.Close()
	v6, err := b.UDP.ListenV6Only(netip.MustParseAddrPort("[::]:53"))
	if err != nil {
		t.Fatal(err)
	}
	defer v6.Close()
	v4 := listenOn(t, b.UDP, "0.0.0.0:53")
	if _, err := b.UDP.Listen(netip.MustParseAddrPort("[::]:53")); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("dual-stack beside udp4 and udp6: %v, want EADDRINUSE", err)
	}
	for _, x := range []struct {
		to string
		c  *udp.Conn
	}{{"10.0.0.2:53", v4}, {"[2001:db8:1::2]:53", v6}} {
		if _, err := cli.WriteToUDPAddrPort([]byte(x.to), netip.MustParseAddrPort(x.to)); err != nil {
			t.Fatal(err)
		}
		if got, _ := readOne(t, x.c); string(got) != x.to {
			t.Errorf("read %q, want %q", got, x.to)
		}
	}
	// An IPv4 endpoint does not send to IPv6, nor the other way.
	if _, err := v4.WriteToUDPAddrPort([]byte("x"), netip.MustParseAddrPort("[2001:db8:1::1]:53")); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("udp4 to IPv6: %v, want EINVAL", err)
	}
	if _, err := v6.WriteToUDPAddrPort([]byte("x"), netip.MustParseAddrPort("10.0.0.1:53")); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("udp6 to IPv4: %v, want EINVAL", err)
	}
}

// errorsSent records the ICMPv6 errors a host's IPv6 layer asks for.
type errorsSent struct {
	mu   sync.Mutex
	errs []ipv6.ICMPError
}

func (e *errorsSent) SendError(x ipv6.ICMPError) {
	x.Orig = bytes.Clone(x.Orig)
	e.mu.Lock()
	e.errs = append(e.errs, x)
	e.mu.Unlock()
}

// RFC 1122 section 4.1.3.1 over IPv6: a datagram to a port nobody bound
// is answered with ICMPv6 Destination Unreachable, code 4 (RFC 4443
// section 3.1), quoting it, out of the interface it came in on.
func TestUDPOverIPv6PortUnreachable(t *testing.T) {
	var sent errorsSent
	a, b := v6test.Pair(t, v6test.Options{ErrorSender: func(h *v6test.Host) ipv6.ErrorSender {
		if h.Addr == v6test.AddrB {
			return &sent
		}
		return nil
	}})
	cli := listenOn(t, a.UDP, "[::]:0")
	if _, err := cli.WriteToUDPAddrPort([]byte("anyone?"), netip.MustParseAddrPort("[2001:db8:1::2]:9")); err != nil {
		t.Fatal(err)
	}
	// The link handed the datagram to B's dealer before the write
	// returned; Sync waits for the dealer to have dealt with it.
	if err := b.IPv6.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent.mu.Lock()
	defer sent.mu.Unlock()
	if len(sent.errs) != 1 {
		t.Fatalf("%d errors, want 1", len(sent.errs))
	}
	e := sent.errs[0]
	if e.Type != wire.ICMPv6DestUnreach || e.Code != wire.ICMPv6CodePortUnreach || e.In != b.If6 {
		t.Errorf("type %d code %d in %v, want port unreachable in eth0", e.Type, e.Code, e.In)
	}
	if e.Orig.Src() != v6test.AddrA || !bytes.HasSuffix(e.Orig, []byte("anyone?")) {
		t.Errorf("the error quotes %x", []byte(e.Orig))
	}
}
