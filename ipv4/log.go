package ipv4

import (
	"context"
	"log/slog"
	"net/netip"
)

// What IPv4 logs, at debug only: a path MTU lowered by an ICMP report (once
// per destination and change, RFC 1191) and a datagram whose fragments
// did not all arrive in time (RFC 791's reassembly timeout, once per
// datagram). Both can come from a peer at will, so neither is logged at
// the default level, and both check the level before building anything.

func (p *Protocol) debug() bool {
	return p.env.Log != nil && p.env.Log.Enabled(context.Background(), slog.LevelDebug)
}

// logPMTU logs that dst's path MTU fell from old to mtu.
func (p *Protocol) logPMTU(dst netip.Addr, old, mtu int) {
	if p.debug() {
		p.env.Log.LogAttrs(context.Background(), slog.LevelDebug, "path MTU lowered",
			slog.String("dst", dst.String()), slog.Int("from", old), slog.Int("mtu", mtu))
	}
}

// logReasmTimeout logs a datagram whose reassembly timed out.
func (p *Protocol) logReasmTimeout(k fragKey) {
	if p.debug() {
		p.env.Log.LogAttrs(context.Background(), slog.LevelDebug, "fragment reassembly timed out",
			slog.String("src", k.src.String()), slog.String("dst", k.dst.String()),
			slog.Int("id", int(k.id)), slog.Int("proto", int(k.proto)))
	}
}
