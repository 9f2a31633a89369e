package wire_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// withOptions returns an IPv4 header carrying opts (padded to four bytes
// with EOL), parsed.
func withOptions(t testing.TB, opts []byte) wire.IPv4 {
	t.Helper()
	for len(opts)%4 != 0 {
		opts = append(opts, 0)
	}
	b := make([]byte, wire.IPv4MinHeaderLen+len(opts))
	wire.EncodeIPv4(b, &wire.IPv4Fields{TotalLen: len(b), TTL: 64, Protocol: wire.ProtoICMP, Src: srcIP, Dst: dstIP, Options: opts})
	h, e := wire.ParseIPv4(b)
	if e != wire.IPv4OK {
		t.Fatalf("ParseIPv4 = %v", e)
	}
	return h
}

// rrOpt is a Record Route option of slots addresses with pointer ptr;
// tsOpt a Timestamp option of length n, pointer ptr, overflow and flag.
func rrOpt(slots int, ptr byte) []byte {
	return append([]byte{wire.IPv4OptRecordRoute, byte(3 + 4*slots), ptr}, make([]byte, 4*slots)...)
}

func tsOpt(n int, ptr, overflow, flag byte) []byte {
	return append([]byte{wire.IPv4OptTimestamp, byte(n), ptr, overflow<<4 | flag}, make([]byte, n-4)...)
}

func TestCheckOptionsFollowsRFC791(t *testing.T) {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	lsrr := []byte{wire.IPv4OptLSRR, 7, 4, 198, 51, 100, 7}
	ssrr := []byte{wire.IPv4OptSSRR, 7, 4, 198, 51, 100, 7}
	tests := []struct {
		name    string
		opts    []byte
		bad     int // offset in the header; 0 for none
		srouted bool
	}{
		{"no options", nil, 0, false},
		{"record route with room", rrOpt(3, 4), 0, false},
		{"record route full", rrOpt(2, 12), 0, false},
		{"timestamps only", tsOpt(12, 5, 0, 0), 0, false},
		{"addresses and timestamps", tsOpt(20, 5, 0, 1), 0, false},
		{"prespecified", tsOpt(12, 5, 0, 3), 0, false},
		{"timestamp full, overflow counting", tsOpt(12, 13, 4, 0), 0, false},
		{"router alert and NOPs", []byte{1, 0x94, 4, 0, 0, 1}, 0, false},
		{"EOL ends the options", []byte{0, 0xff, 0xff, 0xff}, 0, false},
		{"loose source route", lsrr, 0, true},
		{"strict source route", ssrr, 0, true},
		// Errors point at the byte in error (RFC 1122 section 3.2.2.5),
		// where Linux's ip_options_compile does.
		{"a type with no length", []byte{1, 1, 1, 7}, 23, false},
		{"length below 2", []byte{0x94, 1, 0, 0}, 20, false},
		{"length past the header", []byte{1, 0x94, 8, 0}, 21, false},
		{"record route shorter than 3", []byte{wire.IPv4OptRecordRoute, 2, 1, 1}, 21, false},
		{"record route pointer below 4", rrOpt(2, 3), 22, false},
		{"record route with a partial slot left is full", []byte{wire.IPv4OptRecordRoute, 10, 8, 1, 2, 3, 4, 0, 0, 0}, 0, false},
		{"record route pointer into a slot", rrOpt(2, 6), 22, false},
		{"record route twice", cat(rrOpt(1, 4), rrOpt(1, 4)), 27, false},
		{"timestamp shorter than 4", []byte{wire.IPv4OptTimestamp, 3, 5, 1}, 21, false},
		{"timestamp pointer below 5", tsOpt(12, 4, 0, 0), 22, false},
		{"timestamp with a partial entry left is full", tsOpt(16, 13, 0, 1), 0, false},
		{"full so, with its overflow at 15", tsOpt(16, 13, 15, 1), 23, false},
		{"timestamp pointer into an entry", tsOpt(12, 7, 0, 0), 22, false},
		{"timestamp of an unknown flag", tsOpt(12, 5, 0, 2), 23, false},
		{"timestamp full with its overflow at 15", tsOpt(12, 13, 15, 0), 23, false},
		{"source route pointer below 4", []byte{wire.IPv4OptLSRR, 7, 2, 0, 0, 0, 0}, 22, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withOptions(t, tt.opts).CheckOptions()
			if got.Bad != tt.bad || got.SourceRouted != tt.srouted {
				t.Fatalf("CheckOptions = %+v, want Bad %d SourceRouted %v", got, tt.bad, tt.srouted)
			}
		})
	}
}

