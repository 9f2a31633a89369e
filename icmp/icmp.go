// Package icmp is GoNet's Internet Control Message Protocol for IPv4
// (RFC 792), with the host rules of RFC 1122 section 3.2.2: it answers echo
// requests, reports errors for the layers that drop datagrams (rate-limited,
// as RFC 1812 section 4.3.2.8 asks), hands received errors to the transport
// they concern, and runs the stack's own ping client (ping.go).
package icmp

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/ping"
	"github.com/gonetstack/gonet/ratelimit"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Config tunes ICMP. Zero fields take the defaults.
type Config struct {
	// ErrorRate is the sustained number of error messages per second
	// (1000, as Linux's icmp_msgs_per_sec); ErrorBurst is the bucket
	// depth (50, as icmp_msgs_burst).
	ErrorRate  float64
	ErrorBurst float64
	// Limiter, when set, is the bucket errors are taken from instead of
	// one of ErrorRate and ErrorBurst: a stack may give ICMP and ICMPv6
	// one, as Linux bounds both families' errors together.
	Limiter *ratelimit.Bucket
	// EchoBroadcast answers echo requests sent to a broadcast address
	// or to a multicast group the host is a member of (224.0.0.1 among
	// them); off by default, as Linux's icmp_echo_ignore_broadcasts,
	// which covers both.
	EchoBroadcast bool
}

// Stats are the ICMP counters, after the SNMP MIB's icmp group (RFC 4293).
type Stats struct {
	InMsgs            stats.Counter
	InErrors          stats.Counter // too short
	InCsumErrors      stats.Counter
	InEchos           stats.Counter
	InEchoReps        stats.Counter
	InDestUnreachs    stats.Counter
	InTimeExcds       stats.Counter
	InRedirects       stats.Counter // taken or refused by the IPv4 layer (ipv4's Redirects counters)
	InOther           stats.Counter
	InEchoIgnored     stats.Counter // echo to broadcast, not answered
	InEchoForeign     stats.Counter // echo to a foreign address (forward.go)
	EchoForwarded     stats.Counter // of those, handed to the echo forwarder hook
	InEchoRepUnknown  stats.Counter // reply matching no outstanding ping
	InEchoRepCorrupt  stats.Counter // reply whose data differs from the request's
	InErrorsDelivered stats.Counter // errors handed to a transport
	OutMsgs           stats.Counter
	OutEchos          stats.Counter
	OutEchoReps       stats.Counter
	OutDestUnreachs   stats.Counter
	OutTimeExcds      stats.Counter
	OutRateLimited    stats.Counter
	OutSuppressed     stats.Counter // errors RFC 1122 section 3.2.2 forbids sending
	OutErrors         stats.Counter // send failed (no route)
	PingsOutstanding  stats.Gauge
}

// Protocol is ICMP on one stack.
type Protocol struct {
	cfg Config
	env *env.Env
	ip  *ipv4.Protocol

	limit *ratelimit.Bucket // errors sent (RFC 1812 section 4.3.2.8)

	pings *ping.Client // this stack's ping client (ping.go)

	echoForwarder // the hook for echo requests to foreign addresses (forward.go)

	Stats Stats
}

// New returns ICMP over ip, registered as its protocol 1 and as its error
// sender.
func New(ip *ipv4.Protocol, cfg Config, e *env.Env) *Protocol {
	if cfg.ErrorRate == 0 {
		cfg.ErrorRate = 1000
	}
	if cfg.ErrorBurst == 0 {
		cfg.ErrorBurst = 50
	}
	p := &Protocol{
		cfg:   cfg,
		env:   e,
		ip:    ip,
		limit: cfg.Limiter,
	}
	p.pings = ping.New("icmp", uint16(e.Rand.Uint32()), e.Clock, p.sendEcho, ping.Counters{
		Outstanding: &p.Stats.PingsOutstanding,
		Unknown:     &p.Stats.InEchoRepUnknown,
		Corrupt:     &p.Stats.InEchoRepCorrupt,
	})
	if p.limit == nil {
		p.limit = ratelimit.New(cfg.ErrorRate, cfg.ErrorBurst, e.Clock)
	}
	ip.Register(wire.ProtoICMP, p)
	ip.SetErrorSender(p)
	return p
}

// Close fails outstanding pings and waits for their goroutines.
func (p *Protocol) Close() { p.pings.Close() }

// HandleIP takes one ICMP message from the IPv4 dealer.
func (p *Protocol) HandleIP(pk *buffer.Packet, h ip.Header) {
	p.Stats.InMsgs.Inc()
	body := pk.Bytes()[h.Off:]
	if len(body) < wire.ICMPHeaderLen {
		p.Stats.InErrors.Inc()
		pk.Release()
		return
	}
	m, ok := wire.ParseICMP(body)
	if !ok {
		p.Stats.InCsumErrors.Inc()
		pk.Release()
		return
	}
	switch m.Type() {
	case wire.ICMPEchoRequest:
		p.Stats.InEchos.Inc()
		if !p.ip.IsHostDst(h.Dst) {
			p.forwardEcho(pk, h, m)
			return
		}
		p.echoReply(pk, h)
		return
	case wire.ICMPEchoReply:
		p.Stats.InEchoReps.Inc()
		p.pings.Reply(m.Ident(), m.Seq(), h.Src, m.Payload())
	case wire.ICMPDestUnreach:
		p.Stats.InDestUnreachs.Inc()
		p.deliverError(m, h)
	case wire.ICMPTimeExceeded:
		p.Stats.InTimeExcds.Inc()
		p.deliverError(m, h)
	case wire.ICMPParamProblem:
		p.Stats.InOther.Inc()
		p.deliverError(m, h)
	case wire.ICMPRedirect:
		p.Stats.InRedirects.Inc()
		p.redirect(m, h)
	default:
		// RFC 1122 section 3.2.2: "If an ICMP message of unknown type is
		// received, it MUST be silently discarded."
		p.Stats.InOther.Inc()
	}
	pk.Release()
}

