package wire_test

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// naiveChecksum is RFC 1071 written the slow, obvious way: 16-bit big-endian
// words, an odd byte padded with zero, each carry added back at once. It is
// the reference the fast Checksum is held to.
func naiveChecksum(b []byte, initial uint32) uint16 {
	s := initial
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i]) << 8
		if i+1 < len(b) {
			w |= uint32(b[i+1])
		}
		s += w
		if s > 0xffff {
			s = s&0xffff + 1
		}
	}
	return ^uint16(s)
}

// naivePseudoHeader returns the 12 bytes of the IPv4 pseudo-header of
// RFC 768, to be summed with the naive checksum.
func naivePseudoHeader(src, dst netip.Addr, proto uint8, length int) []byte {
	s, d := src.As4(), dst.As4()
	return []byte{s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3], 0, proto, byte(length >> 8), byte(length)}
}

// serialize builds a packet with gopacket, the independent encoder the wire
// package is checked against, letting it fix lengths and checksums.
func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatalf("gopacket serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// feedback records whether gopacket found a layer truncated.
type feedback struct{ truncated bool }

func (f *feedback) SetTruncated() { f.truncated = true }

// decodeLayer decodes b into l with gopacket, failing the test if gopacket
// reports an error or a truncated layer.
func decodeLayer(t testing.TB, l gopacket.DecodingLayer, b []byte) {
	t.Helper()
	var df feedback
	if err := l.DecodeFromBytes(b, &df); err != nil {
		t.Fatalf("gopacket decode %T: %v", l, err)
	}
	if df.truncated {
		t.Fatalf("gopacket decode %T: truncated", l)
	}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func ip(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

func hw(m wire.MAC) net.HardwareAddr { return net.HardwareAddr(m[:]) }

// payload returns n bytes of a fixed pattern.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*37 + 11)
	}
	return b
}

// gopacketIPv4 returns an IPv4 layer gopacket will serialize with lengths and
// checksum filled in, for use as a UDP/ICMP pseudo-header source.
func gopacketIPv4(src, dst netip.Addr, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: ip(src), DstIP: ip(dst)}
}

var (
	srcMAC = wire.MAC{0x02, 0x00, 0x5e, 0x10, 0x00, 0x01}
	dstMAC = wire.MAC{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	srcIP  = addr("192.0.2.1")
	dstIP  = addr("198.51.100.7")
)

// checkParse fails the test unless a Parse function, named fn, returned ok
// as want and, when it rejected its input, no view. It returns ok: whether
// there is a view to check further.
func checkParse[V ~[]byte](t testing.TB, fn string, v V, ok, want bool) bool {
	t.Helper()
	if ok != want {
		t.Fatalf("%s ok = %v, want %v", fn, ok, want)
	}
	if !ok && v != nil {
		t.Fatalf("%s rejected its input but returned a view %x", fn, []byte(v))
	}
	return ok
}

// transportLayer is a gopacket TCP or UDP layer: its checksum covers the
// IPv4 pseudo-header.
type transportLayer interface {
	gopacket.SerializableLayer
	gopacket.DecodingLayer
	SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
	VerifyChecksum() (error, gopacket.ChecksumVerificationResult)
}

// gopacketTransport serializes l carrying pl with gopacket, its checksum
// over the pseudo-header of src and dst, and returns it without the IP
// header.
func gopacketTransport(t testing.TB, src, dst netip.Addr, proto layers.IPProtocol, l transportLayer, pl []byte) []byte {
	t.Helper()
	ipl := gopacketIPv4(src, dst, proto)
	if err := l.SetNetworkLayerForChecksum(ipl); err != nil {
		t.Fatal(err)
	}
	b := serialize(t, ipl, l, gopacketPayload(pl))
	return b[wire.IPv4MinHeaderLen:]
}

// gopacketTransportValid decodes b into l with gopacket and reports whether
// its checksum over the pseudo-header of src and dst is right.
func gopacketTransportValid(t testing.TB, l transportLayer, b []byte, src, dst netip.Addr, proto layers.IPProtocol) bool {
	t.Helper()
	decodeLayer(t, l, b)
	if err := l.SetNetworkLayerForChecksum(gopacketIPv4(src, dst, proto)); err != nil {
		t.Fatal(err)
	}
	err, v := l.VerifyChecksum()
	if err != nil {
		t.Fatal(err)
	}
	return v.Valid
}

// checksumCase is a TCP segment or UDP datagram and the addresses of its
// pseudo-header, with whether its checksum should verify.
type checksumCase struct {
	name     string
	b        []byte
	src, dst netip.Addr
	valid    bool
}

// checkChecksumValid checks, for each case, that ChecksumValid and gopacket
// both give the verdict the case expects.
func checkChecksumValid(t *testing.T, proto layers.IPProtocol, cases []checksumCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var got bool
			var g transportLayer
			switch proto {
			case layers.IPProtocolTCP:
				seg, ok := wire.ParseTCP(tt.b)
				if !ok {
					t.Fatal("ParseTCP rejected the segment")
				}
				got, g = seg.ChecksumValid(tt.src, tt.dst), &layers.TCP{}
			case layers.IPProtocolUDP:
				u, ok := wire.ParseUDP(tt.b)
				if !ok {
					t.Fatal("ParseUDP rejected the datagram")
				}
				got, g = u.ChecksumValid(tt.src, tt.dst), &layers.UDP{}
			}
			if got != tt.valid {
				t.Errorf("ChecksumValid = %v, want %v", got, tt.valid)
			}
			if valid := gopacketTransportValid(t, g, tt.b, tt.src, tt.dst, proto); valid != tt.valid {
				t.Errorf("gopacket says valid = %v", valid)
			}
		})
	}
}

// gopacketPayload wraps raw bytes as a gopacket layer.
func gopacketPayload(b []byte) gopacket.SerializableLayer { return gopacket.Payload(b) }

var errChecksum = errors.New("bad checksum")

// gopacketFold returns gopacket's checksum over b: zero if b carries a
// valid checksum.
func gopacketFold(b []byte) uint16 { return gopacket.FoldChecksum(gopacket.ComputeChecksum(b, 0)) }

func addrFrom4(a [4]byte) netip.Addr { return netip.AddrFrom4(a) }