// RecordIPv4Options fills each kind of entry; gopacket, decoding the
// header, reads the options back with the host's entries in place.
func TestRecordIPv4OptionsAsGopacketReadsThem(t *testing.T) {
	self, other := netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("198.51.100.1")
	const now = 0x01020304
	prespec := tsOpt(20, 5, 0, 3)
	copy(prespec[4:], self.AsSlice()) // our turn first
	prespecOther := tsOpt(20, 5, 0, 3)
	copy(prespecOther[4:], other.AsSlice())
	tests := []struct {
		name string
		opt  []byte
		want []byte // the option's data (after type and length) once recorded
	}{
		{"record route", rrOpt(2, 4), append([]byte{8}, append(self.AsSlice(), 0, 0, 0, 0)...)},
		{"record route full", rrOpt(1, 8), []byte{8, 0, 0, 0, 0}},
		{"timestamps only", tsOpt(12, 5, 0, 0), []byte{9, 0, 1, 2, 3, 4, 0, 0, 0, 0}},
		{"address and timestamp", tsOpt(12, 5, 0, 1), append(append([]byte{13, 1}, self.AsSlice()...), 1, 2, 3, 4)},
		{"prespecified, our address next", prespec, append(append([]byte{13, 3}, self.AsSlice()...), append([]byte{1, 2, 3, 4}, make([]byte, 8)...)...)},
		{"prespecified, another's next", prespecOther, append(append([]byte{5, 3}, other.AsSlice()...), make([]byte, 12)...)},
		{"timestamp full counts an overflow", tsOpt(8, 9, 2, 0), []byte{9, 3 << 4, 0, 0, 0, 0}},
		{"a partial entry left is full", tsOpt(16, 13, 0, 1), append([]byte{13, 1<<4 | 1}, make([]byte, 12)...)},
		{"the overflow count stops at 15", tsOpt(8, 9, 15, 0), []byte{9, 0xf0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := withOptions(t, tt.opt)
			wire.RecordIPv4Options(h.Options(), self, now)
			binary.BigEndian.PutUint16(h[10:], 0)
			binary.BigEndian.PutUint16(h[10:], wire.Checksum(h[:h.HeaderLen()], 0))
			var g layers.IPv4
			if err := g.DecodeFromBytes(h, &feedback{}); err != nil {
				t.Fatalf("gopacket: %v", err)
			}
			if len(g.Options) == 0 || g.Options[0].OptionType != tt.opt[0] {
				t.Fatalf("gopacket reads options %+v, want one of type %d", g.Options, tt.opt[0])
			}
			if got := g.Options[0].OptionData; !bytes.Equal(got, tt.want) {
				t.Fatalf("option data %x, want %x", got, tt.want)
			}
		})
	}
}

func TestReflectedOptionsAreRecordRouteAndTimestamp(t *testing.T) {
	ra := []byte{0x94, 4, 0, 0}
	rr, ts := rrOpt(1, 4), tsOpt(8, 5, 0, 0)
	h := withOptions(t, bytes.Join([][]byte{ra, rr, {1}, ts}, nil))
	got := h.ReflectedOptions(nil)
	want := bytes.Join([][]byte{rr, ts, {0}}, nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("ReflectedOptions = %x, want %x", got, want)
	}
}

func TestMillisSinceMidnightUT(t *testing.T) {
	for _, tc := range []struct {
		unixMilli int64
		want      uint32
	}{
		{0, 0},
		{86_400_000 + 1234, 1234},
		{86_400_000 - 1, 86_399_999},
		{-1, 86_399_999},
	} {
		if got := wire.MillisSinceMidnightUT(tc.unixMilli); got != tc.want {
			t.Errorf("MillisSinceMidnightUT(%d) = %d, want %d", tc.unixMilli, got, tc.want)
		}
	}
}

// FuzzIPv4Options gives the option code any options: nothing may panic or
// write outside the options; options CheckOptions passes stay passing once
// a host recorded itself in them (but for an overflow count it took to
// 15); and the reflected ones are whole options, padded.
func FuzzIPv4Options(f *testing.F) {
	f.Add(rrOpt(9, 4))
	f.Add(tsOpt(40, 5, 0, 1))
	f.Add(append(tsOpt(12, 5, 0, 3), rrOpt(1, 4)...))
	f.Add([]byte{1, 0x94, 4, 0, 0, wire.IPv4OptLSRR, 7, 4, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, opts []byte) {
		if len(opts) > 40 {
			opts = opts[:40]
		}
		h := withOptions(t, opts)
		whole := append(wire.IPv4(nil), h...)
		c := h.CheckOptions()
		if c.Bad != 0 && (c.Bad < wire.IPv4MinHeaderLen || c.Bad >= h.HeaderLen()) {
			t.Fatalf("Bad %d outside the options (header length %d)", c.Bad, h.HeaderLen())
		}
		refl := h.ReflectedOptions(nil)
		if len(refl)%4 != 0 || len(refl) > len(h.Options())+3 {
			t.Fatalf("reflected %d bytes of %d", len(refl), len(h.Options()))
		}
		if c.Bad != 0 {
			return
		}
		wire.RecordIPv4Options(h.Options(), netip.MustParseAddr("192.0.2.9"), 42)
		if !bytes.Equal(h[:wire.IPv4MinHeaderLen], whole[:wire.IPv4MinHeaderLen]) {
			t.Fatal("RecordIPv4Options wrote outside the options")
		}
		// Passing still, but where the host counted a full timestamp's
		// overflow up to 15, which the next host cannot count past.
		if again := h.CheckOptions(); again.Bad != 0 && h[again.Bad]>>4 != 0xf {
			t.Fatalf("options %x pass, but once recorded %x fail at %d", whole.Options(), h.Options(), again.Bad)
		}
	})
}
