package ndp_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/wire"
)

// MLDv2 source filters (RFC 3810 sections 4, 6.1-6.3): the reports a
// change of a group's filter sends, the answers to queries, and MLDv1
// compatibility (section 8.2.1). Reports are decoded with wire, their
// envelope (and, for large ones, their records) checked with gopacket.

var (
	mgroup  = netip.MustParseAddr("ff05::1:3") // site-local scope: reported
	s1      = netip.MustParseAddr("2001:db8::1")
	s2      = netip.MustParseAddr("2001:db8::2")
	s3      = netip.MustParseAddr("2001:db8::3")
	v2Type  = uint8(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)
	recName = map[wire.MLDv2RecordType]string{
		wire.MLDv2ModeIsInclude: "IS_IN", wire.MLDv2ModeIsExclude: "IS_EX",
		wire.MLDv2ChangeToInclude: "TO_IN", wire.MLDv2ChangeToExclude: "TO_EX",
		wire.MLDv2AllowNewSources: "ALLOW", wire.MLDv2BlockOldSources: "BLOCK",
	}
)

// rec is a record in the RFC's notation, as mldRecords gives them:
// "ALLOW ff05::1:3 {2001:db8::1 2001:db8::2}".
func rec(typ string, group netip.Addr, sources ...netip.Addr) string {
	s := make([]string, len(sources))
	for i, a := range sources {
		s[i] = a.String()
	}
	return fmt.Sprintf("%s %v {%s}", typ, group, strings.Join(s, " "))
}

func include(sources ...netip.Addr) sourcefilter.Filter {
	return sourcefilter.New(sourcefilter.Include, sources...)
}

func exclude(sources ...netip.Addr) sourcefilter.Filter {
	return sourcefilter.New(sourcefilter.Exclude, sources...)
}

// wireReport decodes the MLDv2 report f with wire, after report has
// checked its envelope with gopacket.
func wireReport(t *testing.T, f *frame) []wire.MLDv2Record {
	t.Helper()
	report(t, f)
	recs, ok := wire.ParseMLDv2Report(append(slices.Clone(f.icmp.Contents), f.icmp.Payload...))
	if !ok {
		t.Fatalf("wire refuses the report %x", f.icmp.Payload)
	}
	return recs
}

// mldRecords returns the records of the next MLDv2 report, in the RFC's
// notation.
func (h *harness) mldRecords(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range wireReport(t, h.next(v2Type)) {
		out = append(out, rec(recName[r.Type], r.Group, r.Sources...))
	}
	return out
}

// settled returns a harness whose own joins have been reported.
func settled(t *testing.T, cfg ndp.Config) *harness {
	h := newHarness(t, cfg)
	h.settle(ndp.MLDUnsolicitedReportInterval)
	return h
}

// settle lets the retransmissions owed within interval go, and drops
// them.
func (h *harness) settle(interval time.Duration) {
	h.clk.Advance(interval)
	h.sync()
	h.drain()
}

func (h *harness) set(group netip.Addr, f sourcefilter.Filter) {
	h.t.Helper()
	if err := h.p.SetGroupFilter(group, f); err != nil {
		h.t.Fatal(err)
	}
}

