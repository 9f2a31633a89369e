package ndp

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/wire"
)

// MLDv2, the host's part (RFC 3810 section 6): the groups this interface
// listens to, each with a source filter (section 4: INCLUDE or EXCLUDE a
// list of sources), reported to routers when the filter changes and in
// answer to their queries, so that switches that snoop MLD deliver the
// groups, and the solicited-node groups neighbour discovery depends on.
// All-nodes (ff02::1) is joined implicitly and never reported (RFC 3810
// section 6: "no MLD messages are ever sent regarding ... the link-scope
// all-nodes multicast address").
//
// A group's filter, the interface state of section 4.2, merges two kinds
// of listener: ndp's own joins of solicited-node groups (RFC 4862 section
// 5.4.2), any source, counted per address; and the host's sockets, whose
// filters the stack merges (sourcefilter.Members) and hands over with
// SetGroupFilter. Package sourcefilter does the set arithmetic of the
// reports; this file keeps their timers and the wire form.
//
// While an MLDv1 querier is on the link, the interface speaks MLDv1 (RFC
// 3810 section 8.2.1, RFC 2710 section 4), as a Linux bridge's querier
// asks by default: source filters are not spoken of, a Report to the
// group when it is joined and in answer to queries, a timer per group,
// another listener's Report answering for us, and a Done to all-routers
// when it is left.

// MLDv1 compatibility's defaults: RFC 2710 section 7.10's Unsolicited
// Report Interval, and the Query Interval and Query Response Interval
// (RFC 3810 sections 9.2 and 9.3) that make the Older Version Querier
// Present Timeout (section 9.12), an MLDv1 query carrying neither.
const (
	MLDv1UnsolicitedReportInterval = 10 * time.Second
	MLDQueryInterval               = 125 * time.Second
	MLDQueryResponseInterval       = 10 * time.Second
)

// olderQuerierTimeout is the Older Version Querier Present Timeout (RFC
// 3810 section 9.12): "[Robustness Variable] times (the [Query Interval]
// in the last Query received) plus ([Query Response Interval])". p.mu is
// held.
func (p *Protocol) olderQuerierTimeout() time.Duration {
	return time.Duration(p.robustnessLocked())*MLDQueryInterval + MLDQueryResponseInterval
}

// robustnessLocked is the Robustness Variable in force (RFC 3810 section
// 9.1): the last MLDv2 querier's QRV when it sent one (section 5.1.8; a
// QRV of zero, a querier's above 7, leaves it as it was), else
// MLDRobustness; as igmp adopts IGMPv3's (RFC 3376 section 4.1.6) and
// Linux's hosts do both. p.mu is held.
func (p *Protocol) robustnessLocked() int {
	if p.mld.robustness > 0 {
		return p.mld.robustness
	}
	return MLDRobustness
}

// group is one multicast address the interface listens to, or has just
// stopped listening to and still owes reports of; p.mu guards it.
type group struct {
	addr netip.Addr
	// refs counts ndp's own joins (addresses sharing the solicited-node
	// group); sockets is the host's sockets' merged filter. state is
	// the interface's (RFC 3810 section 4.2): any source while ndp
	// itself needs the group, else the sockets'.
	refs    int
	sockets sourcefilter.Filter
	state   sourcefilter.Filter
	// changes are the MLDv2 state change reports owed (section 6.1),
	// v1Reports the MLDv1 Reports of a join (RFC 2710 section 4);
	// retrans fires the next.
	changes   sourcefilter.Changes
	v1Reports int
	retrans   clock.Timer
	// answer is the pending MLDv1 Report answering a query (RFC 2710
	// section 4's per-address timer), due at answerAt.
	answer   clock.Timer
	answerAt time.Time
}

// stop cancels the group's reports and answer, owed or pending.
func (g *group) stop() {
	if g.retrans != nil {
		g.retrans.Stop()
		g.retrans = nil
	}
	g.changes.Reset()
	g.v1Reports = 0
	g.stopAnswer()
}

func (g *group) stopAnswer() {
	if g.answer != nil {
		g.answer.Stop()
		g.answer = nil
	}
}

// mld is the interface's MLD state; p.mu guards it.
type mld struct {
	groups map[netip.Addr]*group
	// A pending answer to queries (RFC 3810 section 6.2): to the
	// general query, or for the groups asked about (and the sources,
	// for a multicast address and source specific query), when respond
	// fires. One timer serves both, at the earliest of their delays.
	respond  clock.Timer
	deadline time.Time
	general  bool
	asked    map[netip.Addr]*sourcefilter.Queried
	gen      uint64
	// v1Until is when the Older Version Querier Present timer ends (RFC
	// 3810 section 8.2.1); v1 is the mode last found.
	v1Until time.Time
	v1      bool
	// robustness is the last querier's QRV, 0 until one is heard.
	robustness int
}

