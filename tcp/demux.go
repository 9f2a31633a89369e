package tcp

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// segment is a received segment as the connection sees it: the packet
// holding the datagram, views into it, and its header fields and options
// parsed once, in the dealer. The mailbox carries segments by value, so
// nothing in one points into the segment itself: the SACK blocks are kept
// in an array of its own and read through sackBlocks.
type segment struct {
	pk *buffer.Packet
	// dgram is the datagram from its network header on, for quoting in
	// an ICMP error (forward.go); the TCP header starts at tcpOff.
	dgram   []byte
	tcp     wire.TCP
	seq     seqnum.Value
	ack     seqnum.Value
	flags   uint8
	tos     uint8 // the network header's TOS or traffic class: ECN (ecn.go)
	wnd     uint16
	tcpOff  uint16
	payload []byte
	opts    wire.TCPOptions // opts.SACK is nil: see sackBlocks
	nSACK   uint8
	sack    [wire.TCPMaxSACKBlocks]wire.SACKBlock // the SACK option's blocks (sack_sender.go)
	// reopenISS, when set, is the ISS a SYN that ended TIME-WAIT must
	// open with (timewait.go).
	reopenISS seqnum.Value
	// synced, when set, makes this a Sync marker with no packet
	// (sync.go): run closes it once everything before it is handled.
	synced chan struct{}
}

// discard lets go of a segment that will not be processed: its packet, or
// for a Sync marker, the waiter.
func (s *segment) discard() {
	if s.synced != nil {
		close(s.synced)
		return
	}
	s.pk.Release()
}

func (s *segment) has(f uint8) bool { return s.flags&f != 0 }

// len is the segment's length in sequence space: data plus SYN and FIN.
func (s *segment) len() seqnum.Size {
	n := seqnum.Size(len(s.payload))
	if s.has(wire.TCPFlagSYN) {
		n++
	}
	if s.has(wire.TCPFlagFIN) {
		n++
	}
	return n
}

// release releases the segment's packet, if it still holds it.
func (s *segment) release() {
	if s.pk != nil {
		s.pk.Release()
	}
}

// sackBlocks are the blocks of the segment's SACK option (RFC 2018).
func (s *segment) sackBlocks() []wire.SACKBlock { return s.sack[:s.nSACK] }

// parseOptions parses the segment's options into opts and its SACK blocks
// into its own array, without allocating. It reports false, leaving opts
// empty, for options that do not parse. The blocks parse first into
// scratch, an array on the heap the dealer owns: had they parsed into
// the segment's array, the segment would point into itself, and escape
// analysis would move every segment the dealer parses to the heap.
func (s *segment) parseOptions(scratch *[wire.TCPMaxSACKBlocks]wire.SACKBlock) bool {
	s.opts.SACK = scratch[:0]
	ok := wire.ParseTCPOptions(s.tcp.Options(), &s.opts)
	s.nSACK = uint8(copy(s.sack[:], s.opts.SACK))
	if !ok {
		s.opts, s.nSACK = wire.TCPOptions{}, 0
	}
	s.opts.SACK = nil
	return ok
}

func parseSegment(pk *buffer.Packet, h *ip.Header) (segment, bool) {
	d := pk.Bytes()
	t, ok := wire.ParseTCP(d[h.Off:])
	if !ok {
		return segment{}, false
	}
	return segment{
		pk: pk, dgram: d, tcp: t, tos: h.TOS, tcpOff: uint16(h.Off),
		seq: seqnum.Value(t.Seq()), ack: seqnum.Value(t.Ack()),
		flags: t.Flags(), wnd: t.Window(), payload: t.Payload(),
	}, true
}

