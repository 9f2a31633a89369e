package dhcp

import (
	"bytes"
	"fmt"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// The client's transitions, as RFC 2131 section 4.4 and its figure 5 have
// them: what each state sends, what moves it on (a reply, a timeout, the
// probe's verdict, a conflict), and the retransmissions of section 4.1.
// They run in run's goroutine (client.go), as all that touches c.fsm does.

// wake sets the state's one timer to at.
func (c *Client) wake(at time.Time) { c.fsm.timer.Reset(at.Sub(c.clk.Now())) }

// retransmitDelay is section 4.1's wait before retransmission number n
// (from zero): 4 seconds doubled each time up to 64, each randomised by
// a uniform -1 to +1 second.
func (c *Client) retransmitDelay(n int) time.Duration {
	d := 64 * time.Second
	if n < 4 {
		d = 4 * time.Second << n
	}
	return d - time.Second + time.Duration(c.rand.IntN(int(2*time.Second)+1))
}

// maxRequests is how often a REQUEST for an offer or a remembered address
// goes out before the client starts over (section 4.4.1 leaves it to the
// client: "enough times to give adequate probability of contacting the
// server without causing the client ... to wait overly long"): four, some
// 60 seconds with section 4.1's backoff, as for dhclient's DISCOVERs.
const maxRequests = 4

// minRenewWait is the shortest wait between REQUESTs in RENEWING and
// REBINDING (section 4.4.5).
const minRenewWait = 60 * time.Second

// newExchange starts a transaction: a fresh xid and its start.
func (c *Client) newExchange() {
	f := &c.fsm
	f.xid = dhcpv4.TransactionID(uint32ToBytes(c.rand.Uint32()))
	f.begun = c.clk.Now()
	f.tries = 0
}

func uint32ToBytes(v uint32) [4]byte {
	return [4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// send transmits m to dst as the exchange's message, to be retransmitted
// on timeouts.
func (c *Client) send(m *dhcpv4.DHCPv4, dst netip.AddrPort) {
	f := &c.fsm
	f.sent, f.sentTo = m, dst
	c.transmit()
}

// transmit sends the exchange's message again, with secs brought up to
// date (RFC 2131 section 2: "seconds elapsed since client began address
// acquisition or renewal process").
func (c *Client) transmit() {
	f := &c.fsm
	if f.tries > 0 {
		c.Stats.Retransmits.Inc()
	}
	f.tries++
	f.sent.NumSeconds = uint16(min(c.clk.Now().Sub(f.begun)/time.Second, 0xffff))
	c.write(f.sent, f.sentTo)
}

// write sends one message and counts it.
func (c *Client) write(m *dhcpv4.DHCPv4, dst netip.AddrPort) {
	if _, err := c.conn.WriteToUDPAddrPort(m.ToBytes(), dst); err != nil {
		c.Stats.OutErrors.Inc()
		return
	}
	switch m.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		c.Stats.OutDiscovers.Inc()
	case dhcpv4.MessageTypeRequest:
		c.Stats.OutRequests.Inc()
	case dhcpv4.MessageTypeDecline:
		c.Stats.OutDeclines.Inc()
	case dhcpv4.MessageTypeRelease:
		c.Stats.OutReleases.Inc()
	}
}

// discover enters SELECTING (section 4.4.1): a DHCPDISCOVER broadcast,
// asking for the address last held (table 5 allows it).
func (c *Client) discover() {
	f := &c.fsm
	c.newExchange()
	f.sent = nil
	c.setState(Selecting)
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeDiscover, xid: f.xid, requested: f.last}), broadcastServer)
	c.wake(c.clk.Now().Add(c.retransmitDelay(0)))
}

// initReboot enters REBOOTING (section 4.4.2): a DHCPREQUEST broadcast for
// the remembered address, without a server identifier.
func (c *Client) initReboot() {
	f := &c.fsm
	c.newExchange()
	f.reqStart = c.clk.Now()
	c.setState(Rebooting)
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeRequest, xid: f.xid, requested: f.last}), broadcastServer)
	c.wake(c.clk.Now().Add(c.retransmitDelay(0)))
}

