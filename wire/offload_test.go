package wire_test

import (
	"encoding/binary"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// A partial checksum finished in software (what a device does with
// VIRTIO_NET_HDR_F_NEEDS_CSUM) must equal the checksum gopacket computes
// over the whole segment, for any length, odd ones and 64 KiB ones too.
func TestFinishedPartialChecksumEqualsFullChecksum(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 100, 1459, 1460, 9001, 65535 - 20 - 32} {
		// The TCP segment as gopacket serializes it, checksum computed.
		tcp := &layers.TCP{SrcPort: 40000, DstPort: 7, Seq: 0x01020304, Ack: 0x0a0b0c0d, ACK: true, PSH: n > 0, Window: 512,
			Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
				{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: []byte{0, 0, 0, 1, 0, 0, 0, 2}}}}
		ipl := gopacketIPv4(srcIP, dstIP, layers.IPProtocolTCP)
		if err := tcp.SetNetworkLayerForChecksum(ipl); err != nil {
			t.Fatal(err)
		}
		want := serialize(t, tcp, gopacketPayload(payload(n)))

		// GoNet's sender: the pseudo-header's partial sum in the field,
		// then the device's part.
		b := append([]byte(nil), want...)
		wire.SetTCPPartialChecksum(b, srcIP, dstIP)
		partial := binary.BigEndian.Uint16(b[16:])
		if partial != wire.Fold(wire.PseudoHeaderSum(srcIP, dstIP, wire.ProtoTCP, len(b))) {
			t.Fatalf("%d bytes: partial checksum %#04x is not the folded pseudo-header sum", n, partial)
		}
		if !wire.FinishChecksum(b, 0, wire.TCPChecksumOffset) {
			t.Fatalf("%d bytes: FinishChecksum refused", n)
		}
		if got, w := binary.BigEndian.Uint16(b[16:]), binary.BigEndian.Uint16(want[16:]); got != w && !(got == 0xffff && w == 0) {
			t.Errorf("%d bytes: finished checksum %#04x, gopacket's %#04x", n, got, w)
		}
		if v := naiveChecksum(append(naivePseudoHeader(srcIP, dstIP, wire.ProtoTCP, len(b)), b...), 0); v != 0 {
			t.Errorf("%d bytes: the finished segment does not verify (%#04x)", n, v)
		}
	}
}

// A finished checksum that comes out zero is sent as 0xffff: for UDP zero
// means "no checksum" (RFC 768), and Linux's skb_checksum_help does the
// same for every protocol.
func TestFinishedChecksumOfZeroIsAllOnes(t *testing.T) {
	// A UDP datagram whose last two bytes are chosen so that the whole sum
	// is 0xffff, which makes the checksum zero.
	b := make([]byte, 8+6)
	binary.BigEndian.PutUint16(b[0:], 53)
	binary.BigEndian.PutUint16(b[2:], 9999)
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	copy(b[8:], "abcd")
	binary.BigEndian.PutUint16(b[6:], wire.PartialChecksum(srcIP, dstIP, wire.ProtoUDP, len(b)))
	s := wire.Fold(wire.Sum(b, 0))
	binary.BigEndian.PutUint16(b[12:], ^s) // sum becomes 0xffff
	if wire.Checksum(b, 0) != 0 {
		t.Fatalf("set-up: the datagram's checksum is %#04x, want 0", wire.Checksum(b, 0))
	}
	wire.FinishChecksum(b, 0, wire.UDPChecksumOffset)
	if got := binary.BigEndian.Uint16(b[6:]); got != 0xffff {
		t.Fatalf("checksum field %#04x, want 0xffff", got)
	}
	u, _ := wire.ParseUDP(b)
	if !u.ChecksumValid(srcIP, dstIP) {
		t.Error("the datagram with 0xffff does not verify")
	}
}

func TestFinishChecksumRefusesAFieldOutsideTheData(t *testing.T) {
	for _, tt := range []struct {
		name             string
		n, start, offset int
	}{
		{"field past the end", 20, 4, 16},
		{"field across the end", 18, 0, 17},
		{"negative start", 20, -1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := payload(tt.n)
			orig := append([]byte(nil), b...)
			if wire.FinishChecksum(b, tt.start, tt.offset) {
				t.Error("FinishChecksum reported success")
			}
			if string(b) != string(orig) {
				t.Error("FinishChecksum changed the data")
			}
		})
	}
}

// EncodeUDPPartial followed by the device's part is EncodeUDP.
func TestEncodeUDPPartialFinishedIsEncodeUDP(t *testing.T) {
	for _, n := range []int{0, 1, 31, 1472, 9000} {
		full := make([]byte, 8+n)
		copy(full[8:], payload(n))
		part := append([]byte(nil), full...)
		wire.EncodeUDP(full, &wire.UDPFields{SrcPort: 5353, DstPort: 53})
		wire.SetUDPChecksum(full, srcIP, dstIP)
		wire.EncodeUDP(part, &wire.UDPFields{SrcPort: 5353, DstPort: 53})
		wire.SetUDPPartialChecksum(part, srcIP, dstIP)
		wire.FinishChecksum(part, 0, wire.UDPChecksumOffset)
		if string(part) != string(full) {
			t.Errorf("%d bytes: finished partial datagram % x, EncodeUDP's % x", n, part[:8], full[:8])
		}
	}
}
