package rawtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Building frames. Every builder lets gopacket fix lengths and compute
// checksums; tests that need a wrong field change the bytes afterwards.

// Serialize encodes layers with gopacket, fixing lengths and checksums.
func Serialize(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		tb.Fatalf("rawtest: gopacket serialize: %v", err)
	}
	return bytes.Clone(buf.Bytes())
}

// Payload is raw bytes as a gopacket layer.
func Payload(b []byte) gopacket.SerializableLayer { return gopacket.Payload(b) }

// Ethernet returns an Ethernet II header.
func Ethernet(src, dst net.HardwareAddr, typ layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: typ}
}

// ARPFrame returns an ARP packet for IPv4 over Ethernet from sha, sent to
// the broadcast address when it is a request (op 1) and to the stack
// otherwise. A nil tha is all zeros.
func (h *Host) ARPFrame(tb testing.TB, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	tb.Helper()
	if tha == nil {
		tha = make(net.HardwareAddr, 6)
	}
	dst := StackMAC
	if op == 1 {
		dst = BroadcastMAC
	}
	return Serialize(tb, Ethernet(sha, dst, layers.EthernetTypeARP), &layers.ARP{
		AddrType:          layers.LinkTypeEthernet,
		Protocol:          layers.EthernetTypeIPv4,
		HwAddressSize:     6,
		ProtAddressSize:   4,
		Operation:         op,
		SourceHwAddress:   sha,
		SourceProtAddress: spa.AsSlice(),
		DstHwAddress:      tha,
		DstProtAddress:    tpa.AsSlice(),
	})
}

// IPv4Header returns an IPv4 header from src to dst carrying proto, with
// TTL 64 and the rest zero.
func IPv4Header(src, dst netip.Addr, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
}

// IPFrame returns a frame from PeerMAC to the stack carrying ip and what
// follows it. The layers are copied, not changed.
func (h *Host) IPFrame(tb testing.TB, ip *layers.IPv4, rest ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	return h.IPFrameFrom(tb, PeerMAC, ip, rest...)
}

// IPFrameFrom is IPFrame from another neighbour's MAC.
func (h *Host) IPFrameFrom(tb testing.TB, src net.HardwareAddr, ip *layers.IPv4, rest ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	c := *ip
	ls := append([]gopacket.SerializableLayer{Ethernet(src, StackMAC, layers.EthernetTypeIPv4), &c}, rest...)
	return Serialize(tb, ls...)
}

// EchoBytes returns an ICMP echo message (typ 8 request, 0 reply) with its
// checksum.
func EchoBytes(tb testing.TB, typ uint8, id, seq uint16, data []byte) []byte {
	tb.Helper()
	return Serialize(tb, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, 0), Id: id, Seq: seq}, gopacket.Payload(data))
}

// ICMPBytes returns an ICMP message of any type with its checksum; rest is
// the rest-of-header word (for errors: unused, or the pointer or MTU).
func ICMPBytes(tb testing.TB, typ, code uint8, rest uint32, body []byte) []byte {
	tb.Helper()
	return Serialize(tb, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, code), Id: uint16(rest >> 16), Seq: uint16(rest)}, gopacket.Payload(body))
}

