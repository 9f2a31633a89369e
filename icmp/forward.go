package icmp

import (
	"net/netip"
	"sync"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// The echo forwarder: an echo request to a foreign address, which only a
// forwarding interface takes (ipv4/forward.go), goes to a hook instead of
// being answered by the stack, which would make every address on the
// Internet seem up. A gateway relays the request through a host ping socket
// and answers with what that gets: the reply from the address pinged, an
// ICMP error, or nothing. Echo requests to the host's own addresses are
// answered as before (RFC 792, RFC 1122 section 3.2.2.6).
//
// Goroutines. The hook runs in the IPv4 dealer's goroutine and must not
// block: it hands the request to a goroutine of its own. The request holds
// a copy of the datagram, so it is the hook's for as long as it likes; its
// methods may be called from any goroutine, at any time, each sending one
// message.

// EchoRequest is an echo request to a foreign address, as the forwarder
// hook gets it.
type EchoRequest struct {
	p *Protocol
	// Src sent the request to Dst, with the identifier Ident, the
	// sequence number Seq and the data Payload (a copy, the hook's own).
	Src, Dst   netip.Addr
	Ident, Seq uint16
	Payload    []byte
	// TTL and TOS are the request's.
	TTL, TOS uint8

	orig wire.IPv4 // the request's datagram, IP header first, for errors
}

// Reply sends the echo reply (RFC 792: the request's identifier, sequence
// number and data, type 0) from Dst to Src.
func (r *EchoRequest) Reply() error {
	p := r.p
	pk := p.env.Pool.Get(wire.ICMPHeaderLen + len(r.Payload))
	b := pk.Bytes()
	copy(b[wire.ICMPHeaderLen:], r.Payload)
	wire.EncodeICMP(b, &wire.ICMPFields{Type: wire.ICMPEchoReply, Rest: wire.EchoRest(r.Ident, r.Seq)})
	p.Stats.OutMsgs.Inc()
	p.Stats.OutEchoReps.Inc()
	err := p.ip.Send(pk, ip.SendParams{Src: r.Dst, Dst: r.Src, Proto: wire.ProtoICMP, TOS: r.TOS})
	if err != nil {
		p.Stats.OutErrors.Inc()
	}
	return err
}

// Error sends an ICMP error of type typ and code about the request (for a
// destination unreachable, wire.ICMPDestUnreach with wire.ICMPCodeHostUnrch
// or wire.ICMPCodeNetUnrch; wire.ICMPTimeExceeded), from the host's own
// address as a router on the path would, within ICMP's rate limit.
func (r *EchoRequest) Error(typ, code uint8) { r.p.SendError(r.orig, typ, code, 0) }

// SetEchoForwarder sets the hook offered echo requests to foreign
// addresses (nil: none, they are dropped and counted in InEchoForeign
// without an EchoForwarded).
func (p *Protocol) SetEchoForwarder(hook func(*EchoRequest)) {
	p.fwdMu.Lock()
	p.fwdHook = hook
	p.fwdMu.Unlock()
}

// forwardEcho offers an echo request to a foreign address to the hook. It
// takes ownership of pk.
func (p *Protocol) forwardEcho(pk *buffer.Packet, h ip.Header, m wire.ICMP) {
	defer pk.Release()
	p.Stats.InEchoForeign.Inc()
	p.fwdMu.Lock()
	hook := p.fwdHook
	p.fwdMu.Unlock()
	if hook == nil {
		return
	}
	orig := wire.IPv4(append([]byte(nil), pk.Bytes()...))
	r := &EchoRequest{
		p: p, Src: h.Src, Dst: h.Dst,
		Ident: m.Ident(), Seq: m.Seq(),
		Payload: orig[h.Off+wire.ICMPHeaderLen:],
		TTL:     h.TTL, TOS: h.TOS,
		orig: orig[:min(len(orig), maxErrorLen-wire.IPv4MinHeaderLen-wire.ICMPHeaderLen)],
	}
	p.Stats.EchoForwarded.Inc()
	hook(r)
}

// echoForwarder is the hook and its lock.
type echoForwarder struct {
	fwdMu   sync.Mutex
	fwdHook func(*EchoRequest)
}
