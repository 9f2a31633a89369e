package icmpv6

import (
	"fmt"
	"net/netip"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Error messages the host sends (RFC 4443 sections 2.2, 2.4 and 3) about
// datagrams the IPv6 layer or a transport dropped. The IPv6 layer has
// applied section 2.4 (e)'s rules on addresses before it calls SendError
// (ipv6/errors.go); what is left here is (e.1), no error about an error,
// the rate limit (f), the quote (c) and the source address (2.2).

// SendError sends the ICMPv6 error e describes, unless it would answer an
// ICMPv6 error message or the rate limit is reached. It is the IPv6
// layer's ipv6.ErrorSender and runs in its dealer's goroutine (or a
// transport's); it copies what it quotes of e.Orig before it returns.
func (p *Protocol) SendError(e ipv6.ICMPError) {
	out := p.outCounter(e.Type)
	if len(e.Orig) < wire.IPv6HeaderLen {
		return
	}
	// Section 2.4 (e.1): "An ICMPv6 error message MUST NOT be
	// originated as a result of receiving ... an ICMPv6 error message."
	// Informational messages (an echo request with a bad option) may be
	// answered with one, as with any other datagram.
	if aboutError(e.Orig) {
		p.Stats.OutErrorsAboutErr.Inc()
		return
	}
	// Section 2.4 (f): a token bucket, shared with ICMP's where the
	// stack says so. An error to the host itself (its own datagram's
	// next hop did not answer) never reaches the network the bucket
	// protects, and each sender must hear of its datagram: it is not
	// counted, as Linux's icmpv6_xrlim_allow spares the loopback.
	if !p.net.IsLocal(e.Orig.Src()) && !p.limit.Allow() {
		p.Stats.OutRateLimitHost.Inc()
		return
	}
	zone := ""
	if e.In != nil {
		zone = e.In.Name()
	}
	dst := zoned(e.Orig.Src(), zone)
	r, err := p.net.Route(dst)
	if err != nil {
		p.Stats.OutErrors.Inc()
		return
	}
	src := p.errorSource(e.Orig.Dst(), r)
	if !src.IsValid() {
		p.Stats.OutErrors.Inc()
		return
	}
	// Section 2.4 (c): "as much of invoking packet as possible without
	// the ICMPv6 packet exceeding the minimum IPv6 MTU", 1280 bytes.
	quote := min(len(e.Orig), wire.ICMPv6MaxErrorQuote)
	pk := p.env.Pool.Get(wire.ICMPv6HeaderLen + quote)
	b := pk.Bytes()
	copy(b[wire.ICMPv6HeaderLen:], e.Orig[:quote])
	wire.EncodeICMPv6(b, &wire.ICMPv6Fields{Type: e.Type, Code: e.Code, Rest: e.Param})
	p.send(pk, ip.SendParams{Src: src, Dst: dst}, r, out)
}

// errorSource picks the source of an error about a datagram that was sent
// to origDst (section 2.2): that address when it is one of the host's
// unicast addresses (a); otherwise, for a datagram to a group or to an
// address the host took without holding it, the address the route to the
// error's destination would use, one of the outgoing interface's where
// the destination is scoped to the link (b, d).
func (p *Protocol) errorSource(origDst netip.Addr, r ip.Route) netip.Addr {
	if !origDst.IsMulticast() && p.net.IsLocal(origDst) {
		return origDst
	}
	return r.Src
}

// outCounter returns the counter of sent errors of type typ.
func (p *Protocol) outCounter(typ uint8) *stats.Counter {
	s := &p.Stats
	switch typ {
	case wire.ICMPv6DestUnreach:
		return &s.OutDestUnreachs
	case wire.ICMPv6PacketTooBig:
		return &s.OutPktTooBigs
	case wire.ICMPv6TimeExceeded:
		return &s.OutTimeExcds
	case wire.ICMPv6ParamProblem:
		return &s.OutParmProblems
	}
	panic(fmt.Sprintf("icmpv6: SendError of type %d, which is no error RFC 4443 defines", typ))
}

// aboutError reports whether orig, the datagram an error would be about,
// is an ICMPv6 error message (RFC 4443 section 2.1: a type with the high
// bit clear), or might be: an ICMPv6 message whose type the datagram
// does not show (a later fragment, a truncated one) is taken as one,
// since an error about an error is what section 2.4 (e.1) exists to
// prevent, and a chain too broken to follow is taken as none (it is the
// chain a Parameter Problem is about).
func aboutError(orig wire.IPv6) bool {
	u := upperLayer(orig)
	switch {
	case u.proto != wire.ProtoICMPv6:
		return false
	case u.laterFragment || u.off >= len(orig):
		return true
	}
	return wire.ICMPv6(orig[u.off:]).IsError()
}
