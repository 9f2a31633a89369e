package dhcpv6

import (
	"net/netip"
	"slices"
	"time"
)

// Stateful DHCPv6 (RFC 8415 section 18): addresses leased in an IA_NA,
// for a link whose routers set the Managed flag. Solicit, and take the
// most preferred Advertise; Request its addresses; hold them, renewing
// with the server at T1 and rebinding with any at T2, until a renewal
// fails to the end of their valid lifetimes or duplicate address
// detection finds one in use; then solicit again.

// holding is the lease the client holds: its server, addresses and when
// it was granted, and when to renew and rebind.
type holding struct {
	serverID []byte
	ia       *lease
	granted  time.Time
	t1, t2   time.Duration
	validEnd time.Time // the latest valid lifetime's end
}

// stateful runs the stateful exchanges until the client closes.
func (c *Client) stateful() {
	c.log.Info("DHCPv6: routers set the Managed flag, soliciting addresses")
	solMaxRT := SolMaxRT
	for {
		adv, why := c.solicit(solMaxRT)
		if why == stopped {
			return
		}
		if adv.solMaxRT != 0 {
			solMaxRT = boundMaxRT(adv.solMaxRT) // section 21.24: for the Solicits to come
		}
		// Section 18.2.2: Request what was advertised, of its server.
		ia := &lease{iaid: c.iaid, addrs: adv.ia.addrs}
		r, why := c.exchange(&exch{typ: msgRequest, serverID: adv.serverID, ia: ia, sent: &c.Stats.OutRequests,
			irt: ReqTimeout, mrt: ReqMaxRT, mrc: ReqMaxRC, accept: c.granted})
		if why == stopped {
			return
		}
		if why != answered {
			continue // section 18.2.2: no Reply: solicit again
		}
		h := c.bind(adv.serverID, &r, nil)
		// The link came up while this lease was sought: it is of the
		// link there is now.
		select {
		case <-c.linkUp:
		default:
		}
		if !c.hold(h) {
			return
		}
	}
}

// usable says whether an Advertise offers us addresses (section 18.2.9:
// "the client MUST ignore any Advertise message that contains no
// addresses ... or a Status Code of NoAddrsAvail").
func usable(r *reply) bool {
	return r.typ == msgAdvertise && r.status == statusSuccess && r.ia != nil && r.ia.status == statusSuccess && len(r.ia.addrs) > 0
}

// extends takes a Reply to a Renew or Rebind that grants our IA_NA
// addresses, or says the server has no binding for it.
func (c *Client) extends(r *reply) verdict {
	return takeIf(c.grants(r) || r.typ == msgReply && r.status == statusSuccess && r.ia != nil && r.ia.status == statusNoBinding)
}

// granted takes a Reply that grants our IA_NA addresses.
func (c *Client) granted(r *reply) verdict {
	return takeIf(c.grants(r))
}

func (c *Client) grants(r *reply) bool {
	return r.typ == msgReply && r.status == statusSuccess && r.ia != nil && r.ia.status == statusSuccess && len(r.ia.addrs) > 0 &&
		(r.ia.t1 <= r.ia.t2 || r.ia.t2 == 0) // section 21.4: an IA_NA with T1 past T2 is discarded
}

// solicit sends Solicits until an Advertise offers addresses (section
// 18.2.1): until the first retransmission timeout, whose RAND is above
// zero, it gathers Advertises and then takes the most preferred, at once
// one of preference 255; after it, the first that comes.
func (c *Client) solicit(maxRT time.Duration) (reply, outcome) {
	var best *reply
	first := true
	return c.exchange(&exch{typ: msgSolicit, ia: &lease{iaid: c.iaid}, sent: &c.Stats.OutSolicits, irt: SolTimeout, mrt: maxRT, firstAbove: true,
		accept: func(r *reply) verdict {
			switch {
			case !usable(r):
				return refuse
			case r.preference == 255 || !first:
				return take
			}
			if best == nil || r.preference > best.preference {
				best = r
			}
			return keep // the first timeout decides
		},
		timeout: func() *reply {
			first = false
			return best
		}})
}

