package dhcp

import "slices"

// Applying a lease to the host: what the client does with the options of
// an ACK (RFC 2132) on the NIC it configures, and undoes when the lease
// ends.

// configure applies l to the host, over what the previous lease applied:
// the address with its subnet (option 1), the classless static routes
// (option 121) or else the default route through the first router (option
// 3), the MTU (option 26), the name servers and search list (options 6,
// 15, 119) for the resolver. It reports false when the host refused the
// address.
func (c *Client) configure(l ClientLease) bool {
	f := &c.fsm
	if f.applied != nil && f.applied.Addr != l.Addr {
		c.unconfigure()
	}
	if f.applied == nil {
		if err := c.host.AddAddress(l.Addr); err != nil {
			c.Stats.ConfigErrors.Inc()
			c.log.Error("DHCP lease not applied", "addr", l.Addr.String(), "err", err)
			return false
		}
	}
	c.setRoutes(l.routes())
	if f.applied == nil || f.applied.MTU != l.MTU {
		c.host.SetMTU(l.MTU)
	}
	if !c.cfg.NoDNS && (f.applied == nil || !slices.Equal(f.applied.DNS, l.DNS) || !slices.Equal(f.applied.Search, l.Search)) {
		c.host.SetDNS(l.DNS, l.Search)
	}
	f.applied = &l
	c.mu.Lock()
	c.leased = &l
	c.mu.Unlock()
	return true
}

// setRoutes makes the routes the client installed want: those it no longer
// wants are removed, the new ones added (a route whose gateway the NIC
// does not reach on-link is refused by the host, logged and counted).
func (c *Client) setRoutes(want []Route) {
	f := &c.fsm
	var kept []Route
	for _, r := range f.routes {
		if slices.Contains(want, r) {
			kept = append(kept, r)
		} else {
			c.host.RemoveRoute(r.Dst, r.Gateway)
		}
	}
	// On-link routes first: a router may be reachable only through one
	// of them (RFC 3442 section 4's example of a router off the subnet).
	want = slices.Clone(want)
	slices.SortStableFunc(want, func(a, b Route) int { return cmpBool(a.Gateway.IsValid(), b.Gateway.IsValid()) })
	for _, r := range want {
		if slices.Contains(kept, r) {
			continue
		}
		if err := c.host.AddRoute(r.Dst, r.Gateway); err != nil {
			c.Stats.ConfigErrors.Inc()
			c.log.Error("DHCP route not applied", "dst", r.Dst.String(), "router", r.Gateway.String(), "err", err)
			continue
		}
		kept = append(kept, r)
	}
	f.routes = kept
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// unconfigure takes the applied lease off the host: its routes, address,
// MTU and name servers.
func (c *Client) unconfigure() {
	f := &c.fsm
	c.setRoutes(nil)
	if f.applied != nil {
		if f.gone {
			f.gone = false
		} else if err := c.host.RemoveAddress(f.applied.Addr.Addr()); err != nil {
			c.Stats.ConfigErrors.Inc()
		}
		if f.applied.MTU != 0 {
			c.host.SetMTU(0)
		}
		if !c.cfg.NoDNS && (len(f.applied.DNS) > 0 || len(f.applied.Search) > 0) {
			c.host.SetDNS(nil, nil)
		}
	}
	f.applied = nil
	c.mu.Lock()
	c.leased = nil
	c.mu.Unlock()
}