// timeout acts on the state's timer: a retransmission, or the next state.
func (c *Client) timeout() {
	f := &c.fsm
	now := c.clk.Now()
	switch f.state {
	case Init:
		c.discover()
	case Selecting:
		// Section 4.1: DISCOVERs go on with the backoff until an OFFER.
		c.transmit()
		c.wake(now.Add(c.retransmitDelay(f.tries - 1)))
	case Requesting, Rebooting:
		if f.tries >= maxRequests {
			c.Stats.RequestTimeouts.Inc()
			if f.state == Rebooting && f.applied != nil && !f.applied.Expired(now) {
				// The lease in use, verified after the link came
				// up, stands "for the remainder of the unexpired
				// lease" (section 3.2 step 2).
				c.log.Info("DHCP server silent after the link came up: keeping the lease", "addr", f.applied.Addr.String())
				c.resume()
				return
			}
			if l, ok := c.usable(now); ok && f.state == Rebooting {
				c.log.Info("DHCP server silent: using the remembered lease", "addr", l.Addr.String(),
					"server", l.Server.String(), "expires", l.Expiry().String())
				c.accept(l)
				return
			}
			c.log.Debug("DHCP REQUEST unanswered: starting over", "state", f.state.String(), "tries", f.tries)
			c.discover()
			return
		}
		c.transmit()
		c.wake(now.Add(c.retransmitDelay(f.tries - 1)))
	case Bound:
		c.renew()
	case Renewing:
		if !now.Before(f.applied.RebindAt()) {
			c.rebind()
			return
		}
		c.transmit()
		c.wakeBefore(f.applied.RebindAt())
	case Rebinding:
		if f.applied.Expired(now) {
			c.expire()
			return
		}
		c.transmit()
		c.wakeBefore(f.applied.Expiry())
	}
}

// relink acts on the NIC's link coming up (LinkUp): a lease in use is
// verified in REBOOTING (section 3.2: the DHCPREQUEST broadcast for the
// address, without a server identifier), the address kept meanwhile; a
// client without one starts its exchange over. A probe under way
// (CHECKING) finishes as it is.
func (c *Client) relink() {
	f := &c.fsm
	c.Stats.LinkUps.Inc()
	switch f.state {
	case Bound, Renewing, Rebinding:
		f.last = f.applied.Addr.Addr()
		c.initReboot()
	case Rebooting:
		c.initReboot()
	case Init, Selecting, Requesting:
		c.discover()
	}
}

// resume goes back to the lease in use after its verification went
// unanswered: BOUND until T1, or on with renewing or rebinding if their
// time has come.
func (c *Client) resume() {
	f := &c.fsm
	l, now := f.applied, c.clk.Now()
	switch {
	case now.Before(l.RenewAt()):
		f.sent = nil
		c.setState(Bound)
		c.wake(l.RenewAt())
	case now.Before(l.RebindAt()):
		c.renew()
	default:
		c.rebind()
	}
}

// usable returns the remembered lease when the client may still use it
// after its INIT-REBOOT went unanswered (RFC 2131 section 3.2 step 2:
// "for the remainder of the unexpired lease"): a whole lease, with its
// server and times, that has not expired at now.
func (c *Client) usable(now time.Time) (ClientLease, bool) {
	r := c.cfg.Remembered
	if r == nil || !r.Server.IsValid() || r.LeaseTime <= 0 || r.Start.IsZero() || r.Expired(now) ||
		!(0 < r.T1 && r.T1 < r.T2 && r.T2 < r.LeaseTime) {
		return ClientLease{}, false
	}
	return *r, true
}

// wakeBefore sets the timer for the next REQUEST in RENEWING or REBINDING
// (section 4.4.5): half the time left until end, at least a minute, and
// end itself at the latest.
func (c *Client) wakeBefore(end time.Time) {
	now := c.clk.Now()
	left := end.Sub(now)
	c.wake(now.Add(min(max(left/2, minRenewWait), left)))
}

