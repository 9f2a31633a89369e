package ipv4

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// ErrMessageTooLong is returned when a datagram with DF set exceeds the MTU,
// or any datagram exceeds 65535 bytes. It wraps syscall.EMSGSIZE.
var ErrMessageTooLong = fmt.Errorf("ipv4: %w", syscall.EMSGSIZE)

// Send sends pkt, whose data is the transport header and payload, as an IPv4
// datagram. It takes ownership of pkt in every case. The route is looked up
// here; callers that already did so may pass it to SendRoute.
func (p *Protocol) Send(pkt *buffer.Packet, sp ip.SendParams) error {
	ri, err := p.Route(sp.Dst)
	if err != nil {
		p.Stats.OutNoRoutes.Inc()
		pkt.Release()
		return err
	}
	return p.SendRoute(pkt, sp, ri)
}

// SendRoute is Send on a route found by Route. sp.DF sets the header's DF
// bit and forbids fragmenting here.
func (p *Protocol) SendRoute(pkt *buffer.Packet, sp ip.SendParams, ri ip.Route) error {
	p.Stats.OutRequests.Inc()
	if !sp.Src.IsValid() || sp.Src.IsUnspecified() {
		sp.Src = ri.Src
	} else if sp.Src != ri.Src {
		if !p.mayUseSource(sp.Src, &ri) {
			pkt.Release()
			return ErrForeignSource
		}
		// RFC 3927 section 2.6.2: a datagram a socket bound to a
		// link-local address sends where the route has a router goes
		// to its destination on the link all the same.
		if ri.NextHop != sp.Dst && LinkLocalPrefix.Contains(sp.Src) {
			ri.NextHop = sp.Dst
		}
	}
	multicast := sp.Dst.IsMulticast()
	if sp.TTL == 0 {
		sp.TTL = p.cfg.DefaultTTL
		if multicast {
			// RFC 1112 section 6.1: "If the upper-layer protocol
			// chooses not to specify a time-to-live, it should
			// default to 1 for all multicast IP datagrams".
			sp.TTL = 1
		}
	}
	f := wire.IPv4Fields{
		TOS:      sp.TOS,
		TotalLen: wire.IPv4MinHeaderLen + pkt.Len(),
		TTL:      sp.TTL,
		Protocol: sp.Proto,
		Src:      sp.Src,
		Dst:      sp.Dst,
	}
	if sp.DF {
		f.Flags = wire.IPv4FlagDF
	}
	switch {
	case len(sp.Options) > 0:
		if err := p.sendOptions(&f, sp); err != nil {
			pkt.Release()
			return err
		}
	case sp.RouterAlert:
		f.Options = wire.IPv4RouterAlert[:]
	}
	f.TotalLen += len(f.Options)
	loop := multicast && sp.MulticastLoop && !ri.Local
	if multicast {
		p.Stats.OutMcastPkts.Inc()
	}
	if f.TotalLen > wire.IPv4MaxTotalLen {
		pkt.Release()
		return ErrMessageTooLong
	}
	// RFC 6864 section 4.1: IDs matter only for datagrams that may be
	// fragmented, but a fresh ID on each costs nothing and helps tools.
	f.ID = uint16(p.nextID.Add(1))
	if f.TotalLen <= ri.MTU || ip.SuperSegment(pkt, &ri, &p.Stats.OutGSO, &p.Stats.OutGSOFallbacks) {
		wire.EncodeIPv4(pkt.Prepend(f.HeaderLen()), &f)
		pkt.Offload.Prepended(f.HeaderLen())
		if loop {
			p.loopMulticast(&ri, pkt)
		}
		p.output(&ri, pkt)
		return nil
	}
	if sp.DF {
		p.Stats.FragFails.Inc()
		pkt.Release()
		return ErrMessageTooLong
	}
	p.fragment(pkt, &f, &ri, loop)
	return nil
}

// errBadOptions is Send's error for options that are no header's.
var errBadOptions = fmt.Errorf("ipv4: options not a multiple of 4 bytes of at most 40: %w", syscall.EINVAL)

// sendOptions gives f the options sp asks for: sp.Options, with Router
// Alert's when asked, and this host's entries in Record Route and
// Timestamp as the datagram leaves from f.Src (RFC 791 section 3.1).
func (p *Protocol) sendOptions(f *wire.IPv4Fields, sp ip.SendParams) error {
	opts := slices.Clone(sp.Options)
	if sp.RouterAlert {
		opts = append(opts, wire.IPv4RouterAlert[:]...)
	}
	if len(opts)%4 != 0 || len(opts) > wire.IPv4MaxOptionsLen {
		return errBadOptions
	}
	wire.RecordIPv4Options(opts, f.Src, wire.MillisSinceMidnightUT(p.env.Clock.Now().UnixMilli()))
	f.Options = opts
	return nil
}

// output passes a whole datagram to the interface, or loops it back.
func (p *Protocol) output(ri *ip.Route, pkt *buffer.Packet) {
	switch {
	case ri.Local:
		ip.FinishChecksum(pkt) // our own input checks it
		p.loop.Deliver(pkt)
	case ri.Bcast && ri.NextHop != limitedBroadcast:
		routeIface(ri).out.OutputBroadcast(pkt)
	default:
		routeIface(ri).out.Output(ri.NextHop, pkt)
	}
}

// fragment splits the datagram f describes, with pkt as its payload, into
// fragments that fit ri's MTU (RFC 791 section 3.2, "An Example
// Fragmentation Procedure"), and sends them in order. Every fragment but the
// last carries a multiple of 8 payload bytes.
func (p *Protocol) fragment(pkt *buffer.Packet, f *wire.IPv4Fields, ri *ip.Route, loop bool) {
	defer pkt.Release()
	ip.FinishChecksum(pkt) // fragments cannot carry a partial checksum
	payload := pkt.Bytes()
	// RFC 791 section 3.2: only the options with the copied flag go into
	// the fragments after the first.
	var copied []byte
	if len(f.Options) > 0 {
		copied = wire.CopiedIPv4Options(nil, f.Options)
	}
	ff := *f
	for off := 0; off < len(payload); {
		if off > 0 {
			ff.Options = copied
		}
		hl := ff.HeaderLen()
		n := min((ri.MTU-hl)&^7, len(payload)-off)
		frag := p.env.Pool.Get(hl + n)
		ff.TotalLen = hl + n
		ff.FragOff = off
		ff.Flags = f.Flags
		if off+n < len(payload) {
			ff.Flags |= wire.IPv4FlagMF
		}
		b := frag.Bytes()
		wire.EncodeIPv4(b, &ff)
		copy(b[hl:], payload[off:off+n])
		p.Stats.FragCreates.Inc()
		if loop {
			p.loopMulticast(ri, frag)
		}
		p.output(ri, frag)
		off += n
	}
	p.Stats.FragOKs.Inc()
}

// IsMessageTooLong reports whether err says a datagram was too big.
func IsMessageTooLong(err error) bool { return errors.Is(err, syscall.EMSGSIZE) }
