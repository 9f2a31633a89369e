package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// freePort returns a loopback port nothing listens on, for proto.
func freePort(t *testing.T, proto Proto) uint16 {
	t.Helper()
	var a net.Addr
	switch proto {
	case TCP:
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a = l.Addr()
		l.Close()
		return uint16(a.(*net.TCPAddr).Port)
	default:
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		a = c.LocalAddr()
		c.Close()
		return uint16(a.(*net.UDPAddr).Port)
	}
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
	var g net.PacketConn
	if err := r.guest.Do(func() (err error) { g, err = net.ListenPacket("udp4", ":53"); return err }); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
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
	f := Forward{Proto: UDP, Host: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), freePort(t, UDP)), GuestPort: 53}
	if err := r.gw.AddForward(f); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(f.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, msg := range []string{"one", "two"} {
		c.Write([]byte(msg))
		b := make([]byte, 128)
		n, err := c.Read(b)
		if want := r.net.Gateway.String() + " " + msg; err != nil || string(b[:n]) != want {
			t.Fatalf("answer: %q, %v; want %q", b[:n], err, want)
		}
	}
	if n := r.gw.Stats.InboundUDP.Load(); n != 1 {
		t.Fatalf("InboundUDP = %d for one client, want 1", n)
	}
}