// UDPBytes returns a UDP datagram from src to dst with its checksum over
// the pseudo-header.
func UDPBytes(tb testing.TB, src, dst netip.AddrPort, data []byte) []byte {
	tb.Helper()
	ip := IPv4Header(src.Addr(), dst.Addr(), layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	if err := u.SetNetworkLayerForChecksum(ip); err != nil {
		tb.Fatal(err)
	}
	b := Serialize(tb, ip, u, gopacket.Payload(data))
	return b[20:]
}

// EchoFrame returns an echo request frame from PeerAddr to the stack.
func (h *Host) EchoFrame(tb testing.TB, id, seq uint16, data []byte) []byte {
	tb.Helper()
	return h.IPFrame(tb, IPv4Header(PeerAddr, StackAddr, layers.IPProtocolICMPv4), Payload(EchoBytes(tb, 8, id, seq, data)))
}

// UDPFrame returns a frame from PeerMAC carrying a UDP datagram from src to
// dst.
func (h *Host) UDPFrame(tb testing.TB, src, dst netip.AddrPort, data []byte) []byte {
	tb.Helper()
	return h.IPFrame(tb, IPv4Header(src.Addr(), dst.Addr(), layers.IPProtocolUDP), Payload(UDPBytes(tb, src, dst, data)))
}

// Fragment returns a frame from PeerMAC carrying one fragment of the
// datagram ip heads: data at byte offset off (a multiple of 8), with MF set
// when more is true. ip's own flags are kept otherwise.
func (h *Host) Fragment(tb testing.TB, ip *layers.IPv4, off int, more bool, data []byte) []byte {
	tb.Helper()
	if off%8 != 0 {
		tb.Fatalf("rawtest: fragment offset %d is not a multiple of 8", off)
	}
	c := *ip
	c.FragOffset = uint16(off / 8)
	c.Flags &^= layers.IPv4MoreFragments
	if more {
		c.Flags |= layers.IPv4MoreFragments
	}
	return Serialize(tb, Ethernet(PeerMAC, StackMAC, layers.EthernetTypeIPv4), &c, gopacket.Payload(data))
}

// Fragments splits payload, the datagram's transport bytes, into fragment
// frames of chunk bytes of payload each (a multiple of 8), in order.
func (h *Host) Fragments(tb testing.TB, ip *layers.IPv4, payload []byte, chunk int) [][]byte {
	tb.Helper()
	if chunk <= 0 || chunk%8 != 0 {
		tb.Fatalf("rawtest: fragment size %d is not a positive multiple of 8", chunk)
	}
	var out [][]byte
	for off := 0; off < len(payload); off += chunk {
		end := min(off+chunk, len(payload))
		out = append(out, h.Fragment(tb, ip, off, end < len(payload), payload[off:end]))
	}
	return out
}

// Decoding frames: gopacket is the oracle for what the stack sends.

// Decode parses a frame with gopacket, failing the test on a decode error.
func Decode(tb testing.TB, frame []byte) gopacket.Packet {
	tb.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	// A protocol gopacket does not know (an experimental IP protocol
	// number) is not an error in the frame.
	if el := p.ErrorLayer(); el != nil && !errors.Is(el.Error(), gopacket.ErrUnsupportedLayer) {
		tb.Fatalf("rawtest: gopacket cannot decode %x: %v", frame, el.Error())
	}
	return p
}

// EthernetOf returns the frame's Ethernet header.
func EthernetOf(tb testing.TB, frame []byte) *layers.Ethernet {
	tb.Helper()
	e, ok := Decode(tb, frame).Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if !ok {
		tb.Fatalf("rawtest: not an Ethernet frame: %x", frame)
	}
	return e
}

// ARPOf returns the frame's Ethernet header and ARP packet, failing the
// test when it is not ARP.
func ARPOf(tb testing.TB, frame []byte) (*layers.Ethernet, *layers.ARP) {
	tb.Helper()
	p := Decode(tb, frame)
	a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if !ok {
		tb.Fatalf("rawtest: expected ARP, got %s", Describe(frame))
	}
	return p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet), a
}

// IPv4Of returns the frame's IPv4 header, failing the test when it is not
// IPv4, was not sent to StackMAC's peer from StackMAC, or its header
// checksum is wrong.
func IPv4Of(tb testing.TB, frame []byte) *layers.IPv4 {
	tb.Helper()
	p := Decode(tb, frame)
	ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok {
		tb.Fatalf("rawtest: expected IPv4, got %s", Describe(frame))
	}
	if e := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); !bytes.Equal(e.SrcMAC, StackMAC) {
		tb.Errorf("rawtest: IPv4 frame from %v, not the stack's %v", e.SrcMAC, StackMAC)
	}
	if _, v := ip.VerifyChecksum(); !v.Valid {
		tb.Errorf("rawtest: IPv4 header checksum %#04x is wrong (want %#04x)", v.Actual, v.Correct)
	}
	return ip
}

