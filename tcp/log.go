package tcp

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/gonetstack/gonet/internal/logs"
)

// What TCP logs: events, never segments. A connection that ends by a
// reset, a timeout or an abort is logged at debug, once per connection; a
// refusal for want of memory and a listener sending SYN cookies because its
// backlog is full are warnings that may come once per SYN in a flood, so
// each is a logs.Repeated: the first, then one per interval with the count
// left out. With the logger off at their level they cost an atomic load,
// and the data path logs nothing.

// logger is TCP's share of the stack's logging.
type logger struct {
	log *slog.Logger
	// memory is "connection refused: memory budget", the counter
	// MemoryRefusals moving.
	memory *logs.Repeated
}

func newLogger(p *Protocol) logger {
	log := logs.OrDiscard(p.env.Log)
	return logger{
		log: log,
		memory: logs.NewRepeated(log, p.env.Clock, slog.LevelWarn,
			"TCP refused a connection: the memory budget is short (raise -memory)", 0),
	}
}

// memoryRefused counts a connection from src to dst (src opened it)
// refused for want of memory, and logs it as the rate allows.
func (p *Protocol) memoryRefused(src, dst netip.AddrPort) {
	p.Stats.MemoryRefusals.Inc()
	if n, ok := p.logger.memory.Allow(); ok {
		b := p.env.Budget
		p.logger.memory.Log(n, append(logs.Counter("TCP.MemoryRefusals", p.Stats.MemoryRefusals.Load()),
			logs.Flow(src, dst), slog.Int64("used", b.Used()), slog.Int64("limit", b.Limit()))...)
	}
}

// newCookieLog returns a listener's warning that it answers SYNs with
// cookies, as Linux's "Possible SYN flooding on port X. Sending cookies.":
// one per listener, so that a flood on one port does not hide another's.
func (p *Protocol) newCookieLog() *logs.Repeated {
	return logs.NewRepeated(p.logger.log, p.env.Clock, slog.LevelWarn,
		"possible SYN flooding: the backlog is full, sending SYN cookies", 0)
}

// cookieSent logs, as the rate allows, that l answered a SYN from remote
// with a cookie because its backlog was full.
func (l *Listener) cookieSent(remote netip.AddrPort) {
	if n, ok := l.cookieLog.Allow(); ok {
		l.cookieLog.Log(n, slog.String("listener", l.laddr.String()), slog.String("src", remote.String()),
			slog.Int("backlog", l.backlog))
	}
}

// logEnd logs, at debug, a connection ended by err in state from: a reset,
// a timeout, an abort. An orderly end (err nil) is not logged.
func (c *Conn) logEnd(from State, err error) {
	if err == nil || err == errStackClosed || !c.p.logger.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	c.p.logger.log.LogAttrs(context.Background(), slog.LevelDebug, "TCP connection ended",
		logs.Flow(c.id.local, c.id.remote), slog.String("state", from.String()), slog.String("err", err.Error()))
}
