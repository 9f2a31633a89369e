package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
)

// The guest's IPv6, as slirp4netns --enable-ipv6 gives it: the gateway is
// the router of the guest's link, which advertises the /64 (RFC 4861
// section 6.2, package ndp's router side) so that the guest forms its
// address by SLAAC (RFC 4862) and routes through the gateway's link-local
// address, and names the DNS forwarder in the advertisements (RFC 8106).
// The guest's IPv6 flows are then decided and relayed as its IPv4 ones
// (flows.go): the stack's IPv6 interface forwards as IPv4's does
// (ipv6/forward.go), the gateway's ::2 stands for the host's ::1, and pings
// go through the host's ICMPv6 ping or raw socket (ping.go). Inbound
// forwards reach the guest at its IPv4 address unless they name its IPv6
// one (inbound.go): the address it forms by SLAAC is its own to choose.

// startIPv6 gives the guest's NIC the gateway's and the DNS forwarder's
// IPv6 addresses with the on-link route of the prefix, and makes it an
// advertising interface.
func startIPv6(s *stack.Stack, nicName string, n Network6) error {
	nd, err := s.NeighborDiscovery(nicName)
	if err != nil {
		return fmt.Errorf("gateway: IPv6 (or Config.NoIPv6): %w", err)
	}
	for _, a := range []netip.Addr{n.Gateway, n.DNS} {
		if err := s.AddAddress(nicName, netip.PrefixFrom(a, n.Prefix.Bits())); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	if err := s.AddRoute(n.Prefix, netip.Addr{}, nicName); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	// A router takes what is sent to all-routers (RFC 4291 section
	// 2.8): the guest's router solicitations (RFC 4861 section 6.3.7).
	if err := s.JoinGroup(nicName, ipv6.AllRouters); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	err = nd.Advertise(ndp.RouterConfig{
		Prefixes:   []ndp.AdvPrefix{{Prefix: n.Prefix}},
		DNSServers: []netip.Addr{n.DNS},
	})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// WaitIPv6 returns once the gateway's IPv6 addresses, its link-local one
// among them, are usable, past duplicate address detection (RFC 4862
// section 5.4: a second or two on a quiet link), so that services can
// bind to them and the advertisements have begun; at once with
// Config.NoIPv6.
// It fails when ctx ends first, or when DAD found an address a duplicate
// (another node on the guest's link holds it).
func (g *Gateway) WaitIPv6(ctx context.Context) error {
	if g.cfg.NoIPv6 {
		return nil
	}
	n := g.cfg.Network6
	nd, err := g.s.NeighborDiscovery(g.nic)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		// The link-local address too: advertisements come from it
		// (RFC 4861 section 6.1.2), and start once it is past DAD.
		linkLocal := false
		for _, a := range nd.Addresses() {
			if a.State == ndp.Duplicate && (a.Prefix.Addr() == n.Gateway || a.Prefix.Addr() == n.DNS) {
				return fmt.Errorf("gateway: IPv6 address %v: another node on the guest's link holds it (DAD)", a.Prefix.Addr())
			}
			linkLocal = linkLocal || (a.Prefix.Addr().IsLinkLocalUnicast() && a.State == ndp.Preferred)
		}
		// Usable once the IPv6 layer, which ndp tells in its own
		// goroutine, holds them past DAD.
		ready := linkLocal
		for _, a := range []netip.Addr{n.Gateway, n.DNS} {
			st, ok := g.s.IPv6().AddressState(a)
			ready = ready && ok && st != ipv6.Tentative
		}
		if ready {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("gateway: waiting for the IPv6 addresses' duplicate address detection: %w", ctx.Err())
		}
	}
}
