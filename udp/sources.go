package udp

import (
	"net/netip"
	"syscall"

	"github.com/gonetstack/gonet/sourcefilter"
)

// Source-specific multicast: the socket interface of RFC 3678 for
// multicast source filters (section 4.1.1's delta-based one, and section
// 4.2's full-state one), under netip-based names. An endpoint's
// membership of a group on an interface takes either the sources it
// lists (INCLUDE mode, joined source by source: IP_ADD_SOURCE_MEMBERSHIP,
// MCAST_JOIN_SOURCE_GROUP, what source-specific multicast, RFC 4607, asks
// of a receiver) or every source but those it blocks (EXCLUDE mode,
// JoinGroup then BlockSource: IP_BLOCK_SOURCE). The stack merges the
// endpoints' filters into each interface's and reports that state by
// IGMPv3 or MLDv2, so that routers forward the sources asked for alone;
// delivery applies the endpoint's own filter, so that an endpoint never
// receives a source another endpoint's filter let in.
//
// The errors are the ones Linux's setsockopt gives, so that a program
// ported from C meets the same ones: a source added twice or removed
// while absent fails with EADDRNOTAVAIL, a call of the other mode's with
// EINVAL, more sources than MaxSourcesIPv4 or MaxSourcesIPv6 with
// ENOBUFS.

// The most sources one membership lists: Linux's igmp_max_msf and
// mld_max_msf defaults.
const (
	MaxSourcesIPv4 = 10
	MaxSourcesIPv6 = 64
)

func (c *Conn) maxSources(group netip.Addr) int {
	if group.Is4() {
		return MaxSourcesIPv4
	}
	return MaxSourcesIPv6
}

// JoinSourceGroup takes datagrams to group from source (RFC 3678
// IP_ADD_SOURCE_MEMBERSHIP): it joins the group in INCLUDE mode on the
// interface named nic (for an empty name, as JoinGroup picks one), or adds
// source to an INCLUDE membership. A membership of any source with no
// source blocked becomes an INCLUDE one of source, as on Linux; one that
// blocks sources fails with EINVAL.
func (c *Conn) JoinSourceGroup(nic string, group, source netip.Addr) error {
	return c.setSources("join source", nic, group, source, sourcefilter.Include, true)
}

// LeaveSourceGroup stops taking datagrams to group from source (RFC 3678
// IP_DROP_SOURCE_MEMBERSHIP); the group is left with its last source.
func (c *Conn) LeaveSourceGroup(nic string, group, source netip.Addr) error {
	return c.setSources("leave source", nic, group, source, sourcefilter.Include, false)
}

// BlockSource stops taking datagrams to group from source in a
// membership of any source (RFC 3678 IP_BLOCK_SOURCE), made by
// JoinGroup.
func (c *Conn) BlockSource(nic string, group, source netip.Addr) error {
	return c.setSources("block source", nic, group, source, sourcefilter.Exclude, true)
}

// UnblockSource takes back a BlockSource (RFC 3678 IP_UNBLOCK_SOURCE).
func (c *Conn) UnblockSource(nic string, group, source netip.Addr) error {
	return c.setSources("unblock source", nic, group, source, sourcefilter.Exclude, false)
}

// setSources puts source on (add) or off the list of the membership of
// group on nic, whose mode must be mode.
func (c *Conn) setSources(op, nic string, group, source netip.Addr, mode sourcefilter.Mode, add bool) error {
	if !sourceOf(group, source) {
		return c.opError(op, netip.AddrPortFrom(source, 0), syscall.EINVAL)
	}
	return c.setFilter(op, nic, group, func(f sourcefilter.Filter, joined bool) (sourcefilter.Filter, error) {
		switch {
		case !joined && mode == sourcefilter.Include && add:
			return sourcefilter.New(sourcefilter.Include, source), nil
		case !joined:
			return f, syscall.EINVAL
		case f.Mode != mode && len(f.Sources) == 0:
			// Linux allows a change of mode to a filter with no
			// sources: EXCLUDE {} is every source, and the first
			// source joined narrows it to that one.
			f.Mode = mode
		case f.Mode != mode:
			return f, syscall.EINVAL
		}
		switch has := f.Has(source); {
		case add && has, !add && !has:
			return f, syscall.EADDRNOTAVAIL
		case add:
			return f.With(source), nil
		}
		return f.Without(source), nil
	})
}

// sourceOf reports whether src may be a source of group's datagrams: a
// unicast address of its family.
func sourceOf(group, src netip.Addr) bool {
	return src.IsValid() && src.Is4() == group.Is4() && !src.IsMulticast() && !src.IsUnspecified() &&
		src != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// SetSourceFilter sets the endpoint's whole filter on group, on nic (RFC
// 3678 section 4.2's setsourcefilter, MCAST_MSFILTER): it joins the group
// with f if not joined, and leaves it for sourcefilter.None.
func (c *Conn) SetSourceFilter(nic string, group netip.Addr, f sourcefilter.Filter) error {
	f = sourcefilter.New(f.Mode, f.Sources...)
	for _, s := range f.Sources {
		if !sourceOf(group, s) {
			return c.opError("set source filter", netip.AddrPortFrom(s, 0), syscall.EINVAL)
		}
	}
	return c.setFilter("set source filter", nic, group, func(sourcefilter.Filter, bool) (sourcefilter.Filter, error) {
		return f, nil
	})
}

// SourceFilter returns the endpoint's filter on group, on nic (RFC 3678
// section 4.2's getsourcefilter); sourcefilter.None when not joined.
func (c *Conn) SourceFilter(nic string, group netip.Addr) sourcefilter.Filter {
	group = group.WithZone("")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.mcast.groups {
		if g.is(group, nic) {
			return g.filter
		}
	}
	return sourcefilter.None
}