func TestAChangeOfFilterIsReportedRobustnessTimes(t *testing.T) {
	tests := []struct {
		name     string
		from, to sourcefilter.Filter
		want     []string // the records of each report; none if nil
	}{
		// Section 6.1's table. Joining with sources is a change from
		// INCLUDE {}, as Linux reports it.
		{"joining with sources allows them", sourcefilter.None, include(s1, s2), []string{rec("ALLOW", mgroup, s1, s2)}},
		{"joining from any source changes to exclude none", sourcefilter.None, sourcefilter.Any, []string{rec("TO_EX", mgroup)}},
		{"a source included is allowed", include(s1), include(s1, s2), []string{rec("ALLOW", mgroup, s2)}},
		{"a source no longer included is blocked", include(s1, s2), include(s1), []string{rec("BLOCK", mgroup, s2)}},
		{"sources swapped: allowed and blocked in one report", include(s1), include(s2), []string{rec("ALLOW", mgroup, s2), rec("BLOCK", mgroup, s1)}},
		{"a source excluded is blocked", sourcefilter.Any, exclude(s1), []string{rec("BLOCK", mgroup, s1)}},
		{"a source no longer excluded is allowed", exclude(s1), sourcefilter.Any, []string{rec("ALLOW", mgroup, s1)}},
		{"include to exclude changes mode with the new list", include(s1), exclude(s2), []string{rec("TO_EX", mgroup, s2)}},
		{"exclude to include changes mode with the new list", exclude(s1), include(s2), []string{rec("TO_IN", mgroup, s2)}},
		{"leaving an include blocks its sources", include(s1), sourcefilter.None, []string{rec("BLOCK", mgroup, s1)}},
		{"leaving an exclude changes to include none", exclude(s1), sourcefilter.None, []string{rec("TO_IN", mgroup)}},
		{"the same filter again is no change", include(s1), include(s1), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := settled(t, quiet)
			if tt.from.Joined() {
				h.set(mgroup, tt.from)
				h.settle(ndp.MLDUnsolicitedReportInterval)
			}
			h.set(mgroup, tt.to)
			if got := h.p.GroupFilter(mgroup); !got.Equal(tt.to) {
				t.Errorf("GroupFilter = %v, want %v", got, tt.to)
			}
			// Groups and the NIC's filter hold the group while it is
			// joined in either mode, not while its leave is reported.
			mac, _ := ipv6.MulticastMAC(mgroup)
			nic, _ := h.nic.MulticastFilter()
			if in, want := slices.Contains(h.p.Groups(), mgroup), tt.to.Joined(); in != want || slices.Contains(nic, mac) != want {
				t.Errorf("in Groups %v, in the NIC filter %v; want %v", in, slices.Contains(nic, mac), want)
			}
			if tt.want == nil {
				h.none(v2Type)
				return
			}
			// At once, then [Robustness Variable] - 1 more times within
			// the Unsolicited Report Interval each, then no more.
			for i := range ndp.MLDRobustness {
				if i > 0 {
					h.clk.Advance(ndp.MLDUnsolicitedReportInterval)
				}
				if got := h.mldRecords(t); !slices.Equal(got, tt.want) {
					t.Errorf("report %d: %q, want %q", i+1, got, tt.want)
				}
			}
			h.clk.Advance(10 * ndp.MLDUnsolicitedReportInterval)
			h.none(v2Type)
		})
	}
}