// stop cancels every pending report and answer.
func (m *mld) stop() {
	for _, g := range m.groups {
		g.stop()
	}
	m.stopRespond()
}

func (m *mld) stopRespond() {
	if m.respond != nil {
		m.respond.Stop()
		m.respond = nil
	}
	m.general, m.asked = false, nil
	m.gen++
}

// reported says whether MLD speaks of group: not of one of scope 0
// (reserved) or 1 (interface-local), RFC 3810 section 6 and RFC 2710
// section 5; all-nodes is never a group of the list.
func reported(group netip.Addr) bool {
	scope := group.As16()[1] & 0x0f
	return scope > 1
}

// v1Locked reports whether the Host Compatibility Mode is MLDv1 (RFC
// 3810 section 8.2.1): while the Older Version Querier Present timer
// runs, or always with Config.MLDVersion 1. The timer's end is found
// here, by whatever asks first; a change of mode cancels every report and
// answer pending ("Whenever a host changes its compatibility mode, it
// cancels all its pending responses and retransmission timers") and drops
// the groups kept only for those. So every way into MLD (a call, a
// message, a timer) asks first, before it holds a group, and what it
// calls then reads p.mld.v1. p.mu is held.
func (p *Protocol) v1Locked() bool {
	v1 := p.cfg.MLDVersion == 1 || p.env.Clock.Now().Before(p.mld.v1Until)
	if v1 == p.mld.v1 {
		return v1
	}
	p.mld.v1 = v1
	p.Stats.MLDMode.Add(map[bool]int64{false: 1, true: -1}[v1]) // 2 to 1, or back
	p.mld.stop()
	for a, g := range p.mld.groups {
		if !g.state.Joined() {
			delete(p.mld.groups, a) // kept only for the reports just cancelled
		}
	}
	if v1 {
		p.log.log.Info("MLDv1 querier present: speaking MLDv1", slog.Duration("for", p.olderQuerierTimeout()))
	} else {
		p.log.log.Info("no MLDv1 querier heard: speaking MLDv2 again")
	}
	return v1
}

// groupLocked returns the group of addr, made if there is none. p.mu is
// held.
func (p *Protocol) groupLocked(addr netip.Addr) *group {
	g := p.mld.groups[addr]
	if g == nil {
		g = &group{addr: addr}
		p.mld.groups[addr] = g
	}
	return g
}

// joinLocked joins addr for ndp itself (counted: two addresses may share
// a solicited-node group), in EXCLUDE mode with no sources whatever the
// sockets ask. p.mu is held.
func (p *Protocol) joinLocked(addr netip.Addr) {
	p.v1Locked()
	g := p.groupLocked(addr)
	if g.refs++; g.refs == 1 {
		p.updateLocked(g)
	}
}

// leaveLocked drops one of ndp's own joins of addr; at the last, the
// group's state is the sockets' filter, None if they have not joined it.
// p.mu is held.
func (p *Protocol) leaveLocked(addr netip.Addr) {
	p.v1Locked()
	g := p.mld.groups[addr]
	if g == nil || g.refs == 0 {
		return
	}
	if g.refs--; g.refs == 0 {
		p.updateLocked(g)
	}
}

// SetGroupFilter sets the host's sockets' filter on group: their
// filters merged (RFC 3810 section 4.2, as sourcefilter.Members does it).
// The interface's state for the group is that filter, but for a
// solicited-node group neighbour discovery holds, which takes every
// source. A change of state is reported (section 6.1); sourcefilter.None
// leaves the group. It fails for an address that is not a multicast one,
// for all-nodes, which is joined already and never reported, and for a
// filter whose mode is neither or whose sources are not IPv6 unicast
// addresses.
func (p *Protocol) SetGroupFilter(group netip.Addr, f sourcefilter.Filter) error {
	group = group.WithZone("")
	if !group.Is6() || group.Is4In6() || !group.IsMulticast() || group == ipv6.AllNodes {
		return fmt.Errorf("ndp: filter %v on %s: not a multicast group a socket joins", group, p.nic.Name())
	}
	if f.Mode != sourcefilter.Include && f.Mode != sourcefilter.Exclude {
		return fmt.Errorf("ndp: filter %v on %s: unknown filter mode %d", group, p.nic.Name(), f.Mode)
	}
	for _, s := range f.Sources {
		if !s.Is6() || s.Is4In6() || s.IsMulticast() || s.IsUnspecified() {
			return fmt.Errorf("ndp: filter %v on %s: source %v is not an IPv6 unicast address", group, p.nic.Name(), s)
		}
	}
	f = sourcefilter.New(f.Mode, f.Sources...) // sorted, distinct, unzoned
	p.mu.Lock()
	defer p.unlock()
	if p.closed {
		if !f.Joined() {
			return nil // nothing to leave
		}
		return fmt.Errorf("ndp: filter %v on %s: %w", group, p.nic.Name(), net.ErrClosed)
	}
	p.v1Locked()
	g := p.mld.groups[group]
	if g == nil && !f.Joined() {
		return nil
	}
	if g == nil {
		g = p.groupLocked(group)
	}
	old := g.sockets
	g.sockets = f
	p.updateLocked(g)
	switch {
	case old.Equal(f):
	case !old.Joined():
		p.log.log.Debug("multicast group joined", slog.String("group", group.String()), slog.String("filter", f.String()))
	case !f.Joined():
		p.log.log.Debug("multicast group left", slog.String("group", group.String()))
	default:
		p.log.log.Debug("multicast group filter changed", slog.String("group", group.String()), slog.String("filter", f.String()))
	}
	return nil
}

