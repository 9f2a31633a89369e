package tcp

import (
	"encoding/binary"
	"net/netip"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/seqnum"
)

// ICMP and ICMPv6 errors about our segments, in the form the network
// layers hand both (ip.ICMPError): path MTU discovery (RFC 1191 section
// 6.4, RFC 8201), soft and hard errors (RFC 1122 section 4.2.3.9), each validated
// against the connection it quotes first (RFC 5927 section 4.1), since an
// ICMP message is easier to forge than a segment: it need not guess the
// peer's sequence numbers, only ours in flight.

// icmpState is what ICMP errors leave for the connection's goroutine; the
// dealer sets it under mu and wakes the connection.
type icmpState struct {
	// mtuDrop: a validated "fragmentation needed" lowered the route's
	// path MTU; the goroutine lowers the MSS and resends.
	mtuDrop bool
	// softErr is the last soft error (RFC 1122 4.2.3.9: "MUST NOT abort
	// the connection"), reported instead of ETIMEDOUT if the connection
	// then times out, as Linux's sk_err_soft.
	softErr error
}

// HandleICMPError implements ip.ErrorHandler (the ICMP layer finds it by
// the quoted protocol number, so tcp need not import icmp). It runs in the
// network layer's dealer goroutine: it finds the connection the quoted
// segment belongs to, checks the quoted sequence number, and leaves the
// rest to the connection's goroutine.
func (p *Protocol) HandleICMPError(e ip.ICMPError) {
	th := e.Transport
	// RFC 792 quotes the IP header and 64 bits of the datagram: TCP's
	// ports and sequence number; the ICMP layer checked that much is there.
	id := fourTuple{
		local:  netip.AddrPortFrom(e.Src, binary.BigEndian.Uint16(th[0:])),
		remote: netip.AddrPortFrom(e.Dst, binary.BigEndian.Uint16(th[2:])),
	}
	seq := seqnum.Value(binary.BigEndian.Uint32(th[4:]))
	p.mu.RLock()
	c := p.conns[id]
	p.mu.RUnlock()
	if c == nil {
		p.Stats.ICMPNoConn.Inc()
		return
	}
	c.icmpError(&e, seq)
}

// icmpError acts on a validated error for c, in the dealer's goroutine.
func (c *Conn) icmpError(e *ip.ICMPError, seq seqnum.Value) {
	c.mu.Lock()
	// RFC 5927 section 4.1: the quoted segment must be one in flight,
	// SND.UNA =< SEG.SEQ < SND.NXT (SND.MAX here, as SND.NXT goes back
	// after a timeout), as Linux's tcp_v4_err checks.
	if c.state == Closed || c.state == TimeWait || !seq.InRange(c.snd.una, c.snd.max) {
		c.mu.Unlock()
		c.p.Stats.OutOfWindowIcmps.Inc()
		return
	}
	// The errno an application sees, as Linux's icmp_err_convert.
	err := e.Kind.Errno()
	switch {
	case e.Kind == ip.PacketTooBig:
		c.mu.Unlock()
		// Only segments sent with DF can draw it.
		if !e.DF {
			c.p.Stats.PMTUIgnored.Inc()
			return
		}
		c.net.UpdatePMTU(e.Dst, e.MTU, e.QuotedLen)
		c.mu.Lock()
		c.icmp.mtuDrop = true
	case e.Kind.Hard() && c.state == SynSent,
		e.Kind == ip.HostUnreachable && e.Local && c.state == SynSent:
		// Linux aborts a connection attempt on a hard error: the port or
		// protocol unreachable (RFC 1122 4.2.3.9 calls these hard). So
		// it does on the host's own report that the peer's address did
		// not resolve (RFC 1122 2.3.2.2): no router's transient view,
		// the link itself has no one there ("no route to host").
		c.p.Stats.ICMPHardErrors.Inc()
		if c.sock.abortReq == nil {
			c.sock.abortReq = err
		}
	default:
		c.p.Stats.ICMPSoftErrors.Inc()
		c.icmp.softErr = err
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.wake()
}

// pathWorks forgets the soft error once an acceptable ACK acknowledges new
// data: the path works again, and a later timeout is to be reported as
// such (Linux clears sk_err_soft in tcp_ack likewise).
func (c *Conn) pathWorks(seg *segment) {
	if c.icmp.softErr != nil && seg.ack.GreaterThan(c.snd.una) && !seg.ack.GreaterThan(c.snd.max) {
		c.icmp.softErr = nil
	}
}

// icmpEvents handles in the connection's goroutine what icmpError left.
func (c *Conn) icmpEvents() {
	if c.icmp.mtuDrop {
		c.icmp.mtuDrop = false
		c.mtuReduced()
	}
}

// mtuReduced follows a drop of the route's path MTU (RFC 1191 section 6.4,
// as Linux's tcp_mtu_reduced and tcp_simple_retransmit): the MSS falls to
// fit, and what was in flight, which the router dropped, is sent again at
// once in segments of the new size. The congestion window stays: the loss
// says nothing about congestion. Further reports about the same drop find
// the MSS already lowered and change nothing, so the data goes again once.
func (c *Conn) mtuReduced() {
	ri, err := c.net.Route(c.id.remote.Addr())
	if err != nil {
		return
	}
	c.route = ri
	mss := mssFor(c.net, &ri)
	if c.tsOK {
		mss -= 12 // RFC 6691: the timestamp option takes room from each segment
	}
	// 48 bytes of data at least, as Linux's tcp_min_snd_mss: a forged
	// report must not make a connection send byte-sized segments.
	mss = max(mss, 48)
	if mss >= c.snd.mss {
		return
	}
	c.p.Stats.PMTUReductions.Inc()
	c.snd.mss = mss
	if c.snd.cc != nil {
		c.snd.cc.SetMSS(mss)
	}
	if !c.state.synchronized() || c.snd.una == c.snd.max {
		return
	}
	// Go back to SND.UNA: output resends from there within the window,
	// in segments of the new MSS. Duplicate ACKs the resent data may draw
	// must not start fast retransmit (RFC 6582's recover, as after a
	// timeout).
	c.p.Stats.PMTURetransmits.Inc()
	c.snd.nxt = c.snd.una
	if !c.snd.inRecovery {
		c.snd.recover = c.snd.max
	}
}
