package ipv4

import (
	"fmt"
	"net/netip"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
)

// Forwarding interfaces: the stack as the router of terminated flows.
//
// A host takes only datagrams addressed to it (RFC 1122 section 3.2.1.3).
// An interface in forwarding mode also takes unicast datagrams to any
// other address, and lets the stack answer from that address: what a user
// mode gateway (slirp, passt, gVisor's netstack behind gvisor-tap-vsock)
// does for a guest whose default route points at it, terminating each of
// the guest's flows in the stack and relaying it through the host's
// sockets. The stack does not forward what it takes: the transports
// deliver it to their forwarder hooks (tcp, udp and icmp each have one),
// which decide per flow.
//
// Taking a datagram for a foreign address is the receive half ("promiscuous
// mode", in gVisor's words); sending with a source address that is not the
// host's is the transmit half ("spoofing"), and is allowed only out of a
// forwarding interface, so that a stack with none keeps a host's rule that
// it sends from its own addresses only.

// ErrForeignSource is returned by Send for a datagram whose source is not
// one of the host's addresses, on a route out of an interface that does not
// forward. It wraps syscall.EADDRNOTAVAIL, as the kernel's bind does.
var ErrForeignSource = fmt.Errorf("ipv4: source address not the host's, on an interface that does not forward: %w", syscall.EADDRNOTAVAIL)

// SetForwarding turns the interface's forwarding mode on or off: while on,
// it takes unicast datagrams to any address (foreignUnicast), and the
// stack may send from any source address out of it. Datagrams already
// queued to the dealer are judged by the mode they arrived in.
func (i *Interface) SetForwarding(on bool) { i.forwarding.Store(on) }

// Forwarding reports whether the interface is in forwarding mode.
func (i *Interface) Forwarding() bool { return i.forwarding.Load() }

// Deliver hands a batch the interface's link received to the IPv4 dealer,
// marked as the interface's, so that the dealer knows whether it came in
// forwarding mode. It runs in the NIC's receive goroutine, never blocks
// and takes ownership of b (Protocol.Deliver).
func (i *Interface) Deliver(b *buffer.Batch) {
	b.From = i
	if i.forwarding.Load() {
		b.From = forwardingFrom{i}
	}
	i.p.in.Deliver(b)
}

// forwardingFrom marks a batch that came in on an interface in forwarding
// mode, as it was when the batch came.
type forwardingFrom struct{ *Interface }

// receivedOn returns the interface b came in on, and whether it was
// forwarding then.
func receivedOn(b *buffer.Batch) (*Interface, bool) {
	switch i := b.From.(type) {
	case *Interface:
		return i, false
	case forwardingFrom:
		return i.Interface, true
	}
	return nil, false
}

// foreignUnicast reports whether a forwarding interface may take a datagram
// to dst, an address not the host's nor one of its broadcasts: a unicast
// address a router would forward. Excluded, as RFC 1812 section 5.3.7 and
// section 4.2.2.11 exclude them from forwarding: 0.0.0.0/8 ("this
// network"), 127.0.0.0/8 (loopback), 224.0.0.0/4 (multicast) and
// 240.0.0.0/4 (reserved, with the limited broadcast); and 169.254.0.0/16,
// which RFC 3927 section 2.7 forbids routers to forward.
func foreignUnicast(dst netip.Addr) bool {
	b := dst.As4()
	switch {
	case b[0] == 0, b[0] == 127, b[0] >= 224:
		return false
	case LinkLocalPrefix.Contains(dst):
		return false
	}
	return true
}

// mayUseSource reports whether a datagram may leave on ri with source src,
// which is not the route's own: when src is one of the host's addresses, or
// the route leaves through a forwarding interface. It counts the outcome.
func (p *Protocol) mayUseSource(src netip.Addr, ri *ip.Route) bool {
	if p.tables.load().isLocal(src) {
		return true
	}
	if i := routeIface(ri); i == nil || !i.forwarding.Load() {
		p.Stats.OutSrcDenied.Inc()
		return false
	}
	p.Stats.OutForeign.Inc()
	return true
}

// IsHostDst reports whether a datagram to dst is for the host itself: to
// one of its addresses or a broadcast, rather than to a foreign address
// a forwarding interface took. Transports use it to keep sockets bound to
// the wildcard address from answering for foreign addresses.
func (p *Protocol) IsHostDst(dst netip.Addr) bool { return p.tables.load().acceptsDst(dst, nil) }
