package stack_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

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
