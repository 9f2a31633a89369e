// Package ipv6 is GoNet's Internet Protocol, version 6 (RFC 8200), beside
// package ipv4 and in its shape.
//
// The Protocol's dealer goroutine takes batches of datagrams from the NICs
// (each Interface is the handler of its NIC and marks its batches, so the
// dealer knows where a datagram came in: link-local addresses and
// multicast groups are the interface's own), validates each (RFC 8200
// section 3, RFC 4291's address rules), walks its extension headers
// (chain.go, RFC 8200 section 4), hands fragments to the assembler
// goroutine of their datagram (package reassembly, shared with IPv4), and
// delivers whole datagrams to the ip.Transport registered for their
// upper-layer protocol, by a function call in the dealer's goroutine.
// Datagrams it cannot deliver are answered through an ErrorSender (ICMPv6)
// within RFC 4443 section 2.4's limits (errors.go). On the way out, Send
// routes a datagram (route.go, source.go), fragments it when it exceeds the
// path MTU (output.go, pmtu.go) and passes it to the interface's link
// output, neighbour discovery.
package ipv6

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/dealer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/reassembly"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Config tunes the IPv6 layer. Zero fields take the defaults.
type Config struct {
	// DefaultHopLimit is the hop limit of unicast datagrams the stack
	// originates (64, as Linux's hop_limit; RFC 8200 section 3 leaves it
	// to the node, and a router may advertise another, RFC 4861 section
	// 6.3.4). Multicast datagrams go with 1 unless the sender says
	// otherwise (RFC 3493 section 5.2's IPV6_MULTICAST_HOPS).
	DefaultHopLimit uint8
	// ReassemblyTimeout bounds the wait for a datagram's missing
	// fragments (60 s, RFC 8200 section 4.5, as Linux's ip6frag_time).
	ReassemblyTimeout time.Duration
	// MaxReassemblies bounds the datagrams under reassembly at once.
	MaxReassemblies int
	// MaxReassemblyBytes bounds the fragment bytes held at once, besides
	// the stack's memory budget (4 MiB, as Linux's ip6frag_high_thresh).
	MaxReassemblyBytes int
	// PMTUExpiry is how long a path MTU learnt from Packet Too Big holds
	// before the link's MTU is tried again (10 minutes, RFC 8201 section
	// 4's recommendation, as Linux's mtu_expires).
	PMTUExpiry time.Duration
}

func (c *Config) setDefaults() {
	c.DefaultHopLimit = cmp.Or(c.DefaultHopLimit, 64)
	c.ReassemblyTimeout = cmp.Or(c.ReassemblyTimeout, 60*time.Second)
	c.MaxReassemblies = cmp.Or(c.MaxReassemblies, 64)
	c.MaxReassemblyBytes = cmp.Or(c.MaxReassemblyBytes, 4<<20)
	c.PMTUExpiry = cmp.Or(c.PMTUExpiry, 10*time.Minute)
}

