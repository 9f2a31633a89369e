package wire_test

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

func TestEncodeMLDv2ReportDecodesWithGopacket(t *testing.T) {
	recs := []wire.MLDv2Record{
		{Type: wire.MLDv2ChangeToExclude, Group: addr("ff02::1:ff00:1234")},
		{Type: wire.MLDv2ModeIsInclude, Group: addr("ff05::fb"), Sources: []netip.Addr{addr("2001:db8::1"), addr("2001:db8::2")}},
		{Type: wire.MLDv2ModeIsExclude, Group: addr("ff02::1:ff99:8877")},
	}
	src, dst := addr("fe80::1"), addr("ff02::16")
	b := make([]byte, wire.MLDv2ReportLenOf(recs))
	wire.EncodeMLDv2Report(b, recs)
	wire.SetICMPv6Checksum(b, src, dst)
	if want := 8 + 20 + 52 + 20; len(b) != want {
		t.Fatalf("report of %d bytes, want %d", len(b), want)
	}
	g, valid := gopacketICMPv6Valid(t, b, src, dst)
	if !valid {
		t.Error("gopacket finds the checksum wrong")
	}
	if g.TypeCode.Type() != layers.ICMPv6TypeMLDv2MulticastListenerReportMessageV2 {
		t.Fatalf("type %v", g.TypeCode)
	}
	var r layers.MLDv2MulticastListenerReportMessage
	decodeLayer(t, &r, g.Payload)
	if int(r.NumberOfMulticastAddressRecords) != len(recs) || len(r.MulticastAddressRecords) != len(recs) {
		t.Fatalf("gopacket decodes %d records (%d), want %d", r.NumberOfMulticastAddressRecords, len(r.MulticastAddressRecords), len(recs))
	}
	for i, want := range recs {
		got := r.MulticastAddressRecords[i]
		if uint8(got.RecordType) != uint8(want.Type) || got.AuxDataLen != 0 || !got.MulticastAddress.Equal(ip(want.Group)) || len(got.SourceAddresses) != len(want.Sources) {
			t.Errorf("record %d: gopacket %v, want %+v", i, got.String(), want)
			continue
		}
		for j, s := range want.Sources {
			if !got.SourceAddresses[j].Equal(ip(s)) {
				t.Errorf("record %d source %d: %v, want %v", i, j, got.SourceAddresses[j], s)
			}
		}
	}
}

func TestEncodeMLDv1DecodesWithGopacket(t *testing.T) {
	src := addr("fe80::1")
	for _, tt := range []struct {
		name string
		typ  uint8
		dst  netip.Addr
		want uint8
	}{
		{"report, to the group", wire.ICMPv6MLDv1Report, addr("ff05::1:3"), layers.ICMPv6TypeMLDv1MulticastListenerReportMessage},
		{"done, to all-routers", wire.ICMPv6MLDv1Done, addr("ff02::2"), layers.ICMPv6TypeMLDv1MulticastListenerDoneMessage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			group := addr("ff05::1:3")
			b := make([]byte, wire.MLDv1Len)
			for i := range b {
				b[i] = 0xa5 // every field written
			}
			wire.EncodeMLDv1(b, tt.typ, group)
			wire.SetICMPv6Checksum(b, src, tt.dst)
			g, valid := gopacketICMPv6Valid(t, b, src, tt.dst)
			if !valid || g.TypeCode.Type() != tt.want || g.TypeCode.Code() != 0 {
				t.Fatalf("gopacket: %v, checksum valid %v", g.TypeCode, valid)
			}
			var m layers.MLDv1MulticastListenerReportMessage // Done's layout is the same
			decodeLayer(t, &m, g.Payload)
			if m.MaximumResponseDelay != 0 || !m.MulticastAddress.Equal(ip(group)) {
				t.Errorf("gopacket decodes delay %v group %v, want 0 and %v", m.MaximumResponseDelay, m.MulticastAddress, group)
			}
			if b[6] != 0 || b[7] != 0 {
				t.Errorf("reserved field %x, want zero", b[6:8])
			}
			v1, ok := wire.ParseMLDv1(b)
			if !ok || v1.Group() != group {
				t.Errorf("ParseMLDv1 = %v, %v; want %v", v1.Group(), ok, group)
			}
			if _, ok := wire.ParseMLDv1(b[:wire.MLDv1Len-1]); ok {
				t.Error("ParseMLDv1 took 23 bytes")
			}
		})
	}
	q := make([]byte, wire.MLDv1QueryLen)
	q[0] = wire.ICMPv6MLDQuery
	if _, ok := wire.ParseMLDv1(q); ok {
		t.Error("ParseMLDv1 took a query")
	}
}

