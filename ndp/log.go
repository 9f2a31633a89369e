package ndp

import (
	"log/slog"
	"net/netip"

	"github.com/gonetstack/gonet/internal/logs"
)

// What ndp logs: a duplicate address found by DAD, a warning, once per
// address (RFC 4862 section 5.4.5: "the node SHOULD log a system management
// error"); another node advertising an address we hold past DAD, a
// warning rate-limited since it may keep doing so.

// ndpLog is ndp's share of the stack's logging.
type ndpLog struct {
	log      *slog.Logger
	conflict *logs.Repeated
}

func newNDPLog(p *Protocol) ndpLog {
	log := logs.OrDiscard(p.env.Log).With(slog.String("nic", p.nic.Name()))
	return ndpLog{
		log:      log,
		conflict: logs.NewRepeated(log, p.env.Clock, slog.LevelWarn, "address conflict: another node advertises our IPv6 address", 0),
	}
}

// duplicate logs that DAD found addr in use by another node.
func (p *Protocol) logDuplicate(addr netip.Addr, retry bool) {
	p.log.log.Warn("duplicate IPv6 address: not used", slog.String("addr", addr.String()), slog.Bool("retrying", retry))
}

// conflicted logs an advertisement of addr, which we hold, from another
// node.
func (p *Protocol) conflicted(addr netip.Addr) {
	if n, ok := p.log.conflict.Allow(); ok {
		p.log.conflict.Log(n, slog.String("addr", addr.String()))
	}
}
