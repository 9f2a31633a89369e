package wire_test

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// TCP and UDP checksums over IPv6: the same functions as over IPv4, taking
// the pseudo-header of RFC 8200 section 8.1 when the addresses are IPv6
// ones, checked against gopacket's checksums over a layers.IPv6.

var (
	src6 = netip.MustParseAddr("2001:db8::1")
	dst6 = netip.MustParseAddr("fe80::1234:5678:9abc:def0")
)

// gopacketOver6 serializes l carrying pl over an IPv6 header of src and dst
// with gopacket, and returns it without the IPv6 header.
func gopacketOver6(t testing.TB, src, dst netip.Addr, proto layers.IPProtocol, l transportLayer, pl []byte) []byte {
	t.Helper()
	ipl := &layers.IPv6{Version: 6, NextHeader: proto, HopLimit: 64, SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
	if err := l.SetNetworkLayerForChecksum(ipl); err != nil {
		t.Fatal(err)
	}
	return serialize(t, ipl, l, gopacketPayload(pl))[wire.IPv6HeaderLen:]
}

func TestTransportChecksumsOverIPv6AreGopackets(t *testing.T) {
	for _, n := range []int{0, 1, 11, 1440} {
		pl := payload(n)
		wantTCP := gopacketOver6(t, src6, dst6, layers.IPProtocolTCP, &layers.TCP{SrcPort: 443, DstPort: 50000, Seq: 7, Ack: 9, ACK: true, Window: 512}, pl)
		b := append(make([]byte, wire.TCPMinHeaderLen), pl...)
		wire.EncodeTCP(b, &wire.TCPFields{SrcPort: 443, DstPort: 50000, Seq: 7, Ack: 9, Flags: wire.TCPFlagACK, Window: 512})
		wire.SetTCPChecksum(b, src6, dst6)
		if !bytes.Equal(b, wantTCP) {
			t.Errorf("%d bytes: TCP checksum %#04x, gopacket's %#04x", n, be16(b[16:18]), be16(wantTCP[16:18]))
		}
		if seg, ok := wire.ParseTCP(wantTCP); !ok || !seg.ChecksumValid(src6, dst6) || seg.ChecksumValid(src6, src6) {
			t.Errorf("%d bytes: TCP ChecksumValid disagrees with gopacket", n)
		}

		wantUDP := gopacketOver6(t, src6, dst6, layers.IPProtocolUDP, &layers.UDP{SrcPort: 53, DstPort: 5353}, pl)
		u := append(make([]byte, wire.UDPHeaderLen), pl...)
		wire.EncodeUDP(u, &wire.UDPFields{SrcPort: 53, DstPort: 5353})
		wire.SetUDPChecksum(u, src6, dst6)
		if !bytes.Equal(u, wantUDP) {
			t.Errorf("%d bytes: UDP checksum %#04x, gopacket's %#04x", n, be16(u[6:8]), be16(wantUDP[6:8]))
		}
		if d, ok := wire.ParseUDP(wantUDP); !ok || !d.ChecksumValid(src6, dst6) || d.ChecksumValid(dst6, dst6) {
			t.Errorf("%d bytes: UDP ChecksumValid disagrees with gopacket", n)
		}
	}
}

func TestUDPChecksumIsMandatoryOverIPv6(t *testing.T) {
	b := make([]byte, wire.UDPHeaderLen+4)
	wire.EncodeUDP(b, &wire.UDPFields{SrcPort: 1, DstPort: 2}) // checksum zero: none
	u, ok := wire.ParseUDP(b)
	if !ok {
		t.Fatal("ParseUDP failed")
	}
	if !u.ChecksumValid(srcIP, dstIP) {
		t.Error("a zero checksum over IPv4 is rejected; RFC 768 makes it 'none'")
	}
	if u.ChecksumValid(src6, dst6) {
		t.Error("a zero checksum over IPv6 is accepted; RFC 8200 section 8.1 makes it mandatory")
	}
}

func TestPseudoHeaderSumTakesTheFamilyOfTheAddresses(t *testing.T) {
	if got, want := wire.PseudoHeaderSum(src6, dst6, wire.ProtoTCP, 1234), wire.PseudoHeaderSum6(src6, dst6, wire.ProtoTCP, 1234); got != want {
		t.Errorf("PseudoHeaderSum over IPv6 = %#x, PseudoHeaderSum6 = %#x", got, want)
	}
}

func TestTransportChecksumsOverIPv6DoNotAllocate(t *testing.T) {
	b := make([]byte, wire.TCPMinHeaderLen+1440)
	wire.EncodeTCP(b, &wire.TCPFields{SrcPort: 1, DstPort: 2, Flags: wire.TCPFlagACK})
	allocs := testing.AllocsPerRun(1000, func() {
		wire.SetTCPChecksum(b, src6, dst6)
		if !wire.TCP(b).ChecksumValid(src6, dst6) {
			t.Fatal("round trip failed")
		}
		wire.SetUDPChecksum(b, src6, dst6)
		if !wire.UDP(b).ChecksumValid(src6, dst6) {
			t.Fatal("round trip failed")
		}
	})
	if allocs > 0 {
		t.Errorf("%.2f allocations per checksum, want 0", allocs)
	}
}