// bind takes a Reply's lease: its addresses go to Config.Lease, those not
// among held counted as new, its DNS information to Config.Learned, and
// T1 and T2 are set, half and four fifths of the shortest preferred
// lifetime when the server leaves them to the client (section 21.4).
func (c *Client) bind(serverID []byte, r *reply, held []leased) *holding {
	now := c.cfg.Env.Clock.Now()
	h := &holding{serverID: serverID, ia: r.ia, granted: now}
	shortest := time.Duration(1<<63 - 1)
	for _, a := range r.ia.addrs {
		valid, preferred := lifetime(a.valid), lifetime(a.preferred)
		shortest = min(shortest, preferred)
		if end := now.Add(valid); valid != forever && end.After(h.validEnd) {
			h.validEnd = end
		}
		c.cfg.Lease(a.addr, valid, preferred)
		if !slices.ContainsFunc(held, func(b leased) bool { return b.addr == a.addr }) {
			c.Stats.Leases.Inc()
		}
	}
	h.t1, h.t2 = time.Duration(r.ia.t1)*time.Second, time.Duration(r.ia.t2)*time.Second
	if r.ia.t1 == 0 || r.ia.t2 == 0 {
		h.t1, h.t2 = shortest/2, shortest*4/5
	}
	c.updateLeased(r.ia.addrs)
	c.learn(r)
	c.log.Info("DHCPv6 lease", "addrs", addrsOf(r.ia.addrs), "t1", h.t1, "t2", h.t2)
	return h
}

// forever is a lifetime of all ones (section 7.7: "infinity").
const forever = time.Duration(1<<63 - 1)

func lifetime(secs uint32) time.Duration {
	if secs == 0xffffffff {
		return forever
	}
	return time.Duration(secs) * time.Second
}

func addrsOf(ls []leased) []netip.Addr {
	out := make([]netip.Addr, len(ls))
	for i, l := range ls {
		out[i] = l.addr
	}
	return out
}

// updateLeased counts the addresses held.
func (c *Client) updateLeased(now []leased) {
	c.Stats.Leased.Add(int64(len(now)) - c.Stats.Leased.Load())
}

// hold keeps the lease h: at T1 a Renew to its server until T2 (section
// 18.2.4), then a Rebind to any until its addresses' valid lifetimes end
// (section 18.2.5); an answer extends it. It returns when the lease is
// lost, its addresses taken away, reporting false if the client closed.
func (c *Client) hold(h *holding) bool {
	clk := c.cfg.Env.Clock
	c.held = h
	defer func() { c.held = nil }()
	for {
		why, dup := c.sleep(h.t1-clk.Now().Sub(h.granted), false)
		switch {
		case why == stopped:
			return false
		case why == releasing:
			c.giveBack(h)
			return false
		case why == declined && slices.ContainsFunc(h.ia.addrs, func(a leased) bool { return a.addr == dup }):
			c.decline(h, dup)
			return true
		case why == declined:
			continue // an address of another origin's: not ours to decline
		case why == relinked:
			switch c.confirm(h) {
			case stopped:
				return false
			case releasing:
				c.giveBack(h)
				return false
			case expired: // NotOnLink: the lease is of another link
				c.drop(h)
				return true
			}
			continue
		}
		ia := &lease{iaid: c.iaid, addrs: h.ia.addrs}
		r, why := c.exchange(&exch{typ: msgRenew, serverID: h.serverID, ia: ia, sent: &c.Stats.OutRenews,
			irt: RenTimeout, mrt: RenMaxRT, mrd: max(h.t2-h.t1, time.Nanosecond), accept: c.extends}) // T2 at T1: straight to Rebind
		if why == expired {
			var left time.Duration // forever
			if !h.validEnd.IsZero() {
				left = max(h.validEnd.Sub(clk.Now()), time.Nanosecond)
			}
			r, why = c.exchange(&exch{typ: msgRebind, ia: ia, sent: &c.Stats.OutRebinds,
				irt: RebTimeout, mrt: RebMaxRT, mrd: left, accept: c.extends})
		}
		if why == answered && r.ia.status == statusNoBinding {
			// Section 18.2.10.1: the server has no binding for the
			// IA: "the client sends a Request message" for it.
			server := h.serverID
			if r.serverID != nil {
				server = r.serverID
			}
			r, why = c.exchange(&exch{typ: msgRequest, serverID: server, ia: ia, sent: &c.Stats.OutRequests,
				irt: ReqTimeout, mrt: ReqMaxRT, mrc: ReqMaxRC, accept: c.granted})
		}
		switch why {
		case stopped:
			return false
		case releasing:
			c.giveBack(h)
			return false
		case expired:
			c.log.Warn("DHCPv6 lease lost: no server renewed it", "addrs", addrsOf(h.ia.addrs))
			c.drop(h)
			return true
		}
		serverID := h.serverID
		if r.serverID != nil {
			serverID = r.serverID // a Rebind's answer may come from another
		}
		for _, a := range h.ia.addrs {
			if !slices.ContainsFunc(r.ia.addrs, func(b leased) bool { return b.addr == a.addr }) {
				c.cfg.Lease(a.addr, 0, 0) // the server no longer leases it
			}
		}
		h = c.bind(serverID, &r, h.ia.addrs)
		c.held = h
	}
}

