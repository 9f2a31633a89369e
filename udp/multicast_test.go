package udp_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

// What an endpoint sends to a group, decoded by gopacket: the group's
// MAC (RFC 1112 section 6.4) and TTL 1 unless the endpoint set another
// (section 6.1).
func TestMulticastSendsTTLAndMAC(t *testing.T) {
	tests := []struct {
		name string
		ttl  int // 0: not set
		want uint8
	}{
		{"default TTL 1", 0, 1},
		{"IP_MULTICAST_TTL 32", 32, 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			c, err := h.S.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 4000))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tt.ttl != 0 {
				if err := c.SetMulticastTTL(tt.ttl); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.SetMulticastInterface(rawtest.NIC); err != nil {
				t.Fatal(err)
			}
			if _, err := c.WriteToUDPAddrPort([]byte("x"), netip.MustParseAddrPort("239.130.2.3:4000")); err != nil {
				t.Fatal(err)
			}
			f := h.Expect(t, rawtest.Timeout)
			eth := rawtest.EthernetOf(t, f)
			ip, u := rawtest.UDPOf(t, f)
			if eth.DstMAC.String() != (net.HardwareAddr{1, 0, 0x5e, 2, 2, 3}).String() {
				t.Errorf("Ethernet destination %v, want 01:00:5e:02:02:03", eth.DstMAC)
			}
			if ip.TTL != tt.want || rawtest.Addr(ip.SrcIP) != rawtest.StackAddr || u.DstPort != 4000 {
				t.Errorf("TTL %d from %v to port %d, want TTL %d from %v", ip.TTL, ip.SrcIP, u.DstPort, tt.want, rawtest.StackAddr)
			}
		})
	}
}
