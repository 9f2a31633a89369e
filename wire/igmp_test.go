package wire_test

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

func TestEncodeIGMPv3ReportDecodesWithGopacket(t *testing.T) {
	recs := []wire.IGMPv3Record{
		{Type: wire.IGMPChangeToExclude, Group: addr("239.1.2.3")},
		{Type: wire.IGMPModeIsInclude, Group: addr("232.1.1.1"), Sources: []netip.Addr{addr("192.0.2.1"), addr("192.0.2.2")}},
		{Type: wire.IGMPModeIsExclude, Group: addr("224.0.0.251")},
	}
	b := make([]byte, wire.IGMPv3ReportLenOf(recs))
	wire.EncodeIGMPv3Report(b, recs)
	if want := 8 + 8 + 16 + 8; len(b) != want {
		t.Fatalf("report of %d bytes, want %d", len(b), want)
	}
	if wire.Checksum(b, 0) != 0 {
		t.Error("checksum does not verify")
	}
	var g layers.IGMP
	decodeLayer(t, &g, b)
	if g.Type != layers.IGMPMembershipReportV3 || int(g.NumberOfGroupRecords) != len(recs) || len(g.GroupRecords) != len(recs) {
		t.Fatalf("gopacket decodes type %v with %d records, want %d", g.Type, len(g.GroupRecords), len(recs))
	}
	for i, want := range recs {
		got := g.GroupRecords[i]
		if uint8(got.Type) != uint8(want.Type) || got.AuxDataLen != 0 || !got.MulticastAddress.Equal(ip(want.Group)) || len(got.SourceAddresses) != len(want.Sources) {
			t.Errorf("record %d: gopacket %+v, want %+v", i, got, want)
			continue
		}
		for j, s := range want.Sources {
			if !got.SourceAddresses[j].Equal(ip(s)) {
				t.Errorf("record %d source %d: %v, want %v", i, j, got.SourceAddresses[j], s)
			}
		}
	}
	m, verr := wire.ParseIGMP(b)
	if verr != wire.IGMPOK {
		t.Fatalf("ParseIGMP: %v", verr)
	}
	for i, r := range m.Records() {
		if r.Type != recs[i].Type || r.Group != recs[i].Group || len(r.Sources) != len(recs[i].Sources) {
			t.Errorf("record %d parsed back as %+v, want %+v", i, r, recs[i])
		}
	}
}

func TestEncodeIGMPv2DecodesWithGopacket(t *testing.T) {
	tests := []struct {
		name    string
		typ     uint8
		maxResp uint8
		group   netip.Addr
	}{
		{"v2 report", wire.IGMPv2Report, 0, addr("239.1.2.3")},
		{"leave", wire.IGMPv2Leave, 0, addr("239.1.2.3")},
		{"v1 report", wire.IGMPv1Report, 0, addr("224.0.0.251")},
		{"v2 query", wire.IGMPQuery, 100, addr("0.0.0.0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, wire.IGMPv2Len)
			wire.EncodeIGMPv2(b, tt.typ, tt.maxResp, tt.group)
			var g layers.IGMPv1or2
			decodeLayer(t, &g, b)
			if uint8(g.Type) != tt.typ || !g.GroupAddress.Equal(ip(tt.group)) || g.MaxResponseTime != time.Duration(tt.maxResp)*100*time.Millisecond {
				t.Errorf("gopacket decodes %+v", g)
			}
			if wire.Checksum(b, 0) != 0 {
				t.Error("checksum does not verify")
			}
		})
	}
}

