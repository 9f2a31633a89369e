package igmp_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

// What a stack puts on the wire for IGMP, decoded by gopacket rather than
// by package wire: the Ethernet and IP destinations, TTL 1 and the Router
// Alert option (RFC 3376 section 4, RFC 2113), and the message.

var group = netip.MustParseAddr("239.5.6.7")

// igmpOf decodes an IGMP frame and checks what every IGMP message carries.
func igmpOf(t *testing.T, frame []byte, dst netip.Addr) []byte {
	t.Helper()
	eth := rawtest.EthernetOf(t, frame)
	ip4 := rawtest.IPv4Of(t, frame)
	d := dst.As4()
	wantMAC := net.HardwareAddr{0x01, 0x00, 0x5e, d[1] & 0x7f, d[2], d[3]}
	if eth.DstMAC.String() != wantMAC.String() {
		t.Errorf("Ethernet destination %v, want %v (RFC 1112 section 6.4)", eth.DstMAC, wantMAC)
	}
	if ip4.Protocol != layers.IPProtocolIGMP || rawtest.Addr(ip4.DstIP) != dst || rawtest.Addr(ip4.SrcIP) != rawtest.StackAddr {
		t.Fatalf("%v -> %v protocol %v, want IGMP from %v to %v", ip4.SrcIP, ip4.DstIP, ip4.Protocol, rawtest.StackAddr, dst)
	}
	if ip4.TTL != 1 {
		t.Errorf("TTL %d, want 1", ip4.TTL)
	}
	if len(ip4.Options) != 1 || ip4.Options[0].OptionType != 148 || ip4.Options[0].OptionLength != 4 || len(ip4.Options[0].OptionData) != 2 || ip4.Options[0].OptionData[0] != 0 || ip4.Options[0].OptionData[1] != 0 {
		t.Errorf("options %+v, want Router Alert alone", ip4.Options)
	}
	return ip4.Payload
}

func TestStackReportsOnTheWire(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	if err := h.S.JoinGroup(rawtest.NIC, group); err != nil {
		t.Fatal(err)
	}
	var r layers.IGMP
	if err := r.DecodeFromBytes(igmpOf(t, h.Expect(t, rawtest.Timeout), netip.MustParseAddr("224.0.0.22")), nil); err != nil {
		t.Fatal(err)
	}
	if r.Type != layers.IGMPMembershipReportV3 || len(r.GroupRecords) != 1 || r.GroupRecords[0].Type != layers.IGMPv3GroupRecordType(4) || !r.GroupRecords[0].MulticastAddress.Equal(group.AsSlice()) {
		t.Fatalf("report %+v, want CHANGE_TO_EXCLUDE_MODE of %v", r, group)
	}

	// A version 2 querier's general query: GoNet answers with a
	// version 2 report to the group within the Max Resp Time.
	q := rawtest.IPv4Header(rawtest.PeerAddr, netip.MustParseAddr("224.0.0.1"), layers.IPProtocolIGMP)
	q.TTL = 1
	q.Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}}
	query := []byte{0x11, 100, 0, 0, 0, 0, 0, 0}
	sum := checksum(query)
	query[2], query[3] = byte(sum>>8), byte(sum)
	h.Inject(rawtest.Serialize(t, rawtest.Ethernet(rawtest.PeerMAC, net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}, layers.EthernetTypeIPv4), q, rawtest.Payload(query)))
	h.Barrier(t) // the join's second report may come meanwhile
	h.Clock.Advance(10 * time.Second)
	for {
		f := h.Expect(t, rawtest.Timeout)
		if rawtest.IPv4Of(t, f).DstIP.Equal(net.IPv4(224, 0, 0, 22)) {
			continue // the join's second report
		}
		var v2 layers.IGMPv1or2
		if err := v2.DecodeFromBytes(igmpOf(t, f, group), nil); err != nil {
			t.Fatal(err)
		}
		if v2.Type != layers.IGMPMembershipReportV2 || !v2.GroupAddress.Equal(group.AsSlice()) {
			t.Errorf("answer %+v, want a version 2 report of %v", v2, group)
		}
		break
	}

	// The leave, in version 2 mode: a Leave Group to all-routers.
	if err := h.S.LeaveGroup(rawtest.NIC, group); err != nil {
		t.Fatal(err)
	}
	var leave layers.IGMPv1or2
	if err := leave.DecodeFromBytes(igmpOf(t, h.Expect(t, rawtest.Timeout), netip.MustParseAddr("224.0.0.2")), nil); err != nil {
		t.Fatal(err)
	}
	if leave.Type != layers.IGMPLeaveGroup || !leave.GroupAddress.Equal(group.AsSlice()) {
		t.Errorf("leave %+v", leave)
	}
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

func TestStackCountsMalformedIGMP(t *testing.T) {
	query := func(n int, typ byte) []byte {
		b := make([]byte, n)
		b[0], b[1] = typ, 10
		if n >= 4 {
			s := checksum(b)
			b[2], b[3] = byte(s>>8), byte(s)
		}
		return b
	}
	badSum := query(8, 0x11)
	badSum[3] ^= 0xff
	tests := []struct {
		name    string
		msg     []byte
		counter string
	}{
		{"truncated", query(4, 0x11), "InTruncated"},
		{"bad checksum", badSum, "InCsumErrors"},
		{"query of 10 octets", query(10, 0x11), "InBadLength"},
		{"unknown type", query(8, 0x42), "InUnknownType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			q := rawtest.IPv4Header(rawtest.PeerAddr, netip.MustParseAddr("224.0.0.1"), layers.IPProtocolIGMP)
			q.TTL = 1
			h.Inject(rawtest.Serialize(t, rawtest.Ethernet(rawtest.PeerMAC, net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}, layers.EthernetTypeIPv4), q, rawtest.Payload(tt.msg)))
			h.WaitCounter(t, "IGMP."+rawtest.NIC+"."+tt.counter, 1)
			h.ExpectNothing(t)
		})
	}
}
