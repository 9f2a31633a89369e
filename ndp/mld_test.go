package ndp_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
)

// report decodes an MLDv2 report the stack sent, checking what every
// report must be (RFC 3810 section 5.2): to ff02::16 at its MAC, hop limit
// 1, a Hop-by-Hop header with the Router Alert option, a valid checksum.
func report(t *testing.T, f *frame) []layers.MLDv2MulticastAddressRecord {
	t.Helper()
	mac, _ := ipv6.MulticastMAC(ipv6.AllMLDv2Routers)
	if !f.ip6.DstIP.Equal(ipOf(ipv6.AllMLDv2Routers)) || !bytes.Equal(f.eth.DstMAC, mac[:]) || f.ip6.HopLimit != 1 {
		t.Errorf("report to %v at %v hop limit %d", f.ip6.DstIP, f.eth.DstMAC, f.ip6.HopLimit)
	}
	hbh, _ := f.pkt.Layer(layers.LayerTypeIPv6HopByHop).(*layers.IPv6HopByHop)
	alert := false
	if hbh != nil {
		for _, o := range hbh.Options {
			alert = alert || (o.OptionType == 5 && bytes.Equal(o.OptionData, []byte{0, 0}))
		}
	}
	if !alert {
		t.Error("no Router Alert option (RFC 2711) in a Hop-by-Hop header")
	}
	if err := f.icmp.SetNetworkLayerForChecksum(f.ip6); err != nil {
		t.Fatal(err)
	}
	if err, v := f.icmp.VerifyChecksum(); err != nil || !v.Valid {
		t.Errorf("report checksum wrong (%v)", err)
	}
	r, ok := f.pkt.Layer(layers.LayerTypeMLDv2MulticastListenerReport).(*layers.MLDv2MulticastListenerReportMessage)
	if !ok {
		t.Fatalf("not an MLDv2 report: %v", f.pkt)
	}
	return r.MulticastAddressRecords
}

func checkRecords(t *testing.T, got []layers.MLDv2MulticastAddressRecord, typ layers.MLDv2MulticastAddressRecordType, groups ...netip.Addr) {
	t.Helper()
	if len(got) != len(groups) {
		t.Fatalf("%d records, want %d: %v", len(got), len(groups), got)
	}
	for i, g := range groups {
		if got[i].RecordType != typ || !got[i].MulticastAddress.Equal(ipOf(g)) || len(got[i].SourceAddresses) != 0 {
			t.Errorf("record %d: %s, want %v for %v with no sources", i, got[i].String(), typ, g)
		}
	}
}

func TestJoiningSendsTwoChangeToExcludeReports(t *testing.T) {
	h := newHarness(t, quiet)
	group := ipv6.SolicitedNode(stackLL)
	checkRecords(t, report(t, h.next(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)), layers.MLDv2MulticastAddressRecordTypeChangeToExcludeMode, group)
	// [Robustness Variable] = 2: once more within the Unsolicited Report
	// Interval, then no more.
	h.clk.Advance(ndp.MLDUnsolicitedReportInterval)
	checkRecords(t, report(t, h.next(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)), layers.MLDv2MulticastAddressRecordTypeChangeToExcludeMode, group)
	h.clk.Advance(10 * ndp.MLDUnsolicitedReportInterval)
	h.none(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)
	if n := h.p.Stats.OutMLDv2Reports.Load(); n != 2 {
		t.Errorf("OutMLDv2Reports = %d", n)
	}
	want := []netip.Addr{ipv6.AllNodes, group}
	if got := h.p.Groups(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Groups %v, want %v", got, want)
	}
	if macs := h.p.GroupMACs(); len(macs) != 2 || macs[0] != [6]byte{0x33, 0x33, 0, 0, 0, 1} || macs[1] != [6]byte{0x33, 0x33, 0xff, 0, 0, 1} {
		t.Errorf("GroupMACs %v", macs)
	}
}

