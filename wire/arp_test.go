package wire_test

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

// gopacketARP returns an IPv4-over-Ethernet ARP layer.
func gopacketARP(op uint16, sha, tha wire.MAC, spa, tpa string) *layers.ARP {
	return &layers.ARP{
		AddrType:          layers.LinkTypeEthernet,
		Protocol:          layers.EthernetTypeIPv4,
		HwAddressSize:     6,
		ProtAddressSize:   4,
		Operation:         op,
		SourceHwAddress:   hw(sha),
		SourceProtAddress: ip(addr(spa)),
		DstHwAddress:      hw(tha),
		DstProtAddress:    ip(addr(tpa)),
	}
}

func TestParseARPDecodesWhatGopacketBuilds(t *testing.T) {
	tests := []struct {
		name     string
		op       uint16
		sha, tha wire.MAC
		spa, tpa string
	}{
		{"request", wire.ARPRequest, srcMAC, wire.MAC{}, "192.0.2.1", "192.0.2.254"},
		{"reply", wire.ARPReply, dstMAC, srcMAC, "192.0.2.254", "192.0.2.1"},
		{"gratuitous", wire.ARPRequest, srcMAC, wire.Broadcast, "192.0.2.1", "192.0.2.1"},
		{"probe from 0.0.0.0", wire.ARPRequest, srcMAC, wire.MAC{}, "0.0.0.0", "192.0.2.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := serialize(t, gopacketARP(tt.op, tt.sha, tt.tha, tt.spa, tt.tpa))
			a, ok := wire.ParseARP(b)
			if !ok {
				t.Fatal("ParseARP rejected a valid packet")
			}
			if a.Op() != tt.op || a.SenderMAC() != tt.sha || a.TargetMAC() != tt.tha ||
				a.SenderIP() != addr(tt.spa) || a.TargetIP() != addr(tt.tpa) {
				t.Errorf("got op %d %v %v -> %v %v", a.Op(), a.SenderMAC(), a.SenderIP(), a.TargetMAC(), a.TargetIP())
			}
		})
	}
}

func TestEncodeARPIsWhatGopacketDecodes(t *testing.T) {
	tests := []struct {
		name string
		f    wire.ARPFields
	}{
		{"request", wire.ARPFields{Op: wire.ARPRequest, SenderMAC: srcMAC, SenderIP: addr("192.0.2.1"), TargetIP: addr("192.0.2.254")}},
		{"reply", wire.ARPFields{Op: wire.ARPReply, SenderMAC: dstMAC, SenderIP: addr("192.0.2.254"), TargetMAC: srcMAC, TargetIP: addr("192.0.2.1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bytes.Repeat([]byte{0xa5}, wire.ARPLen)
			wire.EncodeARP(b, &tt.f)
			var a layers.ARP
			decodeLayer(t, &a, b)
			if a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || a.HwAddressSize != 6 || a.ProtAddressSize != 4 {
				t.Errorf("header: hw %v proto %v sizes %d/%d", a.AddrType, a.Protocol, a.HwAddressSize, a.ProtAddressSize)
			}
			if a.Operation != tt.f.Op ||
				!bytes.Equal(a.SourceHwAddress, tt.f.SenderMAC[:]) || !bytes.Equal(a.SourceProtAddress, tt.f.SenderIP.AsSlice()) ||
				!bytes.Equal(a.DstHwAddress, tt.f.TargetMAC[:]) || !bytes.Equal(a.DstProtAddress, tt.f.TargetIP.AsSlice()) {
				t.Errorf("gopacket got op %d %v %v -> %v %v", a.Operation,
					a.SourceHwAddress, a.SourceProtAddress, a.DstHwAddress, a.DstProtAddress)
			}
			if want := serialize(t, gopacketARP(tt.f.Op, tt.f.SenderMAC, tt.f.TargetMAC, tt.f.SenderIP.String(), tt.f.TargetIP.String())); !bytes.Equal(b, want) {
				t.Errorf("EncodeARP = %x, gopacket = %x", b, want)
			}
		})
	}
}

func TestParseARPTrimsEthernetPadding(t *testing.T) {
	b := serialize(t, gopacketARP(wire.ARPRequest, srcMAC, wire.MAC{}, "192.0.2.1", "192.0.2.2"), gopacketPayload(make([]byte, 18)))
	a, ok := wire.ParseARP(b)
	if !ok || len(a) != wire.ARPLen {
		t.Fatalf("ParseARP of a padded packet = len %d, %v; want %d, true", len(a), ok, wire.ARPLen)
	}
}

func TestParseARPRejectsAllButIPv4OverEthernet(t *testing.T) {
	valid := serialize(t, gopacketARP(wire.ARPRequest, srcMAC, wire.MAC{}, "192.0.2.1", "192.0.2.2"))
	tests := []struct {
		name   string
		b      []byte
		accept bool
	}{
		{"valid", valid, true},
		{"unknown op still parses", with(valid, 7, 9), true},
		{"truncated", valid[:wire.ARPLen-1], false},
		{"empty", nil, false},
		{"IEEE 802 hardware type", with(valid, 1, 6), false},
		{"hardware type high byte", with(valid, 0, 1), false},
		{"IPv6 protocol", with(with(valid, 2, 0x86), 3, 0xdd), false},
		{"hardware address length 8", with(valid, 4, 8), false},
		{"protocol address length 16", with(valid, 5, 16), false},
		// What gopacket builds for ARP over another link carrying IPv6.
		{"IPv6 over token ring from gopacket", serialize(t, &layers.ARP{
			AddrType: layers.LinkTypeTokenRing, Protocol: layers.EthernetTypeIPv6,
			HwAddressSize: 6, ProtAddressSize: 16, Operation: 1,
			SourceHwAddress: hw(srcMAC), SourceProtAddress: make([]byte, 16),
			DstHwAddress: make([]byte, 6), DstProtAddress: make([]byte, 16),
		}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok := wire.ParseARP(tt.b)
			checkParse(t, "ParseARP", a, ok, tt.accept)
		})
	}
}

// with returns a copy of b with b[i] set to v.
func with(b []byte, i int, v byte) []byte {
	c := append([]byte(nil), b...)
	c[i] = v
	return c
}
