package udp_test

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
)

// A connected endpoint's Read fails with ECONNREFUSED once its peer's
// stack answers a datagram with port unreachable (RFC 1122 section
// 4.1.3.3), over either family, and the error is reported once; an
// unconnected endpoint's reads are not failed by errors about one of its
// peers.
func TestPortUnreachableRefusesAConnectedEndpointsRead(t *testing.T) {
	for _, c := range []struct {
		name     string
		src, dst netip.Addr
	}{
		{"IPv4", stacktest.AddrA.Addr(), stacktest.AddrB.Addr()},
		{"IPv6", stacktest.AddrA6.Addr(), stacktest.AddrB6.Addr()},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := stacktest.Pair(t, stacktest.Options{IPv6: true})
			conn, err := a.DialUDP(netip.AddrPortFrom(c.dst, 9))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte("anyone?")); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 64)
			if _, err := conn.Read(buf); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("read after port unreachable: %v, want ECONNREFUSED", err)
			}
			// Reported once: a datagram from the peer reads after it.
			echo, err := b.ListenUDP(netip.AddrPortFrom(c.dst, 9))
			if err != nil {
				t.Fatal(err)
			}
			defer echo.Close()
			if _, err := echo.WriteToUDPAddrPort([]byte("here"), netip.AddrPortFrom(c.src, conn.LocalAddrPort().Port())); err != nil {
				t.Fatal(err)
			}
			if n, err := conn.Read(buf); err != nil || string(buf[:n]) != "here" {
				t.Fatalf("read after the error: %q, %v; want the peer's datagram", buf[:n], err)
			}
			if got := a.Counters()["UDP.InICMPErrors"]; got != 1 {
				t.Errorf("UDP.InICMPErrors = %d, want 1", got)
			}
		})
	}
}

// An unconnected endpoint is not told: its other peers' datagrams still
// read, and the error is counted as taken by no connected endpoint.
func TestPortUnreachableLeavesAnUnconnectedEndpointAlone(t *testing.T) {
	a, _ := stacktest.Pair(t, stacktest.Options{})
	conn, err := a.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.WriteToUDPAddrPort([]byte("anyone?"), netip.AddrPortFrom(stacktest.AddrB.Addr(), 9)); err != nil {
		t.Fatal(err)
	}
	waitCounter(t, a, "UDP.ICMPNoConnected", 1)
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, _, err := conn.ReadFromUDPAddrPort(make([]byte, 64)); errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("an unconnected endpoint's read failed with %v", err)
	}
}

func waitCounter(t *testing.T, s *stack.Stack, name string, want int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if s.Counters()[name] >= want {
			return
		}
	}
	t.Fatalf("%s = %d, want %d", name, s.Counters()[name], want)
}
