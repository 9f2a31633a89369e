package stack_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
)

// TestNICConfigurationComesOffAgain pins the calls a DHCP client makes to
// undo what it configured: the address goes with its routes, a route by
// its destination and gateway, the MTU back to the link's; and the errors
// for what is not there.
func TestNICConfigurationComesOffAgain(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 7}
	ep, peer := pipe.New(1500, mac, net.HardwareAddr{2, 0, 0, 0, 0, 8})
	defer peer.Close()
	s := stack.New(stack.Config{NoIPv6: true})
	defer s.Close()
	if err := s.AddNIC("eth0", ep); err != nil {
		t.Fatal(err)
	}
	if hw, err := s.HardwareAddr("eth0"); err != nil || hw.String() != mac.String() {
		t.Errorf("HardwareAddr = %v, %v; want %v", hw, err, mac)
	}
	a, gw := netip.MustParsePrefix("10.3.0.2/24"), netip.MustParseAddr("10.3.0.1")
	if err := s.AddAddress("eth0", a); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDefaultGateway(gw, "eth0"); err != nil {
		t.Fatal(err)
	}
	if mtu, err := s.SetLinkMTU("eth0", 1400); err != nil || mtu != 1400 {
		t.Errorf("SetLinkMTU(1400) = %d, %v", mtu, err)
	}
	if mtu, _ := s.SetLinkMTU("eth0", 0); mtu != 1500 {
		t.Errorf("SetLinkMTU(0) = %d, want the link's 1500", mtu)
	}
	if !s.RemoveRoute(netip.MustParsePrefix("0.0.0.0/0"), gw, "eth0") || s.RemoveRoute(netip.MustParsePrefix("0.0.0.0/0"), gw, "eth0") {
		t.Error("RemoveRoute does not remove the default route exactly once")
	}
	if err := s.SetDefaultGateway(gw, "eth0"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		nic  string
		addr string
	}{{"eth1", "10.3.0.2"}, {"eth0", "10.3.0.9"}, {"eth0", "fd00::1"}} {
		if err := s.RemoveAddress(bad.nic, netip.MustParseAddr(bad.addr)); err == nil {
			t.Errorf("RemoveAddress(%s, %s) succeeded", bad.nic, bad.addr)
		}
	}
	if err := s.RemoveAddress("eth0", a.Addr()); err != nil {
		t.Fatal(err)
	}
	if r := s.Routes(); len(r) != 0 {
		t.Errorf("routes left with the address gone: %v", r)
	}
	var st struct{ Events stats.Counter }
	st.Events.Inc()
	s.AddStats("Extra.eth0", &st)
	if v := s.Counters()["Extra.eth0.Events"]; v != 1 {
		t.Errorf("AddStats: Extra.eth0.Events = %d, want 1", v)
	}
}
