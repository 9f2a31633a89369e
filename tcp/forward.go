package tcp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// The forwarder: a SYN that no connection and no listener takes goes to a
// hook, which decides what the peer is told before anything is answered.
// A gateway uses it to answer the guest's SYN only once its own connect on
// the host has succeeded, and to carry a refused or unreachable connect
// back as RST or ICMP, as a router on the path would. With ipv4's
// forwarding interfaces (ipv4/forward.go) the SYN may be for any address.
//
// Goroutines. The TCP dealer (in the network layer's dealer goroutine), or a
// connection in TIME-WAIT that a newer SYN ends (timewait.go), makes a
// ForwardRequest for the SYN and starts the hook in a goroutine of its own,
// so that neither ever waits for a decision; the hook calls one of the
// request's decisions from any goroutine, once. Until then the 4-tuple is
// pending: retransmissions of the SYN are dropped (ForwardSYNDuplicates)
// rather than starting a second request, and at most
// Config.ForwardMaxPending requests are pending at once, beyond which SYNs
// are dropped (ForwardPendingDrops), so a flood of SYNs to random addresses
// makes a bounded number of goroutines. The request holds copies of what
// it needs of the SYN, never its packet.

// ForwardRequest is a SYN waiting for the forwarder hook's decision. Exactly
// one of Accept, Refuse, Unreachable and Drop decides it; later calls do
// nothing (Accept returns an error). A hook that returns without deciding
// drops the SYN. Once the stack is closing, Accept fails with
// net.ErrClosed and the other decisions send nothing.
type ForwardRequest struct {
	p   *Protocol
	id  fourTuple
	syn segment // the SYN's fields and options; no packet, no views
	// quote is the SYN's datagram, network header first, up to what an
	// ICMP error quotes, with its checksum complete.
	quote []byte

	decided atomic.Bool
}

// LocalAddr is the address and port the peer's SYN is for: the local side
// of the connection Accept makes, foreign to the host on a forwarding
// interface.
func (r *ForwardRequest) LocalAddr() netip.AddrPort { return r.id.local }

// RemoteAddr is the address and port the SYN came from.
func (r *ForwardRequest) RemoteAddr() netip.AddrPort { return r.id.remote }

// ErrForwardDecided is returned by Accept on a request already decided.
var ErrForwardDecided = errors.New("tcp: forward request already decided")

// Accept answers the SYN with a SYN-ACK, negotiated with the SYN's options
// (RFC 9293 3.10.7.2, as a listener would), and waits for the handshake to
// complete, ctx to end, or the attempt to fail (the peer's reset, or the
// SYN-ACK's retransmissions exhausted). The connection's local address is
// LocalAddr, so its segments leave from that address.
func (r *ForwardRequest) Accept(ctx context.Context) (*Conn, error) {
	p := r.p
	fail := func(err error) error {
		return &net.OpError{Op: "accept", Net: "tcp", Source: net.TCPAddrFromAddrPort(r.id.local),
			Addr: net.TCPAddrFromAddrPort(r.id.remote), Err: err}
	}
	if !r.decide() {
		return nil, fail(ErrForwardDecided)
	}
	defer p.fwd.done(r.id)
	nw, route, err := p.route(r.id.remote.Addr())
	if err != nil {
		p.Stats.ForwardAcceptFails.Inc()
		return nil, fail(err)
	}
	c := p.newConn(r.id, nw, route, SynReceived)
	if r.syn.reopenISS != 0 {
		c.snd.startAt(r.syn.reopenISS) // RFC 6191 (timewait.go)
	}
	c.forwarded = true
	c.negotiate(&r.syn)
	c.snd.wnd = uint32(r.syn.wnd)
	c.snd.wl1 = r.syn.seq
	c.snd.maxWnd = c.snd.wnd
	// Registered before the request stops pending, so that a
	// retransmitted SYN finds the connection, which answers it with
	// its SYN-ACK again, and never starts a second request.
	if !p.register(c) {
		p.Stats.ForwardAcceptFails.Inc()
		if p.isClosed() {
			return nil, fail(net.ErrClosed)
		}
		return nil, fail(errNoBuffers)
	}
	p.Stats.ForwardAccepted.Inc()
	p.Stats.PassiveOpens.Inc()
	c.start()
	select {
	case <-c.established:
		return c, nil
	case <-c.done:
		p.Stats.ForwardAcceptFails.Inc()
		return nil, fail(c.sock.err)
	case <-ctx.Done():
		c.abort(ctx.Err())
		<-c.done
		p.Stats.ForwardAcceptFails.Inc()
		return nil, fail(mapContextErr(ctx.Err()))
	}
}

// Refuse answers the SYN with a reset, <SEQ=0><ACK=SEG.SEQ+1><CTL=RST,ACK>
// as RFC 9293 3.10.7.1 answers a segment for a closed port: the peer's
// connect fails with ECONNREFUSED.
func (r *ForwardRequest) Refuse() {
	if !r.decide() {
		return
	}
	defer r.p.fwd.done(r.id)
	r.p.Stats.ForwardRefused.Inc()
	if r.p.isClosed() {
		return
	}
	r.p.sendResetTo(r.id, 0, r.syn.seq.Add(r.syn.len()), wire.TCPFlagRST|wire.TCPFlagACK)
}

