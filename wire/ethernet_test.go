package wire_test

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/wire"
)

func TestParseEthernetDecodesWhatGopacketBuilds(t *testing.T) {
	tests := []struct {
		name      string
		dst       wire.MAC
		etherType layers.EthernetType
		payload   int
	}{
		{"unicast IPv4", dstMAC, layers.EthernetTypeIPv4, 100},
		{"broadcast ARP", wire.Broadcast, layers.EthernetTypeARP, 28},
		{"IPv6 multicast", wire.MAC{0x33, 0x33, 0, 0, 0, 1}, layers.EthernetTypeIPv6, 40},
		{"padded to the minimum frame", dstMAC, layers.EthernetTypeIPv4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := payload(tt.payload)
			b := serialize(t,
				&layers.Ethernet{DstMAC: hw(tt.dst), SrcMAC: hw(srcMAC), EthernetType: tt.etherType},
				gopacketPayload(pl))
			e, ok := wire.ParseEthernet(b)
			if !ok {
				t.Fatal("ParseEthernet rejected a valid frame")
			}
			if e.Dst() != tt.dst || e.Src() != srcMAC || e.Type() != uint16(tt.etherType) {
				t.Errorf("got dst %v src %v type %#04x, want %v %v %#04x", e.Dst(), e.Src(), e.Type(), tt.dst, srcMAC, uint16(tt.etherType))
			}
			// gopacket pads short frames to 60 bytes; the view keeps the padding.
			if !bytes.Equal(e.Payload()[:len(pl)], pl) || len(e.Payload()) != len(b)-wire.EthernetHeaderLen {
				t.Errorf("payload = %x, want %x followed by padding", e.Payload(), pl)
			}
		})
	}
}

func TestEncodeEthernetIsWhatGopacketDecodes(t *testing.T) {
	tests := []struct {
		name      string
		dst, src  wire.MAC
		etherType uint16
	}{
		{"IPv4", dstMAC, srcMAC, wire.EtherTypeIPv4},
		{"ARP broadcast", wire.Broadcast, srcMAC, wire.EtherTypeARP},
		{"IPv6", dstMAC, srcMAC, wire.EtherTypeIPv6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, wire.EthernetHeaderLen+46)
			copy(b[wire.EthernetHeaderLen:], payload(46))
			wire.EncodeEthernet(b, &wire.EthernetFields{Dst: tt.dst, Src: tt.src, Type: tt.etherType})
			var eth layers.Ethernet
			decodeLayer(t, &eth, b)
			if !bytes.Equal(eth.DstMAC, tt.dst[:]) || !bytes.Equal(eth.SrcMAC, tt.src[:]) || uint16(eth.EthernetType) != tt.etherType {
				t.Errorf("gopacket got dst %v src %v type %v", eth.DstMAC, eth.SrcMAC, eth.EthernetType)
			}
			if !bytes.Equal(eth.Payload, payload(46)) {
				t.Error("EncodeEthernet wrote past the header")
			}
		})
	}
}

func TestParseEthernetRejectsFramesShorterThanTheHeader(t *testing.T) {
	for n := 0; n < wire.EthernetHeaderLen; n++ {
		if _, ok := wire.ParseEthernet(make([]byte, n)); ok {
			t.Errorf("ParseEthernet accepted %d bytes", n)
		}
	}
	e, ok := wire.ParseEthernet(make([]byte, wire.EthernetHeaderLen))
	if !ok || len(e.Payload()) != 0 {
		t.Errorf("ParseEthernet of a bare header = %v, %v; want an empty payload", e, ok)
	}
}

func TestMACGroupBit(t *testing.T) {
	tests := []struct {
		name      string
		mac       wire.MAC
		multicast bool
	}{
		{"broadcast is multicast", wire.Broadcast, true},
		{"IPv4 multicast 01:00:5e", wire.MAC{0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb}, true},
		{"IPv6 multicast 33:33", wire.MAC{0x33, 0x33, 0xff, 0x00, 0x00, 0x01}, true},
		{"unicast", dstMAC, false},
		{"locally administered unicast", wire.MAC{0x02, 0, 0, 0, 0, 1}, false},
		{"zero", wire.MAC{}, false},
		{"group bit only in the first byte", wire.MAC{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.mac.IsMulticast(); got != tt.multicast {
				t.Errorf("%v.IsMulticast() = %v, want %v", tt.mac, got, tt.multicast)
			}
		})
	}
	if wire.Broadcast != (wire.MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) {
		t.Errorf("Broadcast = %v", wire.Broadcast)
	}
}

func TestMACStringMatchesNetHardwareAddr(t *testing.T) {
	for _, m := range []wire.MAC{{}, wire.Broadcast, srcMAC, {0x0a, 0xbc, 0xde, 0xf0, 0x01, 0x23}} {
		if got, want := m.String(), hw(m).String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
