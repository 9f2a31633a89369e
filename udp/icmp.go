package udp

import (
	"encoding/binary"
	"net/netip"

	"github.com/gonetstack/gonet/ip"
)

// ICMP and ICMPv6 errors about our datagrams (RFC 1122 section 4.1.3.3:
// "UDP MUST pass to the application layer all ICMP error messages that
// it receives from the IP layer"). As Linux does without IP_RECVERR, an
// error reaches a connected endpoint only: its peer is the one the error
// is about, so the next Read fails with the error's errno (port
// unreachable: ECONNREFUSED) and a DNS client or a ping-pong protocol
// learns at once that nobody listens. An unconnected endpoint sends to
// many peers, and an error about one of them must not fail its reads.
// Packet Too Big is the network layer's (path MTU) and nothing here.
// Linux, without IP_RECVERR, passes only the errors it deems hard (port
// and protocol unreachable, administratively prohibited, parameter
// problem); GoNet passes every kind, as the RFC's MUST has it, so that a
// next hop that never resolves (host unreachable, looped back) fails a
// connected socket's read as it fails a connect.

// HandleICMPError implements ip.ErrorHandler. It runs in the network
// layer's dealer goroutine.
func (p *Protocol) HandleICMPError(e ip.ICMPError) {
	if e.Kind == ip.PacketTooBig {
		return
	}
	p.Stats.InICMPErrors.Inc()
	local := netip.AddrPortFrom(e.Src, binary.BigEndian.Uint16(e.Transport[0:]))
	remote := netip.AddrPortFrom(e.Dst, binary.BigEndian.Uint16(e.Transport[2:]))
	p.mu.RLock()
	var c *Conn
	for _, x := range p.ports[local.Port()] {
		if b := x.binding(); b.Addr == local.Addr() || b.Takes(local.Addr()) {
			if x.connectedTo(remote) {
				c = x
				break
			}
		}
	}
	p.mu.RUnlock()
	if c == nil {
		p.Stats.ICMPNoConnected.Inc()
		return
	}
	c.setError(e.Kind.Errno())
}

// connectedTo reports whether c is connected to remote, with or without
// the zone a link-local peer carries.
func (c *Conn) connectedTo(remote netip.AddrPort) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peer.IsValid() && c.peer.Port() == remote.Port() && c.peer.Addr().WithZone("") == remote.Addr().WithZone("")
}

// setError leaves err for the next Read (Linux's sk_err) and wakes a
// reader waiting.
func (c *Conn) setError(err error) {
	c.softErr.Store(&err)
	select {
	case c.errWake <- struct{}{}:
	default:
	}
}

// takeError returns and clears the error an ICMP message left, if any.
func (c *Conn) takeError() error {
	if c.softErr.Load() == nil { // the common case: a load, no write to share
		return nil
	}
	if p := c.softErr.Swap(nil); p != nil {
		return *p
	}
	return nil
}
