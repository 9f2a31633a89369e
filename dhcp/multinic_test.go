package dhcp_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
)

// A host with two NICs runs a client on each, both on port 68, each
// leased by the server on its own link (a GoNet stack serving a subnet of
// its own): a client hears its NIC's server alone.
func TestAClientOnEachNIC(t *testing.T) {
	host := stack.New(stack.Config{NoIPv6: true})
	defer stacktest.Closed(t, host)
	want := map[string]netip.Prefix{}
	for i, nic := range []string{"eth0", "eth1"} {
		network := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(10 + i), 0}), 24)
		server := stack.New(stack.Config{NoIPv6: true})
		defer stacktest.Closed(t, server)
		toServer, toHost := pipe.New(1500, net.HardwareAddr{2, 0, 0, 0, byte(i), 1}, net.HardwareAddr{2, 0, 0, 0, byte(i), 2})
		if err := server.AddNIC("eth0", toServer); err != nil {
			t.Fatal(err)
		}
		if err := host.AddNIC(nic, toHost); err != nil {
			t.Fatal(err)
		}
		srvAddr := netip.PrefixFrom(network.Addr().Next().Next(), 24)
		if err := server.AddAddress("eth0", srvAddr); err != nil {
			t.Fatal(err)
		}
		first := netip.AddrFrom4([4]byte{10, 0, byte(10 + i), 100})
		srv, err := dhcp.NewServer(dhcp.Config{Network: network, Server: srvAddr.Addr(), FirstLease: first, PoolSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		c, err := server.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), dhcp.ServerPort))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(c) }()
		defer func() { c.Close(); <-done }()
		want[nic] = netip.PrefixFrom(first, 24)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clients := map[string]*dhcp.Client{}
	for nic := range want {
		c, err := dhcp.StartOn(ctx, host, nic, dhcp.ClientConfig{NoProbe: true, NoDNS: true})
		if err != nil {
			t.Fatalf("client on %s: %v", nic, err)
		}
		defer c.Close()
		clients[nic] = c
	}
	for nic, c := range clients {
		for {
			if l, ok := c.Lease(); ok {
				if l.Addr != want[nic] {
					t.Errorf("the client on %s leased %v, want %v from its own server", nic, l.Addr, want[nic])
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the client on %s got no lease (state %v)", nic, c.State())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
