package igmp

import (
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/sourcefilter"
)

// The host's protocol: RFC 3376 section 5, the actions on a change of
// interface state (section 5.1, change.go) and on reception of a query
// (section 5.2, query.go), with the compatibility modes of section 7.2
// that make a version 3 host speak version 2 (RFC 2236 section 3) or
// version 1 (RFC 1112 appendix I) while such a querier is on the link.
// This file holds what both share: a group's state, the timers and the
// mode.

// group is the interface's record of one group (RFC 3376 section 3.2)
// and what it owes the routers about it; p.mu guards it. A group left
// (state None) stays in p.groups until the reports of its leaving are
// sent, so that a join meanwhile merges with them rather than racing
// them.
type group struct {
	addr  netip.Addr
	state sourcefilter.Filter
	// changes are the version 3 state-change reports owed (section
	// 5.1); older is how many more version 1 or 2 Membership Reports of
	// a join are owed (RFC 2236 section 3). retrans sends the next.
	changes sourcefilter.Changes
	older   int
	retrans pending
	// queried and answer are the pending answer to queries about this
	// group: group-specific and group-and-source-specific ones in
	// version 3 mode (section 5.2's "group timer" and "source list"),
	// any in versions 1 and 2 (RFC 2236 section 3's per-group delay
	// timer).
	queried sourcefilter.Queried
	asked   int // sources the queries recorded in queried listed
	answer  pending
}

// maxAsked bounds the sources the pending answer to a group's
// group-and-source-specific queries records: past it, the answer is the
// group's whole state, as to a group-specific query, which tells the
// routers what they asked and more, so that queries (each may list
// thousands of sources, and rule 5 of section 5.2 adds them up until the
// answer goes, up to Max Resp Time's 53 minutes later) cannot make a host
// hold more.
const maxAsked = 1024

// ask records a query about g's sources, none for a group-specific one
// (section 5.2, rules 3 to 5), within maxAsked.
func (g *group) ask(sources []netip.Addr) {
	if g.asked += len(sources); g.asked > maxAsked {
		sources = nil
	}
	g.queried.Ask(sources)
}

// answered forgets the queries answered.
func (g *group) answered() {
	g.queried = sourcefilter.Queried{}
	g.asked = 0
}

func newGroup(addr netip.Addr) *group { return &group{addr: addr} }

// stop forgets every report and answer g owes.
func (g *group) stop() {
	g.retrans.stop()
	g.answer.stop()
	g.changes.Reset()
	g.older = 0
	g.answered()
}

// owes reports whether a state-change report of g is still to be sent.
func (g *group) owes() bool { return g.changes.Pending() || g.older > 0 }

// settleLocked drops g once it is left and owes nothing more.
func (p *Protocol) settleLocked(g *group) {
	if g.state.Joined() || g.owes() {
		return
	}
	g.stop()
	if p.groups[g.addr] == g {
		delete(p.groups, g.addr)
	}
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

// modeDroppedLocked cancels what the groups owe when the mode falls to an
// older version's (section 7.2.1: "Whenever a host changes its
// compatibility mode, it cancels all its pending response and
// retransmission timers"); the groups left, which were kept for their
// reports alone, go with them.
func (p *Protocol) modeDroppedLocked() {
	p.general.stop()
	for _, g := range p.groups {
		g.stop()
		p.settleLocked(g)
	}
}
