package sourcefilter_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/gonetstack/gonet/sourcefilter"
)

var (
	group      = netip.MustParseAddr("232.1.1.1")
	a, b, c, d = src(1), src(2), src(3), src(4)
)

func src(i byte) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, i}) }

func in(s ...netip.Addr) sourcefilter.Filter { return sourcefilter.New(sourcefilter.Include, s...) }
func ex(s ...netip.Addr) sourcefilter.Filter { return sourcefilter.New(sourcefilter.Exclude, s...) }

func TestFilterAllowsTheSourcesItsModeTakes(t *testing.T) {
	for _, tt := range []struct {
		f    sourcefilter.Filter
		take []netip.Addr
		drop []netip.Addr
	}{
		{sourcefilter.None, nil, []netip.Addr{a, b}},
		{sourcefilter.Any, []netip.Addr{a, b}, nil},
		{in(b, a), []netip.Addr{a, b}, []netip.Addr{c}},
		{ex(a), []netip.Addr{b, c}, []netip.Addr{a}},
		{in(netip.MustParseAddr("fe80::1%eth0")), []netip.Addr{netip.MustParseAddr("fe80::1%eth1")}, []netip.Addr{netip.MustParseAddr("fe80::2")}},
	} {
		for _, s := range tt.take {
			if !tt.f.Allows(s) {
				t.Errorf("%v refuses %v", tt.f, s)
			}
		}
		for _, s := range tt.drop {
			if tt.f.Allows(s) {
				t.Errorf("%v takes %v", tt.f, s)
			}
		}
	}
}

func TestNewSortsAndDedupes(t *testing.T) {
	f := in(c, a, c, b)
	if !slices.Equal(f.Sources, []netip.Addr{a, b, c}) {
		t.Errorf("sources %v", f.Sources)
	}
	if got := f.Without(b).With(d).String(); got != "INCLUDE {192.0.2.1, 192.0.2.3, 192.0.2.4}" {
		t.Errorf("Without(b).With(d) = %s", got)
	}
	if f.String() != "INCLUDE {192.0.2.1, 192.0.2.2, 192.0.2.3}" {
		t.Errorf("With/Without changed the filter they were called on: %v", f)
	}
	if sourcefilter.None.Joined() || !sourcefilter.Any.Joined() || !in(a).Joined() {
		t.Error("Joined: want None alone not joined")
	}
}

// RFC 3376 section 3.2's merging of the sockets' filters into the
// interface's, with its own examples.
func TestMembersMergeAsSection3_2(t *testing.T) {
	for _, tt := range []struct {
		name    string
		members []sourcefilter.Filter
		want    sourcefilter.Filter
	}{
		{"no members", nil, sourcefilter.None},
		{"None is no member", []sourcefilter.Filter{sourcefilter.None}, sourcefilter.None},
		{"includes are united", []sourcefilter.Filter{in(a, b), in(b, c)}, in(a, b, c)},
		{"an exclude makes it exclude", []sourcefilter.Filter{in(a), sourcefilter.Any}, sourcefilter.Any},
		{"excludes are intersected", []sourcefilter.Filter{ex(a, b, c), ex(b, c, d)}, ex(b, c)},
		// Section 3.2's example: socket 1 EXCLUDE {a, b, c}, socket 2
		// EXCLUDE {b, c, d}, socket 3 INCLUDE {b, z}: EXCLUDE {c}.
		{"RFC example", []sourcefilter.Filter{ex(a, b, c), ex(b, c, d), in(b, src(26))}, ex(c)},
		{"one plain join takes every source", []sourcefilter.Filter{ex(a), sourcefilter.Any}, sourcefilter.Any},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var m sourcefilter.Members
			for _, f := range tt.members {
				m.Add(f)
			}
			if got := m.State(); !got.Equal(tt.want) {
				t.Errorf("state %v, want %v", got, tt.want)
			}
			for _, f := range tt.members {
				m.Remove(f)
			}
			if got := m.State(); !got.Equal(sourcefilter.None) || m.Len() != 0 {
				t.Errorf("all removed: state %v with %d members", got, m.Len())
			}
		})
	}
}

