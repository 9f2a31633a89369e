package stack

import (
	"fmt"
	"net/netip"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/udp"
)

// Multicast group membership: the glue between the sockets that join
// groups, the network layers that take datagrams to them, the protocols
// that report them (igmp for IPv4, ndp's MLD for IPv6) and the NICs'
// multicast filters. Joins are counted per NIC and group, so that the
// group is left, and reported left, when the last socket leaves it.

// groupKey is a group joined on a NIC.
type groupKey struct {
	nic   string
	group netip.Addr
}

// JoinGroup joins the named NIC to a multicast group for the host, as a
// socket's IP_ADD_MEMBERSHIP or IPV6_JOIN_GROUP does: datagrams to it are
// taken, and routers and snooping switches told by IGMP (IPv4) or MLD
// (IPv6). An empty NIC name picks the NIC the group is routed through
// (for IPv6, the group's zone names it). Joins are counted: each is
// undone by one LeaveGroup.
func (s *Stack) JoinGroup(nicName string, group netip.Addr) error {
	_, err := s.joinGroup(nicName, group)
	return err
}

// LeaveGroup undoes one JoinGroup.
func (s *Stack) LeaveGroup(nicName string, group netip.Addr) error {
	n, err := s.groupNIC(nicName, group)
	if err != nil {
		return err
	}
	group = group.WithZone("")
	s.mcastMu.Lock()
	defer s.mcastMu.Unlock()
	k := groupKey{n.eth.Name(), group}
	if s.joins[k] == 0 {
		return fmt.Errorf("stack: leave %v on %s: not joined", group, k.nic)
	}
	if s.joins[k]--; s.joins[k] > 0 {
		return nil
	}
	delete(s.joins, k)
	if group.Is4() {
		s.ip.LeaveGroup(n.iface, group)
		n.igmp.Leave(group)
		n.eth.SetMulticastFilter("ipv4", n.igmp.GroupMACs())
		return nil
	}
	s.ip6.LeaveGroup(n.iface6, group)
	n.nd.LeaveGroup(group) // which sets the NIC's IPv6 filter
	return nil
}

func (s *Stack) joinGroup(nicName string, group netip.Addr) (string, error) {
	n, err := s.groupNIC(nicName, group)
	if err != nil {
		return "", err
	}
	group = group.WithZone("")
	s.mcastMu.Lock()
	defer s.mcastMu.Unlock()
	k := groupKey{n.eth.Name(), group}
	if s.joins[k] == 0 {
		if err := s.joinNIC(n, group); err != nil {
			return "", fmt.Errorf("stack: join %v on %s: %w", group, k.nic, err)
		}
	}
	if s.joins == nil {
		s.joins = map[groupKey]int{}
	}
	s.joins[k]++
	return k.nic, nil
}

// joinNIC makes n a member of group. s.mcastMu is held.
func (s *Stack) joinNIC(n *nic, group netip.Addr) error {
	if group.Is4() {
		if err := n.igmp.Join(group); err != nil {
			return err
		}
		if err := s.ip.JoinGroup(n.iface, group); err != nil {
			n.igmp.Leave(group)
			return err
		}
		n.eth.SetMulticastFilter("ipv4", n.igmp.GroupMACs())
		return nil
	}
	if n.nd == nil {
		return errNoIPv6
	}
	if err := n.nd.JoinGroup(group); err != nil {
		return err
	}
	if err := s.ip6.JoinGroup(n.iface6, group); err != nil {
		n.nd.LeaveGroup(group)
		return err
	}
	return nil
}

// groupNIC is the NIC a join of group names, or picks for an empty name.
func (s *Stack) groupNIC(nicName string, group netip.Addr) (*nic, error) {
	if !group.IsMulticast() || group.Is4In6() {
		return nil, fmt.Errorf("stack: %v is not a multicast group", group)
	}
	if nicName == "" && group.Zone() != "" {
		nicName = group.Zone()
	}
	if nicName != "" {
		return s.nic(nicName)
	}
	var ri ip.Route
	var err error
	if group.Is4() {
		ri, err = s.ip.MulticastRoute(group, "")
	} else {
		ri, err = s.ip6.MulticastRoute(group, "")
	}
	if err != nil {
		return nil, fmt.Errorf("stack: no interface for %v: %w", group, err)
	}
	switch i := ri.Iface.(type) {
	case *ipv4.Interface:
		return s.nic(i.Name())
	case *ipv6.Interface:
		return s.nic(i.Name())
	}
	return nil, fmt.Errorf("stack: no interface for %v", group)
}

// Groups returns the multicast groups joined on the named NIC, with how
// many times each was joined; the groups every interface is in without
// asking (224.0.0.1, ff02::1, the solicited-node groups) are not listed.
func (s *Stack) Groups(nicName string) map[netip.Addr]int {
	s.mcastMu.Lock()
	defer s.mcastMu.Unlock()
	out := map[netip.Addr]int{}
	for k, n := range s.joins {
		if k.nic == nicName {
			out[k.group] = n
		}
	}
	return out
}

// membership is the stack as UDP's endpoints join groups through it.
type membership struct{ s *Stack }

var _ udp.Membership = membership{}

func (m membership) JoinGroup(nic string, group netip.Addr) (string, error) {
	return m.s.joinGroup(nic, group)
}

func (m membership) LeaveGroup(nic string, group netip.Addr) error {
	return m.s.LeaveGroup(nic, group)
}

// ListenMulticastUDP binds a UDP endpoint to laddr sharing the port with
// the others bound so (SO_REUSEADDR), as multicast listeners do: each
// joins its groups (udp.Conn.JoinGroup) and receives what is sent to
// them.
func (s *Stack) ListenMulticastUDP(laddr netip.AddrPort) (*udp.Conn, error) {
	return s.udp.ListenMulticast(laddr)
}
