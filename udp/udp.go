// Package udp is GoNet's User Datagram Protocol (RFC 768), with the host
// rules of RFC 1122 section 4.1.
//
// The Protocol demultiplexes datagrams from the network layer's dealer
// (ip.Transport, whichever the family) to bound endpoints by a function
// call in the dealer's goroutine; each endpoint (a
// Conn, which is a net.PacketConn) has a bounded receive queue that its
// readers drain. Datagrams for a port nobody bound are answered with ICMP
// or ICMPv6 port unreachable. Over IPv6 the checksum is mandatory both
// ways (RFC 8200 section 8.1); endpoints bind as Go's net binds sockets of
// both families (ip.Binding).
package udp

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Config tunes UDP. Zero fields take the defaults.
type Config struct {
	// EphemeralLow and EphemeralHigh bound the ports given to endpoints
	// bound to port 0 (32768-60999, as Linux's ip_local_port_range).
	EphemeralLow, EphemeralHigh uint16
	// ReadBuffer is each endpoint's default receive queue in bytes of
	// datagrams held (212992, as Linux's rmem_default).
	ReadBuffer int
}

// Stats are the UDP counters, after the SNMP MIB's udp group (RFC 4113)
// and Linux's additions.
type Stats struct {
	InDatagrams  stats.Counter
	NoPorts      stats.Counter
	InErrors     stats.Counter // malformed: bad length
	InCsumErrors stats.Counter
	// InNoChecksum6 counts, beside InCsumErrors, the IPv6 datagrams that
	// came without a checksum, which IPv6 makes mandatory (RFC 8200
	// section 8.1: "IPv6 receivers must discard UDP packets containing a
	// zero checksum").
	InNoChecksum6 stats.Counter
	RcvbufErrors  stats.Counter // receive queue or memory budget full
	// IgnoredMulti counts datagrams to a group no endpoint on their
	// port joined (multicast.go), as Linux's UDP IgnoredMulti.
	IgnoredMulti stats.Counter
	OutDatagrams stats.Counter
	OutErrors    stats.Counter
	Sockets      stats.Gauge
	// ICMP errors quoting our datagrams (icmp.go), Packet Too Big
	// aside, and those no connected endpoint took.
	InICMPErrors    stats.Counter
	ICMPNoConnected stats.Counter
	// The forwarder (forward.go): datagrams offered to the hook, and its
	// decisions (none: port unreachable, counted in NoPorts).
	ForwardRequests    stats.Counter
	ForwardOpened      stats.Counter
	ForwardUnreachable stats.Counter
	ForwardDropped     stats.Counter
}

// Protocol is UDP on one stack.
type Protocol struct {
	cfg  Config
	env  *env.Env
	nets ip.Networks // the network layers it sends through, by family

	mu    sync.RWMutex
	ports map[uint16][]*Conn
	flows map[flowKey]*Conn     // endpoints the forwarder opened (forward.go)
	hook  func(*ForwardRequest) // the forwarder hook
	// membership joins interfaces to the groups endpoints join
	// (multicast.go).
	membership Membership

	Stats Stats
}

// New returns UDP over nets, registered with each as its protocol 17.
func New(nets ip.Networks, cfg Config, e *env.Env) *Protocol {
	if cfg.EphemeralLow == 0 {
		cfg.EphemeralLow, cfg.EphemeralHigh = 32768, 60999
	}
	if cfg.ReadBuffer == 0 {
		cfg.ReadBuffer = 212992
	}
	p := &Protocol{cfg: cfg, env: e, nets: nets, ports: map[uint16][]*Conn{}}
	nets.Each(func(n ip.Network) { n.Register(wire.ProtoUDP, p) })
	return p
}

// Listen binds an endpoint to laddr: an unspecified address takes datagrams
// to any of the host's addresses of its family, :: to those of both, as a
// Linux socket on :: does by default (ip.Binding); a specific address must
// be the host's (EADDRNOTAVAIL otherwise), and a link-local one takes the
// zone of its interface when given without. Port 0 picks an ephemeral
// port (RFC 6056 section 3.3.1, algorithm 1: a random port, then the next
// free one).
func (p *Protocol) Listen(laddr netip.AddrPort) (*Conn, error) {
	return p.listenOpts(laddr, false, false, "")
}

