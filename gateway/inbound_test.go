package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freePort returns a port nothing listens on at 127.0.0.1, for proto.
func freePort(t *testing.T, proto Proto) uint16 {
	return freePortOn(t, proto, netip.MustParseAddr("127.0.0.1"))
}

// freePortOn returns a port nothing listens on at addr, for proto.
func freePortOn(t *testing.T, proto Proto, addr netip.Addr) uint16 {
	t.Helper()
	var a net.Addr
	switch proto {
	case TCP:
		l, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		if err != nil {
			t.Fatal(err)
		}
		a = l.Addr()
		l.Close()
	default:
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		if err != nil {
			t.Fatal(err)
		}
		a = c.LocalAddr()
		c.Close()
	}
	return uint16(netip.MustParseAddrPort(a.String()).Port())
}

func TestInboundForwardTCP(t *testing.T) {
	r := newGatewayRig(t, Config{})
	// The guest serves echo on port 80 and says whom it saw.
	var l net.Listener
	if err := r.guest.Do(func() (err error) { l, err = net.Listen("tcp4", ":80"); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peers := make(chan string, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			peers <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	f := Forward{Proto: TCP, Host: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), freePort(t, TCP)), GuestPort: 80}
	if err := r.gw.AddForward(f); err != nil {
		t.Fatal(err)
	}
	if err := r.gw.AddForward(f); err == nil {
		t.Fatal("the same host address forwarded twice")
	}
	c, err := net.DialTimeout("tcp4", f.Host.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	data := bytes.Repeat([]byte("inbound "), 50_000)
	go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("echoed %d of %d bytes: %v", len(got), len(data), err)
	}
	if p := <-peers; p != r.net.Gateway.String() {
		t.Fatalf("the guest saw the connection come from %s, want %s", p, r.net.Gateway)
	}
	if fw := r.gw.Forwards(); len(fw) != 1 || fw[0] != f {
		t.Fatalf("Forwards = %v, want [%v]", fw, f)
	}
	if err := r.gw.RemoveForward(f); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp4", f.Host.String(), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after RemoveForward: %v, want ECONNREFUSED", err)
	}
}

func TestInboundForwardUDP(t *testing.T) {
	r := newGatewayRig(t, Config{})
	r.guestUDPEcho(t, "udp4", ":53")
	f := Forward{Proto: UDP, Host: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), freePort(t, UDP)), GuestPort: 53}
	if err := r.gw.AddForward(f); err != nil {
		t.Fatal(err)
	}
	exchangeViaForward(t, f, r.net.Gateway)
	if n := r.gw.Stats.InboundUDP.Load(); n != 1 {
		t.Fatalf("InboundUDP = %d for one client, want 1", n)
	}
}

// TestInboundForwardAcrossFamilies carries a host connection to the guest
// in every pairing of the host's family and the guest's: the host socket
// takes its address's family, and the flow arrives from the gateway's
// address in the guest address's.
func TestInboundForwardAcrossFamilies(t *testing.T) {
	r := newGatewayRig6(t, Config{})
	// The guest serves echo on port 80 over both families and says whom
	// it saw.
	var l net.Listener
	if err := r.guest.Do(func() (err error) { l, err = net.Listen("tcp", ":80"); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peers := make(chan netip.Addr, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			peers <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	loop4, loop6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	tests := []struct {
		name        string
		host, guest netip.Addr
		wantFrom    netip.Addr
	}{
		{"IPv6 host to the guest's IPv4", loop6, netip.Addr{}, r.net.Gateway},
		{"IPv4 host to the guest's IPv6", loop4, r.guest6, r.gw.cfg.Network6.Gateway},
		{"IPv6 host to the guest's IPv6", loop6, r.guest6, r.gw.cfg.Network6.Gateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Forward{Proto: TCP, Host: netip.AddrPortFrom(tt.host, freePortOn(t, TCP, tt.host)), Guest: tt.guest, GuestPort: 80}
			if err := r.gw.AddForward(f); err != nil {
				t.Fatal(err)
			}
			defer r.gw.RemoveForward(f)
			c, err := net.DialTimeout("tcp", f.Host.String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			echoesToTheFIN(t, c, bytes.Repeat([]byte("inbound "), 50_000), 10*time.Second)
			if p := <-peers; p != tt.wantFrom {
				t.Fatalf("the guest saw the connection come from %v, want %v", p, tt.wantFrom)
			}
		})
	}
}

// An inbound UDP flow is kept alive by either side's datagrams, as
// conntrack's entry: a client that streams to a guest that never answers
// keeps one flow, and so one source port in the guest's eyes, however long
// it sends; once nothing comes either way for UDPTimeout the flow ends, and
// the client's next datagram opens another.
func TestInboundUDPFlowLivesWhileTheClientSends(t *testing.T) {
	const timeout = 300 * time.Millisecond
	r := newGatewayRig(t, Config{UDPTimeout: timeout, UDPStreamTimeout: 2 * timeout})
	var sink net.PacketConn
	if err := r.guest.Do(func() (err error) { sink, err = net.ListenPacket("udp4", ":514"); return err }); err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sources := make(chan netip.AddrPort, 100)
	go func() {
		b := make([]byte, 2048)
		for {
			_, from, err := sink.ReadFrom(b)
			if err != nil {
				close(sources)
				return
			}
			sources <- from.(*net.UDPAddr).AddrPort()
		}
	}()
	f := Forward{Proto: UDP, Host: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), freePort(t, UDP)), GuestPort: 514}
	if err := r.gw.AddForward(f); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(f.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next := func() netip.AddrPort {
		t.Helper()
		if _, err := c.Write([]byte("log line")); err != nil {
			t.Fatal(err)
		}
		select {
		case from := <-sources:
			return from
		case <-time.After(5 * time.Second):
			t.Fatal("the guest received nothing")
			return netip.AddrPort{}
		}
	}
	// Three timeouts' worth of datagrams, a third of one apart.
	first := next()
	for range 9 {
		time.Sleep(timeout / 3)
		if from := next(); from != first {
			t.Fatalf("the guest saw the stream come from %v after %v: the flow ended while the client sent", from, first)
		}
	}
	if n := r.gw.Stats.InboundUDP.Load(); n != 1 {
		t.Fatalf("InboundUDP = %d for one client streaming, want 1", n)
	}
	// Idle both ways: the flow ends, counted, and the next datagram
	// opens another.
	deadline := time.Now().Add(5 * time.Second)
	for r.gw.Stats.UDPIdleExpired.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle flow did not end")
		}
		time.Sleep(timeout / 10)
	}
	next()
	if n := r.gw.Stats.InboundUDP.Load(); n != 2 {
		t.Fatalf("InboundUDP = %d after the flow idled out and the client sent again, want 2", n)
	}
}

