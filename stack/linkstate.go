package stack

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/gonetstack/gonet/link"
)

// The state of a NIC's link (link.StateWatcher: a TAP device whose kernel
// side is set down and up, as a cable is pulled out and plugged in). When
// the link comes up, what the host sent while it was down went nowhere and
// the network behind it may be another: each IPv4 address is announced by
// a gratuitous ARP, after probing for it again where address conflict
// detection defends it (RFC 5227 section 2.1, arp.Protocol.Verify: kept
// in use meanwhile, given up if another station holds it), neighbour
// discovery puts every
// IPv6 address through DAD again and solicits routers (RFC 4862 section
// 5.3, RFC 4861 section 6.3.7), the DHCPv6 client confirms its lease (RFC
// 8415 section 18.2.3), and the stack's watchers are told (WatchLink), so
// that an mDNS responder probes for its name again (RFC 6762 section 8.1)
// and a DHCP client verifies its lease (RFC 2131 section 3.2). A link that
// cannot tell is up for good.

// linkWatch is a NIC's link state and who is told of it; s.mu guards it.
type linkWatch struct {
	watchers []func(up bool)
}

// watchLink follows n's endpoint's state.
func (s *Stack) watchLink(n *nic, ep link.Endpoint) {
	n.ep = ep
	link.WatchState(ep, func(up bool) { s.linkChanged(n, up) })
}

// linkChanged acts on n's link coming up or going down, in the endpoint's
// goroutine.
func (s *Stack) linkChanged(n *nic, up bool) {
	state := "down"
	if up {
		state = "up"
		// RFC 5227 section 2.3's announcement, as AddAddress makes:
		// neighbours that cached another station for the address, on
		// the link there is now, learn ours. A defended address is
		// probed for first (section 2.1), and announced by ARP once
		// no station answered.
		for _, a := range s.ip.Addresses(n.iface) {
			if _, defended := n.arp.Defended(a.Addr()); !defended {
				n.arp.Announce(a.Addr())
			}
		}
		n.arp.LinkUp()
		if n.nd != nil {
			n.nd.LinkUp()
		}
	} else {
		n.arp.LinkDown()
	}
	s.env.Log.Info("link "+state, slog.String("nic", n.eth.Name()))
	s.mu.Lock()
	fs := slices.Clone(n.link.watchers)
	dhcp6 := n.dhcp6
	s.mu.Unlock()
	if up && dhcp6 != nil {
		dhcp6.LinkUp() // a lease confirmed (RFC 8415 section 18.2.3)
	}
	for _, f := range fs {
		f(up)
	}
}

// WatchLink has f told, in order, of each change of the named NIC's link
// state from now on: true when it comes up, false when it goes down. It
// is called from the link's goroutine and must not block. A link that
// cannot tell its state (link.StateWatcher) tells nothing.
func (s *Stack) WatchLink(nicName string, f func(up bool)) error {
	n, err := s.nic(nicName)
	if err != nil {
		return fmt.Errorf("stack: watch link: %w", err)
	}
	s.mu.Lock()
	n.link.watchers = append(n.link.watchers, f)
	s.mu.Unlock()
	return nil
}

// LinkUp reports whether the named NIC's link is up now; a link that
// cannot tell is.
func (s *Stack) LinkUp(nicName string) (bool, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return false, fmt.Errorf("stack: link state: %w", err)
	}
	return link.IsUp(n.ep), nil
}