func TestMembersChangeOneFilterLeavesTheOthers(t *testing.T) {
	var m sourcefilter.Members
	m.Add(in(a))
	m.Add(in(a, b))
	m.Change(in(a, b), in(c))
	if got := m.State(); !got.Equal(in(a, c)) || m.Len() != 2 {
		t.Errorf("state %v with %d members, want INCLUDE {a, c} with 2", got, m.Len())
	}
	m.Change(in(c), ex(a))
	if got := m.State(); !got.Equal(sourcefilter.Any) {
		t.Errorf("state %v: an include of a takes a back from an exclude of it", got)
	}
}

func rec(t sourcefilter.RecordType, s ...netip.Addr) sourcefilter.Record {
	return sourcefilter.Record{Type: t, Group: group, Sources: s}
}

func show(rs []sourcefilter.Record) string {
	out := ""
	for _, r := range rs {
		out += fmt.Sprintf("%d%v ", r.Type, r.Sources)
	}
	return out
}

// The reports a series of changes makes, report by report, with the
// Robustness Variable 2: section 5.1's table and its merging rules.
func TestChangesReportAsSection5_1(t *testing.T) {
	const (
		toIn  = sourcefilter.ChangeToInclude
		toEx  = sourcefilter.ChangeToExclude
		allow = sourcefilter.AllowNewSources
		block = sourcefilter.BlockOldSources
	)
	type step struct {
		to   sourcefilter.Filter // a change to this state, or
		send bool                // a report sent
		want []sourcefilter.Record
	}
	change := func(f sourcefilter.Filter) step { return step{to: f} }
	report := func(r ...sourcefilter.Record) step { return step{send: true, want: r} }
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"join any source: TO_EX {}, twice", []step{
			change(sourcefilter.Any), report(rec(toEx)), report(rec(toEx)), report(),
		}},
		{"leave: TO_IN {}", []step{
			change(sourcefilter.Any), report(rec(toEx)), report(rec(toEx)),
			change(sourcefilter.None), report(rec(toIn)), report(rec(toIn)), report(),
		}},
		{"source-specific join is INCLUDE to INCLUDE: ALLOW", []step{
			change(in(a, b)), report(rec(allow, a, b)), report(rec(allow, a, b)), report(),
		}},
		{"source-specific leave: BLOCK", []step{
			change(in(a)), report(rec(allow, a)), report(rec(allow, a)),
			change(sourcefilter.None), report(rec(block, a)), report(rec(block, a)), report(),
		}},
		{"block a source of an any-source join", []step{
			change(sourcefilter.Any), report(rec(toEx)), report(rec(toEx)),
			change(ex(a)), report(rec(block, a)), report(rec(block, a)), report(),
		}},
		{"unblock it: ALLOW", []step{
			change(ex(a)), report(rec(toEx, a)), report(rec(toEx, a)),
			change(sourcefilter.Any), report(rec(allow, a)), report(rec(allow, a)), report(),
		}},
		{"a second change merges into the reports owed", []step{
			change(in(a)), report(rec(allow, a)),
			change(in(a, b)), report(rec(allow, a, b)), report(rec(allow, b)), report(),
		}},
		{"a source allowed then dropped is blocked, not allowed", []step{
			change(in(a)), report(rec(allow, a)),
			change(in(b)), report(rec(allow, b), rec(block, a)), report(rec(allow, b), rec(block, a)), report(),
		}},
		{"a mode change clears source changes owed and carries the state", []step{
			change(in(a)), report(rec(allow, a)),
			change(ex(c)), report(rec(toEx, c)), report(rec(toEx, c)), report(),
		}},
		{"source changes during a mode change follow it", []step{
			change(ex(c)), report(rec(toEx, c)),
			change(ex(c, d)), report(rec(toEx, c, d)), report(rec(block, d)), report(rec(block, d)), report(),
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ch sourcefilter.Changes
			state := sourcefilter.None
			for i, s := range tt.steps {
				if !s.send {
					ch.Change(state, s.to, 2)
					state = s.to
					continue
				}
				got := ch.Next(group, state)
				if show(got) != show(s.want) {
					t.Fatalf("step %d: report %s, want %s", i, show(got), show(s.want))
				}
				if len(got) == 0 && ch.Pending() {
					t.Fatalf("step %d: an empty report while reports are owed", i)
				}
			}
			if ch.Pending() {
				t.Error("still pending at the end")
			}
		})
	}
}

