package igmp

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/wire"
)

// Source filters (RFC 3376 sections 3, 5.1, 5.2 and 4.2.16) and what the
// version 1 and 2 modes make of them (section 7.2.1).

var (
	g3 = netip.MustParseAddr("239.3.3.3")
	s1 = netip.MustParseAddr("192.0.2.1")
	s2 = netip.MustParseAddr("192.0.2.2")
	s3 = netip.MustParseAddr("198.51.100.3")
)

func include(srcs ...netip.Addr) sourcefilter.Filter {
	return sourcefilter.New(sourcefilter.Include, srcs...)
}

func exclude(srcs ...netip.Addr) sourcefilter.Filter {
	return sourcefilter.New(sourcefilter.Exclude, srcs...)
}

func set(g netip.Addr, f sourcefilter.Filter) step {
	return func(h *harness) {
		if err := h.p.SetFilter(g, f); err != nil {
			h.t.Fatalf("SetFilter(%v, %v): %v", g, f, err)
		}
	}
}

// about is a group-and-source-specific query about g's srcs.
func about(g netip.Addr, code uint8, srcs ...netip.Addr) step {
	return recv(g, v3QueryAbout(code, g, srcs...))
}

// settled is f set on g and its reports sent and forgotten.
func settled(g netip.Addr, f sourcefilter.Filter) []step {
	return []step{set(g, f), wait(5 * time.Second), forget()}
}

func then(before []step, after ...step) []step { return append(slices.Clone(before), after...) }

