package ipv4

import (
	"fmt"
	"net/netip"
	"slices"
)

// RemoveAddress takes a off its interface, with the on-link route of its
// subnet unless another address of the interface is on it, and then the
// routes through gateways no on-link route of the interface reaches any
// more, as Linux does (fib_sync_down_addr). Sockets bound to a stay open;
// what they send fails for want of a source, as on Linux.
// Address conflict detection calls it for an address given up to another
// station (RFC 5227 section 2.4).
func (p *Protocol) RemoveAddress(a netip.Addr) error {
	return p.tables.update(func(t *table) error {
		i := slices.IndexFunc(t.addrs, func(ad address) bool { return ad.prefix.Addr() == a })
		if i < 0 {
			return fmt.Errorf("ipv4: remove %v: address not assigned", a)
		}
		gone := t.addrs[i]
		t.addrs = slices.Delete(t.addrs, i, i+1)
		on := gone.prefix.Masked()
		if slices.ContainsFunc(t.addrs, func(ad address) bool { return ad.iface == gone.iface && ad.prefix.Masked() == on }) {
			return nil
		}
		t.routes.Remove(Route{Dst: on, Iface: gone.iface})
		t.routes.DeleteFunc(func(r Route) bool {
			return r.Iface == gone.iface && !r.OnLink() && !t.routes.OnLink(r.Gateway, r.Iface)
		})
		return nil
	})
}
