package igmp

import "github.com/gonetstack/gonet/sourcefilter"

// Action on a change of interface state: RFC 3376 section 5.1 in version
// 3 mode, RFC 2236 section 3 and RFC 1112 appendix I in the
// compatibility modes (RFC 3376 section 7.2.1).
//
// "A change of interface state causes the system to immediately transmit
// a State-Change Report from that interface", of the records section
// 5.1's table gives, and "it is retransmitted [Robustness Variable] - 1
// more times, at intervals chosen at random from the range (0,
// [Unsolicited Report Interval])". A change made while reports of an
// earlier one are owed is merged into them. sourcefilter.Changes keeps
// that count per group and source, and gives each report's records.

// changedLocked reports g's change of state from old to g.state.
//
// In version 3 mode that is the records of section 5.1's table: TO_EX or
// TO_IN for a change of filter mode, joining in EXCLUDE mode and leaving
// from it among them; ALLOW and BLOCK for a change of sources in one mode,
// a join to INCLUDE (B) (ALLOW (B), as from INCLUDE {}) and a leave from
// it (BLOCK (B)) among them.
//
// Versions 1 and 2 have no sources to tell (section 7.2.1: the host uses
// "only the IGMPv2 protocol"), so a group joined in any state, an INCLUDE
// one too, is reported by an unsolicited Membership Report to the group,
// sent now and [Robustness Variable] - 1 more times (RFC 2236 section 3);
// a group left is told by one Leave Group to all-routers in version 2
// mode (RFC 2236 section 3; it "MAY be skipped" only when another host
// answered last, which a host that always sends it need not track) and by
// nothing in version 1 mode, which has no leave (RFC 3376 section 7.3.2);
// and a change between joined states sends nothing.
func (p *Protocol) changedLocked(g *group, old sourcefilter.Filter) {
	if !g.state.Joined() {
		// No state, nothing to answer for (section 5.2 answers with the
		// state the group has when its timer fires).
		g.answer.stop()
		g.answered()
	}
	switch mode := p.modeLocked(); {
	case mode == 3:
		g.changes.Change(old, g.state, p.robustness)
		p.sendChangeLocked(g)
	case !old.Joined():
		g.older = p.robustness
		p.sendChangeLocked(g)
	case !g.state.Joined():
		g.stop()
		if mode == 2 {
			p.queueLeave(g.addr)
		}
		p.settleLocked(g)
	}
}

// sendChangeLocked sends the next state-change report g owes now, and
// schedules the one after at random within the Unsolicited Report
// Interval of the mode; a group left that owes nothing more is dropped.
// The reports owed are the mode's: those of the other mode are cancelled
// by the change of mode (section 7.2.1).
func (p *Protocol) sendChangeLocked(g *group) {
	g.retrans.stop()
	interval := p.cfg.UnsolicitedReportInterval
	if mode := p.modeLocked(); mode == 3 {
		g.older = 0
		p.queueV3Records(g.changes.Next(g.addr, g.state))
	} else {
		g.changes.Reset()
		if g.older > 0 {
			g.older--
			p.queueV1V2Report(g.addr, mode)
		}
		interval = p.cfg.UnsolicitedReportIntervalV2
	}
	if g.owes() {
		p.after(&g.retrans, p.random(interval), func() { p.sendChangeLocked(g) })
		return
	}
	p.settleLocked(g)
}
