package arp

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/wire"
)

// What ARP logs: another station claiming one of our addresses (RFC 5227
// section 2.4's conflict), a warning rate-limited since the other station
// may keep claiming it, packet after packet; and, at debug, an address that
// did not resolve, once per resolution, not per packet dropped with it.

// arpLog is ARP's share of the stack's logging.
type arpLog struct {
	log      *slog.Logger
	conflict *logs.Repeated
}

func newARPLog(p *Protocol) arpLog {
	log := logs.OrDiscard(p.env.Log).With(slog.String("nic", p.nic.Name()))
	return arpLog{
		log:      log,
		conflict: logs.NewRepeated(log, p.env.Clock, slog.LevelWarn, "address conflict: another station claims our address", 0),
	}
}

// conflicted logs a packet from mac that gives our address addr as its
// sender's.
func (p *Protocol) conflicted(addr netip.Addr, mac wire.MAC) {
	if n, ok := p.log.conflict.Allow(); ok {
		p.log.conflict.Log(n, slog.String("addr", addr.String()), slog.String("mac", mac.String()))
	}
}

// acd logs a conflict that address conflict detection acted on (RFC
// 5227): one warning each, since each is bounded by the protocol (one per
// probe, one per DefendInterval, one giving up).
func (l arpLog) acd(c Conflict) {
	var msg string
	switch {
	case c.Probing:
		msg = "address conflict: probe answered, address in use by another station"
	case c.GaveUp:
		msg = "address conflict: giving the address up to another station"
	default:
		msg = "address conflict: defending the address with an announcement"
	}
	l.log.LogAttrs(context.Background(), slog.LevelWarn, msg,
		slog.String("addr", c.Addr.String()), slog.String("mac", c.MAC.String()))
}

// unresolved logs, at debug, that addr did not resolve and dropped
// packets were waiting on it.
func (p *Protocol) unresolved(addr netip.Addr, dropped int) {
	select {
	case <-p.done:
		return // the stack is closing: nothing failed to resolve
	default:
	}
	if p.log.log.Enabled(context.Background(), slog.LevelDebug) {
		p.log.log.LogAttrs(context.Background(), slog.LevelDebug, "address did not resolve",
			slog.String("addr", addr.String()), slog.Int("dropped", dropped))
	}
}
