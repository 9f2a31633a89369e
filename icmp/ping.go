package icmp

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

// MaxPingSize is the most echo data one datagram carries: 65535 less the
// IPv4 and ICMP headers.
const MaxPingSize = wire.IPv4MaxTotalLen - wire.IPv4MinHeaderLen - wire.ICMPHeaderLen

// Ping sends an echo request with size bytes of data to dst and waits for
// the matching reply, an ICMP error about the request, or ctx to end. Each
// outstanding ping is a goroutine of its own, registered by sequence number
// so that the dealer can wake it (package ping, which ICMPv6 shares).
func (p *Protocol) Ping(ctx context.Context, dst netip.Addr, size int) (time.Duration, error) {
	if size < 0 || size > MaxPingSize {
		return 0, fmt.Errorf("icmp: ping %v: size %d outside 0..%d: %w", dst, size, MaxPingSize, syscall.EMSGSIZE)
	}
	return p.pings.Ping(ctx, dst, size)
}

// ErrPingsExhausted is returned when 65536 pings are outstanding at once.
var ErrPingsExhausted = ping.ErrExhausted

// sendEcho encodes and sends an echo request for the ping client.
func (p *Protocol) sendEcho(dst netip.Addr, seq uint16, size int) error {
	pk := p.env.Pool.Get(wire.ICMPHeaderLen + size)
	b := pk.Bytes()
	ping.Fill(b[wire.ICMPHeaderLen:], seq)
	wire.EncodeICMP(b, &wire.ICMPFields{Type: wire.ICMPEchoRequest, Rest: wire.EchoRest(p.pings.Ident(), seq)})
	p.Stats.OutMsgs.Inc()
	p.Stats.OutEchos.Inc()
	return p.ip.Send(pk, ip.SendParams{Dst: dst, Proto: wire.ProtoICMP})
}

// pingFailed wakes the ping that an ICMP error quotes; quoted is the ICMP
// header of the request.
func (p *Protocol) pingFailed(m wire.ICMP, quoted []byte) {
	if quoted[0] != wire.ICMPEchoRequest {
		return
	}
	var err error
	switch m.Type() {
	case wire.ICMPDestUnreach:
		err = fmt.Errorf("destination unreachable, code %d: %w", m.Code(), syscall.EHOSTUNREACH)
	case wire.ICMPTimeExceeded:
		err = fmt.Errorf("time exceeded, code %d: %w", m.Code(), syscall.ETIMEDOUT)
	default:
		err = fmt.Errorf("ICMP type %d code %d", m.Type(), m.Code())
	}
	ident := uint16(quoted[4])<<8 | uint16(quoted[5])
	seq := uint16(quoted[6])<<8 | uint16(quoted[7])
	p.pings.Fail(ident, seq, err)
}