// Stats are the IPv6 counters, named as Linux's /proc/net/snmp6 names them
// (RFC 4293's IP group, without the Ip6 prefix) where one exists, with
// finer counters beside those that would hide a reason.
type Stats struct {
	InReceives  stats.Counter
	InHdrErrors stats.Counter // every header error below, counted once more by its reason
	// Header errors by reason: shorter than the fixed header, a version
	// other than 6, addresses no node sends with (martian).
	InShortHeader stats.Counter
	InBadVersion  stats.Counter
	InMartians    stats.Counter
	// Extension header errors by reason (chain.go): truncated, an option
	// running past its header, more headers or bytes than the chain's
	// bounds, Hop-by-Hop not first, an unknown routing type with segments
	// left, an unknown option whose action drops, a first fragment
	// without the whole chain (RFC 7112), a fragment of bad length or
	// offset (RFC 8200 section 4.5).
	InExtTruncated     stats.Counter
	InBadOptions       stats.Counter
	InExtHdrLimit      stats.Counter
	InHopByHopNotFirst stats.Counter
	InUnknownRouting   stats.Counter
	InUnknownOptions   stats.Counter
	InIncompleteChain  stats.Counter
	InBadFragments     stats.Counter
	InTruncatedPkts    stats.Counter // payload length past the end of the frame
	InAddrErrors       stats.Counter // to a unicast address not ours (or tentative, or ::1 from a link)
	InNoGroup          stats.Counter // to a multicast group not joined on the interface
	InUnknownProtos    stats.Counter
	InNoNextHeader     stats.Counter // No Next Header (RFC 8200 section 4.7): nothing to deliver
	InAtomicFragments  stats.Counter // delivered at once (RFC 6946)
	InFragmentedND     stats.Counter // neighbour discovery in a fragment (RFC 6980)
	InDiscards         stats.Counter // dealer queue full
	InDelivers         stats.Counter
	InMcastPkts        stats.Counter
	InLoopback         stats.Counter
	OutRequests        stats.Counter
	OutNoRoutes        stats.Counter
	OutNoSource        stats.Counter // no address to send from, or one not the host's
	// Forwarding interfaces (forward.go): datagrams to a foreign address
	// taken, and datagrams sent from one out of a forwarding interface.
	InForeign       stats.Counter
	OutForeign      stats.Counter
	OutDiscards     stats.Counter // loopback queue full
	OutMcastPkts    stats.Counter
	FragOKs         stats.Counter
	FragFails       stats.Counter // needed fragmenting but the sender forbade it
	FragCreates     stats.Counter
	ReasmReqds      stats.Counter
	ReasmOKs        stats.Counter
	ReasmFails      stats.Counter
	ReasmTimeout    stats.Counter
	ReasmOverlaps   stats.Counter // RFC 5722
	ReasmOversize   stats.Counter // would exceed the largest datagram
	ReasmMalformed  stats.Counter // inconsistent length or unaligned fragment
	ReasmDuplicates stats.Counter
	ReasmLimit      stats.Counter // fragment refused: too many datagrams or bytes in reassembly
	ReasmEvictions  stats.Counter // oldest datagram dropped to make room for a new one
	ReasmNested     stats.Counter // reassembled datagram still a fragment
	ReasmActive     stats.Gauge
	ReasmBytes      stats.Gauge
	// ICMPv6 errors the layer did not ask for because RFC 4443 section
	// 2.4 (e) forbids them (errors.go).
	ErrorsSuppressed stats.Counter
	// Path MTU discovery (pmtu.go): reports that lowered a destination's
	// path MTU, reports ignored (not lower, or for no route), reports
	// below 1280 raised to it, and entries evicted from a full cache.
	PMTUUpdates   stats.Counter
	PMTUIgnored   stats.Counter
	PMTUClamped   stats.Counter
	PMTUEvictions stats.Counter
	// Offloads (output.go): TCP super-segments sent whole for the link
	// to cut up, and those sent on a route without TSO (fragmented).
	OutGSO          stats.Counter
	OutGSOFallbacks stats.Counter
}

// Protocol is the IPv6 layer of one stack.
type Protocol struct {
	cfg        Config
	env        *env.Env
	transports [256]ip.Transport
	errors     ErrorSender

	tables
	pmtu      pmtuCache                    // path MTUs learnt (pmtu.go)
	redirects *route.Redirects[*Interface] // host routes Redirects made (TakeRedirect)

	in   *dealer.Inbox[*buffer.Batch]
	loop *dealer.Inbox[*buffer.Packet] // datagrams this host sent to itself
	done chan struct{}
	wg   sync.WaitGroup // the dealer, which stops the assemblers
	once sync.Once

	reasm *reassembly.Reassembler[fragKey] // owned by the dealer goroutine

	Stats    Stats
	hopLimit atomic.Uint32 // CurHopLimit: Config.DefaultHopLimit, or a router's (SetHopLimit)
}