// ListenOn is Listen for an endpoint bound to the interface named device
// from the start (BindToDevice before bind(2), as SO_BINDTODEVICE is set
// on a Linux socket): endpoints bound to different interfaces may then
// share an address and port, each taking the datagrams that come in on
// its own, as a DHCP client per NIC on port 68 does. IPv4 only, as
// BindToDevice.
func (p *Protocol) ListenOn(device string, laddr netip.AddrPort) (*Conn, error) {
	if device == "" || laddr.Addr().Is6() {
		return nil, opError("listen", laddr, syscall.EINVAL)
	}
	if _, ok := p.deviceRouter(); !ok {
		return nil, opError("listen", laddr, syscall.EAFNOSUPPORT)
	}
	return p.listenOpts(laddr, false, false, device)
}

// ListenV6Only is Listen for an endpoint on :: that takes IPv6 only
// (IPV6_V6ONLY, RFC 3493 section 5.3), what Go's "udp6" asks for: the
// same port can then carry a separate IPv4 endpoint.
func (p *Protocol) ListenV6Only(laddr netip.AddrPort) (*Conn, error) {
	return p.listenOpts(laddr, true, false, "")
}

// listenOpts binds an endpoint; reuse shares the port with the other
// endpoints bound with it (ListenMulticast); a device binds it to that
// interface first (ListenOn).
func (p *Protocol) listenOpts(laddr netip.AddrPort, v6only, reuse bool, device string) (*Conn, error) {
	a := laddr.Addr()
	if !a.IsValid() {
		a = netip.IPv4Unspecified()
	}
	if v6only && !a.Is6() {
		return nil, opError("listen", laddr, syscall.EINVAL)
	}
	nw, err := p.nets.For(a)
	if err != nil {
		return nil, opError("listen", laddr, fmt.Errorf("%v: %w", a, err))
	}
	if !a.IsUnspecified() {
		// The address as the network layer delivers datagrams to it:
		// with its zone when it is link-local.
		r, err := nw.Route(a)
		if err != nil || !r.Local {
			return nil, opError("listen", laddr, syscall.EADDRNOTAVAIL)
		}
		a = r.Src
	}
	c := newConn(p, a)
	c.v6only, c.reuse = v6only, reuse
	if device != "" {
		c.device.Store(&device)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	port := laddr.Port()
	if port == 0 {
		n := int(p.cfg.EphemeralHigh-p.cfg.EphemeralLow) + 1
		start := p.env.Rand.IntN(n)
		for i := range n {
			cand := p.cfg.EphemeralLow + uint16((start+i)%n)
			if p.free(c, cand) {
				port = cand
				break
			}
		}
		if port == 0 {
			return nil, opError("listen", laddr, syscall.EADDRINUSE)
		}
	} else if !p.free(c, port) {
		return nil, opError("listen", laddr, syscall.EADDRINUSE)
	}
	c.laddr = netip.AddrPortFrom(a, port)
	p.ports[port] = append(p.ports[port], c)
	p.Stats.Sockets.Add(1)
	return c, nil
}

// free reports whether c can be bound on port: no binding there takes an
// address c's takes, as the kernel has it without SO_REUSEADDR
// (ip.Binding.Conflicts), or both were bound with it and to the same
// address (ListenMulticast), or to different interfaces (ListenOn). p.mu
// is held.
func (p *Protocol) free(c *Conn, port uint16) bool {
	b := c.binding()
	for _, o := range p.ports[port] {
		if c.reuse && o.reuse && b == o.binding() {
			continue
		}
		if d, od := c.boundDevice(), o.boundDevice(); d != "" && od != "" && d != od {
			continue
		}
		if b.Conflicts(o.binding()) {
			return false
		}
	}
	return true
}

func (p *Protocol) unbind(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.raddr.IsValid() {
		delete(p.flows, flowKey{c.laddr, c.raddr})
		p.Stats.Sockets.Add(-1)
		return
	}
	port := c.laddr.Port()
	list := p.ports[port]
	for i, o := range list {
		if o == c {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.ports, port)
	} else {
		p.ports[port] = list
	}
	p.Stats.Sockets.Add(-1)
}

// lookup finds the endpoint for a datagram to dst:port from src, which nw
// delivered and which came in on the interface named in: the forwarded
// flow's (forward.go), else one bound to dst itself, else a wildcard one
// of dst's family (ip.Binding), which takes only datagrams for the host's
// own addresses, not the foreign ones a forwarding interface takes
// (ipv4/forward.go); an endpoint bound to an interface only those that
// came in on it.
func (p *Protocol) lookup(nw ip.Network, dst netip.Addr, port uint16, src netip.AddrPort, in string) *Conn {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if len(p.flows) > 0 {
		if c := p.flows[flowKey{netip.AddrPortFrom(dst, port), src}]; c != nil {
			return c
		}
	}
	var wild *Conn
	for _, c := range p.ports[port] {
		if !c.takesFrom(in) {
			continue
		}
		switch b := c.binding(); {
		case !b.Wildcard():
			if b.Addr == dst {
				return c
			}
		case b.Takes(dst):
			wild = c
		}
	}
	if wild != nil && !nw.IsHostDst(dst) {
		return nil
	}
	return wild
}

// HandleIP takes one datagram from a network layer's dealer.
func (p *Protocol) HandleIP(pk *buffer.Packet, h ip.Header) {
	dgram := pk.Bytes()
	u, ok := wire.ParseUDP(dgram[h.Off:])
	if !ok {
		p.Stats.InErrors.Inc()
		pk.Release()
		return
	}
	if u.Checksum() == 0 && h.Dst.Is6() && pk.Offload.Flags&buffer.NeedsCsum == 0 {
		// Before the link's word: a device that vouches for a zero
		// checksum vouches for nothing IPv6 accepts. (A partial
		// checksum, left for the link to finish, is no zero one.)
		p.Stats.InNoChecksum6.Inc()
		p.Stats.InCsumErrors.Inc()
		pk.Release()
		return
	}
	if !pk.Offload.ChecksumVerified() && !u.ChecksumValid(h.Src, h.Dst) {
		p.Stats.InCsumErrors.Inc()
		pk.Release()
		return
	}
	if h.Dst.IsMulticast() {
		p.deliverMulticast(pk, h, u)
		return
	}
	nw, err := p.nets.For(h.Dst)
	if err != nil { // a family that registered no UDP: cannot happen
		p.Stats.InErrors.Inc()
		pk.Release()
		return
	}
	c := p.lookup(nw, h.Dst, u.DstPort(), netip.AddrPortFrom(h.Src, u.SrcPort()), h.In)
	if c == nil {
		pk.SetLen(h.Off + len(u))
		if p.forward(pk, dgram, nw, h, u) {
			return
		}
		// RFC 1122 section 4.1.3.1: port unreachable. SendError declines
		// for broadcasts, as section 3.2.2 requires.
		p.Stats.NoPorts.Inc()
		if pk.Offload.Flags&buffer.NeedsCsum != 0 {
			// The quote goes back with the checksum the datagram would
			// have had on a wire, not the link's partial one.
			wire.FinishChecksum(u, 0, wire.UDPChecksumOffset)
		}
		nw.ReportError(dgram, ip.PortUnreachable)
		pk.Release()
		return
	}
	// Keep the datagram trimmed to the UDP length; the network header
	// stays in front so the reader learns the source (datagram).
	pk.SetLen(h.Off + len(u))
	queueable(pk, h)
	if !c.enqueue(pk, h.Src.Zone(), h.In) {
		p.Stats.RcvbufErrors.Inc()
		pk.Release()
		return
	}
	p.Stats.InDatagrams.Inc()
}

// MaxPayload is the largest UDP payload in one IPv4 datagram (65507
// bytes); MaxPayload6 in one IPv6 datagram without a jumbo payload (65527
// bytes: IPv6's Payload Length excludes its fixed header, RFC 8200
// section 3).
const (
	MaxPayload  = wire.IPv4MaxTotalLen - wire.IPv4MinHeaderLen - wire.UDPHeaderLen
	MaxPayload6 = wire.IPv6MaxPayloadLen - wire.UDPHeaderLen
)

// maxPayload is the largest payload to dst's family.
func maxPayload(dst netip.Addr) int {
	if dst.Is6() {
		return MaxPayload6
	}
	return MaxPayload
}

// send builds and sends one datagram from b's address and port laddr to
// raddr, with the endpoint's multicast options o when raddr is a group,
// through the interface named device when it is not empty
// (Conn.BindToDevice).
func (p *Protocol) send(b ip.Binding, laddr, raddr netip.AddrPort, device string, data []byte, o *mcastOpts) error {
	// An endpoint sends within the families its binding takes, as the
	// kernel's sockets of one family do.
	if !b.Reaches(raddr.Addr()) || raddr.Port() == 0 {
		return syscall.EINVAL
	}
	if len(data) > maxPayload(raddr.Addr()) {
		return syscall.EMSGSIZE
	}
	nw, err := p.nets.For(raddr.Addr())
	if err != nil {
		p.Stats.OutErrors.Inc()
		return err
	}
	var ri ip.Route
	sp := ip.SendParams{Proto: wire.ProtoUDP}
	if raddr.Addr().IsMulticast() && o != nil {
		ri, err = multicastRoute(nw, raddr.Addr(), o)
		sp.TTL, sp.MulticastLoop = o.ttl, !o.noLoop
	} else if dr, ok := nw.(ip.DeviceRouter); ok && device != "" {
		ri, err = dr.RouteVia(raddr.Addr(), device)
	} else {
		ri, err = nw.Route(raddr.Addr())
	}
	if err != nil {
		p.Stats.OutErrors.Inc()
		return fmt.Errorf("%w: %w", err, syscall.ENETUNREACH)
	}
	src := laddr.Addr()
	if src.IsUnspecified() {
		src = ri.Src
	}
	dst := ip.Scoped(raddr.Addr(), ri)
	if dst.Zone() != "" && !dst.IsLinkLocalUnicast() && !dst.IsMulticast() {
		// A zone that chose the interface (WriteMsg) and is no part of
		// a global address.
		dst = dst.WithZone("")
	}
	pk := p.env.Pool.Get(wire.UDPHeaderLen + len(data))
	buf := pk.Bytes()
	copy(buf[wire.UDPHeaderLen:], data)
	wire.EncodeUDP(buf, &wire.UDPFields{SrcPort: laddr.Port(), DstPort: raddr.Port()})
	if ri.Offloads.TxChecksum {
		// The link finishes the checksum (the network layer does, should
		// the datagram need fragmenting).
		wire.SetUDPPartialChecksum(buf, src, dst)
		pk.Offload = buffer.Offload{Flags: buffer.NeedsCsum, CsumOffset: wire.UDPChecksumOffset}
	} else {
		// Always computed, so that IPv6, which requires it (RFC 8200
		// section 8.1), gets it too.
		wire.SetUDPChecksum(buf, src, dst)
	}
	sp.Src, sp.Dst = src, dst
	if err := nw.SendRoute(pk, sp, ri); err != nil {
		p.Stats.OutErrors.Inc()
		return err
	}
	p.Stats.OutDatagrams.Inc()
	return nil
}

func opError(op string, addr netip.AddrPort, err error) error {
	return &net.OpError{Op: op, Net: "udp", Addr: net.UDPAddrFromAddrPort(addr), Err: err}
}

// deviceRouter is the IPv4 network layer as the router through a named
// interface that binding to a device needs, and whether it is one.
func (p *Protocol) deviceRouter() (ip.DeviceRouter, bool) {
	nw, err := p.nets.For(netip.IPv4Unspecified())
	if err != nil {
		return nil, false
	}
	dr, ok := nw.(ip.DeviceRouter)
	return dr, ok
}