func TestParseMLDQueryReadsWhatGopacketBuilds(t *testing.T) {
	tests := []struct {
		name    string
		delay   time.Duration
		group   netip.Addr
		sources []netip.Addr
	}{
		{"general, short delay", 1000 * time.Millisecond, netip.IPv6Unspecified(), nil},
		{"general, exponential delay", 40 * time.Second, netip.IPv6Unspecified(), nil},
		{"group-specific", 10 * time.Second, addr("ff02::1:ff00:1234"), nil},
		{"group-and-source", 10 * time.Second, addr("ff05::fb"), []netip.Addr{addr("2001:db8::1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &layers.MLDv2MulticastListenerQueryMessage{MulticastAddress: ip(tt.group), QueriersRobustnessVariable: 2}
			for _, s := range tt.sources {
				q.SourceAddresses = append(q.SourceAddresses, ip(s))
			}
			if err := q.SetMLDv2MaximumResponseDelay(tt.delay); err != nil {
				t.Fatal(err)
			}
			b := gopacketICMPv6(t, srcIP6, dstIP6, wire.ICMPv6MLDQuery, 0, q)
			m, ok := wire.ParseMLDQuery(b)
			if !ok {
				t.Fatalf("ParseMLDQuery rejected %x", b)
			}
			if m.IsV1() || m.Group() != tt.group || m.NumSources() != len(tt.sources) || m.QRV() != 2 {
				t.Errorf("v1 %v group %v sources %d qrv %d", m.IsV1(), m.Group(), m.NumSources(), m.QRV())
			}
			if got := time.Duration(m.MaxRespDelay()) * time.Millisecond; got != q.MaximumResponseDelay() {
				t.Errorf("MaxRespDelay %v, gopacket %v", got, q.MaximumResponseDelay())
			}
			for i, s := range tt.sources {
				if m.Source(i) != s {
					t.Errorf("source %d = %v, want %v", i, m.Source(i), s)
				}
			}
		})
	}
}

func TestEncodeMLDv2QueryDecodesWithGopacket(t *testing.T) {
	f := wire.MLDv2QueryFields{MaxRespCode: 10000, Group: addr("ff02::1:ff00:1"), QRV: 2, QQIC: 125, Sources: []netip.Addr{addr("fe80::9")}}
	b := make([]byte, wire.MLDv2QueryLenOf(len(f.Sources)))
	wire.EncodeMLDv2Query(b, &f)
	wire.SetICMPv6Checksum(b, srcIP6, dstIP6)
	g, valid := gopacketICMPv6Valid(t, b, srcIP6, dstIP6)
	if !valid {
		t.Error("gopacket finds the checksum wrong")
	}
	var q layers.MLDv2MulticastListenerQueryMessage
	decodeLayer(t, &q, g.Payload)
	if q.MaximumResponseCode != f.MaxRespCode || !q.MulticastAddress.Equal(ip(f.Group)) || q.QueriersRobustnessVariable != 2 ||
		q.QueriersQueryIntervalCode != 125 || len(q.SourceAddresses) != 1 || !q.SourceAddresses[0].Equal(ip(f.Sources[0])) {
		t.Errorf("gopacket decodes %s", q.String())
	}
}

func TestParseMLDQueryRefusesTruncated(t *testing.T) {
	f := wire.MLDv2QueryFields{Sources: []netip.Addr{addr("fe80::9")}}
	b := make([]byte, wire.MLDv2QueryLenOf(1))
	wire.EncodeMLDv2Query(b, &f)
	for _, n := range []int{0, 8, 23, 25, 27, len(b) - 1} {
		if _, ok := wire.ParseMLDQuery(b[:n]); ok {
			t.Errorf("accepted %d of %d bytes", n, len(b))
		}
	}
	if q, ok := wire.ParseMLDQuery(b[:wire.MLDv1QueryLen]); !ok || !q.IsV1() {
		t.Error("refused the 24 bytes of an MLDv1 query")
	}
}

func TestEncodeMLDHopByHopIsARouterAlert(t *testing.T) {
	b := make([]byte, wire.MLDHopByHopLen)
	wire.EncodeMLDHopByHop(b)
	var h layers.IPv6HopByHop
	var df feedback
	if err := h.DecodeFromBytes(b, &df); err != nil || df.truncated {
		t.Fatalf("gopacket decode: %v (truncated %v)", err, df.truncated)
	}
	if h.NextHeader != layers.IPProtocolICMPv6 || h.ActualLength != wire.MLDHopByHopLen {
		t.Fatalf("next header %v length %d", h.NextHeader, h.ActualLength)
	}
	var alert bool
	for _, o := range h.Options {
		if o.OptionType == wire.IPv6OptRouterAlert && len(o.OptionData) == 2 && o.OptionData[0] == 0 && o.OptionData[1] == 0 {
			alert = true
		}
	}
	if !alert {
		t.Errorf("no Router Alert option with value 0 in %+v", h.Options)
	}
}

func FuzzParseMLDQuery(f *testing.F) {
	b := make([]byte, wire.MLDv2QueryLenOf(2))
	wire.EncodeMLDv2Query(b, &wire.MLDv2QueryFields{Sources: []netip.Addr{addr("fe80::1"), addr("fe80::2")}})
	f.Add(b)
	f.Add(b[:wire.MLDv1QueryLen])
	f.Fuzz(func(t *testing.T, data []byte) {
		q, ok := wire.ParseMLDQuery(data)
		if !ok {
			return
		}
		_ = q.MaxRespDelay()
		_ = q.Group()
		_ = q.QRV()
		for i := range q.NumSources() {
			_ = q.Source(i)
		}
	})
}

func TestParseMLDv2ReportIsEncodeMLDv2ReportsInverse(t *testing.T) {
	recs := []wire.MLDv2Record{
		{Type: wire.MLDv2AllowNewSources, Group: addr("ff05::1:3"), Sources: []netip.Addr{addr("2001:db8::1"), addr("2001:db8::2")}},
		{Type: wire.MLDv2ChangeToExclude, Group: addr("ff02::1:ff00:1234")},
		{Type: wire.MLDv2BlockOldSources, Group: addr("ff0e::9"), Sources: []netip.Addr{addr("2001:db8::3")}},
	}
	b := make([]byte, wire.MLDv2ReportLenOf(recs))
	wire.EncodeMLDv2Report(b, recs)
	got, ok := wire.ParseMLDv2Report(b)
	if !ok || !reflect.DeepEqual(got, recs) {
		t.Fatalf("ParseMLDv2Report = %v, %v; want %v", got, ok, recs)
	}
	for n := range len(b) {
		if _, ok := wire.ParseMLDv2Report(b[:n]); ok {
			t.Errorf("took %d of %d bytes", n, len(b))
		}
	}
	if _, ok := wire.ParseMLDv2Report(append(slices.Clone(b), 0, 0, 0, 0)); !ok {
		t.Error("refused a report with bytes after its last record")
	}
	q := slices.Clone(b)
	q[0] = wire.ICMPv6MLDQuery
	if _, ok := wire.ParseMLDv2Report(q); ok {
		t.Error("took a query")
	}
}

func TestParseMLDv2ReportSkipsAuxiliaryData(t *testing.T) {
	// One record with one word of auxiliary data (RFC 3810 section
	// 5.2.6), then one without: the second is found past the first's.
	first := wire.MLDv2Record{Type: wire.MLDv2ModeIsInclude, Group: addr("ff05::1"), Sources: []netip.Addr{addr("2001:db8::1")}}
	second := wire.MLDv2Record{Type: wire.MLDv2ModeIsExclude, Group: addr("ff05::2")}
	b := make([]byte, wire.MLDv2ReportLenOf([]wire.MLDv2Record{first, second})+4)
	wire.EncodeMLDv2Report(b, []wire.MLDv2Record{first})
	b[7] = 2 // Nr of Mcast Address Records
	off := wire.MLDv2ReportLen
	b[off+1] = 1 // Aux Data Len, in 32-bit words
	copy(b[off+wire.MLDv2RecordLen+16:], []byte{0xde, 0xad, 0xbe, 0xef})
	tail := make([]byte, wire.MLDv2ReportLenOf([]wire.MLDv2Record{second}))
	wire.EncodeMLDv2Report(tail, []wire.MLDv2Record{second})
	copy(b[off+wire.MLDv2RecordLen+16+4:], tail[wire.MLDv2ReportLen:])
	got, ok := wire.ParseMLDv2Report(b)
	if !ok || !reflect.DeepEqual(got, []wire.MLDv2Record{first, second}) {
		t.Fatalf("ParseMLDv2Report = %v, %v", got, ok)
	}
	if _, ok := wire.ParseMLDv2Report(b[:len(b)-1]); ok {
		t.Error("took a report whose last record is cut short")
	}
}

func FuzzParseMLDv2Report(f *testing.F) {
	recs := []wire.MLDv2Record{{Type: wire.MLDv2AllowNewSources, Group: addr("ff05::1:3"), Sources: []netip.Addr{addr("2001:db8::1")}}, {Type: wire.MLDv2ModeIsExclude, Group: addr("ff02::1:ff00:1")}}
	b := make([]byte, wire.MLDv2ReportLenOf(recs))
	wire.EncodeMLDv2Report(b, recs)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, ok := wire.ParseMLDv2Report(data)
		if !ok {
			return
		}
		// Parsed, it encodes back to a report that parses the same.
		re := make([]byte, wire.MLDv2ReportLenOf(recs))
		wire.EncodeMLDv2Report(re, recs)
		if again, ok := wire.ParseMLDv2Report(re); !ok || !reflect.DeepEqual(again, recs) {
			t.Fatalf("re-encoded %v parses as %v, %v", recs, again, ok)
		}
	})
}