// New returns an IPv6 layer with no interfaces.
func New(cfg Config, e *env.Env) *Protocol {
	cfg.setDefaults()
	p := &Protocol{cfg: cfg, env: e, done: make(chan struct{})}
	p.reasm = p.newReassembler()
	// A dealer that far behind drops and counts, as a NIC drops when its
	// ring is full: blocking would stall the other protocols on the NIC.
	p.in = dealer.New[*buffer.Batch](dealer.NetworkInbox, &p.Stats.InDiscards)
	p.loop = dealer.New[*buffer.Packet](256, &p.Stats.OutDiscards)
	p.tables.init()
	p.redirects = route.NewRedirects(e.Clock, func(r Route) bool { return p.tables.load().routes.Has(r) }, p.AddRoute, p.RemoveRoute)
	p.hopLimit.Store(uint32(cfg.DefaultHopLimit))
	return p
}

// SetHopLimit sets the hop limit of the unicast datagrams the host
// originates, as a router advertises it (RFC 4861 section 6.3.4's
// CurHopLimit); zero keeps the current one.
func (p *Protocol) SetHopLimit(n uint8) {
	if n != 0 {
		p.hopLimit.Store(uint32(n))
	}
}

// Register binds a transport to an upper-layer protocol number (TCP 6,
// UDP 17, ICMPv6 58). Call it before Start.
func (p *Protocol) Register(proto uint8, t ip.Transport) { p.transports[proto] = t }

// Transport returns the transport bound to proto, or nil.
func (p *Protocol) Transport(proto uint8) ip.Transport { return p.transports[proto] }

// SetErrorSender sets who reports dropped datagrams with ICMPv6. Call it
// before Start.
func (p *Protocol) SetErrorSender(e ErrorSender) { p.errors = e }

// Start launches the dealer goroutine.
func (p *Protocol) Start() {
	p.wg.Add(1)
	go p.deal()
}

// Close stops the dealer and every assembler and releases what they hold.
func (p *Protocol) Close() {
	p.once.Do(func() {
		close(p.done)
		p.wg.Wait()
		p.in.Close()
		p.loop.Close()
		p.redirects.Stop()
	})
}

// Sync returns once the dealer has dealt with every datagram delivered to
// it before the call, and then with every datagram the host had sent itself
// by then, those sent while dealing with the delivered ones included. Its
// scope is ipv4.Protocol.Sync's: not the reassembly that follows in an
// assembler's goroutine, nor what transports do in goroutines of their
// own. It returns ctx's error if ctx ends first, and dealer.ErrClosed once
// the layer is closed.
func (p *Protocol) Sync(ctx context.Context) error {
	if err := p.in.Sync(ctx); err != nil {
		return err
	}
	return p.loop.Sync(ctx)
}

// deal is the IPv6 dealer: it validates and delivers batches, and takes the
// reports of assemblers.
func (p *Protocol) deal() {
	defer p.wg.Done()
	defer p.reasm.Stop()
	for {
		select {
		case e := <-p.in.C():
			if b, ok := e.Open(); ok {
				in, _ := b.From.(*Interface)
				for _, pk := range b.Pkts {
					p.receive(pk, in)
				}
				b.Put()
			}
		case e := <-p.loop.C():
			if pk, ok := e.Open(); ok {
				p.Stats.InLoopback.Inc()
				p.receive(pk, nil)
			}
		case r := <-p.reasm.Done():
			p.reasm.Settle(r)
		case <-p.done:
			return
		}
	}
}