// Unreachable answers the SYN with the network layer's error for kind
// (ip.NetUnreachable, ip.HostUnreachable or ip.AdminProhibited: an ICMP
// or ICMPv6 destination unreachable), quoting the SYN, from the host's own
// address as a router would: the peer's connect fails with ENETUNREACH,
// EHOSTUNREACH or, for Linux, EHOSTUNREACH too. The error's rate limit
// applies.
func (r *ForwardRequest) Unreachable(kind ip.ErrorKind) {
	if !r.decide() {
		return
	}
	defer r.p.fwd.done(r.id)
	r.p.Stats.ForwardUnreachable.Inc()
	if r.p.isClosed() {
		return
	}
	if nw, err := r.p.nets.For(r.id.remote.Addr()); err == nil {
		nw.ReportError(r.quote, kind)
	}
}

// Drop answers nothing: the peer retransmits its SYN, which makes a new
// request, and in the end times out.
func (r *ForwardRequest) Drop() {
	if !r.decide() {
		return
	}
	defer r.p.fwd.done(r.id)
	r.p.Stats.ForwardDropped.Inc()
}

// decide reports whether this call is the one that decides the request.
func (r *ForwardRequest) decide() bool { return r.decided.CompareAndSwap(false, true) }

// forwarder is the protocol's hook and the requests pending on it.
type forwarder struct {
	mu      sync.Mutex
	hook    func(*ForwardRequest)
	pending map[fourTuple]*ForwardRequest
}

// SetForwarder sets the hook that decides SYNs no connection or listener
// takes (nil: none, they are reset as RFC 9293 3.10.7.1 says). The hook
// runs in a goroutine of its own per request and must decide it (see
// ForwardRequest); it may block, as a connect on the host does, since
// Config.ForwardMaxPending bounds the requests pending.
func (p *Protocol) SetForwarder(hook func(*ForwardRequest)) {
	p.fwd.mu.Lock()
	p.fwd.hook = hook
	p.fwd.mu.Unlock()
}

// hooked reports whether a hook is set.
func (f *forwarder) hooked() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hook != nil
}

// forward offers a SYN that nothing took, its options parsed, to the hook:
// from the dealer, or from a connection in TIME-WAIT that the SYN ends
// (timewait.go). Without a hook (removed since the caller looked) the SYN
// is dropped. The segment's packet stays the caller's.
func (p *Protocol) forward(seg *segment, id fourTuple) {
	f := &p.fwd
	f.mu.Lock()
	hook := f.hook
	switch {
	case hook == nil:
		f.mu.Unlock()
		return
	case f.pending[id] != nil:
		f.mu.Unlock()
		p.Stats.ForwardSYNDuplicates.Inc()
		return
	case len(f.pending) >= p.cfg.ForwardMaxPending:
		f.mu.Unlock()
		p.Stats.ForwardPendingDrops.Inc()
		return
	}
	r := &ForwardRequest{p: p, id: id, syn: *seg, quote: quoteSYN(seg)}
	r.syn.pk, r.syn.dgram, r.syn.tcp, r.syn.payload = nil, nil, nil, nil
	if f.pending == nil {
		f.pending = map[fourTuple]*ForwardRequest{}
	}
	f.pending[id] = r
	f.mu.Unlock()
	p.Stats.ForwardRequests.Inc()
	p.Stats.ForwardPending.Add(1)
	go func() {
		hook(r)
		r.Drop() // nothing, if the hook decided
	}()
}

// isClosed reports whether the stack is closing: a hook deciding after that
// sends nothing, since the layers below may be gone.
func (p *Protocol) isClosed() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.closed
}

// done ends a request's pending.
func (f *forwarder) done(id fourTuple) {
	f.mu.Lock()
	r := f.pending[id]
	delete(f.pending, id)
	f.mu.Unlock()
	if r != nil {
		r.p.Stats.ForwardPending.Add(-1)
	}
}

// maxQuote is as much of a datagram as an ICMP error quotes (icmp's
// maxErrorLen of 576 bytes, less its own IP and ICMP headers); maxQuote6
// as much as an ICMPv6 one does: as much as fits the minimum MTU of 1280
// (RFC 4443 section 2.4 (c)), 1232 bytes.
const (
	maxQuote  = 576 - wire.IPv4MinHeaderLen - wire.ICMPHeaderLen
	maxQuote6 = wire.ICMPv6MaxErrorQuote
)

// quoteSYN copies the SYN's datagram for an ICMP or ICMPv6 error, with the
// checksum a wire would have carried if the link left it partial (checksum
// offload).
func quoteSYN(seg *segment) []byte {
	maxQuote := maxQuote
	if len(seg.dgram) > 0 && seg.dgram[0]>>4 == 6 {
		maxQuote = maxQuote6
	}
	q := append([]byte(nil), seg.dgram[:min(len(seg.dgram), maxQuote)]...)
	if seg.pk.Offload.Flags&buffer.NeedsCsum != 0 && len(seg.dgram) <= maxQuote {
		wire.FinishChecksum(q[seg.tcpOff:], 0, wire.TCPChecksumOffset)
	}
	return q
}

// sendResetTo sends a bare segment from id's local side to its remote one.
func (p *Protocol) sendResetTo(id fourTuple, seq, ack seqnum.Value, flags uint8) {
	pk := p.env.Pool.Get(wire.TCPMinHeaderLen)
	b := pk.Bytes()
	wire.EncodeTCP(b, &wire.TCPFields{
		SrcPort: id.local.Port(), DstPort: id.remote.Port(),
		Seq: uint32(seq), Ack: uint32(ack), Flags: flags,
	})
	src, dst := id.local.Addr(), id.remote.Addr()
	wire.SetTCPChecksum(b, src, dst)
	p.Stats.OutRsts.Inc()
	p.Stats.OutSegs.Inc()
	if nw, err := p.nets.For(dst); err == nil {
		nw.Send(pk, ip.SendParams{Src: src, Dst: dst, Proto: wire.ProtoTCP})
	} else {
		pk.Release()
	}
}
