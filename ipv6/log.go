package ipv6

import (
	"context"
	"log/slog"
)

// What IPv6 logs, at debug only, as IPv4 does: a path MTU lowered by a
// Packet Too Big (RFC 8201) and a datagram whose fragments did not all
// arrive in time (RFC 8200 section 4.5). Both can come from a peer at
// will, so neither is logged at the default level, and both check the
// level before building anything.

func (p *Protocol) debug() bool {
	return p.env.Log != nil && p.env.Log.Enabled(context.Background(), slog.LevelDebug)
}

func (p *Protocol) logPMTU(dst string, old, mtu int) {
	if p.debug() {
		p.env.Log.LogAttrs(context.Background(), slog.LevelDebug, "path MTU lowered",
			slog.String("dst", dst), slog.Int("from", old), slog.Int("mtu", mtu))
	}
}

func (p *Protocol) logReasmTimeout(k fragKey) {
	if p.debug() {
		p.env.Log.LogAttrs(context.Background(), slog.LevelDebug, "fragment reassembly timed out",
			slog.String("src", k.src.String()), slog.String("dst", k.dst.String()), slog.Uint64("id", uint64(k.id)))
	}
}
