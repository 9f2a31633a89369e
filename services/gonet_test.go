package services

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
)

// On GoNet, whose UDP endpoints tell where a datagram was sent, a service
// on the wildcard address of a host with two addresses on the subnet
// answers a request to the second from the second (RFC 1122 section
// 4.1.3.5): from the route's source, the first, a client connected to the
// second would drop the answer as another peer's, and wait for ever.
func TestUDPServicesAnswerFromTheAddressAsked(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	second := netip.MustParseAddr("10.0.0.3")
	if err := b.AddAddress("eth0", netip.PrefixFrom(second, 24)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, svc := range Known() {
		if svc.ServeUDP == nil || svc.Name == "discard" {
			continue
		}
		t.Run(svc.Name, func(t *testing.T) {
			conn, err := b.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), svc.Port))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- svc.ServeUDP(ctx, conn) }()
			t.Cleanup(func() { conn.Close(); <-done })
			for _, dst := range []netip.Addr{stacktest.AddrB.Addr(), second} {
				c, err := a.DialUDP(netip.AddrPortFrom(dst, svc.Port))
				if err != nil {
					t.Fatal(err)
				}
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write([]byte("request")); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Read(make([]byte, maxDatagram)); err != nil {
					t.Errorf("no answer to a request to %v: %v", dst, err)
				}
				c.Close()
			}
		})
	}
}
