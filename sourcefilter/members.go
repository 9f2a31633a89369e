package sourcefilter

import (
	"maps"
	"net/netip"
	"slices"
)

// Members are the filters of the sockets that joined one group on one
// interface, merged into the interface's (RFC 3376 section 3.2, RFC 3810
// section 4.2):
//
//	"If any of the socket records for the group have a filter mode of
//	EXCLUDE, then the interface record for that group will have a filter
//	mode of EXCLUDE, and its source list will be the intersection of the
//	source lists of all socket records in EXCLUDE mode, minus those
//	source addresses that appear in any socket record in INCLUDE mode."
//	Otherwise it is INCLUDE, "and its source list will be the union of
//	the source lists of all the socket records for the group."
//
// Members count rather than list (as Linux's sfcount does): how many
// members exclude, and per source how many include it and how many of the
// excluding ones exclude it; so a socket's filter is added and removed
// without the others'. The zero value has no members.
type Members struct {
	n        int // members, of either mode
	exclude  int // members in EXCLUDE mode
	included map[netip.Addr]int
	excluded map[netip.Addr]int
}

// Add counts a member's filter; None is no member and is not counted.
func (m *Members) Add(f Filter) { m.count(f, 1) }

// Remove takes back a filter Add counted. A filter no member could have
// (more removed than added) is refused: false, and nothing changes.
func (m *Members) Remove(f Filter) bool {
	if !m.has(f) {
		return false
	}
	m.count(f, -1)
	return true
}

// has reports whether a member could have filter f: one of its mode
// counted, and each of its sources.
func (m *Members) has(f Filter) bool {
	if !f.Joined() {
		return true
	}
	members, counts := m.n-m.exclude, m.included
	if f.Mode == Exclude {
		members, counts = m.exclude, m.excluded
	}
	if members == 0 {
		return false
	}
	for _, s := range f.Sources {
		if counts[s] == 0 {
			return false
		}
	}
	return true
}

// Change replaces a member's filter from with to; it is refused as
// Remove(from) is.
func (m *Members) Change(from, to Filter) bool {
	if !m.Remove(from) {
		return false
	}
	m.Add(to)
	return true
}

func (m *Members) count(f Filter, d int) {
	if !f.Joined() {
		return
	}
	m.n += d
	counts := &m.included
	if f.Mode == Exclude {
		m.exclude += d
		counts = &m.excluded
	}
	if *counts == nil {
		*counts = map[netip.Addr]int{}
	}
	for _, s := range f.Sources {
		if (*counts)[s] += d; (*counts)[s] == 0 {
			delete(*counts, s)
		}
	}
}

// Len is how many members there are.
func (m *Members) Len() int { return m.n }

// State is the interface's filter for the group, merged from its
// members' (section 3.2); None without members.
func (m *Members) State() Filter {
	included := slices.SortedFunc(maps.Keys(m.included), netip.Addr.Compare)
	if m.exclude == 0 {
		return Filter{Mode: Include, Sources: included}
	}
	// A source every excluding member excludes, which no including
	// member includes.
	var excluded []netip.Addr
	for s, n := range m.excluded {
		if n == m.exclude {
			excluded = append(excluded, s)
		}
	}
	slices.SortFunc(excluded, netip.Addr.Compare)
	return Filter{Mode: Exclude, Sources: minus(excluded, included)}
}
