// Package logs holds what GoNet's layers share to log with log/slog: a
// logger that drops everything, for a stack nobody asked to log, the
// attributes that identify an event (the flow's 4-tuple, the counter that
// moved), and Repeated, the warning of a drop that may repeat per packet,
// logged once and then at most once per interval with the count suppressed
// in between.
//
// The stack logs events, never packets: a NIC going down, a lease
// granted, a limit reached. What a packet triggers is a Repeated, whose
// Allow costs an atomic load when it declines, so that the paths `make
// allocs` pins stay free of allocations whatever the level.
package logs

import (
	"log/slog"
	"net/netip"
)

// Discard returns a logger that writes nothing and whose Enabled is false
// at every level: a library does not write to stderr uninvited, so a stack
// configured without a logger gets this one.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// OrDiscard returns l, or Discard() when l is nil.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return Discard()
	}
	return l
}

// Flow is the attribute naming a flow by its 4-tuple, as a group
// flow.src, flow.dst: one key a log pipeline can filter on, whatever the
// event.
func Flow(src, dst netip.AddrPort) slog.Attr {
	return slog.Group("flow", slog.String("src", src.String()), slog.String("dst", dst.String()))
}

// Hosts is Flow for what has no ports (a ping): flow.src and flow.dst are
// addresses.
func Hosts(src, dst netip.Addr) slog.Attr {
	return slog.Group("flow", slog.String("src", src.String()), slog.String("dst", dst.String()))
}

// Counter is the pair of attributes of a counter-driven event: the
// counter's name as gonet stats prints it and its value now.
func Counter(name string, value uint64) []slog.Attr {
	return []slog.Attr{slog.String("counter", name), slog.Uint64("value", value)}
}
