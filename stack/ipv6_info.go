package stack

import (
	"fmt"
	"net/netip"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
)

// What a NIC's IPv6 holds, for tools to show as `ip -6 addr`, `ip -6
// neigh` and `ip -6 route` do. Each is a snapshot.

// Address6 is one of a NIC's IPv6 addresses with its DAD and lifetime
// state (RFC 4862): tentative until duplicate address detection ends.
type Address6 = ndp.Address

// Neighbor6 is a NIC's neighbour cache entry (RFC 4861 section 7.3).
type Neighbor6 = ndp.Neighbor

// Addresses returns the named NIC's usable addresses of both families, with
// their prefixes: IPv4's, then IPv6's in use (preferred, deprecated, or
// optimistic while their duplicate address detection runs), the
// link-local one included.
func (s *Stack) Addresses(nicName string) ([]netip.Prefix, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return nil, err
	}
	out := s.ip.Addresses(n.iface)
	if n.nd != nil {
		for _, a := range n.nd.Addresses() {
			if a.State.Usable() {
				out = append(out, a.Prefix)
			}
		}
	}
	return out, nil
}

// Addresses6 returns the named NIC's IPv6 addresses: the link-local one,
// static ones and those SLAAC formed, tentative and duplicate ones
// included. A stack with Config.NoIPv6 has none, and says so.
func (s *Stack) Addresses6(nicName string) ([]Address6, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return nil, err
	}
	if n.nd == nil {
		return nil, fmt.Errorf("stack: addresses of %s: %w", nicName, errNoIPv6)
	}
	return n.nd.Addresses(), nil
}

// Neighbors6 returns the named NIC's neighbour cache.
func (s *Stack) Neighbors6(nicName string) ([]Neighbor6, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return nil, err
	}
	if n.nd == nil {
		return nil, fmt.Errorf("stack: neighbours of %s: %w", nicName, errNoIPv6)
	}
	return n.nd.Neighbors(), nil
}

// Routes6 returns the IPv6 routing table: on-link prefixes, default
// routers with their preference (RFC 4191) and redirected hosts.
func (s *Stack) Routes6() []ipv6.Route { return s.ip6.Routes() }
