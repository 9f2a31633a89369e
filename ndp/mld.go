package ndp

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// MLDv2, the host's part (RFC 3810 section 6): the groups this interface
// listens to, each in EXCLUDE mode with no sources (any source), reported
// to routers when joined or left and in answer to their queries, so that
// switches that snoop MLD deliver the solicited-node groups neighbour
// discovery depends on. All-nodes (ff02::1) is joined implicitly and never
// reported (RFC 3810 section 6: "no MLD messages are ever sent regarding
// ... the link-scope all-nodes multicast address").

// group is one joined multicast address; p.mu guards it.
type group struct {
	addr netip.Addr
	refs int // addresses sharing the solicited-node group
	// left is how many more state change reports are owed and of
	// which record type; retrans fires the next.
	left    int
	change  wire.MLDv2RecordType
	retrans clock.Timer
}

// mld is the interface's MLD state; p.mu guards it.
type mld struct {
	groups map[netip.Addr]*group
	// A pending answer to queries (RFC 3810 section 6.2): to the
	// general query, or for the groups listed, when respond fires.
	respond  clock.Timer
	deadline time.Time
	general  bool
	asked    map[netip.Addr]bool
	gen      uint64
}

func (m *mld) stop() {
	for _, g := range m.groups {
		if g.retrans != nil {
			g.retrans.Stop()
		}
	}
	if m.respond != nil {
		m.respond.Stop()
	}
	m.gen++
}

// joinLocked joins addr (counted: two addresses may share a solicited-node
// group) and, for a new group, sends a state change report:
// CHANGE_TO_EXCLUDE_MODE with no sources (RFC 3810 section 6.1). p.mu is
// held.
func (p *Protocol) joinLocked(addr netip.Addr) {
	if g := p.mld.groups[addr]; g != nil {
		g.refs++
		return
	}
	g := &group{addr: addr, refs: 1}
	p.mld.groups[addr] = g
	p.filterLocked()
	p.stateChangeLocked(g, wire.MLDv2ChangeToExclude)
}

// leaveLocked drops one reference to addr and, at the last, leaves it
// with a CHANGE_TO_INCLUDE_MODE report with no sources (RFC 3810 section
// 6.1). p.mu is held.
func (p *Protocol) leaveLocked(addr netip.Addr) {
	g := p.mld.groups[addr]
	if g == nil {
		return
	}
	if g.refs--; g.refs > 0 {
		return
	}
	delete(p.mld.groups, addr)
	p.filterLocked()
	p.stateChangeLocked(g, wire.MLDv2ChangeToInclude)
}

// JoinGroup joins group on the interface for the host's sockets, and
// reports it (RFC 3810 section 6.1); each join is counted, and the group
// is left, and reported left, at the last LeaveGroup. It fails for an
// address that is not a multicast one, and for all-nodes, which is joined
// already and never reported.
func (p *Protocol) JoinGroup(group netip.Addr) error {
	group = group.WithZone("")
	if !group.Is6() || !group.IsMulticast() || group == ipv6.AllNodes {
		return fmt.Errorf("ndp: join %v on %s: not a multicast group a socket joins", group, p.nic.Name())
	}
	p.mu.Lock()
	defer p.unlock()
	if p.closed {
		return fmt.Errorf("ndp: join %v on %s: %w", group, p.nic.Name(), net.ErrClosed)
	}
	p.joinLocked(group)
	p.log.log.Debug("multicast group joined", slog.String("group", group.String()))
	return nil
}

// LeaveGroup undoes one JoinGroup of group.
func (p *Protocol) LeaveGroup(group netip.Addr) {
	group = group.WithZone("")
	p.mu.Lock()
	defer p.unlock()
	if p.closed || p.mld.groups[group] == nil {
		return
	}
	p.leaveLocked(group)
	if p.mld.groups[group] == nil {
		p.log.log.Debug("multicast group left", slog.String("group", group.String()))
	}
}

// filterLocked gives the NIC's multicast filter the Ethernet addresses of
// the groups the interface listens to (RFC 2464 section 7), whenever
// they change. p.mu is held.
func (p *Protocol) filterLocked() {
	macs := []wire.MAC{}
	for _, g := range append([]netip.Addr{ipv6.AllNodes}, slices.Collect(maps.Keys(p.mld.groups))...) {
		if mac, ok := ipv6.MulticastMAC(g); ok && !slices.Contains(macs, mac) {
			macs = append(macs, mac)
		}
	}
	p.nic.SetMulticastFilter("ipv6", macs)
}

