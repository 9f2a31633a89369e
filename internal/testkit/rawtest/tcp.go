package rawtest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TCP segments: built and decoded with gopacket's layers.TCP, so that what
// the test injects and what it reads back do not depend on GoNet's wire
// package.

// TCP control bits, as in byte 13 of the header (RFC 9293 section 3.1).
const (
	FIN uint8 = 0x01
	SYN uint8 = 0x02
	RST uint8 = 0x04
	PSH uint8 = 0x08
	ACK uint8 = 0x10
	URG uint8 = 0x20
	ECE uint8 = 0x40
	CWR uint8 = 0x80
)

// FlagString spells control bits the way tcpdump does: "S.", "F.", "R",
// "P.", "." for ACK alone, "none" for no bit at all.
func FlagString(f uint8) string {
	var b strings.Builder
	for _, x := range []struct {
		bit uint8
		c   byte
	}{{SYN, 'S'}, {FIN, 'F'}, {RST, 'R'}, {PSH, 'P'}, {URG, 'U'}, {ECE, 'E'}, {CWR, 'W'}, {ACK, '.'}} {
		if f&x.bit != 0 {
			b.WriteByte(x.c)
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// TCPOpts are the options a test offers or finds in a segment. The zero
// value is no option at all.
type TCPOpts struct {
	MSS           uint16 // 0: absent
	HasWScale     bool
	WScale        uint8
	SACKPermitted bool
	HasTimestamp  bool
	TSVal, TSEcr  uint32
	// SACK holds the first NumSACK blocks of a SACK option, [start, end)
	// each, decoded from a segment or sent in one (after the others).
	SACK    [4][2]uint32
	NumSACK int
}

// String lists the options present.
func (o TCPOpts) String() string {
	var parts []string
	if o.MSS != 0 {
		parts = append(parts, fmt.Sprintf("mss %d", o.MSS))
	}
	if o.HasWScale {
		parts = append(parts, fmt.Sprintf("wscale %d", o.WScale))
	}
	if o.SACKPermitted {
		parts = append(parts, "sackOK")
	}
	if o.HasTimestamp {
		parts = append(parts, fmt.Sprintf("TS val %d ecr %d", o.TSVal, o.TSEcr))
	}
	for _, b := range o.SACK[:o.NumSACK] {
		parts = append(parts, fmt.Sprintf("sack %d-%d", b[0], b[1]))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// layers returns the options as gopacket lays them out, in Linux's order.
func (o TCPOpts) layers() []layers.TCPOption {
	var out []layers.TCPOption
	if o.MSS != 0 {
		out = append(out, layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4,
			OptionData: binary.BigEndian.AppendUint16(nil, o.MSS)})
	}
	if o.SACKPermitted {
		out = append(out, layers.TCPOption{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2})
	}
	if o.HasTimestamp {
		d := binary.BigEndian.AppendUint32(nil, o.TSVal)
		d = binary.BigEndian.AppendUint32(d, o.TSEcr)
		out = append(out, layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: d})
	}
	if o.HasWScale {
		out = append(out,
			layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{o.WScale}})
	}
	if o.NumSACK > 0 {
		var d []byte
		for _, b := range o.SACK[:o.NumSACK] {
			d = binary.BigEndian.AppendUint32(d, b[0])
			d = binary.BigEndian.AppendUint32(d, b[1])
		}
		out = append(out,
			layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionLength: uint8(2 + len(d)), OptionData: d})
	}
	return out
}

// TCPOptsOf reads the options gopacket decoded from a segment, failing the
// test on one of a known kind with the wrong length.
func TCPOptsOf(tb testing.TB, t *layers.TCP) TCPOpts {
	tb.Helper()
	var o TCPOpts
	for _, opt := range t.Options {
		bad := func(want int) {
			if len(opt.OptionData) != want {
				tb.Fatalf("rawtest: TCP option %v with %d bytes of data, want %d", opt.OptionType, len(opt.OptionData), want)
			}
		}
		switch opt.OptionType {
		case layers.TCPOptionKindMSS:
			bad(2)
			o.MSS = binary.BigEndian.Uint16(opt.OptionData)
		case layers.TCPOptionKindWindowScale:
			bad(1)
			o.HasWScale, o.WScale = true, opt.OptionData[0]
		case layers.TCPOptionKindSACKPermitted:
			bad(0)
			o.SACKPermitted = true
		case layers.TCPOptionKindSACK:
			if len(opt.OptionData)%8 != 0 || len(opt.OptionData) > 32 {
				tb.Fatalf("rawtest: SACK option with %d bytes of data", len(opt.OptionData))
			}
			for d := opt.OptionData; len(d) >= 8; d = d[8:] {
				o.SACK[o.NumSACK] = [2]uint32{binary.BigEndian.Uint32(d), binary.BigEndian.Uint32(d[4:])}
				o.NumSACK++
			}
		case layers.TCPOptionKindTimestamps:
			bad(8)
			o.HasTimestamp = true
			o.TSVal = binary.BigEndian.Uint32(opt.OptionData)
			o.TSEcr = binary.BigEndian.Uint32(opt.OptionData[4:])
		}
	}
	return o
}

// TCPSegment describes a segment to build. Src and Dst default to PeerAddr
// and StackAddr (their ports must be given).
type TCPSegment struct {
	Src, Dst netip.AddrPort
	Seq, Ack uint32
	Flags    uint8
	Window   uint16
	Urgent   uint16
	Opts     TCPOpts
	Payload  []byte
	// TOS is the IPv4 TOS byte; its low two bits are the ECN field (RFC
	// 3168 section 5: 2 ECT(0), 1 ECT(1), 3 CE).
	TOS uint8
}

// Len is the segment's length in sequence space: data, SYN and FIN.
func (s TCPSegment) Len() uint32 {
	n := uint32(len(s.Payload))
	if s.Flags&SYN != 0 {
		n++
	}
	if s.Flags&FIN != 0 {
		n++
	}
	return n
}

// String summarises the segment as tcpdump would.
func (s TCPSegment) String() string {
	str := fmt.Sprintf("%v > %v: Flags [%s], seq %d, ack %d, win %d, urg %d, options %v, length %d",
		s.Src, s.Dst, FlagString(s.Flags), s.Seq, s.Ack, s.Window, s.Urgent, s.Opts, len(s.Payload))
	if s.TOS != 0 {
		str += fmt.Sprintf(", tos %#x", s.TOS)
	}
	return str
}

func (s TCPSegment) layer() *layers.TCP {
	f := s.Flags
	return &layers.TCP{
		SrcPort: layers.TCPPort(s.Src.Port()), DstPort: layers.TCPPort(s.Dst.Port()),
		Seq: s.Seq, Ack: s.Ack,
		FIN: f&FIN != 0, SYN: f&SYN != 0, RST: f&RST != 0, PSH: f&PSH != 0,
		ACK: f&ACK != 0, URG: f&URG != 0, ECE: f&ECE != 0, CWR: f&CWR != 0,
		Window: s.Window, Urgent: s.Urgent,
		Options: s.Opts.layers(),
	}
}

// TCPBytes returns the segment s describes, header and payload, with its
// checksum over the IPv4 pseudo-header of its addresses.
func TCPBytes(tb testing.TB, s TCPSegment) []byte {
	tb.Helper()
	s = s.withDefaults()
	ip := IPv4Header(s.Src.Addr(), s.Dst.Addr(), layers.IPProtocolTCP)
	t := s.layer()
	if err := t.SetNetworkLayerForChecksum(ip); err != nil {
		tb.Fatal(err)
	}
	b := Serialize(tb, ip, t, gopacket.Payload(s.Payload))
	return b[20:]
}

func (s TCPSegment) withDefaults() TCPSegment {
	if !s.Src.Addr().IsValid() {
		s.Src = netip.AddrPortFrom(PeerAddr, s.Src.Port())
	}
	if !s.Dst.Addr().IsValid() {
		s.Dst = netip.AddrPortFrom(StackAddr, s.Dst.Port())
	}
	return s
}

// TCPFrame returns a frame from PeerMAC carrying the segment s describes.
func (h *Host) TCPFrame(tb testing.TB, s TCPSegment) []byte {
	tb.Helper()
	s = s.withDefaults()
	ip := IPv4Header(s.Src.Addr(), s.Dst.Addr(), layers.IPProtocolTCP)
	ip.TOS = s.TOS
	return h.IPFrame(tb, ip, Payload(TCPBytes(tb, s)))
}

// TCPOf returns the frame's IPv4 header and TCP segment, failing the test
// when it is not TCP or its checksum is wrong.
func TCPOf(tb testing.TB, frame []byte) (*layers.IPv4, *layers.TCP) {
	tb.Helper()
	ip := IPv4Of(tb, frame)
	p := Decode(tb, frame)
	t, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok {
		tb.Fatalf("rawtest: expected TCP, got %s", Describe(frame))
	}
	if err := t.SetNetworkLayerForChecksum(ip); err != nil {
		tb.Fatal(err)
	}
	if _, v := t.VerifyChecksum(); !v.Valid {
		tb.Errorf("rawtest: TCP checksum %#04x is wrong (want %#04x)", v.Actual, v.Correct)
	}
	return ip, t
}

// SegmentOf decodes a frame the stack sent into a TCPSegment, failing the
// test when it is not a well-formed TCP segment.
func SegmentOf(tb testing.TB, frame []byte) TCPSegment {
	tb.Helper()
	ip, t := TCPOf(tb, frame)
	return TCPSegment{
		Src:     netip.AddrPortFrom(Addr(ip.SrcIP), uint16(t.SrcPort)),
		Dst:     netip.AddrPortFrom(Addr(ip.DstIP), uint16(t.DstPort)),
		Seq:     t.Seq,
		Ack:     t.Ack,
		Flags:   TCPFlags(t),
		Window:  t.Window,
		Urgent:  t.Urgent,
		Opts:    TCPOptsOf(tb, t),
		Payload: append([]byte(nil), t.Payload...),
		TOS:     ip.TOS,
	}
}

// TCPFlags returns the control bits gopacket decoded.
func TCPFlags(t *layers.TCP) uint8 {
	var f uint8
	for _, x := range []struct {
		on  bool
		bit uint8
	}{{t.FIN, FIN}, {t.SYN, SYN}, {t.RST, RST}, {t.PSH, PSH}, {t.ACK, ACK}, {t.URG, URG}, {t.ECE, ECE}, {t.CWR, CWR}} {
		if x.on {
			f |= x.bit
		}
	}
	return f
}