func TestAChangeMergesWithTheReportsStillOwed(t *testing.T) {
	type step struct {
		set  *sourcefilter.Filter // else wait an Unsolicited Report Interval
		want []string             // the report sent; none if nil
	}
	set := func(f sourcefilter.Filter, want ...string) step { return step{set: &f, want: want} }
	wait := func(want ...string) step { return step{want: want} }
	tests := []struct {
		name  string
		steps []step
	}{
		// "retransmission state for that source needs to be maintained
		// until [Robustness Variable] State-Change reports have been
		// sent" (section 6.1): s1 once more, s2 twice.
		{"a second source rides with the first's retransmission", []step{
			set(include(s1), rec("ALLOW", mgroup, s1)),
			set(include(s1, s2), rec("ALLOW", mgroup, s1, s2)),
			wait(rec("ALLOW", mgroup, s2)),
			wait(),
		}},
		{"a source blocked is no longer allowed", []step{
			set(include(s1, s2), rec("ALLOW", mgroup, s1, s2)),
			set(include(s2), rec("ALLOW", mgroup, s2), rec("BLOCK", mgroup, s1)),
			wait(rec("BLOCK", mgroup, s1)),
			wait(),
		}},
		// A filter-mode change: "the next [Robustness Variable]
		// State-Change Reports will include a Filter-Mode-Change
		// record", the source changes owed dropped, its list
		// carrying them.
		{"a mode change drops the source changes owed", []step{
			set(include(s1), rec("ALLOW", mgroup, s1)),
			set(sourcefilter.Any, rec("TO_EX", mgroup)),
			wait(rec("TO_EX", mgroup)),
			wait(),
		}},
		// "... if source-list changes to the interface reception have
		// been scheduled in the meantime, then the next State-Change
		// report will include Source-List-Change records".
		{"source changes during a mode change follow its reports", []step{
			set(sourcefilter.Any, rec("TO_EX", mgroup)),
			set(exclude(s1), rec("TO_EX", mgroup, s1)),
			wait(rec("BLOCK", mgroup, s1)),
			wait(rec("BLOCK", mgroup, s1)),
			wait(),
		}},
		// Joining again while the leave is still reported: the group's
		// reports merge, and no TO_IN of the leave follows the join.
		{"re-joining while leaving reports the join alone", []step{
			set(sourcefilter.Any, rec("TO_EX", mgroup)),
			wait(rec("TO_EX", mgroup)),
			set(sourcefilter.None, rec("TO_IN", mgroup)),
			set(sourcefilter.Any, rec("TO_EX", mgroup)),
			wait(rec("TO_EX", mgroup)),
			wait(),
			wait(),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := settled(t, quiet)
			last := sourcefilter.None
			for i, s := range tt.steps {
				if s.set != nil {
					h.set(mgroup, *s.set)
					last = *s.set
				} else {
					h.clk.Advance(ndp.MLDUnsolicitedReportInterval)
				}
				if s.want == nil {
					h.none(v2Type)
					continue
				}
				if got := h.mldRecords(t); !slices.Equal(got, s.want) {
					t.Fatalf("step %d: %q, want %q", i+1, got, s.want)
				}
			}
			if got := h.p.GroupFilter(mgroup); !got.Equal(last) || slices.Contains(h.p.Groups(), mgroup) != last.Joined() {
				t.Errorf("GroupFilter %v, Groups %v; want %v", got, h.p.Groups(), last)
			}
		})
	}
}

func TestJoinGroupAndLeaveGroupAreAnyAndNone(t *testing.T) {
	h := settled(t, quiet)
	if err := h.p.JoinGroup(mgroup); err != nil {
		t.Fatal(err)
	}
	if got := h.p.GroupFilter(mgroup); !got.Equal(sourcefilter.Any) {
		t.Errorf("after JoinGroup: %v", got)
	}
	h.p.LeaveGroup(mgroup)
	if got := h.p.GroupFilter(mgroup); got.Joined() {
		t.Errorf("after LeaveGroup: %v", got)
	}
}

func TestASolicitedNodeGroupTakesAnySourceWhateverSocketsAsk(t *testing.T) {
	h := settled(t, quiet)
	static := netip.MustParsePrefix("2001:db8::1234:5678/64")
	sn := ipv6.SolicitedNode(static.Addr())
	if err := h.p.AddStatic(static); err != nil {
		t.Fatal(err)
	}
	h.settle(ndp.MLDUnsolicitedReportInterval)
	// A socket's narrower filter changes nothing: DAD and address
	// resolution need every source.
	h.set(sn, include(s1))
	if got := h.p.GroupFilter(sn); !got.Equal(sourcefilter.Any) {
		t.Errorf("GroupFilter = %v while the address holds the group, want EXCLUDE {}", got)
	}
	h.none(v2Type)
	h.injectQuery(msg{src: routerLL, dst: sn}, sn, time.Second)
	h.clk.Advance(time.Second)
	if got, want := h.mldRecords(t), []string{rec("IS_EX", sn)}; !slices.Equal(got, want) {
		t.Errorf("answer %q, want %q", got, want)
	}
	// The address goes: the group is the socket's.
	if err := h.p.RemoveStatic(static.Addr()); err != nil {
		t.Fatal(err)
	}
	if got, want := h.mldRecords(t), []string{rec("TO_IN", sn, s1)}; !slices.Equal(got, want) {
		t.Errorf("on removing the address: %q, want %q", got, want)
	}
	h.settle(ndp.MLDUnsolicitedReportInterval)
	if !slices.Contains(h.p.Groups(), sn) {
		t.Error("the socket's group left with the address")
	}
	h.set(sn, sourcefilter.None)
	if got, want := h.mldRecords(t), []string{rec("BLOCK", sn, s1)}; !slices.Equal(got, want) {
		t.Errorf("on leaving: %q, want %q", got, want)
	}
}

