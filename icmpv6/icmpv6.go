// Package icmpv6 is GoNet's Internet Control Message Protocol for IPv6
// (RFC 4443), beside package icmp and in its shape: it answers echo
// requests (echo.go), sends the error messages the IPv6 layer and the
// transports ask for, rate-limited (errors.go), hands the errors it
// receives to the transport of the datagram they quote and path MTU
// discovery the Packet Too Big messages (received.go), runs the stack's
// ping client over IPv6 (ping.go). Neighbour discovery's and MLD's
// messages are not its: they belong to the link they came in on, and the
// IPv6 layer hands them to that interface's neighbour discovery (package
// ndp) before ICMPv6 sees them.
//
// It runs in the IPv6 dealer's goroutine: HandleIP is the ip.Transport
// of next header 58, and nothing it does there blocks.
package icmpv6

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ping"
	"github.com/gonetstack/gonet/ratelimit"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Config tunes ICMPv6. Zero fields take the defaults.
type Config struct {
	// ErrorRate is the sustained number of error messages per second
	// and ErrorBurst the bucket's depth (RFC 4443 section 2.4 (f)): 1000
	// and 50, as Linux's icmp_msgs_per_sec and icmp_msgs_burst, which
	// bound ICMPv6 too.
	ErrorRate  float64
	ErrorBurst float64
	// Limiter, when set, is the bucket errors are taken from instead of
	// one of ErrorRate and ErrorBurst: a stack may give ICMP and ICMPv6
	// one, as Linux does.
	Limiter *ratelimit.Bucket
	// IgnoreEchoMulticast leaves echo requests sent to a multicast group
	// unanswered. RFC 4443 section 4.2 says a reply SHOULD be sent, and
	// Linux does by default (net.ipv6.icmp.echo_ignore_multicast is 0
	// since it was added, commit 03f1eccc7a69), so the zero value
	// answers.
	IgnoreEchoMulticast bool
}

func (c *Config) setDefaults() {
	if c.ErrorRate == 0 {
		c.ErrorRate = 1000
	}
	if c.ErrorBurst == 0 {
		c.ErrorBurst = 50
	}
}

// Stats are the ICMPv6 counters, named as Linux's /proc/net/snmp6 names
// its Icmp6 group (RFC 4293's icmpStatsTable and icmpMsgStatsTable for
// IPv6), without the Icmp6 prefix, with finer counters beside those that
// would hide a reason.
type Stats struct {
	InMsgs       stats.Counter // every message, the bad ones included
	InErrors     stats.Counter // bad messages: every reason below, counted once more there
	InCsumErrors stats.Counter
	InTooShort   stats.Counter // shorter than the 8-byte header
	// Errors whose quote does not reach the IPv6 header, or for one the
	// transport needs, its first 8 bytes (RFC 4443 section 2.4 (d)).
	InBadQuotes stats.Counter

	InDestUnreachs           stats.Counter
	InPktTooBigs             stats.Counter
	InTimeExcds              stats.Counter
	InParmProblems           stats.Counter
	InEchos                  stats.Counter
	InEchoReplies            stats.Counter
	InGroupMembQueries       stats.Counter
	InGroupMembResponses     stats.Counter
	InGroupMembReductions    stats.Counter
	InRouterSolicits         stats.Counter
	InRouterAdvertisements   stats.Counter
	InNeighborSolicits       stats.Counter
	InNeighborAdvertisements stats.Counter
	InRedirects              stats.Counter
	InMLDv2Reports           stats.Counter

	InUnknownErrors stats.Counter // error types RFC 4443 does not define, dropped
	InUnknownInfos  stats.Counter // informational types no one handles (section 2.4 (a))
	InNoHandler     stats.Counter // neighbour discovery or MLD on an interface without neighbour discovery
	InEchoIgnored   stats.Counter // echo to a multicast group, not answered (IgnoreEchoMulticast)
	InEchoForeign   stats.Counter // echo to a foreign address (forward.go)
	EchoForwarded   stats.Counter // of those, handed to the echo forwarder hook

	InEchoRepUnknown  stats.Counter // reply matching no outstanding ping
	InEchoRepCorrupt  stats.Counter // reply whose data differs from the request's
	InErrorsForeign   stats.Counter // errors quoting a datagram whose source is not ours
	InErrorsNoHandler stats.Counter // errors quoting a protocol that takes none
	InErrorsDelivered stats.Counter // errors handed to a transport or a ping

	OutMsgs           stats.Counter
	OutErrors         stats.Counter // messages not sent: no route, no source
	OutDestUnreachs   stats.Counter
	OutPktTooBigs     stats.Counter
	OutTimeExcds      stats.Counter
	OutParmProblems   stats.Counter
	OutEchos          stats.Counter
	OutEchoReplies    stats.Counter
	OutRateLimitHost  stats.Counter // errors the rate limit held back (section 2.4 (f))
	OutErrorsAboutErr stats.Counter // errors not sent about an ICMPv6 error (section 2.4 (e.1))

	PingsOutstanding stats.Gauge
}