// receive validates one datagram (RFC 8200 section 3, RFC 4291) and walks
// its extension headers. It takes ownership of pk. in is the interface it
// arrived on, nil for a datagram the host sent itself.
func (p *Protocol) receive(pk *buffer.Packet, in *Interface) {
	p.Stats.InReceives.Inc()
	h, verr := wire.ParseIPv6(pk.Bytes())
	if verr != wire.IPv6OK {
		p.countInvalid(verr)
		pk.Release()
		return
	}
	pk.SetLen(len(h)) // drop link-layer padding
	t := p.tables.load()
	src, dst := h.Src(), h.Dst()
	fromWire := in != nil
	if martian(src, dst, fromWire) {
		p.headerError(&p.Stats.InMartians)
		pk.Release()
		return
	}
	if !fromWire {
		// What the host sent itself came in on the interface of the
		// address it went to, which a link-local one needs.
		in = t.ifaceOf(dst)
	}
	switch t.accepts(dst, in, fromWire) {
	case acceptNotOurs:
		if !p.takesForeign(t, dst, in) {
			p.Stats.InAddrErrors.Inc()
			pk.Release()
			return
		}
	case acceptNoGroup:
		p.Stats.InNoGroup.Inc()
		pk.Release()
		return
	}
	if dst.IsMulticast() {
		p.Stats.InMcastPkts.Inc()
	}
	p.dispatch(pk, h, in, false)
}

// martian reports a datagram no node sends: from a multicast address (RFC
// 4291 section 2.7), from the loopback address over a link (section
// 2.5.3), or with an IPv4-mapped address on either side, which only
// stands for an IPv4 node inside a host's API (section 2.5.5.2), as Linux
// drops them.
func martian(src, dst netip.Addr, fromWire bool) bool {
	switch CheckSource(src) {
	case SourceMulticast:
		return true
	case SourceLoopback:
		return fromWire
	}
	return src.Is4In6() || dst.Is4In6()
}

// headerError counts a header error under its reason.
func (p *Protocol) headerError(reason *stats.Counter) {
	p.Stats.InHdrErrors.Inc()
	reason.Inc()
}

func (p *Protocol) countInvalid(e wire.IPv6Error) {
	switch e {
	case wire.IPv6Truncated:
		p.headerError(&p.Stats.InShortHeader)
	case wire.IPv6BadVersion:
		p.headerError(&p.Stats.InBadVersion)
	case wire.IPv6BadPayloadLen:
		p.Stats.InTruncatedPkts.Inc()
	default:
		panic(fmt.Sprintf("ipv6: unknown validation error %d", e))
	}
}

// dispatch walks the extension headers of a datagram addressed to us (RFC
// 8200 section 4) and does what the walk says. whole says the datagram is
// the result of reassembly, walked again from its first header.
func (p *Protocol) dispatch(pk *buffer.Packet, h wire.IPv6, in *Interface, whole bool) {
	c := WalkChain(h)
	switch c.Verdict {
	case Deliver:
		if c.Frag.Atomic() {
			p.Stats.InAtomicFragments.Inc()
		}
		if (whole || c.Frag.Present()) && isND(h, c) {
			p.Stats.InFragmentedND.Inc()
			break
		}
		if in != nil && in.nd != nil && isLinkMessage(h, c) {
			// Neighbour discovery and MLD belong to the link they came
			// in on, which only this layer knows.
			p.Stats.InDelivers.Inc()
			in.nd.Handle(pk, p.header(h, c, in), whole || c.Frag.Present())
			return
		}
		p.deliver(pk, h, c, in)
		return
	case Reassemble:
		if whole {
			// A Fragment header in the fragmentable part: a datagram
			// fragmented twice, which no sender makes (RFC 8200
			// section 4.5 fragments only once, at the source).
			p.Stats.ReasmNested.Inc()
			break
		}
		p.reassemble(pk, h, c, in)
		return
	case NoNext:
		p.Stats.InNoNextHeader.Inc()
	case Discard:
		p.countChainError(c.Reason)
	case SendParamProblem:
		p.countChainError(c.Reason)
		p.sendError(ICMPError{Type: wire.ICMPv6ParamProblem, Code: c.Problem.Code, Param: c.Problem.Pointer, Orig: h, In: in})
	}
	pk.Release()
}

