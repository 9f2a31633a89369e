package stack_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
)

func TestAddresses6ShowsTheLinkLocalAddressFromTheStart(t *testing.T) {
	a, b := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0, 0x61, 1}, net.HardwareAddr{0x02, 0, 0, 0, 0x61, 2})
	defer b.Close()
	s := stack.New(stack.Config{})
	defer s.Close()
	if err := s.AddNIC("n0", a); err != nil {
		t.Fatal(err)
	}
	addrs, err := s.Addresses6("n0")
	if err != nil {
		t.Fatal(err)
	}
	// EUI-64 of 02:00:00:00:61:01 (RFC 4291 appendix A), tentative
	// until DAD ends (RFC 4862 section 5.4).
	if len(addrs) != 1 || addrs[0].Prefix.String() != "fe80::ff:fe00:6101/64" || addrs[0].State != ndp.Tentative {
		t.Errorf("Addresses6 = %+v, want fe80::ff:fe00:6101/64 tentative", addrs)
	}
	if n, err := s.Neighbors6("n0"); err != nil || len(n) != 0 {
		t.Errorf("Neighbors6 = %v, %v; want an empty cache", n, err)
	}
	if _, err := s.Addresses6("n9"); err == nil {
		t.Error("Addresses6 of a NIC the stack does not have: no error")
	}
}

func TestIPv6InfoSaysSoWithoutIPv6(t *testing.T) {
	a, b := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0, 0x62, 1}, net.HardwareAddr{0x02, 0, 0, 0, 0x62, 2})
	defer b.Close()
	s := stack.New(stack.Config{NoIPv6: true})
	defer s.Close()
	if err := s.AddNIC("n0", a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Addresses6("n0"); !errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Errorf("Addresses6 without IPv6: %v, want EAFNOSUPPORT", err)
	}
	if _, err := s.Neighbors6("n0"); !errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Errorf("Neighbors6 without IPv6: %v, want EAFNOSUPPORT", err)
	}
	if r := s.Routes6(); len(r) != 0 {
		t.Errorf("Routes6 without IPv6: %v, want none", r)
	}
}

// TestPingToANeighbourThatNeverAnswersIsHostUnreachable pins RFC 4861
// section 7.2.2: the datagrams that waited on a resolution that failed
// are answered with ICMPv6 address unreachable, which reaches the ping
// that sent one as EHOSTUNREACH.
func TestPingToANeighbourThatNeverAnswersIsHostUnreachable(t *testing.T) {
	a, b := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0, 0x63, 1}, net.HardwareAddr{0x02, 0, 0, 0, 0x63, 2})
	defer b.Close()
	s := stack.New(stack.Config{NDP: ndp.Config{NoDAD: true, NoRouterSolicitation: true, RetransTimer: 20 * time.Millisecond}})
	defer s.Close()
	if err := s.AddNIC("n0", a); err != nil {
		t.Fatal(err)
	}
	// The link-local address is the IPv6 layer's once ndp has told it,
	// from ndp's own goroutine.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if a := s.IPv6().Addresses(); len(a) == 1 && a[0].State == ipv6.Preferred {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no preferred link-local address after 5 s")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := s.Ping(ctx, netip.MustParseAddr("fe80::99%n0"), 56)
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("ping to a neighbour that never answers: %v, want EHOSTUNREACH", err)
	}
	// Three solicitations 20 ms apart, not the ping's own timeout.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the error took %v", d)
	}
	c := s.Counters()
	if c["ICMPv6.OutDestUnreachs"] != 1 || c["ICMPv6.InDestUnreachs"] != 1 {
		t.Errorf("ICMPv6 OutDestUnreachs %d, InDestUnreachs %d; want the error sent and received once",
			c["ICMPv6.OutDestUnreachs"], c["ICMPv6.InDestUnreachs"])
	}
}
