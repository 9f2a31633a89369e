package sourcefilter

import (
	"maps"
	"net/netip"
	"slices"
)

// RecordType is a group record's type (RFC 3376 section 4.2.12, RFC 3810
// section 5.2.12): the same numbers in IGMPv3 and MLDv2.
type RecordType uint8

// Current-state records (answers to queries), filter-mode-change records
// and source-list-change records.
const (
	ModeIsInclude   RecordType = 1
	ModeIsExclude   RecordType = 2
	ChangeToInclude RecordType = 3
	ChangeToExclude RecordType = 4
	AllowNewSources RecordType = 5
	BlockOldSources RecordType = 6
)

// Record is a group record: its type, group and sources.
type Record struct {
	Type    RecordType
	Group   netip.Addr
	Sources []netip.Addr
}

// Current is the current-state record of a group in state f, the answer
// to a general or group-specific query (RFC 3376 section 5.2): IS_IN or
// IS_EX with f's sources; none for a group in None, which the interface
// has no reception state for.
func Current(group netip.Addr, f Filter) (Record, bool) {
	if !f.Joined() {
		return Record{}, false
	}
	t := ModeIsInclude
	if f.Mode == Exclude {
		t = ModeIsExclude
	}
	return Record{Type: t, Group: group, Sources: f.Sources}, true
}

// Changes are a group's state-change reports still owed (RFC 3376
// section 5.1, RFC 3810 section 6.1): how many more reports carry a
// filter-mode-change record, and, per source, how many more carry it in
// an ALLOW or a BLOCK record. The zero value owes nothing.
//
// Each change is announced by a report sent at once and [Robustness
// Variable] - 1 more. A change made while reports of an earlier one are
// still owed is merged into them: "Each time a source is included in the
// difference report ..., retransmission state for that source needs to be
// maintained until [Robustness Variable] State-Change reports have been
// sent", and a filter-mode change makes the next [Robustness Variable]
// reports carry the mode and the whole source list, "even if any number of
// source-list changes occur in that period", the source-list changes
// following once they are sent.
type Changes struct {
	mode         int
	allow, block map[netip.Addr]int
}

// Change records the interface's state going from old to new, to be
// reported robustness times. Section 5.1's table:
//
//	INCLUDE (A) -> INCLUDE (B)   ALLOW (B-A), BLOCK (A-B)
//	EXCLUDE (A) -> EXCLUDE (B)   ALLOW (A-B), BLOCK (B-A)
//	INCLUDE (A) -> EXCLUDE (B)   TO_EX (B)
//	EXCLUDE (A) -> INCLUDE (B)   TO_IN (B)
//
// A mode change clears the source-list changes owed: its record carries
// the whole state they were changes to.
func (c *Changes) Change(old, new Filter, robustness int) {
	if old.Mode != new.Mode {
		c.mode = robustness
		c.allow, c.block = nil, nil
		return
	}
	allow, block := minus(new.Sources, old.Sources), minus(old.Sources, new.Sources)
	if new.Mode == Exclude {
		allow, block = block, allow
	}
	owe := func(to, from *map[netip.Addr]int, srcs []netip.Addr) {
		for _, s := range srcs {
			if *to == nil {
				*to = map[netip.Addr]int{}
			}
			(*to)[s] = robustness
			delete(*from, s)
		}
	}
	owe(&c.allow, &c.block, allow)
	owe(&c.block, &c.allow, block)
}

// Pending reports whether a report is owed.
func (c *Changes) Pending() bool { return c.mode > 0 || len(c.allow) > 0 || len(c.block) > 0 }

// Reset forgets every report owed, as a change of compatibility mode
// does (RFC 3376 section 7.2.1).
func (c *Changes) Reset() { *c = Changes{} }

