package dns

import (
	"log/slog"
	"net/netip"

	"github.com/gonetstack/gonet/internal/logs"
)

// What the forwarder logs: an upstream that does not answer, and queries
// refused over MaxInFlight. Both come once per query while they last (a
// host whose resolver is down sees every lookup of its guest fail), so
// each is a rate-limited warning naming the upstream or the bound and the
// counter that moved; answers are never logged.

// forwarderLog is the forwarder's logging.
type forwarderLog struct {
	upstream *logs.Repeated
	refused  *logs.Repeated
}

func newForwarderLog(cfg *Config) forwarderLog {
	return forwarderLog{
		upstream: logs.NewRepeated(cfg.Logger, cfg.Clock, slog.LevelWarn, "DNS upstream failed", 0),
		refused:  logs.NewRepeated(cfg.Logger, cfg.Clock, slog.LevelWarn, "DNS queries refused: too many in flight", 0),
	}
}

// upstreamFailed counts and logs, as the rate allows, an attempt with up
// that failed with err: a timeout or another error.
func (f *Forwarder) upstreamFailed(up netip.AddrPort, err error, timeout bool) {
	c, name := &f.Stats.UpstreamErrors, "DNS.UpstreamErrors"
	if timeout {
		c, name = &f.Stats.Timeouts, "DNS.Timeouts"
	}
	c.Inc()
	if n, ok := f.log.upstream.Allow(); ok {
		f.log.upstream.Log(n, append(logs.Counter(name, c.Load()),
			slog.String("upstream", up.String()), slog.String("err", err.Error()))...)
	}
}

// refusedQuery counts and logs, as the rate allows, a query refused over
// MaxInFlight.
func (f *Forwarder) refusedQuery() {
	f.Stats.Refused.Inc()
	if n, ok := f.log.refused.Allow(); ok {
		f.log.refused.Log(n, append(logs.Counter("DNS.Refused", f.Stats.Refused.Load()),
			slog.Int("max_in_flight", f.cfg.MaxInFlight))...)
	}
}
