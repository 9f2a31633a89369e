package icmp

import (
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// maxErrorLen bounds an error datagram: RFC 1812 section 4.3.2.3 quotes "as
// much of the original datagram as possible without the length of the ICMP
// datagram exceeding 576 bytes", as Linux does for hosts too.
const maxErrorLen = 576

// SendError sends an ICMP error about orig, a datagram the stack dropped,
// unless RFC 1122 section 3.2.2 forbids it or the rate limit is reached.
func (p *Protocol) SendError(orig wire.IPv4, typ, code uint8, rest uint32) {
	if !p.mayReport(orig) {
		p.Stats.OutSuppressed.Inc()
		return
	}
	// An error to the host itself (its own datagram's next hop did not
	// answer, RFC 1122 2.3.2.2) never reaches the network the limit
	// protects, and each sender must hear of its datagram: it is not
	// counted, as Linux's icmpv4_xrlim_allow spares the loopback.
	if !p.ip.IsLocal(orig.Src()) && !p.limit.Allow() {
		p.Stats.OutRateLimited.Inc()
		return
	}
	quote := min(len(orig), maxErrorLen-wire.IPv4MinHeaderLen-wire.ICMPHeaderLen)
	pk := p.env.Pool.Get(wire.ICMPHeaderLen + quote)
	b := pk.Bytes()
	copy(b[wire.ICMPHeaderLen:], orig[:quote])
	wire.EncodeICMP(b, &wire.ICMPFields{Type: typ, Code: code, Rest: rest})
	p.Stats.OutMsgs.Inc()
	switch typ {
	case wire.ICMPDestUnreach:
		p.Stats.OutDestUnreachs.Inc()
	case wire.ICMPTimeExceeded:
		p.Stats.OutTimeExcds.Inc()
	}
	sp := ip.SendParams{Dst: orig.Src(), Proto: wire.ProtoICMP}
	if p.ip.IsLocal(orig.Dst()) {
		sp.Src = orig.Dst()
	}
	if err := p.ip.Send(pk, sp); err != nil {
		p.Stats.OutErrors.Inc()
	}
}

// mayReport applies RFC 1122 section 3.2.2: no error about an ICMP error,
// a datagram to a broadcast or multicast address, a fragment other than the
// first, or a datagram whose source is not one host.
func (p *Protocol) mayReport(orig wire.IPv4) bool {
	if orig.FragmentOffset() != 0 {
		return false
	}
	dst, src := orig.Dst(), orig.Src()
	if dst.IsMulticast() || p.ip.IsBroadcast(dst) {
		return false
	}
	if src.IsUnspecified() || src.IsMulticast() || src.IsLoopback() || p.ip.IsBroadcast(src) {
		return false
	}
	if orig.Protocol() == wire.ProtoICMP {
		body := orig[orig.HeaderLen():]
		if len(body) < 1 || isError(body[0]) {
			return false
		}
	}
	return true
}

// isError reports whether an ICMP type is an error message rather than a
// query (RFC 792 types 3, 4, 5, 11, 12).
func isError(typ uint8) bool {
	switch typ {
	case wire.ICMPDestUnreach, 4, 5, wire.ICMPTimeExceeded, wire.ICMPParamProblem:
		return true
	}
	return false
}