// Next returns the records of the next report of group, whose state is
// now current, and counts it sent: the filter-mode-change record while
// one is owed, else an ALLOW and a BLOCK record of the sources owed,
// each left out when empty. It returns nil when nothing is owed.
func (c *Changes) Next(group netip.Addr, current Filter) []Record {
	if c.mode > 0 {
		c.mode--
		t := ChangeToInclude
		if current.Mode == Exclude {
			t = ChangeToExclude
		}
		return []Record{{Type: t, Group: group, Sources: current.Sources}}
	}
	var out []Record
	for _, o := range []struct {
		t      RecordType
		counts map[netip.Addr]int
	}{{AllowNewSources, c.allow}, {BlockOldSources, c.block}} {
		if len(o.counts) == 0 {
			continue
		}
		srcs := slices.SortedFunc(maps.Keys(o.counts), netip.Addr.Compare)
		for _, s := range srcs {
			if o.counts[s]--; o.counts[s] <= 0 {
				delete(o.counts, s)
			}
		}
		out = append(out, Record{Type: o.t, Group: group, Sources: srcs})
	}
	return out
}

// Queried is what the pending answer to queries about one group asks
// (RFC 3376 section 5.2, rules 3 to 5; RFC 3810 section 6.2): the group's
// whole state, after a group-specific query, or its state for the sources
// of group-and-source-specific ones, their lists merged. The zero value
// has been asked nothing.
type Queried struct {
	asked   bool
	group   bool
	sources []netip.Addr
}

// Ask records a query about the group, with the sources it lists (none
// for a group-specific query): "If there already is a pending response
// ... and either the new Query is a Group-Specific Query or the recorded
// source-list associated with the group is empty, then the group
// source-list is cleared" (rule 4); else "the group source list is
// augmented to contain the list of sources in the new Query" (rule 5).
func (q *Queried) Ask(sources []netip.Addr) {
	switch {
	case len(sources) == 0 || (q.asked && q.group):
		q.group, q.sources = true, nil
	default:
		q.sources = union(q.sources, New(Include, sources...).Sources)
	}
	q.asked = true
}

// Asked reports whether a query was recorded.
func (q *Queried) Asked() bool { return q.asked }

// Answer is the current-state record answering the queries recorded,
// for a group in state f (section 5.2): its whole state after a
// group-specific query (Current); after source-specific ones, the queried
// sources (A) the interface takes,
//
//	INCLUDE (B)   IS_IN (A*B)
//	EXCLUDE (B)   IS_IN (A-B)
//
// and "If the resulting Current-State Record has an empty set of source
// addresses, then no response is sent."
func (q *Queried) Answer(group netip.Addr, f Filter) (Record, bool) {
	if !q.asked || !f.Joined() {
		return Record{}, false
	}
	if q.group {
		return Current(group, f)
	}
	var srcs []netip.Addr
	if f.Mode == Include {
		srcs = intersect(q.sources, f.Sources)
	} else {
		srcs = minus(q.sources, f.Sources)
	}
	if len(srcs) == 0 {
		return Record{}, false
	}
	return Record{Type: ModeIsInclude, Group: group, Sources: srcs}, true
}

// Split packs records into reports with room bytes for records (the
// report's own header not counted), a record taking recordLen bytes and
// each of its sources sourceLen (RFC 3376
// section 4.2.16, RFC 3810 section 5.2.15): records go in order, as many
// to a report as fit; a record too large for a report of its own is split
// into records of the sources that fit, one report each, but for
// MODE_IS_EXCLUDE and CHANGE_TO_EXCLUDE_MODE, which "a single Group
// Record is sent, containing as many source addresses as can fit, and the
// remaining source addresses are not reported" (splitting an exclude list
// would report each part as the whole).
func Split(recs []Record, room, recordLen, sourceLen int) [][]Record {
	perRecord := max((room-recordLen)/sourceLen, 1)
	var out [][]Record
	var cur []Record
	used := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur, used = nil, 0
	}
	for _, r := range recs {
		size := recordLen + sourceLen*len(r.Sources)
		if size > room {
			flush()
			if r.Type == ModeIsExclude || r.Type == ChangeToExclude {
				r.Sources = r.Sources[:min(perRecord, len(r.Sources))]
				out = append(out, []Record{r})
				continue
			}
			for s := r.Sources; len(s) > 0; {
				n := min(len(s), perRecord)
				out = append(out, []Record{{Type: r.Type, Group: r.Group, Sources: s[:n]}})
				s = s[n:]
			}
			continue
		}
		if used+size > room {
			flush()
		}
		cur = append(cur, r)
		used += size
	}
	flush()
	return out
}