// Network is what ICMPv6 needs of the IPv6 layer: the part of ip.Network
// it uses, with the lookup of a transport by next header and the
// registration of the error sender; *ipv6.Protocol is one.
type Network interface {
	// Register binds a transport to its next header.
	Register(proto uint8, t ip.Transport)
	// Transport returns the transport bound to proto, or nil.
	Transport(proto uint8) ip.Transport
	// SetErrorSender sets who sends the layer's ICMPv6 errors.
	SetErrorSender(e ipv6.ErrorSender)
	// Route finds how to reach dst and the source address to use.
	Route(dst netip.Addr) (ip.Route, error)
	// SendRoute sends pkt, an ICMPv6 message, on a route Route found.
	// It takes ownership of pkt.
	SendRoute(pkt *buffer.Packet, sp ip.SendParams, r ip.Route) error
	// IsLocal reports whether a is one of the host's addresses.
	IsLocal(a netip.Addr) bool
	// IsHostDst reports whether a datagram to a is for the host itself,
	// rather than for a foreign address a forwarding interface took.
	IsHostDst(a netip.Addr) bool
	// UpdatePMTU takes a validated Packet Too Big report about a
	// datagram of quotedLen bytes to dst.
	UpdatePMTU(dst netip.Addr, mtu, quotedLen int) int
}

// Protocol is ICMPv6 on one stack.
type Protocol struct {
	cfg           Config
	env           *env.Env
	net           Network
	limit         *ratelimit.Bucket // errors sent (RFC 4443 section 2.4 (f))
	pings         *ping.Client      // this stack's ping client over IPv6 (ping.go)
	echoForwarder                   // the hook for echo requests to foreign addresses (forward.go)

	Stats Stats
}

// New returns ICMPv6 over n, registered as its next header 58 and its
// error sender.
func New(n Network, cfg Config, e *env.Env) *Protocol {
	cfg.setDefaults()
	p := &Protocol{cfg: cfg, env: e, net: n, limit: cfg.Limiter}
	if p.limit == nil {
		p.limit = ratelimit.New(cfg.ErrorRate, cfg.ErrorBurst, e.Clock)
	}
	p.pings = ping.New("icmpv6", uint16(e.Rand.Uint32()), e.Clock, p.sendEcho, ping.Counters{
		Outstanding: &p.Stats.PingsOutstanding,
		Unknown:     &p.Stats.InEchoRepUnknown,
		Corrupt:     &p.Stats.InEchoRepCorrupt,
	})
	n.Register(wire.ProtoICMPv6, p)
	n.SetErrorSender(p)
	return p
}

// Close fails outstanding pings and waits for their goroutines.
func (p *Protocol) Close() { p.pings.Close() }

// MLD's message types (RFC 2710 section 3, RFC 3810 section 5), which
// package wire will name once neighbour discovery's branch brings them.
const (
	typeMLDQuery    = 130
	typeMLDv1Report = 131
	typeMLDv1Done   = 132
	typeMLDv2Report = 143
)

