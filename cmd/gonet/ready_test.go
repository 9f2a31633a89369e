package main

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/ipv4ll"
)

// TestReadyLineOrdersTheAddresses pins the ready line's first address, the
// one scripts read: the lease's, else the IPv4 link-local address, else
// the first -addr; and "(dhcp from SERVER)" only once a lease is held,
// which with -addr ipv4ll it may not be.
func TestReadyLineOrdersTheAddresses(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0, 0, 0x99, 8, 1}
	lease := dhcp.ClientLease{Addr: netip.MustParsePrefix("10.0.0.57/24"), Server: netip.MustParseAddr("10.0.0.1")}
	ll := netip.MustParseAddr("169.254.33.7")
	v6 := []netip.Prefix{netip.MustParsePrefix("fe80::ff:fe99:801/64")}
	tests := []struct {
		name string
		h    *host
		want string
	}{
		{"a lease", &host{nic: "b0", mac: mac, dhcp: &dhcp.Client{}, lease: lease, addrs: v6},
			"gonet: up b0 10.0.0.57/24 02:00:00:99:08:01 fe80::ff:fe99:801/64 (dhcp from 10.0.0.1)"},
		{"a link-local address", &host{nic: "b0", mac: mac, ll: &ipv4ll.Client{}, llAddr: ll, addrs: v6},
			"gonet: up b0 169.254.33.7/16 02:00:00:99:08:01 fe80::ff:fe99:801/64"},
		{"a lease and a link-local address", &host{nic: "b0", mac: mac, dhcp: &dhcp.Client{}, lease: lease, ll: &ipv4ll.Client{}, llAddr: ll},
			"gonet: up b0 10.0.0.57/24 02:00:00:99:08:01 169.254.33.7/16 (dhcp from 10.0.0.1)"},
		{"no lease yet beside a link-local address", &host{nic: "b0", mac: mac, dhcp: &dhcp.Client{}, ll: &ipv4ll.Client{}, llAddr: ll},
			"gonet: up b0 169.254.33.7/16 02:00:00:99:08:01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readyLine(tt.h); got != tt.want {
				t.Errorf("ready line %q, want %q", got, tt.want)
			}
		})
	}
}