// renew enters RENEWING at T1 (section 4.4.5): a DHCPREQUEST unicast to
// the server that granted the lease, with ciaddr and no server
// identifier (table 5).
func (c *Client) renew() {
	f := &c.fsm
	c.newExchange()
	f.reqStart = c.clk.Now()
	c.setState(Renewing)
	l := f.applied
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeRequest, xid: f.xid, ciaddr: l.Addr.Addr()}),
		netip.AddrPortFrom(l.Server, ServerPort))
	c.wakeBefore(l.RebindAt())
}

// rebind enters REBINDING at T2 (section 4.4.5): the same REQUEST
// broadcast, for any server to extend the lease.
func (c *Client) rebind() {
	f := &c.fsm
	// secs counts on from T1: rebinding goes on with the renewal
	// process (section 2: "seconds elapsed since client began address
	// acquisition or renewal process"), as dhclient's does, so that a
	// server that waits for secs to pass a threshold before answering,
	// as a backup does, hears how long the client has been trying.
	renewing, began := f.state == Renewing, f.begun
	c.newExchange()
	if renewing {
		f.begun = began
	}
	f.reqStart = c.clk.Now()
	c.setState(Rebinding)
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeRequest, xid: f.xid, ciaddr: f.applied.Addr.Addr()}), broadcastServer)
	c.wakeBefore(f.applied.Expiry())
}

// expire ends a lease nobody renewed (section 4.4.5: "the client MUST
// immediately discontinue use of the previously allocated network
// address"), and starts over.
func (c *Client) expire() {
	l := *c.fsm.applied
	c.Stats.Expired.Inc()
	c.Stats.Lost.Inc()
	c.unconfigure()
	c.log.Warn("DHCP lease lost: expired", "addr", l.Addr.String(), "server", l.Server.String(), "lease", l.LeaseTime.String())
	c.notify(LeaseLost, l)
	c.discover()
}

// receive takes a decoded reply: it must be a BOOTREPLY of the
// transaction open, for this client (section 4.4.1: "the client ... uses
// the 'xid' field to match replies"), of a type the state takes.
func (c *Client) receive(m *dhcpv4.DHCPv4) {
	f := &c.fsm
	switch {
	case m.OpCode != dhcpv4.OpcodeBootReply:
		c.Stats.InNotReply.Inc()
		return
	case f.sent == nil || m.TransactionID != f.xid:
		c.Stats.InBadXID.Inc()
		return
	case !bytes.Equal(m.ClientHWAddr, c.hw):
		c.Stats.InOtherClient.Inc()
		return
	}
	// RFC 6842: a server that returns the identifier returns ours.
	if id := m.Options.Get(dhcpv4.OptionClientIdentifier); id != nil && !bytes.Equal(id, c.id) {
		c.Stats.InOtherClient.Inc()
		return
	}
	switch m.MessageType() {
	case dhcpv4.MessageTypeOffer:
		c.Stats.InOffers.Inc()
		if f.state != Selecting {
			c.Stats.InUnexpected.Inc()
			return
		}
		c.selectOffer(m)
	case dhcpv4.MessageTypeAck:
		c.Stats.InAcks.Inc()
		if !c.awaitsReply() {
			c.Stats.InUnexpected.Inc()
			return
		}
		c.ack(m)
	case dhcpv4.MessageTypeNak:
		c.Stats.InNaks.Inc()
		if !c.awaitsReply() {
			c.Stats.InUnexpected.Inc()
			return
		}
		c.nak(m)
	default:
		c.Stats.InUnexpected.Inc()
	}
}

// awaitsReply reports whether the state has a REQUEST out.
func (c *Client) awaitsReply() bool {
	switch c.fsm.state {
	case Requesting, Rebooting, Renewing, Rebinding:
		return true
	}
	return false
}

// fromAskedServer reports whether a reply in REQUESTING or RENEWING comes
// from the server the REQUEST was for; in REBOOTING and REBINDING any
// server may answer.
func (c *Client) fromAskedServer(m *dhcpv4.DHCPv4) bool {
	f := &c.fsm
	switch f.state {
	case Requesting:
		return addr(m.ServerIdentifier()) == f.server
	case Renewing:
		return addr(m.ServerIdentifier()) == f.applied.Server
	}
	return true
}

