package ipv4_test

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

// On a link with checksum offload UDP leaves its checksum to the link,
// which the harness finishes as a device would (at the offsets the
// datagram carries); a datagram that must be fragmented has its checksum
// finished by IPv4 first, since fragments cannot carry a partial one.
// Either way the datagram that arrives has a right checksum (gopacket
// checks it).
func TestPartialChecksumIsFinishedByTheLinkOrBeforeFragmenting(t *testing.T) {
	for _, tt := range []struct {
		name  string
		size  int
		frags int
	}{
		{"within the MTU: the link finishes it", 1000, 1},
		{"fragmented: IPv4 finishes it", 4000, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{}, rawtest.Offload())
			h.LearnPeer(t)
			c, err := h.S.ListenUDP(netip.AddrPortFrom(rawtest.StackAddr, 4000))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			msg := data(tt.size)
			if _, err := c.WriteToUDPAddrPort(msg, netip.AddrPortFrom(rawtest.PeerAddr, 5000)); err != nil {
				t.Fatal(err)
			}
			whole, frags := datagram(t, h)
			if len(frags) != tt.frags {
				t.Fatalf("%d fragments, want %d", len(frags), tt.frags)
			}
			p := gopacket.NewPacket(whole.Payload, layers.LayerTypeUDP, gopacket.Default)
			u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if !ok {
				t.Fatalf("no UDP datagram in %x", whole.Payload[:8])
			}
			if err := u.SetNetworkLayerForChecksum(whole); err != nil {
				t.Fatal(err)
			}
			if _, v := u.VerifyChecksum(); !v.Valid {
				t.Errorf("UDP checksum %#04x, want %#04x", v.Actual, v.Correct)
			}
			if string(u.Payload) != string(msg) {
				t.Errorf("payload of %d bytes differs from the %d sent", len(u.Payload), len(msg))
			}
		})
	}
}
