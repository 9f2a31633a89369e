package icmpv6

import (
	"fmt"
	"math"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// Error messages received (RFC 4443 sections 2.4 (d) and 3): each quotes
// a datagram this host sent; the transport of that datagram gets it as an
// ip.ICMPError, the form both families' errors take, and a Packet Too Big
// lowers the path MTU to its destination (RFC 8201).

// echoQuoteLen is what an error must quote of an upper-layer header for a
// transport to use it: ports and TCP's sequence number, or an echo
// request's identifier and sequence number (ip.ICMPError.Transport).
const echoQuoteLen = 8

// received deals with an error message m that came with h.
func (p *Protocol) received(m wire.ICMPv6, h ip.Header) {
	q := m.Payload()
	if len(q) < wire.IPv6HeaderLen || q[0]>>4 != 6 {
		p.inError(&p.Stats.InBadQuotes)
		return
	}
	quoted := wire.IPv6(q)
	zone := zoneOf(h)
	src, dst := zoned(quoted.Src(), zone), zoned(quoted.Dst(), zone)
	// Only errors about our own datagrams are believed: one quoting
	// another host's would have us lower the path MTU of flows that are
	// not ours, or end connections we do not have (RFC 5927 section
	// 4.1 asks a transport to check what it can; this is the check the
	// network layer can make).
	if !p.net.IsLocal(src) {
		p.Stats.InErrorsForeign.Inc()
		return
	}
	kind, _ := ErrorKindOf(m.Type(), m.Code())
	e := ip.ICMPError{
		Kind: kind, Src: src, Dst: dst,
		QuotedLen: wire.IPv6HeaderLen + quoted.PayloadLen(),
		DF:        true, // routers never fragment IPv6 (RFC 8200 section 5)
		Local:     p.net.IsLocal(h.Src),
	}
	if kind == ip.PacketTooBig {
		// RFC 8201 section 4: a node "MUST NOT reduce its estimate of
		// the Path MTU below the IPv6 minimum link MTU", and a report
		// below it counts as 1280; the IPv6 layer never raises a path
		// MTU on a report. The whole datagram need not be quoted for
		// that: a later fragment's too-big is news of the path too.
		e.MTU = int(max(min(m.MTU(), math.MaxInt32), wire.IPv6MinMTU))
		p.net.UpdatePMTU(dst, e.MTU, e.QuotedLen)
	}
	u := upperLayer(q)
	if u.truncated || u.laterFragment || len(q)-u.off < echoQuoteLen {
		// Section 2.4 (d): where the upper-layer protocol cannot be
		// found, the message "is silently dropped after any IPv6-layer
		// processing", the path MTU above.
		p.inError(&p.Stats.InBadQuotes)
		return
	}
	e.Transport = q[u.off:]
	if u.proto == wire.ProtoICMPv6 {
		p.echoFailed(m, e)
		return
	}
	eh, ok := p.net.Transport(u.proto).(ip.ErrorHandler)
	if !ok {
		p.Stats.InErrorsNoHandler.Inc()
		return
	}
	p.Stats.InErrorsDelivered.Inc()
	eh.HandleICMPError(e)
}

// echoFailed ends the ping whose echo request an error quotes, with the
// errno Linux gives its sockets for the error (ip.ErrorKind.Errno).
func (p *Protocol) echoFailed(m wire.ICMPv6, e ip.ICMPError) {
	req := wire.ICMPv6(e.Transport)
	if req.Type() != wire.ICMPv6EchoRequest {
		p.Stats.InErrorsNoHandler.Inc()
		return
	}
	err := fmt.Errorf("%v (ICMPv6 type %d code %d): %w", e.Kind, m.Type(), m.Code(), e.Kind.Errno())
	if e.Kind == ip.PacketTooBig {
		err = fmt.Errorf("%v, MTU %d: %w", e.Kind, e.MTU, e.Kind.Errno())
	}
	if p.pings.Fail(req.Ident(), req.Seq(), err) {
		p.Stats.InErrorsDelivered.Inc()
	} else {
		p.Stats.InErrorsNoHandler.Inc()
	}
}

// ErrorKindOf is the kind of error an ICMPv6 message of type typ and code
// reports (RFC 4443 section 3), for the transports (ip.ICMPError), and
// false for a type that is no error about a datagram. Codes of one meaning
// map to one kind, as Linux's icmpv6_err_convert groups them: beyond the
// scope of the source and address unreachable are the host's; a source
// address that failed policy and a reject route are a filter's refusal.
func ErrorKindOf(typ, code uint8) (ip.ErrorKind, bool) {
	switch typ {
	case wire.ICMPv6DestUnreach:
		switch code {
		case wire.ICMPv6CodeNoRoute:
			return ip.NetUnreachable, true
		case wire.ICMPv6CodeAdminProhibited, wire.ICMPv6CodeSrcPolicyFailed, wire.ICMPv6CodeRejectRoute:
			return ip.AdminProhibited, true
		case wire.ICMPv6CodePortUnreach:
			return ip.PortUnreachable, true
		}
		return ip.HostUnreachable, true
	case wire.ICMPv6PacketTooBig:
		return ip.PacketTooBig, true
	case wire.ICMPv6TimeExceeded:
		if code == wire.ICMPv6CodeReassemblyTime {
			return ip.ReassemblyTimeout, true
		}
		return ip.TimeExceeded, true
	case wire.ICMPv6ParamProblem:
		if code == wire.ICMPv6CodeUnrecognizedNext {
			// The next header the quoted pointer names is a protocol
			// the destination does not run: Linux's ECONNREFUSED.
			return ip.ProtoUnreachable, true
		}
		return ip.ParameterProblem, true
	}
	return 0, false
}