// selectOffer takes the first acceptable OFFER (section 4.4.1 lets the
// client choose; waiting for more only delays it) and requests it: a
// DHCPREQUEST broadcast with the same xid, naming the server and the
// address (table 5), so that other servers withdraw theirs.
func (c *Client) selectOffer(m *dhcpv4.DHCPv4) {
	f := &c.fsm
	a, sid := addr(m.YourIPAddr), addr(m.ServerIdentifier())
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || !sid.IsValid() || sid.IsUnspecified() {
		c.Stats.InBadOffer.Inc()
		return
	}
	f.offered, f.server = a, sid
	f.tries = 0
	f.reqStart = c.clk.Now()
	c.setState(Requesting)
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeRequest, xid: f.xid, requested: a, server: sid}), broadcastServer)
	c.wake(c.clk.Now().Add(c.retransmitDelay(0)))
}

// ack takes a DHCPACK to the REQUEST out: the lease is checked, probed
// when its address is new, and applied.
func (c *Client) ack(m *dhcpv4.DHCPv4) {
	f := &c.fsm
	if !c.fromAskedServer(m) {
		c.Stats.InOtherServer.Inc()
		return
	}
	l, err := leaseFromAck(m, f.reqStart)
	if err != nil {
		c.Stats.InBadAck.Inc()
		c.log.Debug("DHCP ACK refused", "err", err)
		return
	}
	if f.applied != nil && l.Addr.Addr() != f.applied.Addr.Addr() {
		// A renewal is of ciaddr (section 4.3.2), a verification
		// after the link came up of the requested address (section
		// 3.2); an ACK for another address answers someone else, or
		// is a server's mistake.
		c.Stats.InBadAck.Inc()
		return
	}
	c.accept(l)
}

// accept takes a lease an ACK granted, or the remembered one (usable):
// an address new to the NIC is probed for first, then the lease is
// applied.
func (c *Client) accept(l ClientLease) {
	f := &c.fsm
	f.sent = nil
	f.timer.Stop()
	if c.cfg.Probe != nil && (f.applied == nil || f.applied.Addr.Addr() != l.Addr.Addr()) {
		c.setState(Checking)
		f.probing = &l
		go func() {
			inUse, err := c.cfg.Probe(f.ctx, l.Addr.Addr())
			select {
			case c.probed <- probeResult{lease: &l, inUse: inUse, err: err}:
			case <-c.done:
			}
		}()
		return
	}
	c.bind(l)
}

// probeDone takes the probe's verdict on the address an ACK gave.
func (c *Client) probeDone(r probeResult) {
	f := &c.fsm
	if f.state != Checking || r.lease != f.probing {
		return
	}
	f.probing = nil
	if r.err != nil {
		c.Stats.ProbeErrors.Inc()
		c.log.Warn("DHCP address probe failed: using the address", "addr", r.lease.Addr.Addr().String(), "err", r.err)
	}
	if r.inUse {
		c.decline(*r.lease)
		return
	}
	c.bind(*r.lease)
}

// decline refuses an address found in use (section 4.4.1): a DHCPDECLINE
// broadcast naming it and its server, then INIT after ten seconds
// (section 3.1 step 5), so that the server marks it and offers another.
func (c *Client) decline(l ClientLease) {
	f := &c.fsm
	c.Stats.Conflicts.Inc()
	c.write(c.message(msgFields{typ: dhcpv4.MessageTypeDecline, xid: f.xid, requested: l.Addr.Addr(),
		server: l.Server, message: "address in use"}), broadcastServer)
	c.log.Warn("DHCP address declined: another host uses it", "addr", l.Addr.Addr().String(), "server", l.Server.String())
	c.notify(AddressDeclined, l)
	f.sent = nil
	f.last = netip.Addr{}
	c.setState(Init)
	c.wake(c.clk.Now().Add(declineWait))
}