func (p *Protocol) countChainError(r DropReason) {
	s := &p.Stats
	switch r {
	case ReasonTruncated:
		p.headerError(&s.InExtTruncated)
	case ReasonBadOptions:
		p.headerError(&s.InBadOptions)
	case ReasonTooManyHeaders, ReasonChainTooLong:
		p.headerError(&s.InExtHdrLimit)
	case ReasonHopByHopNotFirst:
		p.headerError(&s.InHopByHopNotFirst)
	case ReasonUnknownRouting:
		p.headerError(&s.InUnknownRouting)
	case ReasonUnknownOption:
		p.headerError(&s.InUnknownOptions)
	case ReasonIncompleteChain:
		p.headerError(&s.InIncompleteChain)
	case ReasonBadFragmentLen, ReasonFragmentTooLong:
		p.headerError(&s.InBadFragments)
	default:
		panic(fmt.Sprintf("ipv6: unknown drop reason %v", r))
	}
}

// isND reports whether the upper-layer packet c found is a neighbour
// discovery message (RFC 4861 section 4). RFC 6980 section 5 has a node
// ignore one that came in a fragment, atomic ones included, since only an
// attacker fragments messages this small; the layer drops them because
// neighbour discovery, above it, cannot tell how a message came.
func isND(h wire.IPv6, c Chain) bool {
	if c.Proto != wire.ProtoICMPv6 || c.Offset >= len(h) {
		return false
	}
	t := h[c.Offset]
	return t >= wire.ICMPv6RouterSolicitation && t <= wire.ICMPv6Redirect
}

// deliver hands a whole datagram to the transport of its upper-layer
// protocol, or answers with Parameter Problem code 1 pointing at the Next
// Header field that named it (RFC 8200 section 4, RFC 4443 section 3.4).
func (p *Protocol) deliver(pk *buffer.Packet, h wire.IPv6, c Chain, in *Interface) {
	t := p.transports[c.Proto]
	if t == nil {
		p.Stats.InUnknownProtos.Inc()
		p.sendError(ICMPError{Type: wire.ICMPv6ParamProblem, Code: wire.ICMPv6CodeUnrecognizedNext, Param: uint32(c.NextAt), Orig: h, In: in})
		pk.Release()
		return
	}
	p.Stats.InDelivers.Inc()
	t.HandleIP(pk, p.header(h, c, in))
}

// header is what an upper layer is told of datagram h, whose chain c
// walked to its upper-layer header.
func (p *Protocol) header(h wire.IPv6, c Chain, in *Interface) ip.Header {
	hdr := ip.Header{
		Src: zoned(h.Src(), in),
		Dst: zoned(h.Dst(), in),
		TOS: h.TrafficClass(),
		TTL: h.HopLimit(),
		Off: c.Offset,
	}
	if in != nil {
		hdr.In = in.name
	}
	return hdr
}

// isLinkMessage reports whether the upper-layer packet c found is one of
// the ICMPv6 messages that neighbour discovery (RFC 4861 section 4) and
// MLD (RFC 3810 section 5) exchange on a link.
func isLinkMessage(h wire.IPv6, c Chain) bool {
	if c.Proto != wire.ProtoICMPv6 || c.Offset >= len(h) {
		return false
	}
	switch h[c.Offset] {
	case wire.ICMPv6RouterSolicitation, wire.ICMPv6RouterAdvertisement,
		wire.ICMPv6NeighborSolicitation, wire.ICMPv6NeighborAdvertisement, wire.ICMPv6Redirect,
		wire.ICMPv6MLDQuery, wire.ICMPv6MLDv1Report, wire.ICMPv6MLDv2Report, wire.ICMPv6MLDv1Done:
		return true
	}
	return false
}