// Section 5.1's table, and the merging of a change into the reports still
// owed of an earlier one.
func TestStateChangeReports(t *testing.T) {
	const (
		allowS1   = "224.0.0.22 v3 ALLOW(239.1.1.1 {192.0.2.1})"
		allowS2   = "224.0.0.22 v3 ALLOW(239.1.1.1 {192.0.2.2})"
		allowS1S2 = "224.0.0.22 v3 ALLOW(239.1.1.1 {192.0.2.1 192.0.2.2})"
		blockS1   = "224.0.0.22 v3 BLOCK(239.1.1.1 {192.0.2.1})"
		toExS1    = "224.0.0.22 v3 TO_EX(239.1.1.1 {192.0.2.1})"
		toExS2    = "224.0.0.22 v3 TO_EX(239.1.1.1 {192.0.2.2})"
		toEx      = "224.0.0.22 v3 TO_EX(239.1.1.1)"
	)
	tests := []sequence{
		{
			name:   "None to INCLUDE (S) is a change from INCLUDE {}: ALLOW (S), twice within the interval",
			steps:  []step{set(g1, include(s1)), wait(5 * time.Second)},
			want:   []string{allowS1, allowS1},
			within: time.Second,
		},
		{
			name:  "None to EXCLUDE (S): TO_EX (S)",
			steps: []step{set(g1, exclude(s1)), wait(5 * time.Second)},
			want:  []string{toExS1, toExS1},
		},
		{
			name:  "INCLUDE (A) to INCLUDE (A+B): ALLOW (B)",
			steps: then(settled(g1, include(s1)), set(g1, include(s1, s2)), wait(5*time.Second)),
			want:  []string{allowS2, allowS2},
		},
		{
			name:  "INCLUDE (A+B) to INCLUDE (B): BLOCK (A)",
			steps: then(settled(g1, include(s1, s2)), set(g1, include(s2)), wait(5*time.Second)),
			want:  []string{blockS1, blockS1},
		},
		{
			name:  "INCLUDE (A) to INCLUDE (B): ALLOW (B-A) and BLOCK (A-B) in one report",
			steps: then(settled(g1, include(s1, s2)), set(g1, include(s2, s3)), wait(5*time.Second)),
			want: []string{
				"224.0.0.22 v3 ALLOW(239.1.1.1 {198.51.100.3}) BLOCK(239.1.1.1 {192.0.2.1})",
				"224.0.0.22 v3 ALLOW(239.1.1.1 {198.51.100.3}) BLOCK(239.1.1.1 {192.0.2.1})",
			},
		},
		{
			name:  "EXCLUDE {} to EXCLUDE (S): BLOCK (S)",
			steps: then(settled(g1, sourcefilter.Any), set(g1, exclude(s1)), wait(5*time.Second)),
			want:  []string{blockS1, blockS1},
		},
		{
			name:  "EXCLUDE (S) to EXCLUDE {}: ALLOW (S)",
			steps: then(settled(g1, exclude(s1)), set(g1, sourcefilter.Any), wait(5*time.Second)),
			want:  []string{allowS1, allowS1},
		},
		{
			name:  "INCLUDE (A) to EXCLUDE (B): TO_EX (B)",
			steps: then(settled(g1, include(s1)), set(g1, exclude(s2)), wait(5*time.Second)),
			want:  []string{toExS2, toExS2},
		},
		{
			name:  "EXCLUDE {} to INCLUDE (S): TO_IN (S)",
			steps: then(settled(g1, sourcefilter.Any), set(g1, include(s1)), wait(5*time.Second)),
			want:  []string{"224.0.0.22 v3 TO_IN(239.1.1.1 {192.0.2.1})", "224.0.0.22 v3 TO_IN(239.1.1.1 {192.0.2.1})"},
		},
		{
			name:   "INCLUDE (S) to None: BLOCK (S), Robustness (3) times",
			cfg:    Config{Robustness: 3},
			steps:  then(settled(g1, include(s1, s2)), leave(g1), wait(5*time.Second)),
			want:   slices.Repeat([]string{"224.0.0.22 v3 BLOCK(239.1.1.1 {192.0.2.1 192.0.2.2})"}, 3),
			within: 2 * time.Second,
		},
		{
			name:  "Join of an INCLUDE group: TO_EX {}",
			steps: then(settled(g1, include(s1)), join(g1), wait(5*time.Second)),
			want:  []string{toEx, toEx},
		},
		{
			name:  "the state the group has already: nothing",
			steps: then(settled(g1, include(s1, s2)), set(g1, include(s2, s1, s1)), wait(5*time.Second)),
			want:  nil,
		},
		{
			name:  "a second change before the first's retransmission: the next report carries both, then what the second owes",
			steps: []step{set(g1, include(s1)), set(g1, include(s1, s2)), wait(5 * time.Second)},
			want:  []string{allowS1, allowS1S2, allowS2},
		},
		{
			name:  "a source blocked and allowed again: the ALLOW replaces the BLOCK owed",
			steps: then(settled(g1, sourcefilter.Any), set(g1, exclude(s1)), set(g1, sourcefilter.Any), wait(5*time.Second)),
			want:  []string{blockS1, allowS1, allowS1},
		},
		{
			name:  "a change of mode while source changes are owed: TO_EX replaces them",
			steps: []step{set(g1, include(s1)), set(g1, exclude(s2)), wait(5 * time.Second)},
			want:  []string{allowS1, toExS2, toExS2},
		},
		{
			name:  "a change of sources while a change of mode is owed: the TO_EX owed carries it, then BLOCK",
			steps: []step{join(g1), set(g1, exclude(s1)), wait(5 * time.Second)},
			want:  []string{toEx, toExS1, blockS1, blockS1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// Section 5.2: group-specific and group-and-source-specific queries
// answered with the state the group has, rules 3 to 5 merging them, and
// the general query's answer.
func TestQueryAnswers(t *testing.T) {
	tests := []sequence{
		{
			name:  "group-and-source-specific on INCLUDE (A): IS_IN (A*B)",
			steps: then(settled(g1, include(s1, s2)), about(g1, 10, s2, s3), wait(2*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.2})"},
		},
		{
			name:  "group-and-source-specific on EXCLUDE (A): IS_IN (B-A)",
			steps: then(settled(g1, exclude(s1)), about(g1, 10, s1, s3), wait(2*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {198.51.100.3})"},
		},
		{
			name:  "group-and-source-specific on EXCLUDE {}: IS_IN of every source asked",
			steps: then(settled(g1, sourcefilter.Any), about(g1, 10, s3, s1), wait(2*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.1 198.51.100.3})"},
		},
		{
			name:  "group-and-source-specific about sources INCLUDE does not take: no answer",
			steps: then(settled(g1, include(s1)), about(g1, 10, s2, s3), wait(2*time.Second)),
			want:  nil,
		},
		{
			name:  "group-and-source-specific about sources EXCLUDE excludes: no answer",
			steps: then(settled(g1, exclude(s1, s2)), about(g1, 10, s2), wait(2*time.Second)),
			want:  nil,
		},
		{
			name:  "group-specific on INCLUDE (A): IS_IN (A)",
			steps: then(settled(g1, include(s1, s2)), specificV3(g1, 10), wait(2*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.1 192.0.2.2})"},
		},
		{
			name:  "group-specific on EXCLUDE (A): IS_EX (A)",
			steps: then(settled(g1, exclude(s1)), specificV3(g1, 10), wait(2*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_EX(239.1.1.1 {192.0.2.1})"},
		},
		{
			name:  "rule 5: a second source-specific query adds its sources to the answer pending",
			steps: then(settled(g1, include(s1, s2, s3)), about(g1, 10, s1), about(g1, 100, s3), wait(20*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.1 198.51.100.3})"},
		},
		{
			name:  "rule 5: the answer goes at the earlier of the two times",
			steps: then(settled(g1, include(s1, s2, s3)), about(g1, 10, s1), about(g1, 100, s3), wait(time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.1 198.51.100.3})"},
		},
		{
			name:  "rule 4: a group-specific query after a source-specific one asks for the whole state",
			steps: then(settled(g1, include(s1, s2)), about(g1, 10, s1), specificV3(g1, 10), wait(2*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.1 192.0.2.2})"},
		},
		{
			name:  "rule 4: a source-specific query after a group-specific one leaves the whole state asked",
			steps: then(settled(g1, include(s1, s2)), specificV3(g1, 10), about(g1, 10, s1), wait(2*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.1 192.0.2.2})"},
		},
		{
			name:  "past 1024 sources asked, the answer is the whole state",
			steps: then(settled(g1, include(s1, s2)), about(g1, 10, s1), about(g1, 10, sources(1100)...), wait(2*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.1 192.0.2.2})"},
		},
		{
			name:  "up to 1024 sources asked, the answer is theirs",
			steps: then(settled(g1, include(s1, s2)), about(g1, 10, s1), about(g1, 10, sources(1000)...), wait(2*time.Second)),
			want:  []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.1})"},
		},
		{
			name:  "a query pending when the group is left is not answered",
			steps: then(settled(g1, include(s1)), about(g1, 100, s1), leave(g1), wait(11*time.Second)),
			want:  []string{"224.0.0.22 v3 BLOCK(239.1.1.1 {192.0.2.1})", "224.0.0.22 v3 BLOCK(239.1.1.1 {192.0.2.1})"},
		},
		{
			name:  "a group left that still owes its reports is not answered for",
			steps: then(settled(g1, include(s1)), leave(g1), about(g1, 1, s1), specificV3(g1, 1), wait(5*time.Second)),
			want:  []string{"224.0.0.22 v3 BLOCK(239.1.1.1 {192.0.2.1})", "224.0.0.22 v3 BLOCK(239.1.1.1 {192.0.2.1})"},
		},
		{
			name: "general query: a record per group joined, with its sources",
			steps: []step{set(g3, exclude(s3)), set(g1, include(s2, s1)), join(g2), wait(5 * time.Second), forget(),
				generalV3(100), wait(11 * time.Second)},
			want: []string{"224.0.0.22 v3 IS_IN(239.1.1.1 {192.0.2.1 192.0.2.2}) IS_EX(239.2.2.2) IS_EX(239.3.3.3 {198.51.100.3})"},
		},
		{
			name: "general query: a group left, its BLOCK still owed, is not in the answer",
			// An hour's Unsolicited Report Interval keeps the second
			// BLOCK owed while the query is answered within 1 s; QRV 0
			// keeps the Robustness Variable.
			cfg: Config{UnsolicitedReportInterval: time.Hour},
			steps: []step{set(g1, include(s1)), join(g2), wait(3 * time.Hour), forget(),
				leave(g1), recv(AllSystems, v3Query(10, netip.IPv4Unspecified(), 0)), wait(time.Second)},
			want: []string{"224.0.0.22 v3 BLOCK(239.1.1.1 {192.0.2.1})", "224.0.0.22 v3 IS_EX(239.2.2.2)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// Section 7.2.1: in the version 1 and 2 modes there are no sources to
// tell; and the change of mode cancels the version 3 reports owed.
func TestOlderModesIgnoreSources(t *testing.T) {
	const v2Report = "239.1.1.1 v2 report 239.1.1.1"
	tests := []sequence{
		{
			name:  "v2 querier: an INCLUDE join is a v2 report, twice",
			steps: []step{generalV2(100), set(g1, include(s1)), wait(30 * time.Second)},
			want:  []string{v2Report, v2Report},
		},
		{
			name: "v2 querier: changes of sources and of mode send nothing",
			steps: []step{generalV2(100), set(g1, include(s1)), wait(30 * time.Second), forget(),
				set(g1, include(s1, s2)), set(g1, exclude(s3)), set(g1, sourcefilter.Any), wait(30 * time.Second)},
			want: nil,
		},
		{
			name:  "v2 querier: leaving INCLUDE (S) is one Leave Group",
			steps: []step{generalV2(100), set(g1, include(s1)), wait(30 * time.Second), forget(), leave(g1), wait(30 * time.Second)},
			want:  []string{"224.0.0.2 leave 239.1.1.1"},
		},
		{
			name:  "v1 querier: an INCLUDE join is a v1 report, and its leave nothing",
			steps: []step{generalV1(), set(g1, include(s1)), wait(30 * time.Second), leave(g1), wait(30 * time.Second)},
			want:  []string{"239.1.1.1 v1 report 239.1.1.1", "239.1.1.1 v1 report 239.1.1.1"},
		},
		{
			name:  "Version 2 configured: a group-and-source-specific query is answered by a v2 report, whatever its sources",
			cfg:   Config{Version: 2},
			steps: then(settled(g1, include(s1)), about(g1, 10, s2), wait(2*time.Second)),
			want:  []string{v2Report},
		},
		{
			name:  "a v2 query cancels the ALLOW owed",
			steps: []step{set(g1, include(s1)), generalV2(1), wait(5 * time.Second)},
			want:  []string{"224.0.0.22 v3 ALLOW(239.1.1.1 {192.0.2.1})", v2Report},
		},
		{
			name:  "a v2 query cancels the BLOCK owed by a group left, and forgets the group",
			steps: then(settled(g1, include(s1)), leave(g1), generalV2(1), wait(5*time.Second)),
			want:  []string{"224.0.0.22 v3 BLOCK(239.1.1.1 {192.0.2.1})"},
		},
		{
			name: "back in v3 mode, changes of sources are reported again",
			steps: []step{generalV2(100), set(g1, include(s1)), wait(261 * time.Second), forget(),
				set(g1, include(s1, s2)), wait(5 * time.Second)},
			want: []string{"224.0.0.22 v3 ALLOW(239.1.1.1 {192.0.2.2})", "224.0.0.22 v3 ALLOW(239.1.1.1 {192.0.2.2})"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// groupRecords returns how many groups p keeps, left ones that owe
// reports among them.
func groupRecords(p *Protocol) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.groups)
}

// A group joined again while the reports of its leaving are owed is the
// same group: the join's reports merge with the leave's, so the last
// report the routers hear is of the join, not a late one of the leave.
func TestRejoinWhileLeavingMergesWithTheLeave(t *testing.T) {
	tests := []struct {
		name string
		f    sourcefilter.Filter
		want []string
	}{
		{"EXCLUDE {}", sourcefilter.Any, []string{
			"224.0.0.22 v3 TO_IN(239.1.1.1)", "224.0.0.22 v3 TO_EX(239.1.1.1)", "224.0.0.22 v3 TO_EX(239.1.1.1)",
		}},
		{"INCLUDE (S)", include(s1), []string{
			"224.0.0.22 v3 BLOCK(239.1.1.1 {192.0.2.1})", "224.0.0.22 v3 ALLOW(239.1.1.1 {192.0.2.1})", "224.0.0.22 v3 ALLOW(239.1.1.1 {192.0.2.1})",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			for _, s := range then(settled(g1, tt.f), leave(g1), set(g1, tt.f)) {
				s(h)
			}
			if n := groupRecords(h.p); n != 1 {
				t.Errorf("%d group records after the join again, want 1", n)
			}
			h.advance(5 * time.Second)
			if got := describeAll(h.take()); !slices.Equal(got, tt.want) {
				t.Errorf("sent %q, want %q", got, tt.want)
			}
			if got := h.p.Filter(g1); !got.Equal(tt.f) {
				t.Errorf("Filter = %v, want %v", got, tt.f)
			}
			if n := h.p.Stats.Groups.Load(); n != 1 {
				t.Errorf("Groups gauge %d, want 1", n)
			}
			// Left for good: the group goes once its reports are sent.
			h.p.Leave(g1)
			if n := groupRecords(h.p); n != 1 {
				t.Errorf("%d group records while the leave's reports are owed, want 1", n)
			}
			h.advance(5 * time.Second)
			if n := groupRecords(h.p); n != 0 {
				t.Errorf("%d group records once the leave is reported, want 0", n)
			}
		})
	}
}

// A group left that still owes reports is not joined: Groups, GroupMACs,
// the Groups gauge and MaxGroups leave it out.
func TestGroupsLeftAreNotCounted(t *testing.T) {
	h := newHarness(t, Config{MaxGroups: 1})
	set(g1, include(s1))(h)
	h.advance(5 * time.Second)
	h.p.Leave(g1) // its BLOCK owed once more
	if n := groupRecords(h.p); n != 1 {
		t.Fatalf("%d group records, want the one left, still owing a report", n)
	}
	if got := h.p.Groups(); !slices.Equal(got, []netip.Addr{AllSystems}) {
		t.Errorf("Groups = %v, want all-systems alone", got)
	}
	if got := h.p.GroupMACs(); !slices.Equal(got, []wire.MAC{MulticastMAC(AllSystems)}) {
		t.Errorf("GroupMACs = %v, want all-systems' alone", got)
	}
	if n := h.p.Stats.Groups.Load(); n != 0 {
		t.Errorf("Groups gauge %d, want 0", n)
	}
	if got := h.p.Filter(g1); !got.Equal(sourcefilter.None) {
		t.Errorf("Filter of the group left = %v, want None", got)
	}
	if err := h.p.SetFilter(g2, include(s2)); err != nil {
		t.Errorf("join with MaxGroups 1 and a group left: %v", err)
	}
	if err := h.p.SetFilter(g1, include(s1)); !errors.Is(err, syscall.ENOBUFS) {
		t.Errorf("joining again the group left while MaxGroups are: %v, want ENOBUFS", err)
	}
	if err := h.p.SetFilter(g2, exclude(s1)); err != nil {
		t.Errorf("a change of a group joined while MaxGroups are: %v", err)
	}
	h.advance(5 * time.Second)
	if n := groupRecords(h.p); n != 1 {
		t.Errorf("%d group records once the leave is reported, want 1", n)
	}
}

func TestSetFilterValidatesAndKeepsItsOwnCopy(t *testing.T) {
	tests := []struct {
		name  string
		group netip.Addr
		f     sourcefilter.Filter
		err   error
	}{
		{"unicast group", netip.MustParseAddr("192.0.2.9"), include(s1), ErrNotMulticast},
		{"IPv6 group", netip.MustParseAddr("ff02::1"), sourcefilter.Any, ErrNotMulticast},
		{"multicast source", g1, include(g2), ErrBadFilter},
		{"unspecified source", g1, exclude(netip.IPv4Unspecified()), ErrBadFilter},
		{"broadcast source", g1, include(netip.MustParseAddr("255.255.255.255")), ErrBadFilter},
		{"IPv6 source", g1, include(netip.MustParseAddr("2001:db8::1")), ErrBadFilter},
		{"neither mode", g1, sourcefilter.Filter{Mode: 7}, ErrBadFilter},
		{"all-systems: nothing to do", AllSystems, include(s1), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			if err := h.p.SetFilter(tt.group, tt.f); !errors.Is(err, tt.err) {
				t.Errorf("SetFilter(%v, %v) = %v, want %v", tt.group, tt.f, err, tt.err)
			}
			h.advance(5 * time.Second)
			if sent := h.take(); len(sent) != 0 {
				t.Errorf("sent %v", describeAll(sent))
			}
		})
	}

	h := newHarness(t, Config{})
	mapped := netip.AddrFrom16(s3.As16())
	srcs := []netip.Addr{s2, mapped, s1, s2}
	if err := h.p.SetFilter(g1, sourcefilter.Filter{Mode: sourcefilter.Include, Sources: srcs}); err != nil {
		t.Fatal(err)
	}
	srcs[0] = g2 // the caller's list is the caller's
	got := h.p.Filter(g1)
	if want := include(s1, s2, s3); !got.Equal(want) {
		t.Errorf("Filter = %v, want %v: sorted, distinct, unmapped", got, want)
	}
	got.Sources[0] = g2
	if got := h.p.Filter(g1); got.Sources[0] != s1 {
		t.Errorf("a change to what Filter returned reached the state: %v", got)
	}
	if got := h.p.Filter(AllSystems); !got.Equal(sourcefilter.Any) {
		t.Errorf("Filter(all-systems) = %v, want EXCLUDE {}", got)
	}
	h.p.Close()
	if err := h.p.SetFilter(g2, include(s1)); !errors.Is(err, syscall.ENODEV) {
		t.Errorf("SetFilter once closed: %v, want ENODEV", err)
	}
}

// sources returns n distinct sources, 10.0.0.1 on.
func sources(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{10, 0, byte((i + 1) >> 8), byte(i + 1)})
	}
	return out
}

// Section 4.2.16: what does not fit a report of a datagram of the
// interface's MTU goes in more; a record too long for one is split, but
// for an exclude list's, which is cut to what fits. The interface here
// has an MTU of 576 bytes: less 20 of IPv4 header, 4 of Router Alert, 8
// of report and 8 of record, room for 134 sources in a record alone.
func TestReportsSplitToFit(t *testing.T) {
	many := sources(200)
	tests := []struct {
		name  string
		mtu   int // 576 when 0
		steps []step
		// records is each report's records, as type and source count.
		records [][]string
	}{
		{
			name:    "ALLOW of 200 sources: two reports each time",
			steps:   []step{set(g1, include(many...)), wait(5 * time.Second)},
			records: [][]string{{"ALLOW 134"}, {"ALLOW 66"}, {"ALLOW 134"}, {"ALLOW 66"}},
		},
		{
			name:    "group-specific query on INCLUDE of 200 sources: IS_IN in two reports",
			steps:   then(settled(g1, include(many...)), specificV3(g1, 10), wait(2*time.Second)),
			records: [][]string{{"IS_IN 134"}, {"IS_IN 66"}},
		},
		{
			name:    "general query on EXCLUDE of 200 sources: one IS_EX, cut to what fits",
			steps:   then(settled(g1, exclude(many...)), generalV3(10), wait(2*time.Second)),
			records: [][]string{{"IS_EX 134"}},
		},
		{
			name: "general query: records go in order, as many to a report as fit",
			steps: then(settled(g1, include(many[:100]...)), set(g2, sourcefilter.Any), set(g3, include(many[:40]...)),
				wait(5*time.Second), forget(), generalV3(10), wait(2*time.Second)),
			records: [][]string{{"IS_IN 100", "IS_EX 0"}, {"IS_IN 40"}},
		},
		{
			name:    "ALLOW of 200 sources on a link of 1500 bytes: one report each time",
			mtu:     1500,
			steps:   []step{set(g1, include(many...)), wait(5 * time.Second)},
			records: [][]string{{"ALLOW 200"}, {"ALLOW 200"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxGroups: 3})
			h.mtu = cmp.Or(tt.mtu, 576)
			for _, s := range tt.steps {
				s(h)
			}
			var got [][]string
			for _, m := range h.take() {
				if len(m.msg) > h.mtu-wire.IPv4MinHeaderLen-len(wire.IPv4RouterAlert) {
					t.Errorf("a report of %d bytes: past a %d-byte datagram", len(m.msg), h.mtu)
				}
				var recs []string
				for _, r := range m.msg.Records() {
					recs = append(recs, fmt.Sprintf("%s %d", recordName[r.Type], len(r.Sources)))
				}
				got = append(got, recs)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.records) {
				t.Errorf("reports %v, want %v", got, tt.records)
			}
		})
	}
}

// What a report with sources carries, read by gopacket rather than by
// package wire: a general query's answer, and a state change of both
// source-list records.
func TestReportsWithSourcesDecodeWithGopacket(t *testing.T) {
	type rec struct {
		typ     layers.IGMPv3GroupRecordType
		group   netip.Addr
		sources []netip.Addr
	}
	tests := []struct {
		name  string
		steps []step
		want  []rec
	}{
		{
			name: "general query answer",
			steps: []step{set(g1, include(s2, s1)), join(g2), set(g3, exclude(s3)), wait(5 * time.Second), forget(),
				generalV3(10), wait(2 * time.Second)},
			want: []rec{
				{layers.IGMPIsIn, g1, []netip.Addr{s1, s2}},
				{layers.IGMPIsEx, g2, nil},
				{layers.IGMPIsEx, g3, []netip.Addr{s3}},
			},
		},
		{
			name:  "INCLUDE (A) to INCLUDE (B)",
			steps: then(settled(g1, include(s1, s2)), set(g1, include(s2, s3))),
			want: []rec{
				{layers.IGMPAllow, g1, []netip.Addr{s3}},
				{layers.IGMPBlock, g1, []netip.Addr{s1}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			for _, s := range tt.steps {
				s(h)
			}
			sent := h.take()
			if len(sent) != 1 {
				t.Fatalf("sent %v, want one report", describeAll(sent))
			}
			var g layers.IGMP
			if err := g.DecodeFromBytes(sent[0].msg, nil); err != nil {
				t.Fatal(err)
			}
			if g.Type != layers.IGMPMembershipReportV3 || len(g.GroupRecords) != len(tt.want) {
				t.Fatalf("gopacket reads %v with %d records, want a version 3 report of %d", g.Type, len(g.GroupRecords), len(tt.want))
			}
			for i, want := range tt.want {
				r := g.GroupRecords[i]
				if r.Type != want.typ || !r.MulticastAddress.Equal(want.group.AsSlice()) || len(r.SourceAddresses) != len(want.sources) {
					t.Errorf("record %d: %v %v %v, want %v %v %v", i, r.Type, r.MulticastAddress, r.SourceAddresses, want.typ, want.group, want.sources)
					continue
				}
				for j, s := range want.sources {
					if !r.SourceAddresses[j].Equal(s.AsSlice()) {
						t.Errorf("record %d source %d: %v, want %v", i, j, r.SourceAddresses[j], s)
					}
				}
			}
		})
	}
}

func TestQueriesAreCountedByKind(t *testing.T) {
	h := newHarness(t, Config{})
	set(g1, include(s1))(h)
	generalWithSources := recv(AllSystems, v3QueryAbout(10, netip.IPv4Unspecified(), s1))
	for _, s := range []step{generalV3(10), specificV3(g1, 10), about(g1, 10, s1), about(g1, 10, s2, s3), generalWithSources} {
		s(h)
	}
	h.advance(5 * time.Second)
	s := &h.p.Stats
	if v3, gs, bad := s.InQueriesV3.Load(), s.InQueriesGroupSource.Load(), s.InBadQueries.Load(); v3 != 5 || gs != 2 || bad != 1 {
		t.Errorf("InQueriesV3 %d, InQueriesGroupSource %d, InBadQueries %d: want 5, 2 and 1", v3, gs, bad)
	}
}
