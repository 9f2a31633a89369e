package wire_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// gopacketUDP serializes a UDP datagram with gopacket, its checksum over the
// IPv4 pseudo-header of src and dst, and returns it without the IP header.
func gopacketUDP(t testing.TB, src, dst netip.Addr, sport, dport uint16, pl []byte) []byte {
	t.Helper()
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	return gopacketTransport(t, src, dst, layers.IPProtocolUDP, u, pl)
}

// gopacketUDPValid decodes b with gopacket and verifies its checksum over the
// pseudo-header of src and dst.
func gopacketUDPValid(t testing.TB, b []byte, src, dst netip.Addr) (*layers.UDP, bool) {
	t.Helper()
	var u layers.UDP
	return &u, gopacketTransportValid(t, &u, b, src, dst, layers.IPProtocolUDP)
}

var udpCases = []struct {
	name         string
	src, dst     netip.Addr
	sport, dport uint16
	payload      int
}{
	{"DNS query", srcIP, dstIP, 53000, 53, 33},
	{"empty payload", srcIP, dstIP, 1, 2, 0},
	{"one byte", srcIP, dstIP, 9, 9, 1},
	{"odd length", addr("10.1.2.3"), addr("10.3.2.1"), 65535, 0, 7},
	{"even length", addr("10.1.2.3"), addr("10.3.2.1"), 4000, 4001, 8},
	{"largest unfragmented on Ethernet", srcIP, dstIP, 5000, 5001, 1472},
	{"broadcast from nowhere (DHCP)", addr("0.0.0.0"), addr("255.255.255.255"), 68, 67, 300},
	{"odd and large", srcIP, dstIP, 7, 7, 8999},
}

func TestParseUDPDecodesWhatGopacketBuilds(t *testing.T) {
	for _, c := range udpCases {
		t.Run(c.name, func(t *testing.T) {
			pl := payload(c.payload)
			b := gopacketUDP(t, c.src, c.dst, c.sport, c.dport, pl)
			u, ok := wire.ParseUDP(b)
			if !ok {
				t.Fatal("ParseUDP rejected a valid datagram")
			}
			g, _ := gopacketUDPValid(t, b, c.src, c.dst)
			if u.SrcPort() != c.sport || u.DstPort() != c.dport || u.Length() != int(g.Length) || u.Length() != len(b) || u.Checksum() != g.Checksum {
				t.Errorf("ports %d>%d length %d checksum %#04x, gopacket %d>%d %d %#04x",
					u.SrcPort(), u.DstPort(), u.Length(), u.Checksum(), g.SrcPort, g.DstPort, g.Length, g.Checksum)
			}
			if !bytes.Equal(u.Payload(), pl) {
				t.Errorf("Payload differs")
			}
			if !u.ChecksumValid(c.src, c.dst) {
				t.Error("ChecksumValid = false on gopacket's checksum")
			}
		})
	}
}

func TestEncodeUDPIsWhatGopacketBuilds(t *testing.T) {
	for _, c := range udpCases {
		t.Run(c.name, func(t *testing.T) {
			pl := payload(c.payload)
			b := append(bytes.Repeat([]byte{0xa5}, wire.UDPHeaderLen), pl...)
			wire.EncodeUDP(b, &wire.UDPFields{SrcPort: c.sport, DstPort: c.dport})
			wire.SetUDPChecksum(b, c.src, c.dst)
			g, valid := gopacketUDPValid(t, b, c.src, c.dst)
			if !valid {
				t.Errorf("gopacket finds checksum %#04x wrong", g.Checksum)
			}
			if uint16(g.SrcPort) != c.sport || uint16(g.DstPort) != c.dport || int(g.Length) != len(b) || !bytes.Equal(g.Payload, pl) {
				t.Errorf("gopacket got %d>%d length %d", g.SrcPort, g.DstPort, g.Length)
			}
			if want := gopacketUDP(t, c.src, c.dst, c.sport, c.dport, pl); !bytes.Equal(b, want) {
				t.Errorf("EncodeUDP header %x, gopacket %x", b[:8], want[:8])
			}
		})
	}
}

