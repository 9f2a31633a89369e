package icmpv6

import (
	"net/netip"
	"sync"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// The echo forwarder, as ICMP's (icmp/forward.go): an echo request to a
// foreign address, which only a forwarding interface takes
// (ipv6/forward.go), goes to a hook instead of being answered by the
// stack, which would make every address on the Internet seem up. A gateway
// relays it through a host socket and answers with what that gets: the
// reply from the address pinged, an ICMPv6 error, or nothing. Echo
// requests to the host's own addresses and groups are answered as RFC 4443
// section 4.2 says (echo.go).
//
// The hook runs in the IPv6 dealer's goroutine and must not block. The
// request holds a copy of the datagram, so it is the hook's for as long as
// it likes; its methods may be called from any goroutine, at any time,
// each sending one message.

// EchoRequest is an echo request to a foreign address, as the forwarder
// hook gets it.
type EchoRequest struct {
	p *Protocol
	// Src sent the request to Dst, with the identifier Ident, the
	// sequence number Seq and the data Payload (a copy, the hook's own).
	Src, Dst   netip.Addr
	Ident, Seq uint16
	Payload    []byte
	// HopLimit and TrafficClass are the request's.
	HopLimit, TrafficClass uint8

	orig wire.IPv6 // the request's datagram, IPv6 header first, for errors
}

// Reply sends the echo reply (RFC 4443 section 4.2: the request's
// identifier, sequence number and data, type 129) from Dst to Src.
func (r *EchoRequest) Reply() error {
	p := r.p
	rt, err := p.net.Route(r.Src)
	if err != nil {
		p.Stats.OutErrors.Inc()
		return err
	}
	pk := p.env.Pool.Get(wire.ICMPv6HeaderLen + len(r.Payload))
	b := pk.Bytes()
	copy(b[wire.ICMPv6HeaderLen:], r.Payload)
	wire.EncodeICMPv6(b, &wire.ICMPv6Fields{Type: wire.ICMPv6EchoReply, Rest: wire.EchoRest(r.Ident, r.Seq)})
	return p.send(pk, ip.SendParams{Src: r.Dst, Dst: r.Src, TOS: r.TrafficClass}, rt, &p.Stats.OutEchoReplies)
}

// Error sends an ICMPv6 error of type typ and code about the request
// (wire.ICMPv6DestUnreach with wire.ICMPv6CodeAddrUnreach, ...NoRoute or
// ...AdminProhibited; wire.ICMPv6TimeExceeded), from the host's own
// address as a router on the path would (RFC 4443 section 2.2), within
// the error rate limit.
func (r *EchoRequest) Error(typ, code uint8) {
	r.p.SendError(ipv6.ICMPError{Type: typ, Code: code, Orig: r.orig})
}

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
func (p *Protocol) forwardEcho(pk *buffer.Packet, h ip.Header) {
	defer pk.Release()
	p.Stats.InEchoForeign.Inc()
	p.fwdMu.Lock()
	hook := p.fwdHook
	p.fwdMu.Unlock()
	if hook == nil {
		return
	}
	orig := wire.IPv6(append([]byte(nil), pk.Bytes()...))
	m := wire.ICMPv6(orig[h.Off:])
	r := &EchoRequest{
		p: p, Src: h.Src, Dst: h.Dst,
		Ident: m.Ident(), Seq: m.Seq(),
		Payload:  orig[h.Off+wire.ICMPv6HeaderLen:],
		HopLimit: h.TTL, TrafficClass: h.TOS,
		orig: orig,
	}
	p.Stats.EchoForwarded.Inc()
	hook(r)
}

// echoForwarder is the hook and its lock.
type echoForwarder struct {
	fwdMu   sync.Mutex
	fwdHook func(*EchoRequest)
}
