package stack

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"

	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/ipv4"
)

// StartDHCP starts a DHCP client (RFC 2131) on the named NIC: it asks for
// an address and applies the lease (address, default route, MTU) until
// ctx ends, Close or Release. The client's socket is UDP on 0.0.0.0:68
// bound to the NIC, so that it broadcasts there from 0.0.0.0 before the
// NIC has an address. Its counters are among the stack's, under
// DHCPClient.<nic>. cfg's Clock, Rand, Logger and Name default to the
// stack's and the NIC's.
func (s *Stack) StartDHCP(ctx context.Context, nicName string, cfg dhcp.ClientConfig) (*dhcp.Client, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return nil, err
	}
	c, err := s.udp.Listen(netip.AddrPortFrom(netip.IPv4Unspecified(), dhcp.ClientPort))
	if err != nil {
		return nil, fmt.Errorf("stack: DHCP client on %s: %w", nicName, err)
	}
	if err := c.BindToDevice(nicName); err != nil {
		c.Close()
		return nil, fmt.Errorf("stack: DHCP client on %s: %w", nicName, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = s.env.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = s.env.Log
	}
	if cfg.Name == "" {
		cfg.Name = nicName
	}
	client := dhcp.StartClient(ctx, c, dhcpHost{s: s, n: n}, cfg)
	s.mu.Lock()
	n.dhcp = client
	s.mu.Unlock()
	return client, nil
}

// dhcpHost is a NIC as its DHCP client configures it.
type dhcpHost struct {
	s *Stack
	n *nic
}

func (h dhcpHost) HardwareAddr() net.HardwareAddr { return h.n.eth.HardwareAddr() }

func (h dhcpHost) AddAddress(a netip.Prefix) error { return h.s.AddAddress(h.n.eth.Name(), a) }

func (h dhcpHost) RemoveAddress(a netip.Addr) error {
	if err := h.s.ip.RemoveAddress(a); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	h.s.env.Log.Info("address removed", "nic", h.n.eth.Name(), "addr", a.String())
	return nil
}

func (h dhcpHost) AddDefaultRoute(gw netip.Addr) error {
	return h.s.SetDefaultGateway(gw, h.n.eth.Name())
}

func (h dhcpHost) RemoveDefaultRoute(gw netip.Addr) {
	h.s.ip.RemoveRoute(ipv4.Route{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Gateway: gw, Iface: h.n.iface})
}

func (h dhcpHost) SetMTU(mtu int) int {
	if mtu == 0 {
		mtu = math.MaxInt32
	}
	return h.n.iface.SetLinkMTU(mtu)
}
