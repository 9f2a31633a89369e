package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/stack"
)

// addAddress assigns -addr's p to the host's NIC. With -acd an IPv4
// address is probed for first (RFC 5227 section 2.1) and then defended
// once; an address another station holds is an error naming its MAC,
// since the user asked for that address.
func (h *host) addAddress(p netip.Prefix, acd bool) error {
	err := h.stack.AddAddressWith(context.Background(), h.nic, p, stack.AddressOptions{ACD: acd})
	if ce := (*arp.ConflictError)(nil); errors.As(err, &ce) {
		return fmt.Errorf("%v is already in use on %s's link by %v: address conflict detection had an answer to its probe (RFC 5227 section 2.1)", ce.Addr, h.nic, ce.MAC)
	}
	if err != nil {
		return fmt.Errorf("assigning %v to %s: %w", p, h.nic, err)
	}
	return nil
}
