package dhcp

import (
	"net"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// FuzzLeaseFromAck feeds the client's reading of an ACK arbitrary
// messages: it must never panic, and a lease it accepts must be usable:
// a unicast IPv4 address with a mask, T1 before T2 before the end of the
// lease, an MTU of at least 68, IPv4 routers and name servers.
func FuzzLeaseFromAck(f *testing.F) {
	ack := &dhcpv4.DHCPv4{
		OpCode: dhcpv4.OpcodeBootReply, HWType: 1, ClientIPAddr: net.IPv4zero.To4(),
		YourIPAddr: net.IPv4(10, 0, 2, 100).To4(), ServerIPAddr: net.IPv4zero.To4(), GatewayIPAddr: net.IPv4zero.To4(),
		ClientHWAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Options: dhcpv4.Options{},
	}
	ack.Options.Update(dhcpv4.OptMessageType(dhcpv4.MessageTypeAck))
	ack.Options.Update(dhcpv4.OptServerIdentifier(net.IPv4(10, 0, 2, 2)))
	ack.Options.Update(dhcpv4.OptIPAddressLeaseTime(time.Hour))
	ack.Options.Update(dhcpv4.OptSubnetMask(net.CIDRMask(24, 32)))
	ack.Options.Update(dhcpv4.OptRouter(net.IPv4(10, 0, 2, 2)))
	ack.Options.Update(dhcpv4.OptDNS(net.IPv4(10, 0, 2, 3)))
	ack.Options.Update(dhcpv4.OptDomainName("example.test"))
	ack.Options.Update(dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{5, 0xdc}))
	ack.Options.Update(dhcpv4.OptGeneric(dhcpv4.OptionDNSDomainSearchList, []byte{7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 4, 't', 'e', 's', 't', 0}))
	ack.Options.Update(dhcpv4.OptRenewTimeValue(10 * time.Minute))
	ack.Options.Update(dhcpv4.OptRebindingTimeValue(20 * time.Minute))
	f.Add(ack.ToBytes())
	ack.Options.Update(dhcpv4.OptRebindingTimeValue(2 * time.Hour))
	ack.Options.Update(dhcpv4.OptGeneric(dhcpv4.OptionIPAddressLeaseTime, []byte{0xff, 0xff, 0xff, 0xff}))
	f.Add(ack.ToBytes())
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := dhcpv4.FromBytes(b)
		if err != nil || !wellFormed(m) {
			return
		}
		l, err := leaseFromAck(m, start)
		if err != nil {
			return
		}
		a := l.Addr.Addr()
		if !a.Is4() || a.IsUnspecified() || a.IsMulticast() || l.Addr.Bits() < 1 || l.Addr.Bits() > 32 {
			t.Errorf("lease of %v", l.Addr)
		}
		if !(0 <= l.T1 && l.T1 < l.T2 && l.T2 < l.LeaseTime) {
			t.Errorf("T1 %v, T2 %v, lease %v out of order", l.T1, l.T2, l.LeaseTime)
		}
		if l.MTU != 0 && l.MTU < 68 {
			t.Errorf("MTU %d", l.MTU)
		}
		for _, r := range append(l.Routers, l.DNS...) {
			if !r.Is4() {
				t.Errorf("address %v", r)
			}
		}
		if !l.Server.Is4() {
			t.Errorf("server %v", l.Server)
		}
	})
}