func TestChangesReset(t *testing.T) {
	var ch sourcefilter.Changes
	ch.Change(sourcefilter.None, in(a), 2)
	ch.Reset()
	if ch.Pending() || ch.Next(group, in(a)) != nil {
		t.Error("Reset left reports owed")
	}
}

// Section 5.2's rules 3 to 5 and its table for the answer to
// group-and-source-specific queries.
func TestQueriedAnswersAsSection5_2(t *testing.T) {
	for _, tt := range []struct {
		name   string
		asked  [][]netip.Addr // each query's sources; none for group-specific
		state  sourcefilter.Filter
		want   sourcefilter.Record
		answer bool
	}{
		{"nothing asked", nil, sourcefilter.Any, sourcefilter.Record{}, false},
		{"group-specific, exclude", [][]netip.Addr{nil}, ex(a), rec(sourcefilter.ModeIsExclude, a), true},
		{"group-specific, include", [][]netip.Addr{nil}, in(a, b), rec(sourcefilter.ModeIsInclude, a, b), true},
		{"group-specific, not a member", [][]netip.Addr{nil}, sourcefilter.None, sourcefilter.Record{}, false},
		{"sources, include: A*B", [][]netip.Addr{{a, c}}, in(a, b), rec(sourcefilter.ModeIsInclude, a), true},
		{"sources, exclude: A-B", [][]netip.Addr{{a, c}}, ex(a, b), rec(sourcefilter.ModeIsInclude, c), true},
		{"sources, none taken: no answer", [][]netip.Addr{{c}}, in(a, b), sourcefilter.Record{}, false},
		{"rule 5: source lists augmented", [][]netip.Addr{{a}, {b}}, in(a, b, c), rec(sourcefilter.ModeIsInclude, a, b), true},
		{"rule 4: a group query clears the sources", [][]netip.Addr{{a}, nil}, in(a, b), rec(sourcefilter.ModeIsInclude, a, b), true},
		{"rule 4: sources after a group query ask the group", [][]netip.Addr{nil, {a}}, in(a, b), rec(sourcefilter.ModeIsInclude, a, b), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var q sourcefilter.Queried
			for _, s := range tt.asked {
				q.Ask(s)
			}
			got, ok := q.Answer(group, tt.state)
			if ok != tt.answer || show([]sourcefilter.Record{got}) != show([]sourcefilter.Record{tt.want}) {
				t.Errorf("answer %s (%v), want %s (%v)", show([]sourcefilter.Record{got}), ok, show([]sourcefilter.Record{tt.want}), tt.answer)
			}
		})
	}
}

func TestCurrentLeavesOutGroupsNotJoined(t *testing.T) {
	if _, ok := sourcefilter.Current(group, sourcefilter.None); ok {
		t.Error("a record for INCLUDE {}")
	}
	if r, ok := sourcefilter.Current(group, in(a)); !ok || r.Type != sourcefilter.ModeIsInclude {
		t.Errorf("INCLUDE {a}: %v %v", r, ok)
	}
}