func TestQueriesAreAnsweredWithTheStateAsked(t *testing.T) {
	tests := []struct {
		name    string
		state   sourcefilter.Filter
		queries [][]netip.Addr // each query's sources; none: group-specific
		want    []string       // the answer; none if nil
	}{
		// Section 6.3's table for Multicast Address and Source Specific
		// Queries.
		{"include: the sources asked that it includes", include(s1, s2), [][]netip.Addr{{s1, s3}}, []string{rec("IS_IN", mgroup, s1)}},
		{"exclude: the sources asked that it does not exclude", exclude(s1), [][]netip.Addr{{s1, s3}}, []string{rec("IS_IN", mgroup, s3)}},
		{"include of none asked: no answer", include(s1), [][]netip.Addr{{s3}}, nil},
		{"exclude of all asked: no answer", exclude(s1, s2), [][]netip.Addr{{s1, s2}}, nil},
		// Section 6.2's rules 3 to 5.
		{"two source queries: their lists merged", include(s1, s2), [][]netip.Addr{{s1}, {s2}}, []string{rec("IS_IN", mgroup, s1, s2)}},
		{"group-specific: the whole state", exclude(s1), [][]netip.Addr{nil}, []string{rec("IS_EX", mgroup, s1)}},
		{"group-specific after source-specific: the whole state", exclude(s1), [][]netip.Addr{{s3}, nil}, []string{rec("IS_EX", mgroup, s1)}},
		{"source-specific after group-specific: the whole state", exclude(s1), [][]netip.Addr{nil, {s3}}, []string{rec("IS_EX", mgroup, s1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := settled(t, quiet)
			h.set(mgroup, tt.state)
			h.settle(ndp.MLDUnsolicitedReportInterval)
			sourceQueries := 0
			for _, srcs := range tt.queries {
				h.injectQuery(msg{src: routerLL, dst: mgroup}, mgroup, 10*time.Second, srcs...)
				if len(srcs) > 0 {
					sourceQueries++
				}
			}
			if n := h.p.Stats.InMLDSourceQueries.Load(); n != uint64(sourceQueries) {
				t.Errorf("InMLDSourceQueries = %d, want %d", n, sourceQueries)
			}
			h.none(v2Type) // not at once
			h.clk.Advance(10 * time.Second)
			if tt.want == nil {
				h.none(v2Type)
				return
			}
			if got := h.mldRecords(t); !slices.Equal(got, tt.want) {
				t.Errorf("answer %q, want %q", got, tt.want)
			}
			h.none(v2Type) // one answer for all the queries
		})
	}
}

func TestAGeneralQueryIsAnsweredWithEachGroupsState(t *testing.T) {
	h := settled(t, quiet)
	g1, g2, g3, g4 := netip.MustParseAddr("ff05::1"), netip.MustParseAddr("ff05::2"), netip.MustParseAddr("ff05::3"), netip.MustParseAddr("ff05::4")
	h.set(g1, include(s1, s2))
	h.set(g2, exclude(s3))
	h.set(g3, sourcefilter.Any)
	h.set(g4, include(s1))
	h.set(netip.MustParseAddr("ff01::5"), sourcefilter.Any) // interface-local: never reported
	h.settle(ndp.MLDUnsolicitedReportInterval)
	h.set(g4, sourcefilter.None) // left, its leave still being reported
	h.next(v2Type)
	h.injectQuery(msg{src: routerLL, dst: ipv6.AllNodes}, netip.IPv6Unspecified(), time.Second)
	h.clk.Advance(time.Second)
	want := []string{rec("IS_EX", ipv6.SolicitedNode(stackLL)), rec("IS_IN", g1, s1, s2), rec("IS_EX", g2, s3), rec("IS_EX", g3)}
	// The leave's retransmission may come first, in the same second.
	for {
		got := h.mldRecords(t)
		if slices.Equal(got, []string{rec("BLOCK", g4, s1)}) {
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("answer %q, want %q", got, want)
		}
		break
	}
}

func TestAGeneralQueryListingSourcesIsDropped(t *testing.T) {
	h := settled(t, quiet)
	h.injectQuery(msg{src: routerLL, dst: ipv6.AllNodes}, netip.IPv6Unspecified(), time.Second, s1)
	if n := h.p.Stats.InMalformed.Load(); n != 1 {
		t.Errorf("InMalformed = %d, want 1", n)
	}
	h.clk.Advance(time.Second)
	h.none(v2Type)
}

// The size of the IPv6 datagram the frame f carries.
func datagramLen(f *frame) int { return wire.IPv6HeaderLen + int(f.ip6.Length) }

// TestLargeReportsAreSplitToFitTheLinkMTU pins RFC 3810 section 5.2.15:
// a report is as large as the link's MTU allows (the harness's NIC has
// 1500 bytes: 1444 of room, a record of 89 sources), or an advertisement's
// lower one (1280: 1224 bytes, 75 sources), and never larger.
func TestLargeReportsAreSplitToFitTheLinkMTU(t *testing.T) {
	var many []netip.Addr
	for i := range 100 {
		many = append(many, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i + 1)}))
	}
	g2 := netip.MustParseAddr("ff05::1:4")
	type part struct {
		typ     string
		sources int
	}
	tests := []struct {
		name  string
		mtu   int // advertised; 0: none
		group netip.Addr
		f     sourcefilter.Filter
		want  []part // per report, its one record
	}{
		{"an allow of 100 sources goes in two reports", 0, mgroup, include(many...), []part{{"ALLOW", 89}, {"ALLOW", 11}}},
		{"the same on a link of 1280 bytes", 1280, mgroup, include(many...), []part{{"ALLOW", 75}, {"ALLOW", 25}}},
		// "If its Type is IS_EX or TO_EX, a single Multicast Address
		// Record is sent, with as many source addresses as can fit".
		{"a change to exclude 100 sources is cut to 89", 0, g2, exclude(many...), []part{{"TO_EX", 89}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := settled(t, quiet)
			mtu := 1500
			if tt.mtu != 0 {
				mtu = tt.mtu
				h.injectRA(msg{}, &layers.ICMPv6RouterAdvertisement{Options: layers.ICMPv6Options{mtuOpt(uint32(mtu))}})
			}
			h.set(tt.group, tt.f)
			var seen []netip.Addr
			for i, w := range tt.want {
				f := h.next(v2Type)
				if n := datagramLen(f); n > mtu {
					t.Errorf("report %d is a %d-byte datagram, over the link MTU %d", i+1, n, mtu)
				}
				recs := wireReport(t, f)
				// gopacket, the oracle, reads the same records.
				oracle := report(t, f)
				if len(recs) != 1 || len(oracle) != 1 || recName[recs[0].Type] != w.typ || len(recs[0].Sources) != w.sources {
					t.Fatalf("report %d: %v, want one %v record of %d sources", i+1, recs, w.typ, w.sources)
				}
				if uint8(oracle[0].RecordType) != uint8(recs[0].Type) || !oracle[0].MulticastAddress.Equal(ipOf(tt.group)) || len(oracle[0].SourceAddresses) != len(recs[0].Sources) {
					t.Fatalf("report %d: gopacket reads %v", i+1, oracle[0].String())
				}
				for j, s := range recs[0].Sources {
					if !oracle[0].SourceAddresses[j].Equal(ipOf(s)) {
						t.Errorf("report %d source %d: wire %v, gopacket %v", i+1, j, s, oracle[0].SourceAddresses[j])
					}
				}
				seen = append(seen, recs[0].Sources...)
			}
			if n := len(seen); tt.f.Mode == sourcefilter.Include && (n != len(many) || !slices.Equal(sourcefilter.New(sourcefilter.Include, seen...).Sources, tt.f.Sources)) {
				t.Errorf("%d sources reported, want each of the %d once", n, len(many))
			}
			if tt.f.Mode == sourcefilter.Exclude && !slices.Equal(seen, tt.f.Sources[:len(seen)]) {
				t.Error("the exclude record does not carry the first sources")
			}
		})
	}
}