// gopacket's decoding of the exponential form (igmpTimeDecode) swaps exp
// and mant, so the oracle is RFC 3376 section 4.1.1's own examples here.
func TestIGMPCodeFollowsRFC3376Section4_1_1(t *testing.T) {
	tests := []struct {
		code uint8
		want time.Duration
	}{
		{0, 0},
		{100, 100},
		{127, 127},
		{0x80, 0x10 << 3},                // exp 0, mant 0: 128
		{0x8f, 0x1f << 3},                // exp 0, mant 15: 248
		{0xff, 0x1f << 10},               // the largest: 31744
		{0x80 | 3<<4 | 5, (0x15) << 6},   // exp 3, mant 5
		{0x80 | 7<<4 | 0, (0x10) << 10},  // exp 7, mant 0
		{0x80 | 1<<4 | 10, (0x1a) << 4},  // exp 1, mant 10
		{0x80 | 4<<4 | 15, (0x1f) << 7},  // exp 4, mant 15
		{0x80 | 6<<4 | 1, (0x11) << 9},   // exp 6, mant 1
		{0x80 | 2<<4 | 8, (0x18) << 5},   // exp 2, mant 8
		{0x80 | 5<<4 | 12, (0x1c) << 8},  // exp 5, mant 12
		{0x80 | 0<<4 | 1, (0x11) << 3},   // exp 0, mant 1
		{0x80 | 7<<4 | 15, (0x1f) << 10}, // the largest again
	}
	for _, tt := range tests {
		if got := wire.DecodeIGMPCode(tt.code); got != tt.want {
			t.Errorf("DecodeIGMPCode(%#x) = %d, want %d", tt.code, got, tt.want)
		}
		if got := wire.EncodeIGMPCode(int(tt.want)); got != tt.code && !(tt.want == 0x1f<<10 && got == 0xff) {
			t.Errorf("EncodeIGMPCode(%d) = %#x, want %#x", tt.want, got, tt.code)
		}
	}
	if got := wire.EncodeIGMPCode(100000); got != 0xff {
		t.Errorf("EncodeIGMPCode saturates at %#x, want 0xff", got)
	}
	if got := wire.EncodeIGMPCode(129); wire.DecodeIGMPCode(got) != 128 {
		t.Errorf("EncodeIGMPCode(129) = %#x, which decodes to %d: want rounding down to 128", got, wire.DecodeIGMPCode(got))
	}
}

func TestParseIGMPTellsQueryVersions(t *testing.T) {
	v3 := make([]byte, wire.IGMPv3QueryLen+4)
	wire.EncodeIGMPv3Query(v3, &wire.IGMPv3QueryFields{MaxRespCode: 0x8f, Group: addr("239.1.2.3"), QRV: 2, QQIC: 125, Sources: []netip.Addr{addr("192.0.2.9")}})
	v2 := make([]byte, 8)
	wire.EncodeIGMPv2(v2, wire.IGMPQuery, 50, addr("0.0.0.0"))
	v1 := make([]byte, 8)
	wire.EncodeIGMPv2(v1, wire.IGMPQuery, 0, addr("0.0.0.0"))
	ten := append(append([]byte{}, v2...), 0, 0)
	ten[2], ten[3] = 0, 0
	ten[2], ten[3] = byte(wire.Checksum(ten, 0)>>8), byte(wire.Checksum(ten, 0))
	badSum := append([]byte{}, v2...)
	badSum[7] ^= 1
	srcPast := append([]byte{}, v3...)
	srcPast[11] = 2 // two sources, one present
	srcPast[2], srcPast[3] = 0, 0
	srcPast[2], srcPast[3] = byte(wire.Checksum(srcPast, 0)>>8), byte(wire.Checksum(srcPast, 0))
	tests := []struct {
		name    string
		b       []byte
		err     wire.IGMPError
		version int
		maxResp time.Duration
	}{
		{"v3", v3, wire.IGMPOK, 3, 248 * 100 * time.Millisecond},
		{"v2", v2, wire.IGMPOK, 2, 5 * time.Second},
		{"v1 means 10 s", v1, wire.IGMPOK, 1, 10 * time.Second},
		{"10 octets ignored", ten, wire.IGMPBadLength, 0, 0},
		{"bad checksum", badSum, wire.IGMPBadChecksum, 0, 0},
		{"sources past the end", srcPast, wire.IGMPBadLength, 0, 0},
		{"truncated", v2[:7], wire.IGMPTruncated, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := wire.ParseIGMP(tt.b)
			if err != tt.err {
				t.Fatalf("ParseIGMP = %v, want %v", err, tt.err)
			}
			if err != wire.IGMPOK {
				return
			}
			if m.QueryVersion() != tt.version || m.MaxResp() != tt.maxResp {
				t.Errorf("version %d max resp %v, want %d %v", m.QueryVersion(), m.MaxResp(), tt.version, tt.maxResp)
			}
		})
	}
	m, _ := wire.ParseIGMP(v3)
	if m.Group() != addr("239.1.2.3") || m.QRV() != 2 || m.QQI() != 125*time.Second || m.NumSources() != 1 {
		t.Errorf("v3 fields: group %v QRV %d QQI %v sources %d", m.Group(), m.QRV(), m.QQI(), m.NumSources())
	}
	var g layers.IGMP
	decodeLayer(t, &g, v3)
	if !g.GroupAddress.Equal(ip(addr("239.1.2.3"))) || g.RobustnessValue != 2 || len(g.SourceAddresses) != 1 {
		t.Errorf("gopacket reads the v3 query as %+v", g)
	}
}