// injectQuery hands the stack an MLDv2 query of group (unspecified: a
// General Query) and, for a Multicast Address and Source Specific Query,
// sources.
func (h *harness) injectQuery(m msg, group netip.Addr, delay time.Duration, sources ...netip.Addr) {
	h.t.Helper()
	q := &layers.MLDv2MulticastListenerQueryMessage{MulticastAddress: ipOf(group)}
	for _, s := range sources {
		q.SourceAddresses = append(q.SourceAddresses, ipOf(s))
	}
	if err := q.SetMLDv2MaximumResponseDelay(delay); err != nil {
		h.t.Fatal(err)
	}
	if m.hops == 0 {
		m.hops = 1
	}
	h.inject(m, layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, q)
}

func TestAnswersQueriesAfterARandomDelay(t *testing.T) {
	static := netip.MustParsePrefix("2001:db8::1234:5678/64")
	tests := []struct {
		name   string
		group  netip.Addr
		dst    netip.Addr
		answer []netip.Addr
	}{
		{"general query: every group", netip.IPv6Unspecified(), ipv6.AllNodes, []netip.Addr{ipv6.SolicitedNode(stackLL), ipv6.SolicitedNode(static.Addr())}},
		{"group-specific query for a group held", ipv6.SolicitedNode(stackLL), ipv6.SolicitedNode(stackLL), []netip.Addr{ipv6.SolicitedNode(stackLL)}},
		{"group-specific query for another group", netip.MustParseAddr("ff02::1:ff99:9999"), netip.MustParseAddr("ff02::1:ff99:9999"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, quiet)
			if err := h.p.AddStatic(static); err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(ndp.MLDUnsolicitedReportInterval) // the joins' retransmissions
			h.drain()
			h.injectQuery(msg{src: routerLL, dst: tt.dst}, tt.group, 10*time.Second)
			h.none(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2) // not at once
			h.clk.Advance(10 * time.Second)
			if tt.answer == nil {
				h.none(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)
				return
			}
			checkRecords(t, report(t, h.next(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)), layers.MLDv2MulticastAddressRecordTypeModeIsExcluded, tt.answer...)
		})
	}
}

func TestDropsQueriesThatWereForwardedOrNotFromALinkLocalSource(t *testing.T) {
	tests := []struct {
		name    string
		m       msg
		counter func(s *ndp.Stats) uint64
	}{
		{"hop limit 255", msg{src: routerLL, dst: ipv6.AllNodes, hops: 255}, func(s *ndp.Stats) uint64 { return s.InBadHopLimit.Load() }},
		{"global source", msg{src: netip.MustParseAddr("2001:db8::fe"), dst: ipv6.AllNodes}, func(s *ndp.Stats) uint64 { return s.InBadSource.Load() }},
		{"bad checksum", msg{src: routerLL, dst: ipv6.AllNodes, badSum: true}, func(s *ndp.Stats) uint64 { return s.InBadChecksum.Load() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, quiet)
			h.clk.Advance(ndp.MLDUnsolicitedReportInterval)
			h.drain()
			h.injectQuery(tt.m, netip.IPv6Unspecified(), time.Second)
			if tt.counter(&h.p.Stats) != 1 {
				t.Error("not counted")
			}
			h.clk.Advance(time.Second)
			h.none(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)
		})
	}
}

func TestRemovingAnAddressLeavesItsGroup(t *testing.T) {
	h := newHarness(t, quiet)
	static := netip.MustParsePrefix("2001:db8::1234:5678/64")
	if err := h.p.AddStatic(static); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(ndp.MLDUnsolicitedReportInterval)
	h.drain()
	if err := h.p.RemoveStatic(static.Addr()); err != nil {
		t.Fatal(err)
	}
	group := ipv6.SolicitedNode(static.Addr())
	checkRecords(t, report(t, h.next(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)), layers.MLDv2MulticastAddressRecordTypeChangeToIncludeMode, group)
	h.sync()
	for _, g := range h.p.Groups() {
		if g == group {
			t.Errorf("still in %v", g)
		}
	}
	if _, ok := h.host.addr(static.Addr()); ok {
		t.Error("host still has the address")
	}
}

// MLDv1 compatibility (RFC 3810 section 8.2.1).

