package dhcp_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
)

// TestStartOnConfiguresTheNIC joins two stacks in memory: one serves
// DHCP on 10.7.0.1, the other has no address and asks for one. The
// client's DISCOVER leaves from 0.0.0.0 and the broadcast replies reach it
// before it has an address; the lease it gets is applied (address, default
// route, MTU) and the hosts then reach each other; Release takes it off
// again. The address is probed for first, with the stack's address
// conflict detection, and defended once assigned.
func TestStartOnConfiguresTheNIC(t *testing.T) {
	epS, epC := pipe.New(1500, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2})
	// The client's probe (RFC 5227) with short timers: no one else is on
	// the pipe.
	fast := arp.ACDConfig{ProbeWait: time.Millisecond, ProbeMin: time.Millisecond, ProbeMax: 2 * time.Millisecond,
		AnnounceWait: time.Millisecond, AnnounceInterval: time.Millisecond}
	srvStack, cl := stack.New(stack.Config{NoIPv6: true}), stack.New(stack.Config{NoIPv6: true, ARP: arp.Config{ACD: fast}})
	t.Cleanup(func() { srvStack.Close(); cl.Close() })
	if err := srvStack.AddNIC("eth0", epS); err != nil {
		t.Fatal(err)
	}
	if err := cl.AddNIC("eth0", epC); err != nil {
		t.Fatal(err)
	}
	serverAddr := netip.MustParseAddr("10.7.0.1")
	if err := srvStack.AddAddress("eth0", netip.PrefixFrom(serverAddr, 24)); err != nil {
		t.Fatal(err)
	}
	cfg := dhcp.ConfigFor(netip.MustParsePrefix("10.7.0.0/24"))
	cfg.Server, cfg.Router, cfg.MTU = serverAddr, serverAddr, 1400
	srv, err := dhcp.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := srvStack.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), dhcp.ServerPort))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(sc)
	t.Cleanup(func() { sc.Close() })

	events := make(chan dhcp.Event, 8)
	c, err := dhcp.StartOn(context.Background(), cl, "eth0", dhcp.ClientConfig{Notify: func(e dhcp.Event) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	var l dhcp.ClientLease
	select {
	case e := <-events:
		if e.Kind != dhcp.LeaseBound {
			t.Fatalf("event %v", e.Kind)
		}
		l = e.Lease
	case <-time.After(10 * time.Second):
		t.Fatalf("no lease; client counters %+v", c.Stats.OutDiscovers.Load())
	}
	want := netip.MustParsePrefix("10.7.0.100/24")
	if l.Addr != want {
		t.Errorf("leased %v, want %v", l.Addr, want)
	}
	var haveDefault bool
	for _, r := range cl.Routes() {
		if r.Dst.Bits() == 0 && r.Gateway == serverAddr {
			haveDefault = true
		}
	}
	if !haveDefault {
		t.Errorf("no default route via %v in %v", serverAddr, cl.Routes())
	}
	if ifc, _ := cl.IPv4().Interface("eth0"); ifc.MTU() != 1400 {
		t.Errorf("MTU %d, want the lease's 1400", ifc.MTU())
	}
	ca, err := cl.ARP("eth0")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := ca.Defended(want.Addr()); !ok || p != arp.DefendOnce {
		t.Errorf("the lease's address defended: %v, %v; want %v", p, ok, arp.DefendOnce)
	}
	if dns := cl.DNS(); len(dns.Servers) != 1 || dns.Servers[0] != netip.MustParseAddrPort("10.7.0.3:53") {
		t.Errorf("stack DNS %+v, want the lease's 10.7.0.3:53", dns)
	}
	if m := cl.Metrics()["DHCPClient.eth0.Bound"]; m.Value != 1 {
		t.Errorf("DHCPClient.eth0.Bound = %+v, want a count of 1", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Ping(ctx, serverAddr, 56); err != nil {
		t.Errorf("ping the server over the leased address: %v", err)
	}

	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if len(cl.Routes()) != 0 || len(cl.DNS().Servers) != 0 {
		t.Errorf("routes %v and DNS %v left after Release", cl.Routes(), cl.DNS())
	}
	if ifc, _ := cl.IPv4().Interface("eth0"); ifc.MTU() != 1500 {
		t.Errorf("MTU %d after Release, want the link's 1500", ifc.MTU())
	}
	if _, ok := ca.Defended(want.Addr()); ok {
		t.Error("the released address still defended")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(srv.Leases()) != 0 {
		if time.Now().After(deadline) {
			// Which side lost it: the client's socket, the wire, or the server.
			t.Fatalf("the server still leases %v after RELEASE (client sent %d, refused %d; server got %d; client stack %v)",
				srv.Leases(), c.Stats.OutReleases.Load(), c.Stats.OutErrors.Load(), srv.Stats.InReleases.Load(), cl.Metrics())
		}
		time.Sleep(time.Millisecond)
	}
}
