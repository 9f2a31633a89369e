package ipv6

import (
	"fmt"
	"net/netip"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// ICMPv6 errors about datagrams the layer drops (RFC 4443 section 3): the
// layer says which and why; the ICMPv6 package builds, rate-limits and
// sends them, through the ErrorSender interface, so that ipv6 does not
// import it.

// ICMPError describes an ICMPv6 error message to send about a datagram.
type ICMPError struct {
	Type, Code uint8
	// Param is the message's 32-bit field: the Pointer of a Parameter
	// Problem (RFC 4443 section 3.4), the MTU of a Packet Too Big
	// (section 3.2), zero for the others.
	Param uint32
	// Orig is the offending datagram from its IPv6 header on; the sender
	// copies what it quotes (section 2.4 (c)) before SendError returns.
	Orig wire.IPv6
	// In is the interface the datagram came in on, nil when the host sent
	// it to itself: an error to a link-local source goes back out of it.
	In *Interface
}

// ErrorSender sends ICMPv6 errors; the ICMPv6 package implements it. The
// IPv6 layer has applied RFC 4443 section 2.4 (e)'s rules on addresses
// before it calls SendError (see sendError); the sender applies the rest:
// no error about an ICMPv6 error message (e.1), and the rate limit (f).
type ErrorSender interface {
	SendError(e ICMPError)
}

// ReportError sends the ICMPv6 error for kind about orig, a datagram from
// its IPv6 header on, for transports that drop one (UDP's port
// unreachable, a forwarder's refusal), under the rules of the layer's own
// errors (sendError). The error goes back out of the interface of the
// address orig was sent to: a transport knows no more of where it came
// in, and for a link-local destination that is the link it came on.
func (p *Protocol) ReportError(orig []byte, kind ip.ErrorKind) {
	h, verr := wire.ParseIPv6(orig)
	if verr != wire.IPv6OK {
		return
	}
	typ, code := ICMPTypeCode(kind)
	e := ICMPError{Type: typ, Code: code, Orig: h, In: p.tables.load().ifaceOf(h.Dst())}
	switch kind {
	case ip.ProtoUnreachable:
		// The pointer names the Next Header field that named the
		// protocol (RFC 8200 section 4, as deliver's own errors).
		e.Param = uint32(WalkChain(h).NextAt)
	case ip.PacketTooBig:
		// A transport has no next-hop MTU to tell; the least every link
		// carries is a safe one (RFC 8200 section 5).
		e.Param = wire.IPv6MinMTU
	}
	p.sendError(e)
}

// ICMPTypeCode is the ICMPv6 type and code (RFC 4443 section 3) that
// report kind. A protocol no transport takes is Parameter Problem code 1,
// whose pointer (the Next Header field that named it) the caller supplies.
func ICMPTypeCode(kind ip.ErrorKind) (typ, code uint8) {
	switch kind {
	case ip.NetUnreachable:
		return wire.ICMPv6DestUnreach, wire.ICMPv6CodeNoRoute
	case ip.HostUnreachable:
		return wire.ICMPv6DestUnreach, wire.ICMPv6CodeAddrUnreach
	case ip.ProtoUnreachable:
		return wire.ICMPv6ParamProblem, wire.ICMPv6CodeUnrecognizedNext
	case ip.PortUnreachable:
		return wire.ICMPv6DestUnreach, wire.ICMPv6CodePortUnreach
	case ip.AdminProhibited:
		return wire.ICMPv6DestUnreach, wire.ICMPv6CodeAdminProhibited
	case ip.PacketTooBig:
		return wire.ICMPv6PacketTooBig, 0
	case ip.TimeExceeded:
		return wire.ICMPv6TimeExceeded, wire.ICMPv6CodeHopLimitExceeded
	case ip.ReassemblyTimeout:
		return wire.ICMPv6TimeExceeded, wire.ICMPv6CodeReassemblyTime
	case ip.ParameterProblem:
		return wire.ICMPv6ParamProblem, wire.ICMPv6CodeErroneousHeader
	}
	panic(fmt.Sprintf("ipv6: no ICMPv6 message for %v", kind))
}

// sendError asks for an error unless RFC 4443 section 2.4 (e) forbids it:
// none about a datagram to a multicast address, except Packet Too Big and
// Parameter Problem code 2 (e.3, e.4: the exceptions that let path MTU
// discovery and option negotiation work for multicast); none about one
// from an address that does not name a single node, the unspecified or a
// multicast address (e.6). A datagram sent to a link-layer multicast or
// broadcast address (e.2) is not told apart from unicast here: the NIC
// does not mark it, and the addresses the layer accepts with a unicast
// destination are its own.
func (p *Protocol) sendError(e ICMPError) {
	if p.errors == nil {
		return
	}
	if !mayAnswer(e) {
		p.Stats.ErrorsSuppressed.Inc()
		return
	}
	p.errors.SendError(e)
}

func mayAnswer(e ICMPError) bool {
	src := e.Orig.Src()
	if src.IsUnspecified() || src.IsMulticast() {
		return false
	}
	if e.Orig.Dst().IsMulticast() {
		return e.Type == wire.ICMPv6PacketTooBig ||
			(e.Type == wire.ICMPv6ParamProblem && ParamProblem{Code: e.Code}.ToMulticast())
	}
	return true
}

// zoned returns a with the name of the interface in as its zone when a is
// scoped to a link (RFC 4007 section 6): a link-local address, or a
// multicast group of interface- or link-local scope. The loopback address,
// which has a single interface, stays without. Every datagram received
// has both its addresses zoned, so the first byte turns away the global
// unicast addresses (neither fe80::/10 nor ff00::/8) before AddrScope.
func zoned(a netip.Addr, in *Interface) netip.Addr {
	if b := a.As16(); in != nil && (b[0] == 0xfe || b[0] == 0xff) && AddrScope(a).linkScoped() {
		return a.WithZone(in.name)
	}
	return a
}

var loopbackAddr = netip.IPv6Loopback()
