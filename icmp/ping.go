package icmp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// MaxPingSize is the most echo data one datagram carries: 65535 less the
// IPv4 and ICMP headers.
const MaxPingSize = wire.IPv4MaxTotalLen - wire.IPv4MinHeaderLen - wire.ICMPHeaderLen

// ping is one outstanding echo request. Its goroutine (runPing) owns it;
// the dealer only sends on reply.
type ping struct {
	dst   netip.Addr
	size  int
	seq   uint16
	reply chan pingReply
}

type pingReply struct {
	at  time.Time
	err error
}

// Ping sends an echo request with size bytes of data to dst and waits for
// the matching reply, an ICMP error about the request, or ctx to end. Each
// outstanding ping is a goroutine of its own, registered by sequence number
// so that the dealer can wake it.
func (p *Protocol) Ping(ctx context.Context, dst netip.Addr, size int) (time.Duration, error) {
	if size < 0 || size > MaxPingSize {
		return 0, fmt.Errorf("icmp: ping %v: size %d outside 0..%d: %w", dst, size, MaxPingSize, syscall.EMSGSIZE)
	}
	res := make(chan pingReply, 1)
	p.pingMu.Lock()
	select {
	case <-p.done:
		p.pingMu.Unlock()
		return 0, fmt.Errorf("icmp: ping %v: %w", dst, net.ErrClosed)
	default:
	}
	p.wg.Add(1)
	p.pingMu.Unlock()
	sent := p.env.Clock.Now()
	go p.runPing(ctx, dst, size, res)
	r := <-res
	if r.err != nil {
		return 0, r.err
	}
	return r.at.Sub(sent), nil
}

// ErrPingsExhausted is returned when 65536 pings are outstanding at once.
var ErrPingsExhausted = errors.New("icmp: every echo sequence number is in use")

func (p *Protocol) runPing(ctx context.Context, dst netip.Addr, size int, res chan<- pingReply) {
	defer p.wg.Done()
	pg := &ping{dst: dst, size: size, reply: make(chan pingReply, 1)}
	if !p.register(pg) {
		res <- pingReply{err: ErrPingsExhausted}
		return
	}
	p.Stats.PingsOutstanding.Add(1)
	defer func() {
		p.pingMu.Lock()
		delete(p.pings, pg.seq)
		p.pingMu.Unlock()
		p.Stats.PingsOutstanding.Add(-1)
	}()

	pk := p.env.Pool.Get(wire.ICMPHeaderLen + size)
	b := pk.Bytes()
	fillPattern(b[wire.ICMPHeaderLen:], pg.seq)
	wire.EncodeICMP(b, &wire.ICMPFields{Type: wire.ICMPEchoRequest, Rest: wire.EchoRest(p.ident, pg.seq)})
	p.Stats.OutMsgs.Inc()
	p.Stats.OutEchos.Inc()
	if err := p.ip.Send(pk, ip.SendParams{Dst: dst, Proto: wire.ProtoICMP}); err != nil {
		res <- pingReply{err: fmt.Errorf("icmp: ping %v: %w", dst, err)}
		return
	}
	select {
	case r := <-pg.reply:
		if r.err != nil {
			r.err = fmt.Errorf("icmp: ping %v: %w", dst, r.err)
		}
		res <- r
	case <-ctx.Done():
		res <- pingReply{err: fmt.Errorf("icmp: ping %v seq %d: %w", dst, pg.seq, ctx.Err())}
	case <-p.done:
		res <- pingReply{err: fmt.Errorf("icmp: ping %v: %w", dst, net.ErrClosed)}
	}
}

// register gives pg a free sequence number.
func (p *Protocol) register(pg *ping) bool {
	p.pingMu.Lock()
	defer p.pingMu.Unlock()
	for range 1 << 16 {
		seq := p.nextSeq
		p.nextSeq++
		if p.pings[seq] == nil {
			pg.seq = seq
			p.pings[seq] = pg
			return true
		}
	}
	return false
}

// fillPattern fills echo data with bytes derived from the sequence number,
// so that a reply with other data is recognised.
func fillPattern(b []byte, seq uint16) {
	for i := range b {
		b[i] = byte(i) + byte(seq)
	}
}

func patternOK(b []byte, seq uint16) bool {
	for i, c := range b {
		if c != byte(i)+byte(seq) {
			return false
		}
	}
	return true
}

// echoReplied wakes the ping an echo reply answers. It runs in the dealer.
func (p *Protocol) echoReplied(m wire.ICMP, from netip.Addr) {
	if m.Ident() != p.ident {
		p.Stats.InEchoRepUnknown.Inc()
		return
	}
	p.pingMu.Lock()
	pg := p.pings[m.Seq()]
	p.pingMu.Unlock()
	if pg == nil || pg.dst != from {
		p.Stats.InEchoRepUnknown.Inc()
		return
	}
	data := m.Payload()
	if len(data) != pg.size || !patternOK(data, pg.seq) {
		p.Stats.InEchoRepCorrupt.Inc()
		return
	}
	select {
	case pg.reply <- pingReply{at: p.env.Clock.Now()}:
	default: // a duplicate reply
	}
}

// pingFailed wakes the ping that an ICMP error quotes; quoted is the ICMP
// header of the request.
func (p *Protocol) pingFailed(m wire.ICMP, quoted []byte) {
	if quoted[0] != wire.ICMPEchoRequest || uint16(quoted[4])<<8|uint16(quoted[5]) != p.ident {
		return
	}
	seq := uint16(quoted[6])<<8 | uint16(quoted[7])
	p.pingMu.Lock()
	pg := p.pings[seq]
	p.pingMu.Unlock()
	if pg == nil {
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
	select {
	case pg.reply <- pingReply{err: err}:
	default:
	}
}