// conflict acts on the loss of a bound address to another host (Conflict):
// the lease is over (RFC 5227 section 2.4 (a) and (b): the host "MUST
// immediately cease using this address"), the server is told with a
// DHCPDECLINE so that it offers another, and the client starts over ten
// seconds later, as after a probe found the address in use.
func (c *Client) conflict(a netip.Addr) {
	f := &c.fsm
	if f.applied == nil || f.applied.Addr.Addr() != a {
		return
	}
	l := *f.applied
	c.Stats.Lost.Inc()
	f.gone = true // the stack removed it
	c.unconfigure()
	c.log.Warn("DHCP lease lost: another host took the address", "addr", l.Addr.String(), "server", l.Server.String())
	c.notify(LeaseLost, l)
	c.newExchange()
	c.decline(l)
}

// declineWait is how long a client that declined an address waits before
// it starts over (RFC 2131 section 3.1 step 5: "a minimum of ten
// seconds").
const declineWait = 10 * time.Second

// nak takes a DHCPNAK: the lease asked for is refused, so any address in
// use is given up at once (sections 3.2 and 4.4.5) and the client starts
// over; a server that NAKs every REQUEST spaces the restarts out with
// section 4.1's backoff rather than a storm of DISCOVERs.
func (c *Client) nak(m *dhcpv4.DHCPv4) {
	f := &c.fsm
	if !c.fromAskedServer(m) {
		c.Stats.InOtherServer.Inc()
		return
	}
	c.log.Warn("DHCP NAK", "server", addr(m.ServerIdentifier()).String(), "state", f.state.String(), "message", m.Message())
	if f.applied != nil {
		l := *f.applied
		c.Stats.Lost.Inc()
		c.unconfigure()
		c.log.Warn("DHCP lease lost: refused", "addr", l.Addr.String(), "server", l.Server.String())
		c.notify(LeaseLost, l)
	}
	f.last = netip.Addr{}
	f.naks++
	f.sent = nil
	if f.naks == 1 {
		c.discover()
		return
	}
	c.setState(Init)
	c.wake(c.clk.Now().Add(c.retransmitDelay(f.naks - 2)))
}

// bind applies the lease and enters BOUND, waiting for T1 (section
// 4.4.1).
func (c *Client) bind(l ClientLease) {
	f := &c.fsm
	renewal := f.applied != nil
	if !c.configure(l) {
		// The host would not take the address: as good as in use.
		c.unconfigure()
		f.sent = nil
		c.setState(Init)
		c.wake(c.clk.Now().Add(declineWait))
		return
	}
	f.naks = 0
	f.last = l.Addr.Addr()
	f.sent = nil
	c.setState(Bound)
	attrs := []any{"addr", l.Addr.String(), "server", l.Server.String(), "lease", l.LeaseTime.String()}
	if gw, ok := l.Gateway(); ok {
		attrs = append(attrs, "router", gw.String())
	}
	if renewal {
		c.Stats.Renewed.Inc()
		c.log.Info("DHCP lease renewed", attrs...)
		c.notify(LeaseRenewed, l)
	} else {
		c.Stats.Bound.Inc()
		c.log.Info("DHCP lease obtained", append(attrs, "dns", fmt.Sprint(l.DNS), "mtu", l.MTU)...)
		c.notify(LeaseBound, l)
	}
	if t1 := l.RenewAt(); !t1.IsZero() {
		c.wake(t1)
	}
}

// release gives the applied lease back (section 4.4.6): a DHCPRELEASE
// unicast to its server, with ciaddr, then the address is dropped.
func (c *Client) release() {
	f := &c.fsm
	if f.applied == nil {
		return
	}
	l := *f.applied
	c.newExchange()
	c.write(c.message(msgFields{typ: dhcpv4.MessageTypeRelease, xid: f.xid, ciaddr: l.Addr.Addr(), server: l.Server}),
		netip.AddrPortFrom(l.Server, ServerPort))
	c.unconfigure()
	c.log.Info("DHCP lease released", "addr", l.Addr.String(), "server", l.Server.String())
	c.notify(LeaseReleased, l)
}

func (c *Client) notify(k EventKind, l ClientLease) {
	if c.cfg.Notify != nil {
		c.cfg.Notify(Event{Kind: k, Lease: l})
	}
}
