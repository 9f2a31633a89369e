package udp

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// A queued datagram carries only its bytes, from the network header on:
// a reader finds the source and the UDP header from them, for either
// family, IPv6's extension headers dropped on the way in.
func TestQueuedDatagramGivesPayloadAndSourceForBothFamilies(t *testing.T) {
	pool := buffer.NewPool()
	payload := []byte("queued")
	tests := []struct {
		name string
		src  netip.Addr
		ext  int // bytes of IPv6 extension headers before UDP
	}{
		{"IPv4", netip.MustParseAddr("10.1.0.2"), 0},
		{"IPv6", netip.MustParseAddr("2001:db8::2"), 0},
		{"IPv6 behind extension headers", netip.MustParseAddr("2001:db8::2"), 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := netip.MustParseAddr("10.1.0.1")
			hl := wire.IPv4MinHeaderLen
			if tt.src.Is6() {
				dst = netip.MustParseAddr("2001:db8::1")
				hl = wire.IPv6HeaderLen + tt.ext
			}
			n := hl + wire.UDPHeaderLen + len(payload)
			pk := pool.Get(n)
			b := pk.Bytes()
			if tt.src.Is4() {
				wire.EncodeIPv4(b, &wire.IPv4Fields{TotalLen: n, TTL: 64, Protocol: wire.ProtoUDP, Src: tt.src, Dst: dst})
			} else {
				wire.EncodeIPv6(b, &wire.IPv6Fields{PayloadLen: n - wire.IPv6HeaderLen, NextHeader: 60, HopLimit: 64, Src: tt.src, Dst: dst})
				for i := wire.IPv6HeaderLen; i < hl; i++ {
					b[i] = 0xee // the extension headers' bytes, never read
				}
			}
			copy(b[hl+wire.UDPHeaderLen:], payload)
			wire.EncodeUDP(b[hl:], &wire.UDPFields{SrcPort: 4000, DstPort: 7})
			queueable(pk, ip.Header{Src: tt.src, Dst: dst, Off: hl})
			got, from := datagram(pk, "")
			if !bytes.Equal(got, payload) || from != netip.AddrPortFrom(tt.src, 4000) {
				t.Errorf("datagram = %q from %v, want %q from %v", got, from, payload, netip.AddrPortFrom(tt.src, 4000))
			}
			pk.Release()
		})
	}
}
