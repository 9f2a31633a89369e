package udp

import (
	"net"
	"net/netip"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// The forwarder: a datagram that no endpoint takes goes to a hook, which
// may open an endpoint for its flow, bound to the datagram's destination
// (foreign to the host when a forwarding interface took it, ipv4/forward.go)
// and connected to its source. The flow's later datagrams go to that
// endpoint, and what it writes leaves from the destination's address: a
// gateway relays the flow through a host socket that way. Without a hook,
// or when the hook decides nothing, the datagram is answered with ICMP
// port unreachable, as before (RFC 1122 section 4.1.3.1).
//
// Goroutines. The hook runs in the network layer's dealer goroutine, synchronously,
// so that the flow's endpoint exists before the dealer takes the flow's
// next datagram (a hook running on its own would be offered every datagram
// that came before it opened one); so it must not block: it decides, opens
// the endpoint and hands it to a goroutine of its own.

// ForwardRequest is a datagram to an address and port no endpoint is bound
// to, offered to the forwarder hook. It is valid only while the hook runs.
type ForwardRequest struct {
	p       *Protocol
	local   netip.AddrPort
	remote  netip.AddrPort
	pk      *buffer.Packet // the datagram, until Open queues it
	nw      ip.Network     // the network layer that delivered it
	hdr     ip.Header
	dgram   []byte // the datagram from its network header, for errors
	udp     wire.UDP
	payload []byte
	decided bool
}

// LocalAddr is the datagram's destination: the local side of the endpoint
// Open makes.
func (r *ForwardRequest) LocalAddr() netip.AddrPort { return r.local }

// RemoteAddr is the datagram's source.
func (r *ForwardRequest) RemoteAddr() netip.AddrPort { return r.remote }

// Payload is the datagram's data. It is the stack's buffer: valid only
// until the hook returns, and after Open the endpoint's first datagram.
func (r *ForwardRequest) Payload() []byte { return r.payload }

// Open makes an endpoint bound to LocalAddr and connected to RemoteAddr,
// which takes the flow's datagrams (this one first) and sends from
// LocalAddr. Closing it ends the flow: its next datagram comes to the hook
// again.
func (r *ForwardRequest) Open() (*Connected, error) {
	if r.decided {
		return nil, opError("listen", r.local, syscall.EALREADY)
	}
	p := r.p
	c := newConn(p, r.local.Addr())
	c.laddr, c.raddr = r.local, r.remote
	p.mu.Lock()
	if p.flows[flowKey{r.local, r.remote}] != nil {
		p.mu.Unlock()
		return nil, opError("listen", r.local, syscall.EADDRINUSE)
	}
	if p.flows == nil {
		p.flows = map[flowKey]*Conn{}
	}
	p.flows[flowKey{r.local, r.remote}] = c
	p.Stats.Sockets.Add(1)
	p.mu.Unlock()
	r.decided = true
	p.Stats.ForwardOpened.Inc()
	pk := r.pk
	r.pk = nil
	queueable(pk, r.hdr)
	if c.enqueue(pk, r.hdr.Src.Zone(), r.hdr.In) {
		p.Stats.InDatagrams.Inc()
	} else {
		p.Stats.RcvbufErrors.Inc()
		pk.Release()
	}
	return &Connected{Conn: c, raddr: r.remote}, nil
}

// Unreachable answers the datagram with the network layer's error for kind
// (ip.HostUnreachable, ip.PortUnreachable or ip.AdminProhibited: an ICMP or
// ICMPv6 destination unreachable), quoting it, from the host's own address.
func (r *ForwardRequest) Unreachable(kind ip.ErrorKind) {
	if r.decided {
		return
	}
	r.decided = true
	r.p.Stats.ForwardUnreachable.Inc()
	if r.pk.Offload.Flags&buffer.NeedsCsum != 0 {
		wire.FinishChecksum(r.udp, 0, wire.UDPChecksumOffset) // as a wire would carry it
	}
	r.nw.ReportError(r.dgram, kind)
}

// Drop answers nothing.
func (r *ForwardRequest) Drop() {
	if r.decided {
		return
	}
	r.decided = true
	r.p.Stats.ForwardDropped.Inc()
}

// flowKey is a forwarded flow's endpoint key, local side first.
type flowKey struct{ local, remote netip.AddrPort }

// SetForwarder sets the hook offered datagrams no endpoint takes (nil:
// none). It runs in the network layer's dealer goroutine and must not block; the
// request and its payload are the hook's only until it returns.
func (p *Protocol) SetForwarder(hook func(*ForwardRequest)) {
	p.mu.Lock()
	p.hook = hook
	p.mu.Unlock()
}

// forward offers the datagram pk (dgram as it came, from its network
// header on), whose header h and UDP view u the dealer checked,
// to the hook. It reports whether the hook decided, and then it has taken
// pk; otherwise pk stays the caller's, to answer with port unreachable.
// Broadcasts are never offered: they are for the host's own services.
func (p *Protocol) forward(pk *buffer.Packet, dgram []byte, nw ip.Network, h ip.Header, u wire.UDP) bool {
	p.mu.RLock()
	hook := p.hook
	p.mu.RUnlock()
	if hook == nil || nw.IsBroadcast(h.Dst) {
		return false
	}
	r := &ForwardRequest{
		p:       p,
		local:   netip.AddrPortFrom(h.Dst, u.DstPort()),
		remote:  netip.AddrPortFrom(h.Src, u.SrcPort()),
		pk:      pk,
		nw:      nw,
		hdr:     h,
		dgram:   dgram,
		udp:     u,
		payload: u.Payload(),
	}
	p.Stats.ForwardRequests.Inc()
	hook(r)
	if !r.decided {
		return false
	}
	if r.pk != nil {
		r.pk.Release()
	}
	return true
}

// RemoteAddrPort returns the peer of a connected endpoint.
func (c *Connected) RemoteAddrPort() netip.AddrPort { return c.raddr }

var _ net.Conn = (*Connected)(nil)

// Unreachable tells the flow's peer that its datagrams cannot be delivered
// beyond: the network layer's error for kind (ip.PortUnreachable when the
// relayed datagram met no socket, say) from the host's address,
// as a router reports what lies past it. A gateway that relayed the
// datagram no longer holds it, so the error quotes the headers it had
// (RFC 792 asks for the IP header and the first 64 bits of data, which for
// UDP is its header): the flow's addresses and ports, all a peer's stack
// needs to find the socket to tell.
func (c *Connected) Unreachable(kind ip.ErrorKind) {
	nw, err := c.p.nets.For(c.raddr.Addr())
	if err != nil {
		return
	}
	var b [wire.IPv6HeaderLen + wire.UDPHeaderLen]byte
	var quote []byte
	src, dst := c.raddr.Addr(), c.laddr.Addr()
	if src.Is4() {
		quote = b[:wire.IPv4MinHeaderLen+wire.UDPHeaderLen]
		wire.EncodeIPv4(quote, &wire.IPv4Fields{TotalLen: len(quote), TTL: 64, Protocol: wire.ProtoUDP, Src: src, Dst: dst})
	} else {
		quote = b[:]
		wire.EncodeIPv6(quote, &wire.IPv6Fields{PayloadLen: wire.UDPHeaderLen, NextHeader: wire.ProtoUDP, HopLimit: 64, Src: src, Dst: dst})
	}
	wire.EncodeUDP(quote[len(quote)-wire.UDPHeaderLen:], &wire.UDPFields{SrcPort: c.raddr.Port(), DstPort: c.laddr.Port()})
	c.p.Stats.ForwardUnreachable.Inc()
	nw.ReportError(quote, kind)
}
