package stack

import (
	"net/netip"

	"github.com/gonetstack/gonet/dhcpv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// DHCPv6 on a NIC whose routers ask for it (the Managed or Other flag of
// their advertisements, RFC 4861 section 4.2): a stateless client (package
// dhcpv6) whose DNS servers and search domains join the resolver's as
// DNSFromDHCPv6, as a Linux host's NetworkManager or systemd-networkd
// starts one on those flags.

// SetConfigFlags starts the NIC's DHCPv6 client at the first
// advertisement that sets either flag, unless Config.NoDHCPv6. With M set,
// the servers would lease addresses too, which GoNet does not ask for
// (stateful DHCPv6 is not done): SLAAC's serve, and the log says so.
func (h linkHost) SetConfigFlags(managed, other bool) {
	if managed {
		h.s.env.Log.Warn("routers ask for stateful DHCPv6 (the Managed flag); GoNet asks DHCPv6 only for DNS, its addresses come from SLAAC", "nic", h.iface.Name())
	}
	if h.s.cfg.NoDHCPv6 {
		return
	}
	h.s.startDHCPv6(h.iface.Name())
}

// startDHCPv6 starts the named NIC's DHCPv6 client, once. Its socket is
// bound to the NIC's link-local address, where the servers answer (RFC
// 8415 section 18.3), so that every NIC has its own; before that address
// has passed DAD, to the wildcard.
func (s *Stack) startDHCPv6(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n *nic
	for _, x := range s.nics {
		if x.eth.Name() == name {
			n = x
		}
	}
	if s.closed || n == nil || n.nd == nil || n.dhcp6 != nil {
		return
	}
	laddr := netip.AddrPortFrom(netip.IPv6Unspecified(), dhcpv6.ClientPort)
	for _, a := range n.nd.Addresses() {
		if a.State == ndp.Preferred && a.Prefix.Addr().IsLinkLocalUnicast() {
			laddr = netip.AddrPortFrom(a.Prefix.Addr().WithZone(name), dhcpv6.ClientPort)
		}
	}
	conn, err := s.udp.Listen(laddr)
	if err != nil {
		s.env.Log.Warn("DHCPv6 client not started", "nic", name, "err", err)
		return
	}
	learned := func(servers []netip.Addr, search []string) {
		cfg := DNSConfig{Search: search}
		for _, a := range servers {
			if a.IsLinkLocalUnicast() {
				a = a.WithZone(name)
			}
			cfg.Servers = append(cfg.Servers, netip.AddrPortFrom(a, 53))
		}
		if err := s.SetLearnedDNS(DNSOrigin{DNSFromDHCPv6, name}, cfg); err != nil {
			s.env.Log.Warn("DHCPv6's DNS servers not taken", "nic", name, "err", err)
		}
	}
	n.dhcp6 = dhcpv6.Start(dhcpv6.Config{
		Conn:    conn,
		Servers: netip.AddrPortFrom(dhcpv6.AllServers.WithZone(name), dhcpv6.ServerPort),
		MAC:     wire.MAC(n.eth.HardwareAddr()),
		Env:     s.env,
		Learned: learned,
	})
	s.env.Log.Info("DHCPv6 client started (stateless)", "nic", name, "addr", laddr.String())
}
