package icmpv6

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ping"
	"github.com/gonetstack/gonet/wire"
)

// MaxPingSize is the most echo data one datagram carries: the largest
// payload, 65535 bytes, less the ICMPv6 header.
const MaxPingSize = wire.IPv6MaxPayloadLen - wire.ICMPv6HeaderLen

// ErrNoSource is returned by Ping when the host has no address to send
// from towards the destination (none yet, or only tentative ones). It
// wraps syscall.EADDRNOTAVAIL.
var ErrNoSource = fmt.Errorf("icmpv6: no source address: %w", syscall.EADDRNOTAVAIL)

// Ping sends an echo request (RFC 4443 section 4.1) with size bytes of
// data to dst and waits for the matching reply, an ICMPv6 error quoting
// the request (its errno: ENETUNREACH, EHOSTUNREACH, EMSGSIZE for Packet
// Too Big...), or ctx to end; it returns the round-trip time. A
// link-local dst names its interface by its zone, unless the host has
// one. The outstanding pings are package ping's, as ICMP's are: a
// goroutine each, matched by this stack's identifier and a sequence
// number, the data checked against the pattern sent.
func (p *Protocol) Ping(ctx context.Context, dst netip.Addr, size int) (time.Duration, error) {
	if !dst.Is6() || dst.Is4In6() {
		return 0, fmt.Errorf("icmpv6: ping %v: not an IPv6 address: %w", dst, syscall.EAFNOSUPPORT)
	}
	if size < 0 || size > MaxPingSize {
		return 0, fmt.Errorf("icmpv6: ping %v: size %d outside 0..%d: %w", dst, size, MaxPingSize, syscall.EMSGSIZE)
	}
	return p.pings.Ping(ctx, dst, size)
}

// sendEcho encodes and sends an echo request for the ping client. The
// route is found first: the checksum covers the source it picks. A
// request longer than the path MTU goes in fragments, as ping6 -s sends
// them.
func (p *Protocol) sendEcho(dst netip.Addr, seq uint16, size int) error {
	r, err := p.net.Route(dst)
	if err != nil {
		return err
	}
	if !r.Src.IsValid() {
		return ErrNoSource
	}
	pk := p.env.Pool.Get(wire.ICMPv6HeaderLen + size)
	b := pk.Bytes()
	ping.Fill(b[wire.ICMPv6HeaderLen:], seq)
	wire.EncodeICMPv6(b, &wire.ICMPv6Fields{Type: wire.ICMPv6EchoRequest, Rest: wire.EchoRest(p.pings.Ident(), seq)})
	return p.send(pk, ip.SendParams{Src: r.Src, Dst: dst}, r, &p.Stats.OutEchos)
}