// ICMPOf returns the frame's IPv4 header and ICMP message, failing the test
// when it is not ICMP or its checksum is wrong.
func ICMPOf(tb testing.TB, frame []byte) (*layers.IPv4, *layers.ICMPv4) {
	tb.Helper()
	ip := IPv4Of(tb, frame)
	p := Decode(tb, frame)
	m, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if !ok {
		tb.Fatalf("rawtest: expected ICMP, got %s", Describe(frame))
	}
	if _, v := m.VerifyChecksum(); !v.Valid {
		tb.Errorf("rawtest: ICMP checksum %#04x is wrong (want %#04x)", v.Actual, v.Correct)
	}
	return ip, m
}

// UDPOf returns the frame's IPv4 header and UDP datagram, failing the test
// when it is not UDP or its checksum is wrong.
func UDPOf(tb testing.TB, frame []byte) (*layers.IPv4, *layers.UDP) {
	tb.Helper()
	ip := IPv4Of(tb, frame)
	p := Decode(tb, frame)
	u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if !ok {
		tb.Fatalf("rawtest: expected UDP, got %s", Describe(frame))
	}
	if err := u.SetNetworkLayerForChecksum(ip); err != nil {
		tb.Fatal(err)
	}
	if _, v := u.VerifyChecksum(); !v.Valid {
		tb.Errorf("rawtest: UDP checksum %#04x is wrong (want %#04x)", v.Actual, v.Correct)
	}
	return ip, u
}

// Describe summarises a frame for failure messages.
func Describe(frame []byte) string {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var parts []string
	for _, l := range p.Layers() {
		switch l := l.(type) {
		case *layers.Ethernet:
			parts = append(parts, fmt.Sprintf("eth %v>%v", l.SrcMAC, l.DstMAC))
		case *layers.ARP:
			parts = append(parts, fmt.Sprintf("arp op %d %v/%v>%v/%v", l.Operation,
				net.HardwareAddr(l.SourceHwAddress), net.IP(l.SourceProtAddress), net.HardwareAddr(l.DstHwAddress), net.IP(l.DstProtAddress)))
		case *layers.IPv4:
			parts = append(parts, fmt.Sprintf("ip %v>%v proto %d len %d id %d flags %v off %d", l.SrcIP, l.DstIP, l.Protocol, l.Length, l.Id, l.Flags, int(l.FragOffset)*8))
		case *layers.ICMPv4:
			parts = append(parts, fmt.Sprintf("icmp %v id %d seq %d", l.TypeCode, l.Id, l.Seq))
		case *layers.UDP:
			parts = append(parts, fmt.Sprintf("udp %d>%d len %d", l.SrcPort, l.DstPort, l.Length))
		case *layers.TCP:
			parts = append(parts, fmt.Sprintf("tcp %d>%d [%s] seq %d ack %d win %d len %d", l.SrcPort, l.DstPort, FlagString(TCPFlags(l)), l.Seq, l.Ack, l.Window, len(l.Payload)))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%x", frame)
	}
	return fmt.Sprint(parts)
}

func isBarrierARPReply(f []byte) bool {
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.NoCopy)
	a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	return ok && a.Operation == 2 && bytes.Equal(a.DstHwAddress, BarrierMAC) && bytes.Equal(a.DstProtAddress, BarrierAddr.AsSlice())
}

func isBarrierEchoReply(f []byte, seq uint16) bool {
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.NoCopy)
	ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok || !bytes.Equal(ip.DstIP.To4(), BarrierAddr.AsSlice()) {
		return false
	}
	m, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	return ok && m.TypeCode.Type() == 0 && m.Id == barrierIdent && m.Seq == seq
}

// Addr returns a netip.Addr for an IPv4 address as gopacket holds it.
func Addr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip.To4())
	return a
}
