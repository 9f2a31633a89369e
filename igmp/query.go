package igmp

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/wire"
)

// Action on reception of a query: RFC 3376 section 5.2 in version 3
// mode, RFC 2236 section 3 in the compatibility modes (RFC 3376 section
// 7.2.1). Only groups joined are answered for: a group left that still
// owes reports of its leaving has no state to tell.

// queryLocked takes a valid query sent to dst.
func (p *Protocol) queryLocked(m wire.IGMP, dst netip.Addr) {
	version := m.QueryVersion()
	var sources []netip.Addr
	switch version {
	case 1:
		p.Stats.InQueriesV1.Inc()
	case 2:
		p.Stats.InQueriesV2.Inc()
	default:
		p.Stats.InQueriesV3.Inc()
		sources = m.Sources()
	}
	group := m.Group()
	general := group.IsUnspecified()
	if !general && len(sources) > 0 {
		p.Stats.InQueriesGroupSource.Inc()
	}
	switch {
	case general && dst.IsMulticast() && dst != AllSystems:
		// Section 9.1: "hosts SHOULD ignore v1, v2 or v3 General
		// Queries sent to a multicast address other than 224.0.0.1".
		p.Stats.InBadQueries.Inc()
		return
	case general && len(sources) > 0:
		// Section 4.1.8: the Number of Sources "is zero in a General
		// Query"; one with sources is neither kind, and Linux ignores
		// it too.
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
		p.modeDroppedLocked()
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
	g := p.groups[group]
	if g == nil || !g.state.Joined() {
		return
	}
	// "3. If the received Query is a Group-Specific Query or a Group-
	// and-Source-Specific Query and there is no pending response to a
	// previous Query for this group, then the group timer is used to
	// schedule a report. If the received Query is a Group-and-Source-
	// Specific Query, the list of queried sources is recorded to be used
	// when generating a response." Rules 4 and 5, for a response
	// pending, clear the list (the whole state is asked for) or add the
	// query's to it, sourcefilter.Queried's Ask; and in both "the group
	// timer is reset to the earliest of the remaining time for the
	// pending report and the selected delay."
	g.ask(sources)
	if g.answer.running() && !g.answer.at.After(at) {
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
// running timer." A version 3 query's sources are no part of it: the
// answer, a version 1 or 2 report, has none.
func (p *Protocol) olderQueryLocked(group netip.Addr, general bool, maxResp time.Duration) {
	now := p.env.Clock.Now()
	// In the groups' order, so that a seeded random source gives the
	// same delays each run.
	for _, a := range slices.SortedFunc(maps.Keys(p.groups), netip.Addr.Compare) {
		g := p.groups[a]
		if !g.state.Joined() || (!general && a != group) {
			continue
		}
		// Should the mode rise to version 3 before the timer fires, the
		// answer is the group's whole state.
		g.ask(nil)
		if g.answer.running() && g.answer.at.Sub(now) <= maxResp {
			continue
		}
		p.after(&g.answer, p.random(maxResp), func() { p.answerGroupLocked(g) })
	}
}

// answerGeneralLocked sends the answer to a General Query in version 3
// mode: "one Current-State Record for each multicast address for which
// the specified interface has reception state" (section 5.2), IS_IN or
// IS_EX with the group's sources, in as many reports as they fill.
func (p *Protocol) answerGeneralLocked() {
	if p.modeLocked() < 3 {
		return
	}
	var recs []sourcefilter.Record
	for _, a := range slices.SortedFunc(maps.Keys(p.groups), netip.Addr.Compare) {
		if r, ok := sourcefilter.Current(a, p.groups[a].state); ok {
			recs = append(recs, r)
		}
	}
	p.queueV3Records(recs)
}

// answerGroupLocked sends the answer to the queries about g: in version 3
// mode, the current-state record of what they asked (section 5.2: g's
// state after a group-specific query, IS_IN of the sources asked about it
// takes after group-and-source-specific ones, nothing when it takes none
// of them); a Membership Report of the mode's version to the group in
// the older modes.
func (p *Protocol) answerGroupLocked(g *group) {
	q := g.queried
	g.answered()
	if p.groups[g.addr] != g || !g.state.Joined() {
		return
	}
	if mode := p.modeLocked(); mode < 3 {
		p.queueV1V2Report(g.addr, mode)
		return
	}
	if r, ok := q.Answer(g.addr, g.state); ok {
		p.queueV3Records([]sourcefilter.Record{r})
	}
}

// otherReportLocked takes another host's version 1 or 2 report of group:
// in those modes it answers the query for both of them, and our pending
// answer is not sent (RFC 2236 section 3: "If a host receives another
// host's Report ... while it has a timer running, it stops its timer for
// the specified group and does not send a Report"). A version 3 host
// suppresses nothing (RFC 3376 section 5.2).
func (p *Protocol) otherReportLocked(group netip.Addr) {
	g := p.groups[group]
	if g == nil || !g.state.Joined() || !g.answer.running() || p.modeLocked() == 3 {
		return
	}
	g.answer.stop()
	g.answered()
	p.Stats.ReportsSuppressed.Inc()
}
