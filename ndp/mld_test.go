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

func (h *harness) injectQuery(m msg, group netip.Addr, delay time.Duration) {
	h.t.Helper()
	q := &layers.MLDv2MulticastListenerQueryMessage{MulticastAddress: ipOf(group)}
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