func TestAGeneralQueryAnswerOfManyGroupsIsSplit(t *testing.T) {
	h := settled(t, quiet)
	// 80 groups and the solicited-node one: 81 records of 20 bytes,
	// 72 of which fill a report on the harness's link of 1500 bytes.
	for i := range 80 {
		h.set(netip.AddrFrom16([16]byte{0xff, 0x05, 15: byte(i + 1)}), sourcefilter.Any)
		h.next(v2Type)
	}
	h.settle(ndp.MLDUnsolicitedReportInterval)
	h.injectQuery(msg{src: routerLL, dst: ipv6.AllNodes}, netip.IPv6Unspecified(), time.Second)
	h.clk.Advance(time.Second)
	for i, want := range []int{72, 9} {
		f := h.next(v2Type)
		if n := datagramLen(f); n > 1500 {
			t.Errorf("report %d is a %d-byte datagram", i+1, n)
		}
		if recs := wireReport(t, f); len(recs) != want {
			t.Errorf("report %d: %d records, want %d", i+1, len(recs), want)
		}
	}
	h.none(v2Type)
}

func TestMLDv1SpeaksOfJoiningAndLeavingOnly(t *testing.T) {
	cfg := quiet
	cfg.MLDVersion = 1
	h := newHarness(t, cfg)
	h.settle(ndp.MLDv1UnsolicitedReportInterval)
	// Section 8.2.1: source lists are not MLDv1's. Joining with
	// sources is joining: Reports to the group, [Robustness Variable]
	// of them.
	h.set(mgroup, include(s1))
	if got := h.nextV1Reports(t, 1); !got[mgroup] {
		t.Errorf("Report of %v, want %v", got, mgroup)
	}
	h.clk.Advance(ndp.MLDv1UnsolicitedReportInterval)
	h.nextV1Reports(t, 1)
	// A change among joined filters is nothing to say.
	h.set(mgroup, include(s1, s2))
	h.set(mgroup, exclude(s3))
	h.clk.Advance(ndp.MLDv1UnsolicitedReportInterval)
	h.none(layers.ICMPv6TypeMLDv1MulticastListenerReportMessage)
	// Leaving is one Done.
	h.set(mgroup, sourcefilter.None)
	if dst, left := v1Message(t, h.next(layers.ICMPv6TypeMLDv1MulticastListenerDoneMessage)); dst != ipv6.AllRouters || left != mgroup {
		t.Errorf("Done of %v to %v, want of %v to all-routers", left, dst, mgroup)
	}
	h.clk.Advance(ndp.MLDv1UnsolicitedReportInterval)
	h.none(layers.ICMPv6TypeMLDv1MulticastListenerDoneMessage)
	if n := h.p.Stats.OutMLDv2Reports.Load(); n != 0 {
		t.Errorf("%d MLDv2 reports sent in MLDv1 mode", n)
	}
}