// HandleIP takes one ICMPv6 message from the IPv6 dealer (RFC 4443 section
// 2): it checks the length and the checksum over the pseudo-header
// (section 2.3), counts it by type, and deals with it.
func (p *Protocol) HandleIP(pk *buffer.Packet, h ip.Header) {
	p.Stats.InMsgs.Inc()
	b := pk.Bytes()
	if h.Off > len(b) || len(b)-h.Off < wire.ICMPv6HeaderLen {
		p.inError(&p.Stats.InTooShort)
		pk.Release()
		return
	}
	m := wire.ICMPv6(b[h.Off:])
	if !pk.Offload.ChecksumVerified() && !m.ChecksumValid(h.Src, h.Dst) {
		p.inError(&p.Stats.InCsumErrors)
		pk.Release()
		return
	}
	typ := m.Type()
	if c := p.inCounter(typ); c != nil {
		c.Inc()
	}
	switch typ {
	case wire.ICMPv6EchoRequest:
		if !p.net.IsHostDst(h.Dst) {
			p.forwardEcho(pk, h)
			return
		}
		p.echoReply(pk, h)
		return
	case wire.ICMPv6EchoReply:
		p.pings.Reply(m.Ident(), m.Seq(), h.Src, m.Payload())
	case wire.ICMPv6DestUnreach, wire.ICMPv6PacketTooBig, wire.ICMPv6TimeExceeded, wire.ICMPv6ParamProblem:
		p.received(m, h)
	default:
		if typ < 128 {
			// Section 2.4 (b) would pass an error of unknown type to
			// the transport; the transports understand the kinds of
			// ip.ErrorKind only, which no unknown type maps to.
			p.Stats.InUnknownErrors.Inc()
			break
		}
		if isNDOrMLD(typ) {
			// Only on an interface without neighbour discovery: on one
			// with it, the IPv6 layer hands these to it.
			p.Stats.InNoHandler.Inc()
		} else {
			// Section 2.4 (a): "If an ICMPv6 informational message of
			// unknown type is received, it MUST be silently
			// discarded."
			p.Stats.InUnknownInfos.Inc()
		}
	}
	pk.Release()
}

// inError counts a bad message under its reason.
func (p *Protocol) inError(reason *stats.Counter) {
	p.Stats.InErrors.Inc()
	reason.Inc()
}

// inCounter returns the counter of received messages of type typ, nil for
// a type without one.
func (p *Protocol) inCounter(typ uint8) *stats.Counter {
	s := &p.Stats
	switch typ {
	case wire.ICMPv6DestUnreach:
		return &s.InDestUnreachs
	case wire.ICMPv6PacketTooBig:
		return &s.InPktTooBigs
	case wire.ICMPv6TimeExceeded:
		return &s.InTimeExcds
	case wire.ICMPv6ParamProblem:
		return &s.InParmProblems
	case wire.ICMPv6EchoRequest:
		return &s.InEchos
	case wire.ICMPv6EchoReply:
		return &s.InEchoReplies
	case typeMLDQuery:
		return &s.InGroupMembQueries
	case typeMLDv1Report:
		return &s.InGroupMembResponses
	case typeMLDv1Done:
		return &s.InGroupMembReductions
	case typeMLDv2Report:
		return &s.InMLDv2Reports
	case wire.ICMPv6RouterSolicitation:
		return &s.InRouterSolicits
	case wire.ICMPv6RouterAdvertisement:
		return &s.InRouterAdvertisements
	case wire.ICMPv6NeighborSolicitation:
		return &s.InNeighborSolicits
	case wire.ICMPv6NeighborAdvertisement:
		return &s.InNeighborAdvertisements
	case wire.ICMPv6Redirect:
		return &s.InRedirects
	}
	return nil
}

// isNDOrMLD reports whether typ is a neighbour discovery or MLD message.
func isNDOrMLD(typ uint8) bool {
	switch typ {
	case typeMLDQuery, typeMLDv1Report, typeMLDv1Done, typeMLDv2Report:
		return true
	}
	return typ >= wire.ICMPv6RouterSolicitation && typ <= wire.ICMPv6Redirect
}

// send checksums an ICMPv6 message over the pseudo-header of src and dst
// (section 2.3) and sends it on r, counting it.
func (p *Protocol) send(pk *buffer.Packet, sp ip.SendParams, r ip.Route, out *stats.Counter) error {
	wire.SetICMPv6Checksum(pk.Bytes(), sp.Src, sp.Dst)
	sp.Proto = wire.ProtoICMPv6
	p.Stats.OutMsgs.Inc()
	out.Inc()
	err := p.net.SendRoute(pk, sp, r)
	if err != nil {
		p.Stats.OutErrors.Inc()
	}
	return err
}

// zoned gives a, a quoted or remote address, the zone of the interface
// the message concerns when a is scoped to a link (RFC 4007 section 6),
// as the IPv6 layer zones the addresses of ip.Header; the loopback
// address, of a single interface, stays without.
func zoned(a netip.Addr, zone string) netip.Addr {
	if zone == "" || a == netip.IPv6Loopback() {
		return a
	}
	if s := ipv6.AddrScope(a); s == ipv6.ScopeLinkLocal || s == ipv6.ScopeInterfaceLocal {
		return a.WithZone(zone)
	}
	return a
}

// zoneOf returns the zone of the interface a message came in on, when its
// addresses say (either is link-scoped), or "".
func zoneOf(h ip.Header) string {
	if z := h.Dst.Zone(); z != "" {
		return z
	}
	return h.Src.Zone()
}