// JoinGroup joins group for the host's sockets with any source:
// SetGroupFilter(group, sourcefilter.Any).
func (p *Protocol) JoinGroup(group netip.Addr) error {
	return p.SetGroupFilter(group, sourcefilter.Any)
}

// LeaveGroup leaves group for the host's sockets:
// SetGroupFilter(group, sourcefilter.None).
func (p *Protocol) LeaveGroup(group netip.Addr) {
	_ = p.SetGroupFilter(group, sourcefilter.None) // fails only for what JoinGroup refused
}

// updateLocked moves g to the state its listeners make, reports the
// change and updates the NIC's filter when the group is joined or left.
// p.mu is held, and v1Locked asked.
func (p *Protocol) updateLocked(g *group) {
	to := g.sockets
	if g.refs > 0 {
		to = sourcefilter.Any
	}
	from := g.state
	if from.Equal(to) {
		p.forgetLocked(g)
		return
	}
	g.state = to
	if from.Joined() != to.Joined() {
		p.filterLocked()
		if !to.Joined() {
			g.stopAnswer()
		}
	}
	p.stateChangeLocked(g, from)
	p.forgetLocked(g)
}

// forgetLocked drops g once the interface neither listens to it nor owes
// a report of it. A group left is kept while the reports of its leaving
// are owed, so that joining it again merges its reports with those
// (section 6.1) rather than sending two interleaved sets, the later of
// which could end in the leave. p.mu is held.
func (p *Protocol) forgetLocked(g *group) {
	if g.state.Joined() || g.changes.Pending() || g.v1Reports > 0 || p.mld.groups[g.addr] != g {
		return
	}
	g.stop()
	delete(p.mld.groups, g.addr)
}

// filterLocked gives the NIC's multicast filter the Ethernet addresses of
// the groups the interface listens to (RFC 2464 section 7), whenever
// they change: in either mode, from any source. p.mu is held.
func (p *Protocol) filterLocked() {
	macs := []wire.MAC{}
	for _, g := range p.joinedLocked() {
		if mac, ok := ipv6.MulticastMAC(g); ok && !slices.Contains(macs, mac) {
			macs = append(macs, mac)
		}
	}
	p.nic.SetMulticastFilter("ipv6", macs)
}