func TestInboundForwardUDPToTheGuestsIPv6(t *testing.T) {
	r := newGatewayRig6(t, Config{})
	r.guestUDPEcho(t, "udp6", "[::]:53")
	loop6 := netip.MustParseAddr("::1")
	f := Forward{Proto: UDP, Host: netip.AddrPortFrom(loop6, freePortOn(t, UDP, loop6)), Guest: r.guest6, GuestPort: 53}
	if err := r.gw.AddForward(f); err != nil {
		t.Fatal(err)
	}
	exchangeViaForward(t, f, r.gw.cfg.Network6.Gateway)
}

// TestForwardGuestAddressMustBeAGuests pins which guest addresses a
// forward may name: one of the guest's subnet or prefix, not the
// gateway's own, and IPv6 only while the gateway's IPv6 is on.
func TestForwardGuestAddressMustBeAGuests(t *testing.T) {
	n, err := NewNetwork(DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	n6, err := NewNetwork6(DefaultPrefix6)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		guest  string
		noIPv6 bool
		want   string // the error's telling part, or "" for none
	}{
		{"", false, ""},
		{"10.0.2.101", false, ""},
		{"fd00::100", false, ""},
		{"10.0.3.1", false, "not a guest's in 10.0.2.0/24"},
		{"10.0.2.0", false, "not a guest's"},
		{"10.0.2.255", false, "not a guest's"},
		{"10.0.2.2", false, "not a guest's"},
		{"10.0.2.3", false, "not a guest's"},
		{"fd01::1", false, "not a guest's in fd00::/64"},
		{"fd00::", false, "not a guest's"},
		{"fd00::2", false, "not a guest's"},
		{"fd00::3", false, "not a guest's"},
		{"fd00::100", true, "IPv6 is off"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s noIPv6=%v", tt.guest, tt.noIPv6), func(t *testing.T) {
			g := &Gateway{cfg: Config{Network: n, Network6: n6, NoIPv6: tt.noIPv6}}
			f := Forward{Proto: TCP, GuestPort: 80}
			if tt.guest != "" {
				f.Guest = netip.MustParseAddr(tt.guest)
			}
			guest, from, err := g.inboundEnds(f)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("inboundEnds: %v", err)
			case tt.want == "" && (guest.Addr().Is4() != from.Addr().Is4() || guest.Port() != 80):
				t.Fatalf("inboundEnds = %v from %v: the families differ", guest, from)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("inboundEnds = %v, %v, %v; want an error about %q", guest, from, err, tt.want)
			}
		})
	}
}

// guestUDPEcho serves UDP on network's address in the guest until the test
// ends, answering each datagram with it behind its source's address and a
// space: whom the guest saw.
func (r *gatewayRig) guestUDPEcho(t *testing.T, network, address string) {
	t.Helper()
	var g net.PacketConn
	if err := r.guest.Do(func() (err error) { g, err = net.ListenPacket(network, address); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := g.ReadFrom(b)
			if err != nil {
				return
			}
			g.WriteTo(append([]byte(from.(*net.UDPAddr).IP.String()+" "), b[:n]...), from)
		}
	}()
}

// exchangeViaForward sends two datagrams to UDP forward f's host address
// and checks that each comes back from guestUDPEcho, which saw it come
// from wantFrom.
func exchangeViaForward(t *testing.T, f Forward, wantFrom netip.Addr) {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(f.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, msg := range []string{"one", "two"} {
		c.Write([]byte(msg))
		b := make([]byte, 128)
		n, err := c.Read(b)
		if want := wantFrom.String() + " " + msg; err != nil || string(b[:n]) != want {
			t.Fatalf("answer: %q, %v; want %q", b[:n], err, want)
		}
	}
}
