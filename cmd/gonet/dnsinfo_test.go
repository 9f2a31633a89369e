package main

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
)

// TestDNSShowsWhatRoutersAdvertise runs gonet up's host beside a GoNet
// router on an in-memory link, the router advertising a DNS server and a
// search domain (RFC 8106), and reads gonet dns: the resolver has them,
// and says where they came from.
func TestDNSShowsWhatRoutersAdvertise(t *testing.T) {
	useControlDir(t)
	epRouter, epUp := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0x99, 9, 1}, net.HardwareAddr{0x02, 0, 0, 0x99, 9, 2})
	router := stack.New(stack.Config{})
	defer router.Close()
	if err := router.AddNIC("r0", epRouter); err != nil {
		t.Fatal(err)
	}
	// A router answers solicitations, sent to all-routers (RFC 4861
	// section 6.2.6), so the host hears from it at once.
	if err := router.JoinGroup("r0", ipv6.AllRouters); err != nil {
		t.Fatal(err)
	}
	nd, err := router.NeighborDiscovery("r0")
	if err != nil {
		t.Fatal(err)
	}
	err = nd.Advertise(ndp.RouterConfig{DNSServers: []netip.Addr{netip.MustParseAddr("fd00:89::53")}, DNSSearch: []string{"lab.test"}})
	if err != nil {
		t.Fatal(err)
	}
	upOn(t, epUp, "-tap", "d0", "-addr", "10.89.0.2/24")

	want := "# router advertisements on d0: nameserver fd00:89::53; search lab.test\n" +
		"nameserver fd00:89::53\nsearch lab.test\n"
	var stdout string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var code int
		var stderr string
		code, stdout, stderr = runArgs(t, "dns", "-tap", "d0")
		if code != exitOK {
			t.Fatalf("gonet dns: exit %d, stderr %q", code, stderr)
		}
		if stdout == want || time.Now().After(deadline) {
			break
		}
	}
	if stdout != want {
		t.Errorf("gonet dns:\n%s\nwant\n%s", stdout, want)
	}
}

func TestWriteDNSShowsSourcesAsComments(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		name string
		dns  dnsInfo
		want string
	}{
		{"none", dnsInfo{}, "# no DNS servers: names resolve from the static table alone\n"},
		{"by hand, an advertisement waiting", dnsInfo{
			Servers: []netip.AddrPort{ap("10.0.0.53:53"), ap("10.0.0.54:5353")},
			Sources: []dnsSourceInfo{
				{From: "by hand", Servers: []netip.AddrPort{ap("10.0.0.53:53"), ap("10.0.0.54:5353")}, Used: true},
				{From: "router advertisements", NIC: "tap0", Servers: []netip.AddrPort{ap("[fe80::1%tap0]:53")}, Search: []string{"lan"}},
			},
		}, "# by hand: nameserver 10.0.0.53; nameserver 10.0.0.54:5353\n" +
			"# router advertisements on tap0 (not used: set by hand): nameserver fe80::1%tap0; search lan\n" +
			"nameserver 10.0.0.53\nnameserver 10.0.0.54:5353\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			writeDNS(&b, linkInfo{DNS: tt.dns})
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}
