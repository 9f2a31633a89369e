package igmp

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/wire"
)

// The host's protocol: RFC 3376 section 5 (actions on a change of
// interface state, section 5.1, and on reception of a query, section
// 5.2), with the compatibility modes of section 7.2 that make a version 3
// host speak version 2 (RFC 2236 section 3) or version 1 (RFC 1112
// appendix I) while such a querier is on the link. Every group is in
// EXCLUDE mode with no sources, so each of its records is of that state
// or a change to or from it.

// group is one joined group; p.mu guards it.
type group struct {
	addr netip.Addr
	// left is how many more state change reports are owed, and of which
	// kind: a join (CHANGE_TO_EXCLUDE_MODE {}) or a leave
	// (CHANGE_TO_INCLUDE_MODE {}); retrans sends the next.
	left    int
	change  wire.IGMPv3RecordType
	retrans pending
	// answer is the pending answer to a query about this group: a
	// group-specific one in version 3 mode, any in versions 1 and 2
	// (RFC 2236 section 3's per-group delay timer).
	answer pending
}

func (g *group) stop() {
	g.retrans.stop()
	g.answer.stop()
	g.left = 0
}

// pending is a timer that runs a step of the protocol under p.mu: at is
// when it fires; gen tells a callback that lost the race with stop or a
// reschedule that it is stale.
type pending struct {
	t   clock.Timer
	at  time.Time
	gen uint64
}

func (t *pending) running() bool { return t.t != nil }

func (t *pending) stop() {
	if t.t != nil {
		t.t.Stop()
		t.t = nil
	}
	t.gen++
}

// after (re)schedules t to run f after d. p.mu is held.
func (p *Protocol) after(t *pending, d time.Duration, f func()) {
	t.stop()
	gen := t.gen
	t.at = p.env.Clock.Now().Add(d)
	t.t = p.env.Clock.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.unlock()
		if p.closed || t.gen != gen {
			return
		}
		t.t = nil
		f()
	})
}

// random returns a delay drawn from (0, max], or zero for no max.
func (p *Protocol) random(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return time.Duration(1 + p.env.Rand.IntN(int(max)))
}

// modeLocked is the Host Compatibility Mode (RFC 3376 section 7.2.1):
// "IGMPv1 if the IGMPv1 Querier Present timer is running; IGMPv2 if the
// IGMPv2 Querier Present timer is running and the IGMPv1 one is not;
// IGMPv3 otherwise", within Config.Version.
func (p *Protocol) modeLocked() int {
	now := p.env.Clock.Now()
	mode := 3
	switch {
	case p.cfg.Version <= 1 || now.Before(p.v1Until):
		mode = 1
	case p.cfg.Version == 2 || now.Before(p.v2Until):
		mode = 2
	}
	if mode != p.mode {
		p.Stats.Mode.Add(int64(mode - p.mode))
		p.mode = mode
	}
	return mode
}

// olderQuerierTimeout is the Older Version Querier Present Timeout
// (section 8.12): "(the Robustness Variable) times (the Query Interval in
// the last Query received) plus (one Query Response Interval)".
func (p *Protocol) olderQuerierTimeout() time.Duration {
	return time.Duration(p.robustness)*QueryInterval + QueryResponseInterval
}

// joinedLocked reports a group just joined (section 5.1): in version 3
// mode a state change report, CHANGE_TO_EXCLUDE_MODE with no sources; in
// versions 1 and 2 an unsolicited Membership Report to the group (RFC
// 2236 section 3). Either is sent now and [Robustness Variable] - 1 more
// times.
func (p *Protocol) joinedLocked(g *group) {
	p.stateChangeLocked(g, wire.IGMPChangeToExclude)
}

// leftLocked reports a group just left: CHANGE_TO_INCLUDE_MODE with no
// sources in version 3 mode, sent [Robustness Variable] times (section
// 5.1); a Leave Group to all-routers in version 2 mode, once (RFC 2236
// section 3; it "MAY be skipped" only when another host answered last,
// which a host that always sends it need not track); nothing in version 1
// mode, which has no leave (RFC 3376 section 7.3.2).
func (p *Protocol) leftLocked(g *group) {
	g.answer.stop()
	p.stateChangeLocked(g, wire.IGMPChangeToInclude)
}

// stateChangeLocked starts the reports of a change of g, replacing those
// of an earlier change still owed: the latest state is what the routers
// must learn.
func (p *Protocol) stateChangeLocked(g *group, change wire.IGMPv3RecordType) {
	g.retrans.stop()
	g.change, g.left = change, p.robustness
	p.sendChangeLocked(g)
}

// sendChangeLocked sends the next report of g's change, and schedules the
// one after "at intervals chosen at random from the range (0,
// [Unsolicited Report Interval])" (section 5.1).
func (p *Protocol) sendChangeLocked(g *group) {
	if g.left == 0 {
		return
	}
	g.left--
	mode := p.modeLocked()
	interval := p.cfg.UnsolicitedReportIntervalV2
	switch {
	case mode == 3:
		p.queueV3Report([]wire.IGMPv3Record{{Type: g.change, Group: g.addr}})
		interval = p.cfg.UnsolicitedReportInterval
	case g.change == wire.IGMPChangeToExclude:
		p.queueV1V2Report(g.addr, mode)
	case mode == 2:
		p.queueLeave(g.addr)
		g.left = 0
	default:
		g.left = 0
	}
	if g.left > 0 {
		p.after(&g.retrans, p.random(interval), func() { p.sendChangeLocked(g) })
	}
}