// confirm asks the link's servers whether h's addresses are of the link
// there is after it came up (section 18.2.3): a Confirm, the first after a
// random delay of up to CNF_MAX_DELAY, of the IA_NA's addresses with their
// lifetimes and T1 and T2 zero, and no Server Identifier, retransmitted
// for CNF_MAX_RD. A Reply of NotOnLink ends the lease (expired); any other
// Reply, or none ("the client MAY continue to use any IP addresses"),
// leaves it standing (answered).
func (c *Client) confirm(h *holding) outcome {
	c.Stats.LinkUps.Inc()
	switch why, dup := c.sleep(time.Duration(c.cfg.Env.Rand.IntN(int(CnfMaxDelay)+1)), false); why {
	case stopped, releasing:
		return why
	case declined:
		c.Declined(dup) // for hold, once the lease is confirmed
	}
	ia := &lease{iaid: c.iaid}
	for _, a := range h.ia.addrs {
		ia.addrs = append(ia.addrs, leased{addr: a.addr})
	}
	r, why := c.exchange(&exch{typ: msgConfirm, ia: ia, sent: &c.Stats.OutConfirms,
		irt: CnfTimeout, mrt: CnfMaxRT, mrd: CnfMaxRD, accept: func(r *reply) verdict { return takeIf(r.typ == msgReply) }})
	switch {
	case why == stopped || why == releasing:
		return why
	case why == answered && r.status == statusNotOnLink:
		c.Stats.NotOnLink.Inc()
		c.log.Warn("DHCPv6 lease not of this link: soliciting again", "addrs", addrsOf(h.ia.addrs))
		return expired
	}
	return answered
}

// giveBack sends one Release of h to its server (section 18.2.7), takes
// its addresses away, answers Release, and waits for Close.
func (c *Client) giveBack(h *holding) {
	c.log.Info("DHCPv6 lease released", "addrs", addrsOf(h.ia.addrs))
	c.Stats.OutReleases.Inc()
	req := &request{typ: msgRelease, xid: c.cfg.Env.Rand.Uint32() & 0xffffff, serverID: h.serverID, ia: &lease{iaid: c.iaid, addrs: h.ia.addrs}}
	c.send(req.encode(c.duid))
	for _, a := range h.ia.addrs {
		c.cfg.Lease(a.addr, 0, 0)
	}
	c.updateLeased(nil)
	close(c.released)
	<-c.done
}

// decline tells the server that an address of the lease is in use by
// another node (section 18.2.8), and drops the lease.
func (c *Client) decline(h *holding, addr netip.Addr) {
	c.log.Warn("DHCPv6 address in use by another node: declined", "addr", addr)
	ia := &lease{iaid: c.iaid, addrs: []leased{{addr: addr}}}
	c.exchange(&exch{typ: msgDecline, serverID: h.serverID, ia: ia, sent: &c.Stats.OutDeclines,
		irt: DecTimeout, mrc: DecMaxRC, accept: func(r *reply) verdict { return takeIf(r.typ == msgReply) }})
	c.drop(h)
}

// drop takes every address of h away.
func (c *Client) drop(h *holding) {
	for _, a := range h.ia.addrs {
		c.cfg.Lease(a.addr, 0, 0)
	}
	c.Stats.LeasesLost.Inc()
	c.updateLeased(nil)
}