// Section 4.2.16: records packed into reports of a bounded size; one too
// large split, but for an exclude list, which is cut.
func TestSplitPacksRecords(t *testing.T) {
	many := func(n int) []netip.Addr {
		s := make([]netip.Addr, n)
		for i := range s {
			s[i] = src(byte(i + 1))
		}
		return s
	}
	// Room for a record of 3 sources: 8 + 3*4 = 20 bytes.
	for _, tt := range []struct {
		name string
		recs []sourcefilter.Record
		want []int // sources in each record, reports separated by -1
	}{
		{"fit together", []sourcefilter.Record{rec(1, a), rec(2)}, []int{1, 0}},
		{"a second report", []sourcefilter.Record{rec(1, a, b), rec(5, a)}, []int{2, -1, 1}},
		{"an include split", []sourcefilter.Record{rec(5, many(7)...)}, []int{3, -1, 3, -1, 1}},
		{"an exclude cut", []sourcefilter.Record{rec(sourcefilter.ModeIsExclude, many(7)...), rec(sourcefilter.ChangeToExclude, many(4)...)}, []int{3, -1, 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for i, rep := range sourcefilter.Split(tt.recs, 20, 8, 4) {
				if i > 0 {
					got = append(got, -1)
				}
				size := 0
				for _, r := range rep {
					got = append(got, len(r.Sources))
					size += 8 + 4*len(r.Sources)
				}
				if size > 20 {
					t.Errorf("report %d of %d bytes", i, size)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("reports %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMembersRefuseToRemoveWhatNoMemberHas(t *testing.T) {
	var m sourcefilter.Members
	m.Add(in(a))
	for _, f := range []sourcefilter.Filter{sourcefilter.Any, in(b), ex(a)} {
		if m.Remove(f) {
			t.Errorf("removed %v from members INCLUDE {a}", f)
		}
	}
	if m.Change(in(b), in(c)) {
		t.Error("changed a filter no member has")
	}
	if got := m.State(); !got.Equal(in(a)) || m.Len() != 1 {
		t.Errorf("state %v with %d members after refusals, want INCLUDE {a} with 1", got, m.Len())
	}
	if !m.Remove(in(a)) || m.Len() != 0 {
		t.Error("the member's own filter not removed")
	}
}

// merged is RFC 3376 section 3.2's rule applied to the whole list of
// filters at once, the oracle for Members' counts.
func merged(fs []sourcefilter.Filter) sourcefilter.Filter {
	var incl, excl []netip.Addr
	excluding := 0
	for _, f := range fs {
		if f.Mode == sourcefilter.Include {
			incl = append(incl, f.Sources...)
			continue
		}
		if excluding == 0 {
			excl = slices.Clone(f.Sources)
		} else {
			excl = slices.DeleteFunc(excl, func(s netip.Addr) bool { return !f.Has(s) })
		}
		excluding++
	}
	if excluding == 0 {
		return in(incl...)
	}
	inc := in(incl...)
	return ex(slices.DeleteFunc(excl, inc.Has)...)
}

// randomFilter draws a filter over four sources, None among them.
func randomFilter(r *rand.Rand) sourcefilter.Filter {
	var s []netip.Addr
	for i := range 4 {
		if r.IntN(2) == 0 {
			s = append(s, src(byte(i+1)))
		}
	}
	return sourcefilter.New(sourcefilter.Mode(r.IntN(2)), s...)
}

func TestMembersAgreeWithTheMergeOfTheWholeList(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m sourcefilter.Members
	var list []sourcefilter.Filter
	for step := range 5000 {
		if len(list) > 0 && r.IntN(3) == 0 {
			i := r.IntN(len(list))
			if !m.Remove(list[i]) {
				t.Fatalf("step %d: member %v not removed", step, list[i])
			}
			list = slices.Delete(list, i, i+1)
		} else if f := randomFilter(r); f.Joined() {
			m.Add(f)
			list = append(list, f)
		}
		if got, want := m.State(), merged(list); !got.Equal(want) {
			t.Fatalf("step %d: members %v merge to %v, want %v", step, list, got, want)
		}
	}
}

// router is what a multicast router learns of one host's state from its
// reports, as RFC 3376 section 6.4's table has it for a lone member:
// TO_IN and TO_EX set the state, ALLOW and BLOCK add sources to or take
// them from what it takes.
type router struct{ view sourcefilter.Filter }

func (r *router) take(rec sourcefilter.Record) {
	s := sourcefilter.New(sourcefilter.Include, rec.Sources...)
	switch rec.Type {
	case sourcefilter.ChangeToInclude:
		r.view = s
	case sourcefilter.ChangeToExclude:
		r.view = sourcefilter.New(sourcefilter.Exclude, rec.Sources...)
	case sourcefilter.AllowNewSources, sourcefilter.BlockOldSources:
		for _, a := range s.Sources {
			if (rec.Type == sourcefilter.AllowNewSources) == (r.view.Mode == sourcefilter.Include) {
				r.view = r.view.With(a)
			} else {
				r.view = r.view.Without(a)
			}
		}
	}
}

// Over a link that loses nothing, a router that hears every report knows
// the host's state after each, however the changes come: the merging of
// section 5.1 never reports a stale state.
func TestChangesKeepALosslessRouterInStep(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var ch sourcefilter.Changes
	var rt router
	state := sourcefilter.None
	for step := range 5000 {
		if r.IntN(2) == 0 {
			next := randomFilter(r)
			ch.Change(state, next, 2)
			state = next
		}
		for _, rec := range ch.Next(group, state) {
			rt.take(rec)
		}
		if !rt.view.Equal(state) {
			t.Fatalf("step %d: the router sees %v, the host is in %v", step, rt.view, state)
		}
	}
}
