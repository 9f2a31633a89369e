package igmp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/wire"
)

var (
	g1 = netip.MustParseAddr("239.1.1.1")
	g2 = netip.MustParseAddr("239.2.2.2")
)

// describe sums a message up: its destination and kind, with the record
// types, groups and sources of a version 3 report ("ALLOW(239.1.1.1
// {192.0.2.1})"; a record without sources shows none: "TO_EX(239.1.1.1)").
func describe(m sentMsg) string {
	switch m.msg.Type() {
	case wire.IGMPv3Report:
		var recs []string
		for _, r := range m.msg.Records() {
			if len(r.Sources) == 0 {
				recs = append(recs, fmt.Sprintf("%s(%v)", recordName[r.Type], r.Group))
				continue
			}
			srcs := make([]string, len(r.Sources))
			for i, a := range r.Sources {
				srcs[i] = a.String()
			}
			recs = append(recs, fmt.Sprintf("%s(%v {%s})", recordName[r.Type], r.Group, strings.Join(srcs, " ")))
		}
		return fmt.Sprintf("%v v3 %s", m.dst, strings.Join(recs, " "))
	case wire.IGMPv2Report:
		return fmt.Sprintf("%v v2 report %v", m.dst, m.msg.Group())
	case wire.IGMPv1Report:
		return fmt.Sprintf("%v v1 report %v", m.dst, m.msg.Group())
	case wire.IGMPv2Leave:
		return fmt.Sprintf("%v leave %v", m.dst, m.msg.Group())
	}
	return fmt.Sprintf("%v type %#x", m.dst, m.msg.Type())
}

var recordName = map[wire.IGMPv3RecordType]string{
	wire.IGMPModeIsInclude: "IS_IN", wire.IGMPModeIsExclude: "IS_EX",
	wire.IGMPChangeToInclude: "TO_IN", wire.IGMPChangeToExclude: "TO_EX",
	wire.IGMPAllowNewSources: "ALLOW", wire.IGMPBlockOldSources: "BLOCK",
}

func describeAll(ms []sentMsg) []string {
	var out []string
	for _, m := range ms {
		out = append(out, describe(m))
	}
	return out
}

// step is one thing done to the protocol in a sequence.
type step func(h *harness)

func join(g netip.Addr) step {
	return func(h *harness) {
		if err := h.p.Join(g); err != nil {
			h.t.Fatalf("Join(%v): %v", g, err)
		}
	}
}
func leave(g netip.Addr) step            { return func(h *harness) { h.p.Leave(g) } }
func wait(d time.Duration) step          { return func(h *harness) { h.advance(d) } }
func recv(dst netip.Addr, b []byte) step { return func(h *harness) { h.receive(dst, b) } }
func forget() step                       { return func(h *harness) { h.take() } }
func generalV3(code uint8) step          { return recv(AllSystems, v3Query(code, netip.IPv4Unspecified(), 2)) }
func generalV2(maxResp uint8) step {
	return recv(AllSystems, v2Message(wire.IGMPQuery, maxResp, netip.IPv4Unspecified()))
}
func generalV1() step                       { return recv(AllSystems, v2Message(wire.IGMPQuery, 0, netip.IPv4Unspecified())) }
func specificV3(g netip.Addr, c uint8) step { return recv(g, v3Query(c, g, 2)) }

// sequence is a test of what a sequence of steps makes the protocol
// send, described as describe does.
type sequence struct {
	name  string
	cfg   Config
	steps []step
	want  []string
	// within bounds when each message went after the first (zero:
	// unchecked).
	within time.Duration
}