// zeroSumUDP returns a datagram, encoded by EncodeUDP, whose checksum
// computes to zero: the last two payload bytes are chosen to make the sum
// all ones.
func zeroSumUDP(src, dst netip.Addr) []byte {
	b := make([]byte, wire.UDPHeaderLen+6)
	copy(b[8:], []byte{0xde, 0xad, 0xbe, 0xef})
	wire.EncodeUDP(b, &wire.UDPFields{SrcPort: 1234, DstPort: 5678})
	wire.SetUDPChecksum(b, src, dst)
	c := be16(b[6:8]) // the checksum with the last word zero
	b[12], b[13] = byte(c>>8), byte(c)
	wire.EncodeUDP(b, &wire.UDPFields{SrcPort: 1234, DstPort: 5678})
	wire.SetUDPChecksum(b, src, dst)
	return b
}

func TestEncodeUDPSendsAComputedZeroAsAllOnes(t *testing.T) {
	b := zeroSumUDP(srcIP, dstIP)
	pre := append([]byte(nil), b...)
	pre[6], pre[7] = 0, 0
	if c := wire.Checksum(pre, wire.PseudoHeaderSum(srcIP, dstIP, wire.ProtoUDP, len(pre))); c != 0 {
		t.Fatalf("setup: the checksum computes to %#04x, not zero", c)
	}
	wire.EncodeUDP(b, &wire.UDPFields{SrcPort: 1234, DstPort: 5678})
	wire.SetUDPChecksum(b, srcIP, dstIP)
	if got := be16(b[6:8]); got != 0xffff {
		t.Fatalf("checksum field %#04x, want 0xffff (RFC 768)", got)
	}
	if u, ok := wire.ParseUDP(b); !ok || !u.ChecksumValid(srcIP, dstIP) {
		t.Error("the all-ones checksum does not verify")
	}
	if _, valid := gopacketUDPValid(t, b, srcIP, dstIP); !valid {
		t.Error("gopacket finds the all-ones checksum wrong")
	}
	// gopacket applies the same rule.
	if want := gopacketUDP(t, srcIP, dstIP, 1234, 5678, b[8:]); !bytes.Equal(b, want) {
		t.Errorf("EncodeUDP = %x, gopacket = %x", b, want)
	}
}

func TestUDPChecksumValid(t *testing.T) {
	good := gopacketUDP(t, srcIP, dstIP, 1000, 2000, payload(11))
	checkChecksumValid(t, layers.IPProtocolUDP, []checksumCase{
		{"valid", good, srcIP, dstIP, true},
		{"zero means none was computed", withU16(good, 6, 0), srcIP, dstIP, true},
		{"zero is accepted even over damaged data", withU16(with(good, 10, good[10]^0xff), 6, 0), srcIP, dstIP, true},
		{"damaged payload", with(good, 10, good[10]^0x01), srcIP, dstIP, false},
		{"damaged odd last byte", with(good, len(good)-1, good[len(good)-1]^0x01), srcIP, dstIP, false},
		{"damaged port", with(good, 0, good[0]^0x40), srcIP, dstIP, false},
		{"wrong source address", good, addr("192.0.2.2"), dstIP, false},
		{"wrong destination address", good, srcIP, addr("198.51.100.8"), false},
		{"swapped addresses still sum the same", good, dstIP, srcIP, true},
		{"computed zero sent as all ones", zeroSumUDP(srcIP, dstIP), srcIP, dstIP, true},
	})
}

func TestParseUDPChecksTheLengthField(t *testing.T) {
	good := gopacketUDP(t, srcIP, dstIP, 1000, 2000, payload(11)) // 19 bytes
	padded := append(append([]byte(nil), good...), 0, 0, 0)
	tests := []struct {
		name    string
		b       []byte
		ok      bool
		wantLen int
	}{
		{"exact", good, true, 19},
		{"trailing bytes beyond the length are trimmed", padded, true, 19},
		{"header only", withU16(good[:8], 4, 8), true, 8},
		{"length 8 on a longer buffer", withU16(good, 4, 8), true, 8},
		{"empty", nil, false, 0},
		{"shorter than a header", good[:7], false, 0},
		{"length below the header", withU16(good, 4, 7), false, 0},
		{"length zero", withU16(good, 4, 0), false, 0},
		{"length one past what arrived", good[:18], false, 0},
		{"length 65535 on a short buffer", withU16(good, 4, 65535), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok := wire.ParseUDP(tt.b)
			if !checkParse(t, "ParseUDP", u, ok, tt.ok) {
				return
			}
			if len(u) != tt.wantLen || u.Length() != tt.wantLen || len(u.Payload()) != tt.wantLen-wire.UDPHeaderLen {
				t.Errorf("len %d Length %d payload %d, want %d", len(u), u.Length(), len(u.Payload()), tt.wantLen)
			}
		})
	}
}
