// Package ipv4 is GoNet's Internet Protocol, version 4 (RFC 791), with the
// host requirements of RFC 1122 section 3.
//
// The Protocol's dealer goroutine takes batches of datagrams from the NICs,
// validates each (section 3.2.1 of RFC 1122), hands fragments to the
// assembler goroutine of their datagram (reassembly.go), and delivers whole
// datagrams to the transport protocol registered for their protocol number,
// by a function call in the dealer's goroutine. On the way out, Send routes a
// datagram (route.go), fragments it when it exceeds the route's MTU
// (output.go) and passes it to the interface's link output.
package ipv4

import (
	"cmp"
	"context"
	"fmt"
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

// Config tunes the IPv4 layer. Zero fields take the defaults.
type Config struct {
	// DefaultTTL is the TTL of datagrams the stack originates (64, as
	// Linux; RFC 1700 recommends 64 too).
	DefaultTTL uint8
	// ReassemblyTimeout bounds the wait for a datagram's missing
	// fragments (30 s, as Linux's ipfrag_time; RFC 1122 section 3.3.2
	// recommends 60 to 120 s, but a shorter wait frees memory sooner).
	ReassemblyTimeout time.Duration
	// MaxReassemblies bounds the datagrams under reassembly at once.
	MaxReassemblies int
	// MaxReassemblyBytes bounds the fragment bytes held at once, besides
	// the stack's memory budget (4 MiB, as Linux's ipfrag_high_thresh).
	MaxReassemblyBytes int
	// PMTUExpiry is how long a path MTU learnt from ICMP holds before the
	// route's own MTU is tried again (10 minutes, RFC 1191 section 6.3,
	// as Linux's mtu_expires). MinPMTU is the floor under it (552, as
	// Linux's min_pmtu): smaller reports lower it to the floor only.
	PMTUExpiry time.Duration
	MinPMTU    int
}

func (c *Config) setDefaults() {
	c.DefaultTTL = cmp.Or(c.DefaultTTL, 64)
	c.ReassemblyTimeout = cmp.Or(c.ReassemblyTimeout, 30*time.Second)
	c.MaxReassemblies = cmp.Or(c.MaxReassemblies, 64)
	c.MaxReassemblyBytes = cmp.Or(c.MaxReassemblyBytes, 4<<20)
	c.PMTUExpiry = cmp.Or(c.PMTUExpiry, 10*time.Minute)
	c.MinPMTU = cmp.Or(c.MinPMTU, 552)
}

// ErrorSender sends ICMP errors about datagrams the IPv4 layer drops; the
// icmp package implements it. orig is the offending datagram, header first;
// the sender copies what it quotes.
type ErrorSender interface {
	SendError(orig wire.IPv4, typ, code uint8, rest uint32)
}

// Stats are the IPv4 counters, named after the IP group of the SNMP MIB
// (RFC 4293) where one exists.
type Stats struct {
	InReceives      stats.Counter
	InTruncated     stats.Counter
	InBadVersion    stats.Counter
	InBadHeaderLen  stats.Counter
	InBadTotalLen   stats.Counter
	InCsumErrors    stats.Counter
	InAddrErrors    stats.Counter // not addressed to us, and not taken by a forwarding interface
	InMartians      stats.Counter // source broadcast, multicast or ours (RFC 1122 section 3.2.1.3)
	InBadOptions    stats.Counter // malformed options, answered with Parameter Problem (RFC 1122 section 3.2.2.5)
	InSourceRouted  stats.Counter // a loose or strict source route, refused (as Linux's accept_source_route 0)
	InUnknownProtos stats.Counter
	InDiscards      stats.Counter // dealer queue full
	InDelivers      stats.Counter
	InLoopback      stats.Counter
	// ICMP Redirects (redirect.go): taken as host routes, and refused
	// (not from the first hop, a gateway off the subnet, a forwarding
	// interface's).
	RedirectsTaken   stats.Counter
	RedirectsRefused stats.Counter
	// Multicast (multicast.go): datagrams to a group taken, those to a
	// group no interface joined (or not the one they came in on), and
	// those sent.
	InMcastPkts     stats.Counter
	InNoGroup       stats.Counter
	OutMcastPkts    stats.Counter
	OutRequests     stats.Counter
	OutNoRoutes     stats.Counter
	OutDiscards     stats.Counter // loopback queue full
	FragOKs         stats.Counter
	FragFails       stats.Counter // needed fragmenting but DF was set
	FragCreates     stats.Counter
	ReasmReqds      stats.Counter
	ReasmOKs        stats.Counter
	ReasmFails      stats.Counter
	ReasmTimeouts   stats.Counter
	ReasmOverlaps   stats.Counter
	ReasmOversize   stats.Counter // would exceed 65535 bytes
	ReasmMalformed  stats.Counter // inconsistent length or unaligned fragment
	ReasmDuplicates stats.Counter
	ReasmLimit      stats.Counter // fragment refused: too many datagrams or bytes in reassembly
	ReasmEvictions  stats.Counter // oldest datagram dropped to make room for a new one
	ReasmActive     stats.Gauge
	ReasmBytes      stats.Gauge
	// Path MTU discovery (pmtu.go): reports that lowered a destination's
	// path MTU, reports ignored (below 68 bytes, not lower than the path
	// MTU, or for no route), reports below MinPMTU raised to it, and
	// entries evicted from a full cache.
	PMTUUpdates   stats.Counter
	PMTUIgnored   stats.Counter
	PMTUClamped   stats.Counter
	PMTUEvictions stats.Counter

	// Forwarding interfaces (forward.go): datagrams to a foreign address
	// taken on one, datagrams sent from a foreign source address out of
	// one, and those refused for a foreign source on an interface that
	// does not forward.
	InForeign    stats.Counter
	OutForeign   stats.Counter
	OutSrcDenied stats.Counter

	// Offloads (offload.go): TCP super-segments sent whole for the link
	// to cut up, and those sent on a route without TSO (fragmented).
	OutGSO          stats.Counter
	OutGSOFallbacks stats.Counter
}

// Protocol is the IPv4 layer of one stack.
type Protocol struct {
	cfg        Config
	env        *env.Env
	transports [256]ip.Transport
	errors     ErrorSender

	tables
	pmtu      pmtuCache                    // path MTUs learnt (pmtu.go)
	redirects *route.Redirects[*Interface] // host routes ICMP Redirects made (redirect.go)
	nextID    atomic.Uint32

	in   *dealer.Inbox[*buffer.Batch]
	loop *dealer.Inbox[*buffer.Packet] // datagrams this host sent to itself
	done chan struct{}
	wg   sync.WaitGroup // the dealer and every assembler
	once sync.Once

	reasm *reassembly.Reassembler[fragKey] // owned by the dealer goroutine

	Stats Stats
}

// New returns an IPv4 layer with no interfaces.
func New(cfg Config, e *env.Env) *Protocol {
	cfg.setDefaults()
	p := &Protocol{
		cfg:  cfg,
		env:  e,
		done: make(chan struct{}),
	}
	p.reasm = p.newReassembler()
	// A dealer that far behind drops and counts, as a NIC drops when its
	// ring is full: blocking would stall ARP on the same NIC, or the sender.
	p.in = dealer.New[*buffer.Batch](dealer.NetworkInbox, &p.Stats.InDiscards)
	p.loop = dealer.New[*buffer.Packet](256, &p.Stats.OutDiscards)
	p.nextID.Store(e.Rand.Uint32())
	p.tables.init()
	p.redirects = p.newRedirects()
	return p
}

// Register binds a transport to a protocol number. Call it before Start.
func (p *Protocol) Register(proto uint8, t ip.Transport) { p.transports[proto] = t }

// Transport returns the transport bound to proto, or nil.
func (p *Protocol) Transport(proto uint8) ip.Transport { return p.transports[proto] }

// SetErrorSender sets who reports dropped datagrams with ICMP.
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

// Deliver hands a batch of datagrams from a NIC to the dealer. When the
// dealer's queue is full the batch is dropped and counted (InDiscards).
func (p *Protocol) Deliver(b *buffer.Batch) { p.in.Deliver(b) }

// Sync returns once the dealer has dealt with every datagram delivered to
// it before the call, and then with every datagram the host had sent itself
// by then, those sent while dealing with the delivered ones included.
// Dealing with a datagram covers its validation, its delivery to the
// transport by function call (ICMP's replies sent, a UDP socket's queue,
// TCP's connection mailboxes) and a fragment's hand-off to its assembler;
// not the reassembly that follows in the assembler's goroutine, nor what
// transports do in goroutines of their own, nor frames the NICs have not
// yet dealt. It returns ctx's error if ctx ends first, and dealer.ErrClosed
// once the layer is closed.
func (p *Protocol) Sync(ctx context.Context) error {
	// The loop after the NICs' queue: a datagram the dealer loops back
	// while dealing with a delivered one is queued before the second marker.
	if err := p.in.Sync(ctx); err != nil {
		return err
	}
	return p.loop.Sync(ctx)
}

// deal is the IPv4 dealer: it validates and delivers batches, and takes the
// results of assemblers.
func (p *Protocol) deal() {
	defer p.wg.Done()
	defer p.reasm.Stop()
	for {
		select {
		case e := <-p.in.C():
			if b, ok := e.Open(); ok {
				in, fwd := receivedOn(b)
				for _, pk := range b.Pkts {
					p.receive(pk, in, fwd)
				}
				b.Put()
			}
		case e := <-p.loop.C():
			if pk, ok := e.Open(); ok {
				p.Stats.InLoopback.Inc()
				p.receive(pk, nil, false)
			}
		case r := <-p.reasm.Done():
			p.reasm.Settle(r)
		case <-p.done:
			return
		}
	}
}

// receive validates one datagram (RFC 1122 section 3.2.1) and delivers it,
// or hands it to reassembly. It takes ownership of pk. in is the interface
// it came in on, nil for the host's own datagrams: a datagram from one of
// our own addresses is a martian only when it came from the wire. fwd
// says it arrived on a forwarding interface, which takes datagrams to
// foreign unicast addresses too (forward.go).
func (p *Protocol) receive(pk *buffer.Packet, in *Interface, fwd bool) {
	fromWire := in != nil
	p.Stats.InReceives.Inc()
	h, verr := wire.ParseIPv4(pk.Bytes())
	if verr != wire.IPv4OK {
		p.countInvalid(verr)
		pk.Release()
		return
	}
	pk.SetLen(len(h)) // drop link-layer padding
	t := p.tables.load()
	dst, src := h.Dst(), h.Src()
	if !t.acceptsDst(dst, in) {
		if dst.IsMulticast() {
			p.Stats.InNoGroup.Inc()
			pk.Release()
			return
		}
		if !fwd || !foreignUnicast(dst) {
			p.Stats.InAddrErrors.Inc()
			pk.Release()
			return
		}
		p.Stats.InForeign.Inc()
	}
	if src.IsMulticast() || t.isBroadcast(src) || (fromWire && t.isLocal(src)) {
		p.Stats.InMartians.Inc()
		pk.Release()
		return
	}
	if h.HeaderLen() > wire.IPv4MinHeaderLen && !p.takeOptions(h, t.isLocal(dst)) {
		pk.Release()
		return
	}
	if dst.IsMulticast() {
		p.Stats.InMcastPkts.Inc()
	}
	if h.Protocol() == wire.ProtoIGMP && in != nil && !h.IsFragment() {
		// IGMP is the interface's: its state is per interface (RFC
		// 3376 section 3), and the host's own messages never come
		// back to it.
		p.handleIGMP(pk, h, in)
		return
	}
	if h.IsFragment() {
		p.reassemble(pk, h, in)
		return
	}
	p.deliver(pk, h, in)
}

// takeOptions acts on the options of datagram h, addressed to us (ours
// says to one of our unicast addresses), as RFC 1122 section 3.2.1.8 has
// a host do, and reports whether the datagram goes on. Malformed options
// are answered with Parameter Problem pointing at the byte in error
// (section 3.2.2.5). A source route is refused, as Linux does unless
// accept_source_route is set: the route a host reverses in its answers is
// one a sender chose around the network's routing. Record Route and
// Timestamp get our entry as the datagram reaches us (RFC 791), which
// echo replies carry back (icmp).
func (p *Protocol) takeOptions(h wire.IPv4, ours bool) bool {
	c := h.CheckOptions()
	switch {
	case c.Bad != 0:
		p.Stats.InBadOptions.Inc()
		if p.errors != nil {
			p.errors.SendError(h, wire.ICMPParamProblem, 0, uint32(c.Bad)<<24)
		}
		return false
	case c.SourceRouted:
		p.Stats.InSourceRouted.Inc()
		return false
	}
	if ours {
		wire.RecordIPv4Options(h.Options(), h.Dst(), wire.MillisSinceMidnightUT(p.env.Clock.Now().UnixMilli()))
	}
	return true
}

func (p *Protocol) countInvalid(e wire.IPv4Error) {
	switch e {
	case wire.IPv4Truncated:
		p.Stats.InTruncated.Inc()
	case wire.IPv4BadVersion:
		p.Stats.InBadVersion.Inc()
	case wire.IPv4BadIHL:
		p.Stats.InBadHeaderLen.Inc()
	case wire.IPv4BadTotalLen:
		p.Stats.InBadTotalLen.Inc()
	case wire.IPv4BadChecksum:
		p.Stats.InCsumErrors.Inc()
	default:
		panic(fmt.Sprintf("ipv4: unknown validation error %d", e))
	}
}

// deliver hands a whole datagram to its transport, or answers with ICMP
// protocol unreachable (RFC 1122 section 3.2.2.1). in is the interface it
// came in on (a reassembled one's first fragment's), nil for the host's
// own.
func (p *Protocol) deliver(pk *buffer.Packet, h wire.IPv4, in *Interface) {
	t := p.transports[h.Protocol()]
	if t == nil {
		p.Stats.InUnknownProtos.Inc()
		p.sendError(h, wire.ICMPDestUnreach, wire.ICMPCodeProtoUnrch)
		pk.Release()
		return
	}
	p.Stats.InDelivers.Inc()
	hdr := ip.Header{Src: h.Src(), Dst: h.Dst(), TOS: h.TOS(), TTL: h.TTL(), Off: h.HeaderLen()}
	if in != nil {
		hdr.In = in.name
	}
	t.HandleIP(pk, hdr)
}

func (p *Protocol) sendError(h wire.IPv4, typ, code uint8) {
	if p.errors != nil {
		p.errors.SendError(h, typ, code, 0)
	}
}

// ReportError sends the ICMP error for kind about orig, a datagram from
// its IPv4 header on, through the error sender: for transports that drop
// a datagram (UDP's port unreachable, a forwarder's refusal).
func (p *Protocol) ReportError(orig []byte, kind ip.ErrorKind) {
	typ, code := ICMPTypeCode(kind)
	p.sendError(wire.IPv4(orig), typ, code)
}

// ICMPTypeCode is the ICMP type and code (RFC 792, RFC 1812 section
// 5.2.7.1) that report kind.
func ICMPTypeCode(kind ip.ErrorKind) (typ, code uint8) {
	switch kind {
	case ip.NetUnreachable:
		return wire.ICMPDestUnreach, wire.ICMPCodeNetUnrch
	case ip.HostUnreachable:
		return wire.ICMPDestUnreach, wire.ICMPCodeHostUnrch
	case ip.ProtoUnreachable:
		return wire.ICMPDestUnreach, wire.ICMPCodeProtoUnrch
	case ip.PortUnreachable:
		return wire.ICMPDestUnreach, wire.ICMPCodePortUnrch
	case ip.AdminProhibited:
		return wire.ICMPDestUnreach, wire.ICMPCodeAdminProhibited
	case ip.PacketTooBig:
		return wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded
	case ip.TimeExceeded:
		return wire.ICMPTimeExceeded, 0
	case ip.ReassemblyTimeout:
		return wire.ICMPTimeExceeded, wire.ICMPCodeReassembly
	case ip.ParameterProblem:
		return wire.ICMPParamProblem, 0
	}
	panic(fmt.Sprintf("ipv4: no ICMP message for %v", kind))
}

// ErrorKindOf is the kind of error an ICMP message of type typ and code
// reports, for the transports (ip.ICMPError), and false for a type that is
// no error about a datagram. Codes of one meaning map to one kind, as
// Linux's icmp_err_convert groups them.
func ErrorKindOf(typ, code uint8) (ip.ErrorKind, bool) {
	switch typ {
	case wire.ICMPDestUnreach:
		switch code {
		case wire.ICMPCodeNetUnrch, 6, 9, 11: // unreachable, unknown, prohibited, for TOS
			return ip.NetUnreachable, true
		case wire.ICMPCodeProtoUnrch:
			return ip.ProtoUnreachable, true
		case wire.ICMPCodePortUnrch:
			return ip.PortUnreachable, true
		case wire.ICMPCodeFragNeeded:
			return ip.PacketTooBig, true
		case wire.ICMPCodeAdminProhibited:
			return ip.AdminProhibited, true
		}
		return ip.HostUnreachable, true
	case wire.ICMPTimeExceeded:
		if code == wire.ICMPCodeReassembly {
			return ip.ReassemblyTimeout, true
		}
		return ip.TimeExceeded, true
	case wire.ICMPParamProblem:
		return ip.ParameterProblem, true
	}
	return 0, false
}

// HeaderLen is the length of an IPv4 header without options.
func (p *Protocol) HeaderLen() int { return wire.IPv4MinHeaderLen }

var _ ip.Network = (*Protocol)(nil)