func (tt sequence) run(t *testing.T) {
	h := newHarness(t, tt.cfg)
	for _, s := range tt.steps {
		s(h)
	}
	sent := h.take()
	if got := describeAll(sent); !slices.Equal(got, tt.want) {
		t.Fatalf("sent\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
	}
	if tt.within == 0 || len(sent) == 0 {
		return
	}
	first := sent[0].at
	for _, m := range sent {
		if m.at-first > tt.within {
			t.Errorf("%s sent %v after the first, want within %v", describe(m), m.at-first, tt.within)
		}
	}
}

func TestSequences(t *testing.T) {
	tests := []sequence{
		{
			name:   "v3 join reports TO_EX twice within the unsolicited report interval",
			steps:  []step{join(g1), wait(5 * time.Second)},
			want:   []string{"224.0.0.22 v3 TO_EX(239.1.1.1)", "224.0.0.22 v3 TO_EX(239.1.1.1)"},
			within: time.Second,
		},
		{
			name:   "v3 leave reports TO_IN twice",
			steps:  []step{join(g1), wait(5 * time.Second), forget(), leave(g1), wait(5 * time.Second)},
			want:   []string{"224.0.0.22 v3 TO_IN(239.1.1.1)", "224.0.0.22 v3 TO_IN(239.1.1.1)"},
			within: 6 * time.Second,
		},
		{
			name:  "a leave before the join's second report replaces it",
			steps: []step{join(g1), leave(g1), wait(5 * time.Second)},
			want:  []string{"224.0.0.22 v3 TO_EX(239.1.1.1)", "224.0.0.22 v3 TO_IN(239.1.1.1)", "224.0.0.22 v3 TO_IN(239.1.1.1)"},
		},
		{
			name:  "all-systems is never reported",
			steps: []step{join(AllSystems), wait(5 * time.Second), generalV3(100), wait(11 * time.Second), leave(AllSystems), wait(5 * time.Second)},
			want:  nil,
		},
		{
			name:   "v3 general query answered with IS_EX of every group within Max Resp Time",
			steps:  []step{join(g2), join(g1), wait(5 * time.Second), forget(), generalV3(100), wait(11 * time.Second)},
			want:   []string{"224.0.0.22 v3 IS_EX(239.1.1.1) IS_EX(239.2.2.2)"},
			within: 15 * time.Second,
		},
		{
			name:  "v3 general query with nothing joined is not answered",
			steps: []step{generalV3(100), wait(11 * time.Second)},
			want:  nil,
		},
		{
			name:  "v3 group-specific query answered for that group only",
			steps: []step{join(g1), join(g2), wait(5 * time.Second), forget(), specificV3(g2, 10), wait(2 * time.Second)},
			want:  []string{"224.0.0.22 v3 IS_EX(239.2.2.2)"},
		},
		{
			name:  "v3 group-specific query for a group not joined is not answered",
			steps: []step{join(g1), wait(5 * time.Second), forget(), specificV3(g2, 10), wait(2 * time.Second)},
			want:  nil,
		},
		{
			name:  "a pending general answer covers a later group-specific query",
			steps: []step{join(g1), wait(5 * time.Second), forget(), generalV3(1), specificV3(g1, 100), wait(11 * time.Second)},
			want:  []string{"224.0.0.22 v3 IS_EX(239.1.1.1)"},
		},
		{
			name:  "a general query not to all-systems is ignored",
			steps: []step{join(g1), wait(5 * time.Second), forget(), recv(g1, v3Query(10, netip.IPv4Unspecified(), 2)), wait(2 * time.Second)},
			want:  nil,
		},
		{
			name:   "v2 querier: the join is a v2 report to the group, twice within 10 s",
			steps:  []step{generalV2(100), join(g1), wait(30 * time.Second)},
			want:   []string{"239.1.1.1 v2 report 239.1.1.1", "239.1.1.1 v2 report 239.1.1.1"},
			within: 10 * time.Second,
		},
		{
			name:  "v2 querier: the leave is one Leave Group to all-routers",
			steps: []step{generalV2(100), join(g1), wait(30 * time.Second), forget(), leave(g1), wait(30 * time.Second)},
			want:  []string{"224.0.0.2 leave 239.1.1.1"},
		},
		{
			name:   "v2 general query answered with a report per group, to each group",
			steps:  []step{join(g1), join(g2), wait(5 * time.Second), generalV2(50), forget(), wait(6 * time.Second)},
			want:   []string{"239.1.1.1 v2 report 239.1.1.1", "239.2.2.2 v2 report 239.2.2.2"},
			within: 11 * time.Second,
		},
		{
			name:  "another host's v2 report suppresses ours",
			steps: []step{join(g1), join(g2), wait(5 * time.Second), generalV2(50), forget(), recv(g1, v2Message(wire.IGMPv2Report, 0, g1)), wait(6 * time.Second)},
			want:  []string{"239.2.2.2 v2 report 239.2.2.2"},
		},
		{
			name:  "another host's v3 report suppresses nothing",
			steps: []step{join(g1), wait(5 * time.Second), forget(), generalV3(50), recv(AllIGMPv3Routers, v2MessageV3Report(g1)), wait(6 * time.Second)},
			want:  []string{"224.0.0.22 v3 IS_EX(239.1.1.1)"},
		},
		{
			name:  "v1 querier: v1 reports, and no leave",
			steps: []step{generalV1(), join(g1), wait(30 * time.Second), leave(g1), wait(30 * time.Second)},
			want:  []string{"239.1.1.1 v1 report 239.1.1.1", "239.1.1.1 v1 report 239.1.1.1"},
		},
		{
			name:  "v1 query answered within 10 s",
			steps: []step{join(g1), wait(5 * time.Second), forget(), generalV1(), wait(10 * time.Second)},
			want:  []string{"239.1.1.1 v1 report 239.1.1.1"},
		},
		{
			name:  "back to v3 once the older querier is gone (Robustness * 125 s + 10 s)",
			steps: []step{generalV2(100), wait(261 * time.Second), forget(), join(g1), wait(5 * time.Second)},
			want:  []string{"224.0.0.22 v3 TO_EX(239.1.1.1)", "224.0.0.22 v3 TO_EX(239.1.1.1)"},
		},
		{
			name:  "a v2 query cancels pending v3 retransmissions and answers",
			steps: []step{join(g1), generalV2(1), wait(time.Second)},
			want:  []string{"224.0.0.22 v3 TO_EX(239.1.1.1)", "239.1.1.1 v2 report 239.1.1.1"},
		},
		{
			name:  "Version 2 configured: a v3 query is answered in v2",
			cfg:   Config{Version: 2},
			steps: []step{join(g1), wait(30 * time.Second), forget(), generalV3(10), wait(2 * time.Second), leave(g1)},
			want:  []string{"239.1.1.1 v2 report 239.1.1.1", "224.0.0.2 leave 239.1.1.1"},
		},
		{
			name:  "the querier's QRV sets the Robustness Variable",
			steps: []step{recv(AllSystems, v3Query(10, netip.IPv4Unspecified(), 3)), wait(2 * time.Second), join(g1), wait(5 * time.Second)},
			want:  []string{"224.0.0.22 v3 TO_EX(239.1.1.1)", "224.0.0.22 v3 TO_EX(239.1.1.1)", "224.0.0.22 v3 TO_EX(239.1.1.1)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// v2MessageV3Report builds another host's version 3 report of g.
func v2MessageV3Report(g netip.Addr) []byte {
	recs := []wire.IGMPv3Record{{Type: wire.IGMPModeIsExclude, Group: g}}
	b := make([]byte, wire.IGMPv3ReportLenOf(recs))
	wire.EncodeIGMPv3Report(b, recs)
	return b
}

// The answer's delay is drawn from (0, Max Resp Time]: over many queries
// it spreads across the range and never passes it.
func TestAnswerDelayIsWithinMaxRespTime(t *testing.T) {
	tests := []struct {
		name string
		q    step
		max  time.Duration
	}{
		{"v3 code 20: 2 s", generalV3(20), 2 * time.Second},
		{"v3 exponential code 0x8f: 24.8 s", generalV3(0x8f), 24800 * time.Millisecond},
		{"v2 time 30: 3 s", generalV2(30), 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			join(g1)(h)
			h.advance(5 * time.Second)
			var least, most time.Duration = 1 << 62, 0
			for range 50 {
				h.take()
				t0 := h.clk.Now().Sub(start)
				tt.q(h)
				h.advance(tt.max)
				sent := h.take()
				if len(sent) != 1 {
					t.Fatalf("%d answers within %v, want 1: %v", len(sent), tt.max, describeAll(sent))
				}
				d := sent[0].at - t0
				least, most = min(least, d), max(most, d)
				h.advance(time.Second) // past any v2 timer
			}
			if least <= 0 || most > tt.max || most-least < tt.max/2 {
				t.Errorf("delays in [%v, %v], want spread over (0, %v]", least, most, tt.max)
			}
		})
	}
}

func TestMalformedMessagesAreCountedAndIgnored(t *testing.T) {
	good := v3Query(10, netip.IPv4Unspecified(), 2)
	badSum := slices.Clone(good)
	badSum[9] ^= 0xff
	ten := append(v2Message(wire.IGMPQuery, 10, netip.IPv4Unspecified()), 0, 0)
	fixChecksum(ten)
	unknown := v2Message(0x30, 0, g1)
	srcPast := slices.Clone(good)
	srcPast[11] = 3
	fixChecksum(srcPast)
	specificUnicast := v3Query(10, netip.MustParseAddr("192.0.2.1"), 2)
	generalWithSources := v3QueryAbout(10, netip.IPv4Unspecified(), s1)
	tests := []struct {
		name    string
		dst     netip.Addr
		b       []byte
		counter func(*Stats) uint64
	}{
		{"truncated", AllSystems, good[:7], func(s *Stats) uint64 { return s.InTruncated.Load() }},
		{"empty", AllSystems, nil, func(s *Stats) uint64 { return s.InTruncated.Load() }},
		{"bad checksum", AllSystems, badSum, func(s *Stats) uint64 { return s.InCsumErrors.Load() }},
		{"query of 10 octets", AllSystems, ten, func(s *Stats) uint64 { return s.InBadLength.Load() }},
		{"sources past the end", AllSystems, srcPast, func(s *Stats) uint64 { return s.InBadLength.Load() }},
		{"unknown type", AllSystems, unknown, func(s *Stats) uint64 { return s.InUnknownType.Load() }},
		{"general query to a group", g1, good, func(s *Stats) uint64 { return s.InBadQueries.Load() }},
		{"query for a unicast group", AllSystems, specificUnicast, func(s *Stats) uint64 { return s.InBadQueries.Load() }},
		{"general query with sources", AllSystems, generalWithSources, func(s *Stats) uint64 { return s.InBadQueries.Load() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			join(g1)(h)
			h.advance(5 * time.Second)
			h.take()
			h.receive(tt.dst, tt.b)
			h.advance(20 * time.Second)
			if got := tt.counter(&h.p.Stats); got != 1 {
				t.Errorf("counter = %d, want 1", got)
			}
			if sent := h.take(); len(sent) != 0 {
				t.Errorf("answered with %v", describeAll(sent))
			}
			if h.p.Mode() != 3 {
				t.Errorf("mode %d, want 3", h.p.Mode())
			}
		})
	}
}

func fixChecksum(b []byte) {
	b[2], b[3] = 0, 0
	c := wire.Checksum(b, 0)
	b[2], b[3] = byte(c>>8), byte(c)
}

func TestJoinLimitsAndGroups(t *testing.T) {
	h := newHarness(t, Config{MaxGroups: 2})
	if err := h.p.Join(netip.MustParseAddr("192.0.2.1")); !errors.Is(err, ErrNotMulticast) {
		t.Errorf("join of a unicast address: %v", err)
	}
	join(g2)(h)
	join(g1)(h)
	join(g1)(h) // again: nothing more
	if err := h.p.Join(netip.MustParseAddr("239.3.3.3")); !errors.Is(err, syscall.ENOBUFS) {
		t.Errorf("join past MaxGroups: %v, want ENOBUFS", err)
	}
	if got, want := h.p.Groups(), []netip.Addr{AllSystems, g1, g2}; !slices.Equal(got, want) {
		t.Errorf("Groups = %v, want %v", got, want)
	}
	// 239.1.1.1 and 239.129.1.1 share 01:00:5e:01:01:01.
	if got := MulticastMAC(netip.MustParseAddr("239.129.1.1")); got != MulticastMAC(g1) || got != (wire.MAC{1, 0, 0x5e, 1, 1, 1}) {
		t.Errorf("MulticastMAC = %v", got)
	}
	want := []wire.MAC{{1, 0, 0x5e, 0, 0, 1}, {1, 0, 0x5e, 1, 1, 1}, {1, 0, 0x5e, 2, 2, 2}}
	if got := h.p.GroupMACs(); !slices.Equal(got, want) {
		t.Errorf("GroupMACs = %v, want %v", got, want)
	}
	if n := h.p.Stats.Groups.Load(); n != 2 {
		t.Errorf("Groups gauge %d, want 2", n)
	}
	h.advance(5 * time.Second)
	if n := h.p.Stats.OutReportsV3.Load(); n != 4 {
		t.Errorf("OutReportsV3 = %d, want 4 (two groups, Robustness 2)", n)
	}
}
