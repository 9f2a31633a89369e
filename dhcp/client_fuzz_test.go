package dhcp

import (
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gonetstack/gonet/clock"
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
	ack.Options.Update(dhcpv4.OptGeneric(dhcpv4.OptionClasslessStaticRoute, []byte{0, 10, 0, 2, 2, 12, 172, 16, 10, 0, 2, 3, 24, 192, 168, 9, 0, 0, 0, 0}))
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
		if len(l.Routes) > maxRoutes {
			t.Errorf("%d routes", len(l.Routes))
		}
		for _, r := range l.Routes {
			if !r.Dst.IsValid() || !r.Dst.Addr().Is4() || r.Dst != r.Dst.Masked() || r.Gateway.IsValid() && !r.Gateway.Is4() {
				t.Errorf("route %v", r)
			}
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

// recordConn is a client socket that keeps what is sent and reads nothing.
type recordConn struct{ sent int }

func (c *recordConn) ReadFromUDPAddrPort([]byte) (int, netip.AddrPort, error) {
	return 0, netip.AddrPort{}, net.ErrClosed
}
func (c *recordConn) WriteToUDPAddrPort(b []byte, _ netip.AddrPort) (int, error) {
	c.sent++
	return len(b), nil
}
func (c *recordConn) Close() error { return nil }

// recordHost is a NIC that holds one address.
type recordHost struct{ prefix netip.Prefix }

func (h *recordHost) HardwareAddr() net.HardwareAddr          { return net.HardwareAddr{2, 0, 0, 0, 0, 1} }
func (h *recordHost) AddAddress(a netip.Prefix) error         { h.prefix = a; return nil }
func (h *recordHost) RemoveAddress(a netip.Addr) error        { h.prefix = netip.Prefix{}; return nil }
func (h *recordHost) AddRoute(netip.Prefix, netip.Addr) error { return nil }
func (h *recordHost) RemoveRoute(netip.Prefix, netip.Addr)    {}
func (h *recordHost) SetDNS([]netip.Addr, []string)           {}
func (h *recordHost) SetMTU(mtu int) int                      { return mtu }

// fuzzReply builds a server's reply of type typ to the client's open
// transaction, granting a for an hour.
func fuzzReply(c *Client, typ dhcpv4.MessageType, a netip.Addr) *dhcpv4.DHCPv4 {
	m := &dhcpv4.DHCPv4{
		OpCode: dhcpv4.OpcodeBootReply, HWType: 1, TransactionID: c.fsm.xid, ClientIPAddr: net.IPv4zero.To4(),
		YourIPAddr: ip(a), ServerIPAddr: net.IPv4zero.To4(), GatewayIPAddr: net.IPv4zero.To4(),
		ClientHWAddr: c.hw, Options: dhcpv4.Options{},
	}
	m.Options.Update(dhcpv4.OptMessageType(typ))
	m.Options.Update(dhcpv4.OptServerIdentifier(net.IPv4(10, 0, 2, 2)))
	m.Options.Update(dhcpv4.OptIPAddressLeaseTime(time.Hour))
	return m
}

// FuzzClientReceive hands a client, in each state a server's replies can
// bring it to, an arbitrary reply (made to match its transaction and
// hardware address when match is set, so that it gets past the first
// checks): the client must not panic, and the NIC must hold an address
// exactly when the client's state says it has a lease.
func FuzzClientReceive(f *testing.F) {
	c := newClient(context.Background(), &recordConn{}, &recordHost{}, ClientConfig{})
	for _, typ := range []dhcpv4.MessageType{dhcpv4.MessageTypeOffer, dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak} {
		m := fuzzReply(c, typ, netip.MustParseAddr("10.0.2.100"))
		for state := range uint8(6) {
			f.Add(m.ToBytes(), state, true)
		}
	}
	a := netip.MustParseAddr("10.0.2.100")
	f.Fuzz(func(t *testing.T, msg []byte, state uint8, match bool) {
		m, err := dhcpv4.FromBytes(msg)
		if err != nil || !wellFormed(m) {
			return
		}
		vc := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		h := &recordHost{}
		cfg := ClientConfig{Clock: vc, Rand: rand.NewPCG(1, 2)}
		if state%6 == 5 {
			cfg.Remembered = &ClientLease{Addr: netip.PrefixFrom(a, 24)}
		}
		c := newClient(context.Background(), &recordConn{}, h, cfg)
		switch state % 6 {
		case 5: // REBOOTING
			c.initReboot()
		default:
			c.discover()
		}
		if s := state % 6; s >= 1 && s <= 4 {
			c.receive(fuzzReply(c, dhcpv4.MessageTypeOffer, a)) // REQUESTING
			if s >= 2 {
				c.receive(fuzzReply(c, dhcpv4.MessageTypeAck, a)) // BOUND
			}
			if s >= 3 {
				c.renew() // RENEWING
			}
			if s == 4 {
				c.rebind() // REBINDING
			}
		}
		if match {
			m.TransactionID, m.ClientHWAddr, m.OpCode = c.fsm.xid, c.hw, dhcpv4.OpcodeBootReply
		}
		c.receive(m)
		st, applied := c.fsm.state, c.fsm.applied
		switch {
		case (applied != nil) != h.prefix.IsValid():
			t.Fatalf("in %v the client applied %v, the NIC holds %v", st, applied, h.prefix)
		case applied != nil && applied.Addr != h.prefix:
			t.Fatalf("the client applied %v, the NIC holds %v", applied.Addr, h.prefix)
		case (st == Bound || st == Renewing || st == Rebinding) != (applied != nil):
			t.Fatalf("in %v with lease %v", st, applied)
		}
	})
}
