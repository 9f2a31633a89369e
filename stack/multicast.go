package stack

import (
	"fmt"
	"net/netip"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/udp"
)

// Multicast group membership: the glue between the sockets that join
// groups, the network layers that take datagrams to them, the protocols
// that report them (igmp for IPv4, ndp's MLD for IPv6) and the NICs'
// multicast filters. Each NIC's members of a group, with their source
// filters, are merged into the NIC's filter (RFC 3376 section 3.2,
// package sourcefilter), which IGMPv3 or MLDv2 reports whenever it
// changes; the group is left, and reported left, when its last member
// leaves.

// groupKey is a group joined on a NIC.
type groupKey struct {
	nic   string
	group netip.Addr
}

// JoinGroup joins the named NIC to a multicast group for the host, from
// any source, as a socket's IP_ADD_MEMBERSHIP or IPV6_JOIN_GROUP does:
// datagrams to it are taken, and routers and snooping switches told by
// IGMP (IPv4) or MLD (IPv6). An empty NIC name picks the NIC the group is
// routed through (for IPv6, the group's zone names it). Joins are
// counted: each is undone by one LeaveGroup.
func (s *Stack) JoinGroup(nicName string, group netip.Addr) error {
	_, err := s.joinGroup(nicName, group, sourcefilter.Any)
	return err
}

// LeaveGroup undoes one JoinGroup.
func (s *Stack) LeaveGroup(nicName string, group netip.Addr) error {
	return s.leaveGroup(nicName, group, sourcefilter.Any)
}

// joinGroup adds a member with filter f to group on the named NIC.
func (s *Stack) joinGroup(nicName string, group netip.Addr, f sourcefilter.Filter) (string, error) {
	k, err := s.changeMembers("join", nicName, group, sourcefilter.None, f)
	return k.nic, err
}

// leaveGroup takes back a member whose filter is f.
func (s *Stack) leaveGroup(nicName string, group netip.Addr, f sourcefilter.Filter) error {
	_, err := s.changeMembers("leave", nicName, group, f, sourcefilter.None)
	return err
}

// changeFilter changes a member's filter on group from from to to.
func (s *Stack) changeFilter(nicName string, group netip.Addr, from, to sourcefilter.Filter) error {
	_, err := s.changeMembers("filter", nicName, group, from, to)
	return err
}

// changeMembers changes a member of group on the named NIC from filter
// from to filter to (None for no member: a join from None, a leave to
// it), and gives the NIC the filter its members make: the network layer
// takes the group while it is joined, and IGMP or MLD reports each change.
// A change the NIC refuses (IGMP's bound on groups) is undone.
func (s *Stack) changeMembers(op, nicName string, group netip.Addr, from, to sourcefilter.Filter) (groupKey, error) {
	n, err := s.groupNIC(nicName, group)
	if err != nil {
		return groupKey{}, err
	}
	k := groupKey{n.eth.Name(), group.WithZone("")}
	s.mcastMu.Lock()
	defer s.mcastMu.Unlock()
	m := s.joins[k]
	if m == nil {
		m = &sourcefilter.Members{}
	}
	was := m.State()
	if !m.Change(from, to) {
		return k, fmt.Errorf("stack: %s %v on %s: no member with %v", op, k.group, k.nic, from)
	}
	if err := s.filterNIC(n, k.group, was, m.State()); err != nil {
		m.Change(to, from)
		return k, fmt.Errorf("stack: %s %v on %s: %w", op, k.group, k.nic, err)
	}
	if s.joins == nil {
		s.joins = map[groupKey]*sourcefilter.Members{}
	}
	if m.Len() == 0 {
		delete(s.joins, k)
	} else {
		s.joins[k] = m
	}
	return k, nil
}

// filterNIC takes n's filter on group from was to now. s.mcastMu is held.
func (s *Stack) filterNIC(n *nic, group netip.Addr, was, now sourcefilter.Filter) error {
	if was.Equal(now) {
		return nil
	}
	if group.Is4() {
		if err := n.igmp.SetFilter(group, now); err != nil {
			return err
		}
		switch {
		case !was.Joined() && now.Joined():
			if err := s.ip.JoinGroup(n.iface, group); err != nil {
				_ = n.igmp.SetFilter(group, was)
				return err
			}
		case was.Joined() && !now.Joined():
			s.ip.LeaveGroup(n.iface, group)
		}
		n.eth.SetMulticastFilter("ipv4", n.igmp.GroupMACs())
		return nil
	}
	if n.nd == nil {
		return errNoIPv6
	}
	// ndp sets the NIC's IPv6 filter.
	if err := n.nd.SetGroupFilter(group, now); err != nil {
		return err
	}
	switch {
	case !was.Joined() && now.Joined():
		if err := s.ip6.JoinGroup(n.iface6, group); err != nil {
			_ = n.nd.SetGroupFilter(group, was)
			return err
		}
	case was.Joined() && !now.Joined():
		s.ip6.LeaveGroup(n.iface6, group)
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
// many members each has; the groups every interface is in without
// asking (224.0.0.1, ff02::1, the solicited-node groups) are not listed.
func (s *Stack) Groups(nicName string) map[netip.Addr]int {
	s.mcastMu.Lock()
	defer s.mcastMu.Unlock()
	out := map[netip.Addr]int{}
	for k, m := range s.joins {
		if k.nic == nicName {
			out[k.group] = m.Len()
		}
	}
	return out
}

// GroupFilters returns the source filter of every multicast group the
// named NIC listens to, as IGMPv3 and MLDv2 report it (RFC 3376 section
// 3.2, RFC 3810 section 4.2): the groups sockets joined, their filters
// merged, and those every interface is in (224.0.0.1, ff02::1, the
// solicited-node groups of its addresses), from any source.
func (s *Stack) GroupFilters(nicName string) (map[netip.Addr]sourcefilter.Filter, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]sourcefilter.Filter{}
	for _, g := range n.igmp.Groups() {
		out[g] = n.igmp.Filter(g)
	}
	if n.nd != nil {
		for _, g := range n.nd.Groups() {
			out[g] = n.nd.GroupFilter(g)
		}
	}
	return out, nil
}

// membership is the stack as UDP's endpoints join groups through it.
type membership struct{ s *Stack }

var _ udp.Membership = membership{}

func (m membership) JoinGroup(nic string, group netip.Addr, f sourcefilter.Filter) (string, error) {
	return m.s.joinGroup(nic, group, f)
}

func (m membership) ChangeFilter(nic string, group netip.Addr, from, to sourcefilter.Filter) error {
	return m.s.changeFilter(nic, group, from, to)
}

func (m membership) LeaveGroup(nic string, group netip.Addr, f sourcefilter.Filter) error {
	return m.s.leaveGroup(nic, group, f)
}

// ListenMulticastUDP binds a UDP endpoint to laddr sharing the port with
// the others bound so (SO_REUSEADDR), as multicast listeners do: each
// joins its groups (udp.Conn.JoinGroup) and receives what is sent to
// them.
func (s *Stack) ListenMulticastUDP(laddr netip.AddrPort) (*udp.Conn, error) {
	return s.udp.ListenMulticast(laddr)
}