// A query's source list, read with Sources, is the one gopacket reads:
// a group-and-source-specific query's (RFC 3376 section 4.1.9), and none
// in the queries that carry no list.
func TestIGMPQuerySourcesDecodeLikeGopacket(t *testing.T) {
	v2 := make([]byte, wire.IGMPv2Len)
	wire.EncodeIGMPv2(v2, wire.IGMPQuery, 50, addr("239.1.2.3"))
	tests := []struct {
		name    string
		b       []byte
		sources []netip.Addr
	}{
		{"group-and-source-specific", v3QueryOf(addr("232.1.2.3"), addr("192.0.2.7"), addr("192.0.2.1"), addr("198.51.100.9")), []netip.Addr{addr("192.0.2.7"), addr("192.0.2.1"), addr("198.51.100.9")}},
		{"group-specific", v3QueryOf(addr("239.1.2.3")), nil},
		{"general", v3QueryOf(netip.Addr{}), nil},
		{"version 2", v2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, verr := wire.ParseIGMP(tt.b)
			if verr != wire.IGMPOK {
				t.Fatalf("ParseIGMP: %v", verr)
			}
			got := m.Sources()
			if !slices.Equal(got, tt.sources) {
				t.Errorf("Sources = %v, want %v", got, tt.sources)
			}
			if len(tt.b) < wire.IGMPv3QueryLen {
				return
			}
			var g layers.IGMP
			decodeLayer(t, &g, tt.b)
			if len(g.SourceAddresses) != len(got) {
				t.Fatalf("gopacket reads %d sources, Sources %d", len(g.SourceAddresses), len(got))
			}
			for i, s := range g.SourceAddresses {
				if !s.Equal(ip(got[i])) {
					t.Errorf("source %d: gopacket %v, Sources %v", i, s, got[i])
				}
			}
		})
	}
}

// v3QueryOf encodes a version 3 query about group (none: a general
// query) and sources.
func v3QueryOf(group netip.Addr, sources ...netip.Addr) []byte {
	b := make([]byte, wire.IGMPv3QueryLen+4*len(sources))
	wire.EncodeIGMPv3Query(b, &wire.IGMPv3QueryFields{MaxRespCode: 100, Group: group, QRV: 2, QQIC: 125, Sources: sources})
	return b
}

func FuzzParseIGMP(f *testing.F) {
	f.Add([]byte{})
	v2 := make([]byte, 8)
	wire.EncodeIGMPv2(v2, wire.IGMPv2Report, 0, addr("239.1.1.1"))
	f.Add(v2)
	q := make([]byte, wire.IGMPv3QueryLen+8)
	wire.EncodeIGMPv3Query(q, &wire.IGMPv3QueryFields{MaxRespCode: 100, QRV: 2, Sources: []netip.Addr{addr("192.0.2.1"), addr("192.0.2.2")}})
	f.Add(q)
	recs := []wire.IGMPv3Record{{Type: wire.IGMPModeIsExclude, Group: addr("239.1.1.1")}, {Type: wire.IGMPAllowNewSources, Group: addr("232.0.0.1"), Sources: []netip.Addr{addr("192.0.2.1")}}}
	r := make([]byte, wire.IGMPv3ReportLenOf(recs))
	wire.EncodeIGMPv3Report(r, recs)
	f.Add(r)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := wire.ParseIGMP(data)
		if err != wire.IGMPOK {
			return
		}
		if len(m) < wire.IGMPv2Len || wire.Checksum(m, 0) != 0 {
			t.Fatalf("accepted %x", data)
		}
		_ = m.Group()
		switch m.Type() {
		case wire.IGMPQuery:
			_ = m.MaxResp()
			if m.QueryVersion() == 3 {
				_, _, _ = m.QRV(), m.QQI(), m.SuppressRouterProcessing()
			}
		case wire.IGMPv3Report:
			recs := m.Records()
			// Without auxiliary data, encoding the records again
			// gives the message back, but for the checksum and reserved bytes.
			aux := false
			for i, o := 0, wire.IGMPv3ReportLen; i < len(recs); i++ {
				aux = aux || data[o+1] != 0
				o += wire.IGMPv3RecordLen + 4*len(recs[i].Sources) + 4*int(data[o+1])
			}
			if !aux {
				re := make([]byte, wire.IGMPv3ReportLenOf(recs))
				wire.EncodeIGMPv3Report(re, recs)
				if n := len(re); n <= len(data) && !bytes.Equal(re[6:], data[6:n]) {
					t.Fatalf("records %+v encode to %x, from %x", recs, re, data)
				}
			}
		}
	})
}