// echoReply turns an echo request into its reply in place (RFC 792: "the
// source and destination addresses are simply reversed, the type code
// changed to 0, and the checksum recomputed") and sends it. The data is
// returned whole, as RFC 1122 section 3.2.2.6 requires, and so are the
// request's Record Route and Timestamp options.
func (p *Protocol) echoReply(pk *buffer.Packet, h ip.Header) {
	src, dst, tos := h.Src, h.Dst, h.TOS
	group := p.ip.IsBroadcast(dst) || dst.IsMulticast()
	if group && !p.cfg.EchoBroadcast {
		p.Stats.InEchoIgnored.Inc()
		pk.Release()
		return
	}
	var opts []byte
	if h.Off > wire.IPv4MinHeaderLen {
		// RFC 1122 section 3.2.2.6: Record Route and Timestamp come
		// back in the reply, with the entries the IPv4 layer made as
		// the request arrived and makes again as the reply leaves.
		opts = wire.IPv4(pk.Bytes()[:h.Off]).ReflectedOptions(nil)
	}
	pk.TrimFront(h.Off)
	m := pk.Bytes()
	// Incremental update (RFC 1624): only the type byte changes.
	old := uint16(m[0])<<8 | uint16(m[1])
	m[0] = wire.ICMPEchoReply
	sum := uint32(^(uint16(m[2])<<8 | uint16(m[3]))) + uint32(^old) + uint32(uint16(m[0])<<8|uint16(m[1]))
	c := ^wire.Fold(sum)
	m[2], m[3] = byte(c>>8), byte(c)
	sp := ip.SendParams{Dst: src, Proto: wire.ProtoICMP, TOS: tos, Options: opts}
	if !group {
		// The reply to a broadcast or a group comes from our own
		// address (RFC 1122 section 3.2.2.6), which the route picks.
		sp.Src = dst
	}
	p.Stats.OutMsgs.Inc()
	p.Stats.OutEchoReps.Inc()
	if err := p.ip.Send(pk, sp); err != nil {
		p.Stats.OutErrors.Inc()
	}
}

// redirect hands a Redirect (RFC 792: codes 0 to 3, the new gateway in the
// rest of the header, the datagram it is about quoted) to the IPv4 layer,
// which decides whether to take it (RFC 1122 section 3.2.2.2). A malformed
// one is counted with the errors.
func (p *Protocol) redirect(m wire.ICMP, h ip.Header) {
	q := m.Payload()
	if m.Code() > 3 || len(q) < wire.IPv4MinHeaderLen || q[0]>>4 != 4 {
		p.Stats.InErrors.Inc()
		return
	}
	gw := m.RestOfHeader()
	p.ip.Redirect(h.In, h.Src, wire.IPv4(q).Dst(), netip.AddrFrom4([4]byte{byte(gw >> 24), byte(gw >> 16), byte(gw >> 8), byte(gw)}))
}

// deliverError hands a received error to the transport of the datagram it
// quotes (RFC 1122 section 3.2.2: "MUST be passed to the transport layer"),
// in the form both families' errors take (ip.ICMPError).
func (p *Protocol) deliverError(m wire.ICMP, h ip.Header) {
	q := m.Payload()
	if len(q) < wire.IPv4MinHeaderLen || q[0]>>4 != 4 {
		p.Stats.InErrors.Inc()
		return
	}
	hl := int(q[0]&0xf) * 4
	if hl < wire.IPv4MinHeaderLen || len(q) < hl+8 {
		p.Stats.InErrors.Inc()
		return
	}
	quoted := wire.IPv4(q)
	proto := quoted.Protocol()
	if proto == wire.ProtoICMP {
		p.pingFailed(m, q[hl:])
		return
	}
	eh, ok := p.ip.Transport(proto).(ip.ErrorHandler)
	if !ok {
		return
	}
	kind, _ := ipv4.ErrorKindOf(m.Type(), m.Code())
	e := ip.ICMPError{
		Kind: kind, Src: quoted.Src(), Dst: quoted.Dst(),
		QuotedLen: quoted.TotalLen(), DF: quoted.DontFragment(), Transport: q[hl:],
		Local: p.ip.IsLocal(h.Src),
	}
	if kind == ip.PacketTooBig {
		// RFC 1191 section 4: the next-hop MTU is the low 16 bits of the
		// rest-of-header word.
		e.MTU = int(m.RestOfHeader() & 0xffff)
	}
	p.Stats.InErrorsDelivered.Inc()
	eh.HandleICMPError(e)
}
