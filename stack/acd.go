package stack

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/gonetstack/gonet/arp"
)

// IPv4 address conflict detection (RFC 5227) as the stack offers it: off
// for an address given with AddAddress, as Linux assigns a static address
// at once; on with AddAddressWith and AddressOptions.ACD, or by hand with
// Probe, for an address the host may not own (a DHCP lease, RFC 2131
// section 2.2 asks the client to check it). ARP does the probing,
// announcing and defending (arp/acd.go); the stack assigns and removes
// the address.

// AddressOptions say how AddAddressWith assigns an IPv4 address.
type AddressOptions struct {
	// ACD probes for the address before assigning it (RFC 5227 section
	// 2.1), announces it once assigned (section 2.3), and then defends it
	// by Defend (section 2.4). A probe takes 4 to 7 s with the RFC's
	// timers (Config.ARP.ACD).
	ACD bool
	// Probed says the caller has probed for the address already
	// (Probe, as a DHCP client does before it accepts a lease): with
	// ACD, the address is assigned, announced and defended without a
	// second probe.
	Probed bool
	// Defend is what is done when another station claims the address
	// once it is in use: defend it once, give it up, or keep it. An
	// address given up is removed from the NIC.
	Defend arp.DefendPolicy
	// OnConflict, when not nil, is told of each conflict the defence
	// acted on (arp.Conflict: Defended, or GaveUp once the address is
	// removed), in a goroutine of its own.
	OnConflict func(arp.Conflict)
}

// AddAddressWith assigns addr (with its prefix) to the named NIC as o
// says. With o.ACD, an IPv4 address is probed for first: if another
// station holds it, nothing is assigned and the error wraps an
// *arp.ConflictError naming the station's MAC. It returns ctx's error if
// ctx ends during the probe. An IPv6 address always goes through
// duplicate address detection (AddAddress); o does not apply to it.
func (s *Stack) AddAddressWith(ctx context.Context, nicName string, addr netip.Prefix, o AddressOptions) error {
	a := addr.Addr()
	if !o.ACD || !a.Is4() {
		return s.AddAddress(nicName, addr)
	}
	n, err := s.nic(nicName)
	if err != nil {
		return err
	}
	if s.ip.IsLocal(a) {
		return fmt.Errorf("stack: add %v to %s: address already assigned", addr, nicName)
	}
	if !o.Probed {
		if err := n.arp.Probe(ctx, a); err != nil {
			return fmt.Errorf("stack: add %v to %s: %w", addr, nicName, err)
		}
	}
	if err := s.ip.AddAddress(n.iface, addr); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	n.arp.AnnounceAndDefend(a, o.Defend, func(c arp.Conflict) { s.conflict(addr, c, o.OnConflict) })
	s.env.Log.Info("address added", "nic", nicName, "addr", addr.String(), "acd", o.Defend.String())
	return nil
}

// conflict acts on a conflict ARP's defence of addr reported: an address
// given up is removed. It runs in ARP's dealer, so the user's hook runs in
// a goroutine of its own.
func (s *Stack) conflict(addr netip.Prefix, c arp.Conflict, hook func(arp.Conflict)) {
	if c.GaveUp {
		if err := s.ip.RemoveAddress(addr.Addr()); err == nil {
			s.env.Log.Info("address removed", "nic", c.NIC, "addr", addr.String(), "reason", "conflict")
		}
	}
	if hook != nil {
		go hook(c)
	}
}

// Probe asks whether another station on the named NIC's link holds addr,
// an IPv4 address not assigned to the stack, with RFC 5227 section 2.1's
// probes (Config.ARP.ACD times them: 4 to 7 s with the RFC's values). It
// is the check a DHCP client makes before it takes an offered address
// (RFC 2131 section 2.2): its signature is the client's probe hook's. A
// client sends a DHCPDECLINE when inUse, and otherwise assigns the address
// with AddAddressWith and AddressOptions{ACD: true, Probed: true}, which
// announces and defends it.
//
// inUse reports that a station answered, with a nil err: the conflict is
// logged with the station's MAC and counted (ARP.<nic>.ProbeConflicts);
// ARP(nic).Probe returns it as an *arp.ConflictError for a caller that
// wants the MAC. err says why no answer could be had: no such NIC, not an
// IPv4 unicast address, an address assigned already or probed already,
// the stack closed, or ctx's end.
func (s *Stack) Probe(ctx context.Context, nicName string, addr netip.Addr) (inUse bool, err error) {
	n, err := s.nic(nicName)
	if err != nil {
		return false, err
	}
	if s.ip.IsLocal(addr) {
		return false, fmt.Errorf("stack: probe %v on %s: address assigned to the stack", addr, nicName)
	}
	err = n.arp.Probe(ctx, addr)
	if ce := (*arp.ConflictError)(nil); errors.As(err, &ce) {
		return true, nil
	}
	return false, err
}

// ARP returns the named NIC's ARP: its cache, counters and the addresses
// it defends.
func (s *Stack) ARP(nicName string) (*arp.Protocol, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return nil, err
	}
	return n.arp, nil
}