// queryLocked takes a valid query sent to dst (section 5.2 in version 3
// mode, RFC 2236 section 3 in the older ones).
func (p *Protocol) queryLocked(m wire.IGMP, dst netip.Addr) {
	version := m.QueryVersion()
	switch version {
	case 1:
		p.Stats.InQueriesV1.Inc()
	case 2:
		p.Stats.InQueriesV2.Inc()
	default:
		p.Stats.InQueriesV3.Inc()
	}
	group := m.Group()
	general := group.IsUnspecified()
	switch {
	case general && dst.IsMulticast() && dst != AllSystems:
		// Section 9.1: "hosts SHOULD ignore v1, v2 or v3 General
		// Queries sent to a multicast address other than 224.0.0.1".
		p.Stats.InBadQueries.Inc()
		return
	case !general && (!group.IsMulticast() || (dst != group && dst != AllSystems)):
		p.Stats.InBadQueries.Inc()
		return
	}
	was := p.modeLocked()
	now := p.env.Clock.Now()
	switch version {
	case 1:
		p.v1Until = now.Add(p.olderQuerierTimeout())
	case 2:
		p.v2Until = now.Add(p.olderQuerierTimeout())
	default:
		// Section 4.1.6: a QRV of zero leaves the variable as it was.
		if q := m.QRV(); q != 0 {
			p.robustness = q
		}
	}
	mode := p.modeLocked()
	if mode < was {
		// Section 7.2.1: "Whenever a host changes its compatibility
		// mode, it cancels all its pending response and
		// retransmission timers."
		p.general.stop()
		for _, g := range p.groups {
			g.stop()
		}
	}
	maxResp := m.MaxResp()
	if mode < 3 {
		p.olderQueryLocked(group, general, maxResp)
		return
	}
	delay := p.random(maxResp)
	at := now.Add(delay)
	// "1. If there is a pending response to a previous General Query
	// scheduled sooner than the selected delay, no additional response
	// needs to be scheduled."
	if p.general.running() && !p.general.at.After(at) {
		return
	}
	// "2. If the received Query is a General Query, the interface timer
	// is used to schedule a response to the General Query after the
	// selected delay. Any previously pending response to a General
	// Query is canceled."
	if general {
		p.after(&p.general, delay, p.answerGeneralLocked)
		return
	}
	// "3. If the received Query is a Group-Specific Query ... and there
	// is no pending response to a previous Query for this group, then
	// the group timer is used to schedule a report." "4. If there
	// already is a pending response to a previous Query scheduled for
	// this group ... the group timer is reset to the earliest of the
	// remaining time for the pending report and the selected delay."
	g := p.groups[group]
	if g == nil || (g.answer.running() && !g.answer.at.After(at)) {
		return
	}
	p.after(&g.answer, delay, func() { p.answerGroupLocked(g) })
}

// olderQueryLocked answers a query in version 1 or 2 mode (RFC 2236
// section 3): "When a host receives a General Query, it sets delay timers
// for each group (excluding the all-systems group) of which it is a member
// ... When a host receives a Group-Specific Query, it sets a delay timer
// for the group being queried if it is a member ... If a timer for the
// group is already running, it is reset to the random value only if the
// requested Max Response Time is less than the remaining value of the
// running timer."
func (p *Protocol) olderQueryLocked(group netip.Addr, general bool, maxResp time.Duration) {
	now := p.env.Clock.Now()
	// In the groups' order, so that a seeded random source gives the
	// same delays each run.
	for _, a := range slices.SortedFunc(maps.Keys(p.groups), netip.Addr.Compare) {
		g := p.groups[a]
		if !general && a != group {
			continue
		}
		if g.answer.running() && g.answer.at.Sub(now) <= maxResp {
			continue
		}
		p.after(&g.answer, p.random(maxResp), func() { p.answerGroupLocked(g) })
	}
}

// answerGeneralLocked sends the answer to a General Query in version 3
// mode: a current-state record, MODE_IS_EXCLUDE with no sources, for every
// group (section 5.2).
func (p *Protocol) answerGeneralLocked() {
	if p.modeLocked() < 3 || len(p.groups) == 0 {
		return
	}
	recs := make([]wire.IGMPv3Record, 0, len(p.groups))
	for a := range p.groups {
		recs = append(recs, wire.IGMPv3Record{Type: wire.IGMPModeIsExclude, Group: a})
	}
	slices.SortFunc(recs, func(a, b wire.IGMPv3Record) int { return a.Group.Compare(b.Group) })
	// Section 4.2.16: records that do not fit one report go in as many
	// as needed.
	for len(recs) > 0 {
		n := min(len(recs), maxRecords)
		p.queueV3Report(recs[:n])
		recs = recs[n:]
	}
}

// answerGroupLocked sends the answer to a query about g: its current
// state in version 3 mode; a Membership Report of the mode's version to
// the group in the older ones.
func (p *Protocol) answerGroupLocked(g *group) {
	if p.groups[g.addr] != g {
		return
	}
	if mode := p.modeLocked(); mode < 3 {
		p.queueV1V2Report(g.addr, mode)
		return
	}
	p.queueV3Report([]wire.IGMPv3Record{{Type: wire.IGMPModeIsExclude, Group: g.addr}})
}

// otherReportLocked takes another host's version 1 or 2 report of group:
// in those modes it answers the query for both of them, and our pending
// answer is not sent (RFC 2236 section 3: "If a host receives another
// host's Report ... while it has a timer running, it stops its timer for
// the specified group and does not send a Report"). A version 3 host
// suppresses nothing (RFC 3376 section 5.2).
func (p *Protocol) otherReportLocked(group netip.Addr) {
	g := p.groups[group]
	if g == nil || !g.answer.running() || p.modeLocked() == 3 {
		return
	}
	g.answer.stop()
	p.Stats.ReportsSuppressed.Inc()
}