// joinedLocked returns all-nodes and the groups the interface listens
// to, these sorted. p.mu is held.
func (p *Protocol) joinedLocked() []netip.Addr {
	var out []netip.Addr
	for a, g := range p.mld.groups {
		if g.state.Joined() {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return append([]netip.Addr{ipv6.AllNodes}, out...)
}

// stateChangeLocked reports g's change of state from from (RFC 3810
// section 6.1): in MLDv2, the records of sourcefilter.Changes' table,
// merged with those still owed of earlier changes, sent now and
// [Robustness Variable] - 1 more times "at intervals chosen at random
// from the range (0, [Unsolicited Report Interval])". In MLDv1 mode
// (section 8.2.1, RFC 2710 section 4) only joining and leaving are
// spoken of: a join is reported as often with Reports to the group, a
// leave with one Done (which RFC 2710 says "MAY" be left out when another
// listener reported last, which a host that always sends it need not
// track); a change of sources is not. p.mu is held, and v1Locked asked.
func (p *Protocol) stateChangeLocked(g *group, from sourcefilter.Filter) {
	if !reported(g.addr) {
		return
	}
	if !p.mld.v1 {
		g.changes.Change(from, g.state, p.robustnessLocked())
		p.sendChangeLocked(g)
		return
	}
	switch {
	case !from.Joined():
		g.v1Reports = p.robustnessLocked()
		p.sendV1ReportLocked(g)
	case !g.state.Joined():
		p.stopRetransLocked(g)
		g.v1Reports = 0
		p.sendLater(p.mldV1(p.linkLocalLocked(), ipv6.AllRouters, wire.ICMPv6MLDv1Done, g.addr))
	}
}

// sendChangeLocked sends g's next MLDv2 state change report, and arms
// the retransmission of the next one owed. p.mu is held.
func (p *Protocol) sendChangeLocked(g *group) {
	p.stopRetransLocked(g)
	p.sendRecordsLocked(g.changes.Next(g.addr, g.state))
	if g.changes.Pending() {
		p.retransLocked(g, MLDUnsolicitedReportInterval)
	}
}

// sendV1ReportLocked sends one of the MLDv1 Reports of g's join, and
// arms the next. p.mu is held.
func (p *Protocol) sendV1ReportLocked(g *group) {
	p.stopRetransLocked(g)
	g.v1Reports--
	p.sendLater(p.mldV1(p.linkLocalLocked(), g.addr, wire.ICMPv6MLDv1Report, g.addr))
	if g.v1Reports > 0 {
		p.retransLocked(g, MLDv1UnsolicitedReportInterval)
	}
}

func (p *Protocol) stopRetransLocked(g *group) {
	if g.retrans != nil {
		g.retrans.Stop()
		g.retrans = nil
	}
}

// retransLocked arms g's retransmission after a delay drawn from (0,
// interval]. p.mu is held.
func (p *Protocol) retransLocked(g *group, interval time.Duration) {
	var t clock.Timer
	t = p.env.Clock.AfterFunc(time.Duration(1+p.env.Rand.IntN(int(interval))), func() {
		p.mu.Lock()
		defer p.unlock()
		if p.closed || g.retrans != t {
			return // stopped, or replaced by a later change's
		}
		g.retrans = nil
		v1 := p.v1Locked() // which, changing, cancels what g owes
		switch {
		case v1 && g.v1Reports > 0:
			p.sendV1ReportLocked(g)
		case !v1 && g.changes.Pending():
			p.sendChangeLocked(g)
		}
		p.forgetLocked(g)
	})
	g.retrans = t
}

// sendRecordsLocked sends recs in as many MLDv2 reports as their size
// needs (section 5.2.15). p.mu is held.
func (p *Protocol) sendRecordsLocked(recs []sourcefilter.Record) {
	if len(recs) == 0 {
		return
	}
	src := p.linkLocalLocked()
	for _, r := range sourcefilter.Split(recs, p.mldReportRoomLocked(), wire.MLDv2RecordLen, mldSourceLen) {
		p.sendLater(p.mldReport(src, r))
	}
}

// queryLocked takes a query (RFC 3810 section 6.2) of group (unspecified
// for a general query) and, for a multicast address and source specific
// one, sources: an MLDv1 query (v1) puts the interface in MLDv1 mode, or
// keeps it there, and is answered as that mode's; so is any query while
// in it. Otherwise the answer is scheduled after a delay drawn from [0,
// Maximum Response Delay), at the earliest of it and any pending, with
// section 6.2's rules: one timer answers the general query and the
// groups asked about; what each group was asked is merged by
// sourcefilter.Queried (rules 3 to 5). p.mu is held.
func (p *Protocol) queryLocked(group netip.Addr, sources []netip.Addr, maxDelay time.Duration, v1 bool) {
	p.v1Locked() // the end of an earlier querier's timer, first
	if v1 {
		p.mld.v1Until = p.env.Clock.Now().Add(p.olderQuerierTimeout())
	}
	if p.v1Locked() {
		p.v1QueryLocked(group, maxDelay)
		return
	}
	general := group.IsUnspecified()
	if general {
		if len(p.joinedLocked()) == 1 {
			return // all-nodes alone, never reported
		}
	} else if g := p.mld.groups[group]; g == nil || !g.state.Joined() || !reported(group) {
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
			m.asked = map[netip.Addr]*sourcefilter.Queried{}
		}
		q := m.asked[group]
		if q == nil {
			q = &sourcefilter.Queried{}
			m.asked[group] = q
		}
		q.Ask(sources)
	}
	if m.respond != nil {
		m.respond.Stop()
	}
	m.deadline = at
	m.gen++
	gen := m.gen
	m.respond = p.env.Clock.AfterFunc(at.Sub(now), func() { p.respond(gen) })
}

// v1QueryLocked answers a query in MLDv1 mode (RFC 2710 section 4):
// "When a node receives a General Query, it sets a delay timer for each
// multicast address to which it is listening on the interface ... When a
// node receives a Multicast-Address-Specific Query, it sets a delay timer
// for that address if it is listening to it ... If a timer for any address
// is already running, it is reset to the new random value only if the
// requested Maximum Response Delay is less than the remaining value of the
// running timer." The delay is drawn from [0, Maximum Response Delay].
// Sources, an MLDv2 query's, are not MLDv1's to answer: the group is.
func (p *Protocol) v1QueryLocked(group netip.Addr, maxDelay time.Duration) {
	now := p.env.Clock.Now()
	// In the groups' order, so that a seeded random source gives the
	// same delays each run.
	for _, a := range p.joinedLocked()[1:] {
		if !group.IsUnspecified() && a != group || !reported(a) {
			continue
		}
		g := p.mld.groups[a]
		if g.answer != nil && g.answerAt.Sub(now) <= maxDelay {
			continue
		}
		g.stopAnswer()
		d := time.Duration(p.env.Rand.IntN(int(maxDelay) + 1))
		g.answerAt = now.Add(d)
		var t clock.Timer
		t = p.env.Clock.AfterFunc(d, func() {
			p.mu.Lock()
			defer p.unlock()
			if p.closed || g.answer != t {
				return // stopped, or replaced by a sooner one
			}
			g.answer = nil
			if p.mld.groups[g.addr] == g && g.state.Joined() && p.v1Locked() {
				p.sendLater(p.mldV1(p.linkLocalLocked(), g.addr, wire.ICMPv6MLDv1Report, g.addr))
			}
		})
		g.answer = t
	}
}

// otherReportLocked takes another listener's MLDv1 Report of group: in
// MLDv1 mode it answers the query for both of us, and our pending answer
// is not sent (RFC 2710 section 4: "If a node receives another node's
// Report from an interface for a multicast address while it has a timer
// running for that same address on that interface, it stops its timer and
// does not send a Report"). MLDv2 suppresses nothing (RFC 3810 section
// 6.2). p.mu is held.
func (p *Protocol) otherReportLocked(group netip.Addr) {
	g := p.mld.groups[group]
	if g == nil || g.answer == nil || !p.v1Locked() {
		return
	}
	g.stopAnswer()
	p.Stats.MLDReportsSuppressed.Inc()
}

// MLDVersion returns the Host Compatibility Mode: 2, or 1 while an MLDv1
// querier is present (RFC 3810 section 8.2.1).
func (p *Protocol) MLDVersion() int {
	p.mu.Lock()
	defer p.unlock()
	if p.v1Locked() {
		return 1
	}
	return 2
}

// respond sends the pending answer to queries, current-state records as
// the interface's state is now (RFC 3810 section 6.3): for the general
// query, each group's whole state (IS_IN or IS_EX with its sources); for
// a group asked about, what sourcefilter.Queried finds it was asked:
// its whole state, or the sources asked that it takes, if any.
func (p *Protocol) respond(gen uint64) {
	p.mu.Lock()
	defer p.unlock()
	m := &p.mld
	if p.closed || m.gen != gen || p.v1Locked() {
		return
	}
	var recs []sourcefilter.Record
	for _, a := range p.joinedLocked()[1:] {
		if !reported(a) {
			continue
		}
		state := m.groups[a].state
		var r sourcefilter.Record
		ok := false
		switch q := m.asked[a]; {
		case m.general:
			r, ok = sourcefilter.Current(a, state)
		case q != nil:
			r, ok = q.Answer(a, state)
		}
		if ok {
			recs = append(recs, r)
		}
	}
	m.respond, m.general, m.asked = nil, false, nil
	p.sendRecordsLocked(recs)
}

// Groups returns the multicast groups the interface listens to, from
// any source or some: all-nodes, the solicited-node group of each
// address, and those the host's sockets joined.
func (p *Protocol) Groups() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.joinedLocked()
}

// GroupFilter returns the interface's filter for group (RFC 3810 section
// 4.2): sourcefilter.None when it does not listen to it, sourcefilter.Any
// for all-nodes.
func (p *Protocol) GroupFilter(group netip.Addr) sourcefilter.Filter {
	group = group.WithZone("")
	if group == ipv6.AllNodes {
		return sourcefilter.Any
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if g := p.mld.groups[group]; g != nil {
		return sourcefilter.Filter{Mode: g.state.Mode, Sources: slices.Clone(g.state.Sources)}
	}
	return sourcefilter.None
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