func TestAnMLDv1QuerierCancelsTheStateChangesOwed(t *testing.T) {
	h := settled(t, quiet)
	h.set(mgroup, include(s1))
	if got, want := h.mldRecords(t), []string{rec("ALLOW", mgroup, s1)}; !slices.Equal(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
	// RFC 3810 section 8.2.1: "Whenever a host changes its
	// compatibility mode, it cancels all its pending responses and
	// retransmission timers." The group, in INCLUDE mode, is answered
	// for as MLDv1 answers: with a Report.
	h.injectV1(msg{src: routerLL, dst: ipv6.AllNodes}, layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, netip.IPv6Unspecified(), 10*time.Second)
	h.clk.Advance(10 * time.Second)
	if got := h.nextV1Reports(t, 2); !got[mgroup] {
		t.Errorf("MLDv1 answers of %v, want one of %v", got, mgroup)
	}
	h.none(v2Type)
	// Back in MLDv2, the next change is reported alone: nothing of
	// the one before the querier came is still owed.
	h.clk.Advance(2*ndp.MLDQueryInterval + ndp.MLDQueryResponseInterval)
	if v := h.p.MLDVersion(); v != 2 {
		t.Fatalf("MLDVersion %d after the Older Version Querier Present Timeout", v)
	}
	h.set(mgroup, include(s1, s2))
	if got, want := h.mldRecords(t), []string{rec("ALLOW", mgroup, s2)}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestSetGroupFilterRefusesWhatIsNoFilterOfAGroup(t *testing.T) {
	tests := []struct {
		name  string
		group netip.Addr
		f     sourcefilter.Filter
		want  string
	}{
		{"a unicast address", s1, sourcefilter.Any, "not a multicast group"},
		{"all-nodes", ipv6.AllNodes, sourcefilter.Any, "not a multicast group"},
		{"an IPv4 group", netip.MustParseAddr("239.1.1.1"), sourcefilter.Any, "not a multicast group"},
		{"an IPv4-mapped group", netip.MustParseAddr("::ffff:239.1.1.1"), sourcefilter.Any, "not a multicast group"},
		{"a multicast source", mgroup, include(netip.MustParseAddr("ff05::9")), "source ff05::9"},
		{"an IPv4 source", mgroup, include(netip.MustParseAddr("192.0.2.1")), "source 192.0.2.1"},
		{"the unspecified source", mgroup, exclude(netip.IPv6Unspecified()), "source ::"},
		{"an unknown mode", mgroup, sourcefilter.Filter{Mode: 7}, "mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := settled(t, quiet)
			err := h.p.SetGroupFilter(tt.group, tt.f)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "eth0") || !strings.Contains(err.Error(), tt.group.String()) {
				t.Errorf("error %v, want one naming %v on eth0: %s", err, tt.group, tt.want)
			}
			h.none(v2Type)
		})
	}
	h := newHarness(t, quiet)
	h.p.Close()
	if err := h.p.SetGroupFilter(mgroup, sourcefilter.Any); !errors.Is(err, net.ErrClosed) {
		t.Errorf("after Close: %v, want net.ErrClosed", err)
	}
	if err := h.p.SetGroupFilter(mgroup, sourcefilter.None); err != nil {
		t.Errorf("leaving after Close: %v", err)
	}
}

