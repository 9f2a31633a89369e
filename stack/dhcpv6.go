package stack

import (
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/dhcpv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// DHCPv6 on a NIC whose routers ask for it (the Managed or Other flag of
// their advertisements, RFC 4861 section 4.2): a client (package dhcpv6)
// whose DNS servers and search domains join the resolver's as
// DNSFromDHCPv6, and whose leased addresses ndp takes through DAD, as a
// Linux host's NetworkManager or systemd-networkd starts one on those
// flags.

// SetConfigFlags starts the NIC's DHCPv6 client at the first
// advertisement that sets either flag, unless Config.NoDHCPv6: stateless
// for the Other flag, leasing addresses too once the Managed flag is set.
func (h linkHost) SetConfigFlags(managed, other bool) {
	if h.s.cfg.NoDHCPv6 {
		return
	}
	if c := h.s.startDHCPv6(h.iface.Name()); c != nil && managed {
		c.Manage()
	}
}

// declineLeased tells the named NIC's DHCPv6 client that DAD found addr
// in use; the client declines it if it leased it.
func (s *Stack) declineLeased(name string, addr netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nics {
		if n.eth.Name() == name && n.dhcp6 != nil {
			n.dhcp6.Declined(addr.WithZone(""))
		}
	}
}

// startDHCPv6 starts the named NIC's DHCPv6 client, once, and returns
// it. Its socket is bound to the NIC's link-local address, the source of
// its messages and so where the servers answer, so that every NIC has its
// own; before that address has passed DAD, to the wildcard.
func (s *Stack) startDHCPv6(name string) *dhcpv6.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n *nic
	for _, x := range s.nics {
		if x.eth.Name() == name {
			n = x
		}
	}
	if s.closed || n == nil || n.nd == nil || n.dhcp6 != nil {
		if n != nil {
			return n.dhcp6
		}
		return nil
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
		return nil
	}
	nd := n.nd
	lease := func(a netip.Addr, valid, preferred time.Duration) {
		if err := nd.Lease(a, valid, preferred); err != nil {
			s.env.Log.Warn("DHCPv6 lease not taken", "nic", name, "err", err)
		}
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
		Lease:   lease,
	})
	s.env.Log.Info("DHCPv6 client started", "nic", name, "addr", laddr.String())
	return n.dhcp6
}