func (h *harness) injectV1(m msg, typ uint8, group netip.Addr, delay time.Duration) {
	h.t.Helper()
	if m.hops == 0 {
		m.hops = 1
	}
	h.inject(m, typ, &layers.MLDv1MulticastListenerQueryMessage{
		MLDv1Message: layers.MLDv1Message{MaximumResponseDelay: delay, MulticastAddress: ipOf(group)}})
}

// v1Message decodes an MLDv1 Report or Done the stack sent and checks
// what RFC 2710 section 3 asks of both: hop limit 1, the Router Alert
// option, a valid checksum; it returns the destination and the group.
func v1Message(t *testing.T, f *frame) (dst, group netip.Addr) {
	t.Helper()
	if f.ip6.HopLimit != 1 {
		t.Errorf("MLDv1 message with hop limit %d", f.ip6.HopLimit)
	}
	hbh, _ := f.pkt.Layer(layers.LayerTypeIPv6HopByHop).(*layers.IPv6HopByHop)
	if hbh == nil || len(hbh.Options) == 0 || hbh.Options[0].OptionType != 5 {
		t.Error("no Router Alert option (RFC 2711) in a Hop-by-Hop header")
	}
	if err := f.icmp.SetNetworkLayerForChecksum(f.ip6); err != nil {
		t.Fatal(err)
	}
	if err, v := f.icmp.VerifyChecksum(); err != nil || !v.Valid {
		t.Errorf("checksum wrong (%v)", err)
	}
	var m layers.MLDv1MulticastListenerReportMessage
	if err := m.DecodeFromBytes(f.icmp.Payload, nil); err != nil {
		t.Fatal(err)
	}
	dst, _ = netip.AddrFromSlice(f.ip6.DstIP)
	group, _ = netip.AddrFromSlice(m.MulticastAddress)
	return dst, group
}

// nextV1Reports returns the groups of the next n MLDv1 Reports, each
// checked to go to its group.
func (h *harness) nextV1Reports(t *testing.T, n int) map[netip.Addr]bool {
	t.Helper()
	groups := map[netip.Addr]bool{}
	for range n {
		dst, group := v1Message(t, h.next(layers.ICMPv6TypeMLDv1MulticastListenerReportMessage))
		if dst != group {
			t.Errorf("MLDv1 Report of %v sent to %v, want the group (RFC 2710 section 3.6)", group, dst)
		}
		groups[group] = true
	}
	return groups
}

func TestMLDv1QuerierTurnsTheHostToMLDv1(t *testing.T) {
	h := newHarness(t, quiet)
	static := netip.MustParsePrefix("2001:db8::1234:5678/64")
	if err := h.p.AddStatic(static); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(ndp.MLDUnsolicitedReportInterval) // the joins' retransmissions
	h.drain()
	v2 := h.p.Stats.OutMLDv2Reports.Load()

	// A general query of MLDv1 (24 bytes): each group is answered on a
	// timer of its own, with a Report to the group.
	h.injectV1(msg{src: routerLL, dst: ipv6.AllNodes}, layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, netip.IPv6Unspecified(), 10*time.Second)
	if v := h.p.MLDVersion(); v != 1 || h.p.Stats.MLDMode.Load() != 1 {
		t.Fatalf("MLDVersion %d, MLDMode %d after an MLDv1 query; want 1", v, h.p.Stats.MLDMode.Load())
	}
	h.clk.Advance(10 * time.Second)
	got := h.nextV1Reports(t, 2)
	for _, want := range []netip.Addr{ipv6.SolicitedNode(stackLL), ipv6.SolicitedNode(static.Addr())} {
		if !got[want] {
			t.Errorf("no MLDv1 Report of %v; got %v", want, got)
		}
	}

	// A join: a Report now and one more within the Unsolicited Report
	// Interval; a leave: one Done to all-routers.
	group := netip.MustParseAddr("ff05::1:3")
	if err := h.p.JoinGroup(group); err != nil {
		t.Fatal(err)
	}
	h.nextV1Reports(t, 1)
	h.clk.Advance(ndp.MLDv1UnsolicitedReportInterval)
	h.nextV1Reports(t, 1)
	h.p.LeaveGroup(group)
	dst, left := v1Message(t, h.next(layers.ICMPv6TypeMLDv1MulticastListenerDoneMessage))
	if dst != ipv6.AllRouters || left != group {
		t.Errorf("Done of %v to %v, want %v to all-routers", left, dst, group)
	}
	h.clk.Advance(ndp.MLDv1UnsolicitedReportInterval)
	h.none(layers.ICMPv6TypeMLDv1MulticastListenerDoneMessage)
	if n := h.p.Stats.OutMLDv2Reports.Load(); n != v2 {
		t.Errorf("%d MLDv2 reports sent in MLDv1 mode", n-v2)
	}
	if r, d := h.p.Stats.OutGroupMembResponses.Load(), h.p.Stats.OutGroupMembReductions.Load(); r != 4 || d != 1 {
		t.Errorf("OutGroupMembResponses %d, OutGroupMembReductions %d; want 4 and 1", r, d)
	}

	// The Older Version Querier Present timer runs out: MLDv2 again.
	h.clk.Advance(2*ndp.MLDQueryInterval + ndp.MLDQueryResponseInterval)
	if v := h.p.MLDVersion(); v != 2 || h.p.Stats.MLDMode.Load() != 2 {
		t.Errorf("MLDVersion %d, MLDMode %d after the Older Version Querier Present Timeout; want 2", v, h.p.Stats.MLDMode.Load())
	}
	if err := h.p.JoinGroup(group); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, report(t, h.next(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)), layers.MLDv2MulticastAddressRecordTypeChangeToExcludeMode, group)
}

