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
//
// While an MLDv1 querier is on the link, the interface speaks MLDv1 (RFC
// 3810 section 8.2.1, RFC 2710 section 4), as a Linux bridge's querier
// asks by default: a Report to the group when it is joined and in answer
// to queries, a timer per group, another listener's Report answering for
// us, and a Done to all-routers when it is left.

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
// in the last Query received) plus ([Query Response Interval])".
const olderQuerierTimeout = MLDRobustness*MLDQueryInterval + MLDQueryResponseInterval

// group is one joined multicast address; p.mu guards it.
type group struct {
	addr netip.Addr
	refs int // addresses sharing the solicited-node group
	// left is how many more state change reports are owed and of
	// which record type; retrans fires the next.
	left    int
	change  wire.MLDv2RecordType
	retrans clock.Timer
	// answer is the pending MLDv1 Report answering a query (RFC 2710
	// section 4's per-address timer), due at answerAt.
	answer   clock.Timer
	answerAt time.Time
}

func (g *group) stop() {
	if g.retrans != nil {
		g.retrans.Stop()
		g.retrans = nil
	}
	g.left = 0
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
	// general query, or for the groups listed, when respond fires.
	respond  clock.Timer
	deadline time.Time
	general  bool
	asked    map[netip.Addr]bool
	gen      uint64
	// v1Until is when the Older Version Querier Present timer ends (RFC
	// 3810 section 8.2.1); v1 is the mode last found, for Stats.MLDMode.
	v1Until time.Time
	v1      bool
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
// runs, or always with Config.MLDVersion 1. p.mu is held.
func (p *Protocol) v1Locked() bool {
	v1 := p.cfg.MLDVersion == 1 || p.env.Clock.Now().Before(p.mld.v1Until)
	if v1 != p.mld.v1 {
		p.mld.v1 = v1
		p.Stats.MLDMode.Add(map[bool]int64{false: 1, true: -1}[v1]) // 2 to 1, or back
	}
	return v1
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
	g.stopAnswer()
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
// range (0, [Unsolicited Report Interval])" (RFC 3810 section 6.1),
// replacing those of an earlier change still owed. In MLDv1 mode a join
// is reported as often with Reports to the group, and a leave with one
// Done (RFC 2710 section 4: it "MAY" be left out when another listener
// reported last, which a host that always sends it need not track).
func (p *Protocol) stateChangeLocked(g *group, change wire.MLDv2RecordType) {
	if g.retrans != nil {
		g.retrans.Stop()
		g.retrans = nil
	}
	if !reported(g.addr) {
		return
	}
	g.change, g.left = change, MLDRobustness
	p.sendChangeLocked(g)
}

func (p *Protocol) sendChangeLocked(g *group) {
	if g.left == 0 || p.closed {
		return
	}
	g.left--
	interval := MLDUnsolicitedReportInterval
	switch src := p.linkLocalLocked(); {
	case !p.v1Locked():
		p.sendLater(p.mldReport(src, []wire.MLDv2Record{{Type: g.change, Group: g.addr}}))
	case g.change == wire.MLDv2ChangeToExclude:
		p.sendLater(p.mldV1(src, g.addr, wire.ICMPv6MLDv1Report, g.addr))
		interval = MLDv1UnsolicitedReportInterval
	default:
		p.sendLater(p.mldV1(src, ipv6.AllRouters, wire.ICMPv6MLDv1Done, g.addr))
		g.left = 0
	}
	if g.left == 0 {
		return
	}
	d := time.Duration(1 + p.env.Rand.IntN(int(interval)))
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
// sooner covers a later one. An MLDv1 query (v1) puts the interface in
// MLDv1 mode, or keeps it there, and is answered as that mode's; so is any
// query while in it. p.mu is held.
func (p *Protocol) queryLocked(group netip.Addr, maxDelay time.Duration, v1 bool) {
	was := p.v1Locked()
	if v1 {
		p.mld.v1Until = p.env.Clock.Now().Add(olderQuerierTimeout)
	}
	if p.v1Locked() {
		if !was {
			// RFC 3810 section 8.2.1: "Whenever a host changes its
			// compatibility mode, it cancels all its pending
			// responses and retransmission timers."
			p.mld.stop()
			p.log.log.Info("MLDv1 querier present: speaking MLDv1", slog.Duration("for", olderQuerierTimeout))
		}
		p.v1QueryLocked(group, maxDelay)
		return
	}
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

// v1QueryLocked answers a query in MLDv1 mode (RFC 2710 section 4):
// "When a node receives a General Query, it sets a delay timer for each
// multicast address to which it is listening on the interface ... When a
// node receives a Multicast-Address-Specific Query, it sets a delay timer
// for that address if it is listening to it ... If a timer for any address
// is already running, it is reset to the new random value only if the
// requested Maximum Response Delay is less than the remaining value of the
// running timer." The delay is drawn from [0, Maximum Response Delay].
func (p *Protocol) v1QueryLocked(group netip.Addr, maxDelay time.Duration) {
	now := p.env.Clock.Now()
	// In the groups' order, so that a seeded random source gives the
	// same delays each run.
	for _, a := range slices.SortedFunc(maps.Keys(p.mld.groups), netip.Addr.Compare) {
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
			if p.mld.groups[g.addr] == g && p.v1Locked() {
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
	defer p.mu.Unlock()
	if p.v1Locked() {
		return 1
	}
	return 2
}

// respond sends the pending answer to queries: a current-state report,
// MODE_IS_EXCLUDE with no sources for each group (RFC 3810 section 6.3).
func (p *Protocol) respond(gen uint64) {
	p.mu.Lock()
	defer p.unlock()
	m := &p.mld
	if p.closed || m.gen != gen || p.v1Locked() {
		return
	}
	var recs []wire.MLDv2Record
	for a := range m.groups {
		if (m.general || m.asked[a]) && reported(a) {
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