// HandleIP is the TCP dealer: it checks a segment and deals it to its
// connection, to the listener of its port (a SYN), or answers it with a
// reset (RFC 9293 section 3.10.7.1). It runs in the network layer's
// dealer, for either family.
func (p *Protocol) HandleIP(pk *buffer.Packet, h ip.Header) {
	p.Stats.InSegs.Inc()
	seg, ok := parseSegment(pk, &h)
	if !ok {
		p.Stats.InErrs.Inc()
		pk.Release()
		return
	}
	src, dst := h.Src, h.Dst
	if !pk.Offload.ChecksumVerified() && !seg.tcp.ChecksumValid(src, dst) {
		p.Stats.InCsumErrors.Inc()
		pk.Release()
		return
	}
	nw, err := p.nets.For(dst)
	// RFC 9293 3.9.1: TCP is unicast; a segment to a broadcast is dropped.
	if err != nil || nw.IsBroadcast(dst) || dst.IsMulticast() {
		p.Stats.InErrs.Inc()
		pk.Release()
		return
	}
	id := fourTuple{netip.AddrPortFrom(dst, seg.tcp.DstPort()), netip.AddrPortFrom(src, seg.tcp.SrcPort())}
	p.mu.RLock()
	c := p.conns[id]
	var l *Listener
	if c == nil {
		l = p.listenerFor(nw, id.local)
	}
	p.mu.RUnlock()
	switch {
	case c != nil:
		if !seg.parseOptions(&p.sackScratch) {
			p.Stats.InErrs.Inc()
			pk.Release()
			return
		}
		c.deliver(&seg)
	case l != nil:
		l.handle(&seg, id, seg.parseOptions(&p.sackScratch))
	case seg.flags&(wire.TCPFlagSYN|wire.TCPFlagACK|wire.TCPFlagRST) == wire.TCPFlagSYN && p.fwd.hooked():
		if seg.parseOptions(&p.sackScratch) {
			p.forward(&seg, id)
		} else {
			p.Stats.InErrs.Inc()
		}
		pk.Release() // the forwarder's request holds copies (forward.go)
	default:
		p.resetClosed(&seg, id)
		pk.Release()
	}
}

// listenerFor finds the listener for a local address: one bound to it
// before a wildcard one of its family (ip.Binding), which takes only the
// host's own addresses, not the foreign ones a forwarding interface takes
// (ipv4/forward.go); nw is the network layer of local's family. p.mu is
// held.
func (p *Protocol) listenerFor(nw ip.Network, local netip.AddrPort) *Listener {
	var wild *Listener
	for _, l := range p.listeners[local.Port()] {
		switch b := l.binding(); {
		case !b.Wildcard():
			if b.Addr == local.Addr() {
				return l
			}
		case b.Takes(local.Addr()):
			wild = l
		}
	}
	if wild != nil && !nw.IsHostDst(local.Addr()) {
		return nil
	}
	return wild
}

// resetClosed answers a segment that has no connection, as RFC 9293
// section 3.10.7.1 says for the CLOSED state: "If the ACK bit is off,
// sequence number zero is used, <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
// If the ACK bit is on, <SEQ=SEG.ACK><CTL=RST>." A reset is never answered.
// id is the segment's 4-tuple, local side first.
func (p *Protocol) resetClosed(seg *segment, id fourTuple) {
	if seg.has(wire.TCPFlagRST) {
		return
	}
	if seg.has(wire.TCPFlagACK) {
		p.sendResetTo(id, seg.ack, 0, wire.TCPFlagRST)
		return
	}
	p.sendResetTo(id, 0, seg.seq.Add(seg.len()), wire.TCPFlagRST|wire.TCPFlagACK)
}

// register adds c to the demultiplexing table; it fails if the 4-tuple is
// taken or the stack is closing.
func (p *Protocol) register(c *Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.conns[c.id] != nil || !p.reserveConn(c.id.remote, c.id.local) {
		return false
	}
	p.conns[c.id] = c
	p.wg.Add(1)
	p.Stats.Connections.Add(1)
	return true
}

func (p *Protocol) unregister(c *Conn) {
	p.mu.Lock()
	if p.conns[c.id] == c {
		delete(p.conns, c.id)
	}
	p.mu.Unlock()
	p.releaseConn()
	p.Stats.Connections.Add(-1)
}

// pickPort chooses a local port for an active open to remote, by RFC 6056
// section 3.3.1 (algorithm 1): a random start in the ephemeral range, then
// the next port whose 4-tuple is free and that no listener holds. p.mu is
// held.
func (p *Protocol) pickPort(local netip.Addr, remote netip.AddrPort) (uint16, bool) {
	n := int(p.cfg.EphemeralHigh-p.cfg.EphemeralLow) + 1
	start := p.env.Rand.IntN(n)
	for i := range n {
		port := p.cfg.EphemeralLow + uint16((start+i)%n)
		if len(p.listeners[port]) > 0 {
			continue
		}
		if p.conns[fourTuple{netip.AddrPortFrom(local, port), remote}] == nil {
			return port, true
		}
	}
	return 0, false
}