// stateChangeLocked sends a state change report for g now and owes
// [Robustness Variable] - 1 more, "at intervals chosen at random from the
// range (0, [Unsolicited Report Interval])" (RFC 3810 section 6.1).
func (p *Protocol) stateChangeLocked(g *group, change wire.MLDv2RecordType) {
	if g.retrans != nil {
		g.retrans.Stop()
		g.retrans = nil
	}
	g.change, g.left = change, MLDRobustness
	p.sendChangeLocked(g)
}

func (p *Protocol) sendChangeLocked(g *group) {
	if g.left == 0 || p.closed {
		return
	}
	g.left--
	p.sendLater(p.mldReport(p.linkLocalLocked(), []wire.MLDv2Record{{Type: g.change, Group: g.addr}}))
	if g.left == 0 {
		return
	}
	d := time.Duration(1 + p.env.Rand.IntN(int(MLDUnsolicitedReportInterval)))
	g.retrans = p.env.Clock.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.unlock()
		g.retrans = nil
		if p.closed {
			return
		}
		p.sendChangeLocked(g)
	})
}

// queryLocked answers a query (RFC 3810 section 6.2) after a delay drawn
// from [0, Maximum Response Delay): a general one with the current state
// of every group, a group-specific one (sources or not: we listen to every
// source) with that group's, if we listen to it. An answer already pending
// sooner covers a later one. p.mu is held.
func (p *Protocol) queryLocked(group netip.Addr, maxDelay time.Duration) {
	general := group.IsUnspecified()
	if !general {
		if p.mld.groups[group] == nil {
			return
		}
	} else if len(p.mld.groups) == 0 {
		return
	}
	d := time.Duration(0)
	if maxDelay > 0 {
		d = time.Duration(p.env.Rand.IntN(int(maxDelay)))
	}
	now := p.env.Clock.Now()
	at := now.Add(d)
	m := &p.mld
	if m.respond != nil && m.deadline.Before(at) {
		// "1. If there is a pending response to a previous General
		// Query scheduled sooner than the selected delay, no
		// additional response needs to be scheduled."
		if m.general {
			return
		}
		at = m.deadline
	}
	if general {
		m.general = true
	} else {
		if m.asked == nil {
			m.asked = map[netip.Addr]bool{}
		}
		m.asked[group] = true
	}
	if m.respond != nil {
		m.respond.Stop()
	}
	m.deadline = at
	m.gen++
	gen := m.gen
	m.respond = p.env.Clock.AfterFunc(at.Sub(now), func() { p.respond(gen) })
}

// respond sends the pending answer to queries: a current-state report,
// MODE_IS_EXCLUDE with no sources for each group (RFC 3810 section 6.3).
func (p *Protocol) respond(gen uint64) {
	p.mu.Lock()
	defer p.unlock()
	m := &p.mld
	if p.closed || m.gen != gen {
		return
	}
	var recs []wire.MLDv2Record
	for a := range m.groups {
		if m.general || m.asked[a] {
			recs = append(recs, wire.MLDv2Record{Type: wire.MLDv2ModeIsExclude, Group: a})
		}
	}
	m.respond, m.general, m.asked = nil, false, nil
	if len(recs) == 0 {
		return
	}
	slices.SortFunc(recs, func(a, b wire.MLDv2Record) int { return a.Group.Compare(b.Group) })
	p.sendLater(p.mldReport(p.linkLocalLocked(), recs))
}

// Groups returns the multicast groups the interface listens to: all-nodes
// and the solicited-node group of each address.
func (p *Protocol) Groups() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []netip.Addr{ipv6.AllNodes}
	for a := range p.mld.groups {
		out = append(out, a)
	}
	slices.SortFunc(out[1:], netip.Addr.Compare)
	return out
}

// GroupMACs returns the Ethernet addresses of Groups, for a NIC that
// filters multicast frames by destination (RFC 2464 section 7).
func (p *Protocol) GroupMACs() []wire.MAC {
	gs := p.Groups()
	out := make([]wire.MAC, 0, len(gs))
	for _, g := range gs {
		if mac, ok := ipv6.MulticastMAC(g); ok && !slices.Contains(out, mac) {
			out = append(out, mac)
		}
	}
	return out
}