// A querier's QRV becomes the Robustness Variable (RFC 3810 section
// 5.1.8): a change is then reported that many times; a QRV of zero leaves
// it as it was.
func TestAQueriersRobustnessIsAdopted(t *testing.T) {
	h := settled(t, quiet)
	query := func(qrv uint8) {
		q := &layers.MLDv2MulticastListenerQueryMessage{MulticastAddress: ipOf(netip.IPv6Unspecified()), QueriersRobustnessVariable: qrv}
		if err := q.SetMLDv2MaximumResponseDelay(time.Second); err != nil {
			t.Fatal(err)
		}
		h.inject(msg{src: routerLL, dst: ipv6.AllNodes, hops: 1}, layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, q)
		h.settle(time.Second) // the answer
	}
	for _, tt := range []struct {
		qrv     uint8
		reports int
	}{{4, 4}, {0, 4}, {2, 2}} {
		query(tt.qrv)
		h.set(mgroup, include(s1))
		for i := range tt.reports {
			if i > 0 {
				h.clk.Advance(ndp.MLDUnsolicitedReportInterval)
			}
			if got := h.mldRecords(t); len(got) != 1 {
				t.Fatalf("QRV %d: report %d: %q", tt.qrv, i+1, got)
			}
		}
		h.clk.Advance(10 * ndp.MLDUnsolicitedReportInterval)
		h.none(v2Type)
		h.set(mgroup, sourcefilter.None)
		h.settle(10 * ndp.MLDUnsolicitedReportInterval)
	}
}