func TestMLDv1ReportFromAnotherListenerAnswersForUs(t *testing.T) {
	h := newHarness(t, quiet)
	h.clk.Advance(ndp.MLDUnsolicitedReportInterval)
	h.drain()
	group := ipv6.SolicitedNode(stackLL)
	h.injectV1(msg{src: routerLL, dst: group}, layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, group, 10*time.Second)
	h.injectV1(msg{src: peerLL, dst: group}, layers.ICMPv6TypeMLDv1MulticastListenerReportMessage, group, 0)
	h.clk.Advance(10 * time.Second)
	h.none(layers.ICMPv6TypeMLDv1MulticastListenerReportMessage)
	if n := h.p.Stats.MLDReportsSuppressed.Load(); n != 1 {
		t.Errorf("MLDReportsSuppressed = %d, want 1", n)
	}
	// A Report to another address than its group is no answer.
	h.injectV1(msg{src: routerLL, dst: group}, layers.ICMPv6TypeMLDv1MulticastListenerQueryMessage, group, 10*time.Second)
	h.injectV1(msg{src: peerLL, dst: ipv6.AllNodes}, layers.ICMPv6TypeMLDv1MulticastListenerReportMessage, group, 0)
	h.clk.Advance(10 * time.Second)
	h.nextV1Reports(t, 1)
	if n := h.p.Stats.InMalformed.Load(); n != 1 {
		t.Errorf("InMalformed = %d, want 1", n)
	}
}

func TestMLDVersion1SpeaksMLDv1FromTheStart(t *testing.T) {
	h := newHarness(t, ndp.Config{NoDAD: true, NoRouterSolicitation: true, MLDVersion: 1})
	if got := h.nextV1Reports(t, 1); !got[ipv6.SolicitedNode(stackLL)] {
		t.Errorf("the first MLDv1 Report is of %v, want the link-local address's solicited-node group", got)
	}
	h.none(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)
}

func TestInterfaceLocalGroupsAreNeverReported(t *testing.T) {
	h := newHarness(t, quiet)
	h.clk.Advance(ndp.MLDUnsolicitedReportInterval)
	h.drain()
	if err := h.p.JoinGroup(netip.MustParseAddr("ff01::1:3")); err != nil {
		t.Fatal(err)
	}
	h.none(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)
	h.injectQuery(msg{src: routerLL, dst: ipv6.AllNodes}, netip.IPv6Unspecified(), time.Second)
	h.clk.Advance(time.Second)
	checkRecords(t, report(t, h.next(layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2)), layers.MLDv2MulticastAddressRecordTypeModeIsExcluded, ipv6.SolicitedNode(stackLL))
}
