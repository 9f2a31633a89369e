package gateway

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/stack"
)

// What the gateway logs, on its stack's logger: a flow refused by a limit,
// which in a flood comes once per SYN or datagram, is a rate-limited
// warning (logs.Repeated) naming the flow, the counter and the limit; a
// flow refused by policy (Deny, NoHostLoopback) is the operator's intent,
// logged at debug.

// gatewayLog is the gateway's share of the stack's logging.
type gatewayLog struct {
	log *slog.Logger
	// flowLimit: MaxFlows flows already (Stats.FlowLimit).
	flowLimit *logs.Repeated
	// connectLimit: MaxConnecting connects in progress, none old enough
	// to give way (Stats.ConnectLimit).
	connectLimit *logs.Repeated
	// connectEvicted: a connect in progress ended for a newer one
	// (Stats.ConnectEvicted).
	connectEvicted *logs.Repeated
}

func newGatewayLog(s *stack.Stack) gatewayLog {
	log, c := s.Logger(), s.Clock()
	return gatewayLog{
		log:            log,
		flowLimit:      logs.NewRepeated(log, c, slog.LevelWarn, "flow limit reached: the guest's new flow is refused (raise -max-flows)", 0),
		connectLimit:   logs.NewRepeated(log, c, slog.LevelWarn, "host connect limit reached: the guest's SYN goes unanswered", 0),
		connectEvicted: logs.NewRepeated(log, c, slog.LevelWarn, "host connect limit reached: the oldest connect in progress gives way", 0),
	}
}

// flowLimited counts and logs a flow refused by MaxFlows.
func (g *Gateway) flowLimited(proto Proto, src, dst netip.AddrPort) {
	g.Stats.FlowLimit.Inc()
	if n, ok := g.log.flowLimit.Allow(); ok {
		g.log.flowLimit.Log(n, append(logs.Counter("Gateway.FlowLimit", g.Stats.FlowLimit.Load()),
			slog.String("proto", string(proto)), logs.Flow(src, dst), slog.Int("max_flows", g.cfg.MaxFlows))...)
	}
}

// connectLimited counts and logs a SYN left unanswered by MaxConnecting.
func (g *Gateway) connectLimited(src, dst netip.AddrPort) {
	g.Stats.ConnectLimit.Inc()
	if n, ok := g.log.connectLimit.Allow(); ok {
		g.log.connectLimit.Log(n, append(logs.Counter("Gateway.ConnectLimit", g.Stats.ConnectLimit.Load()),
			logs.Flow(src, dst), slog.Int("max_connecting", g.cfg.MaxConnecting))...)
	}
}

// connectEvicted counts and logs a connect in progress ended to make room
// for the flow from src to dst.
func (g *Gateway) connectEvicted(src, dst netip.AddrPort) {
	g.Stats.ConnectEvicted.Inc()
	if n, ok := g.log.connectEvicted.Allow(); ok {
		g.log.connectEvicted.Log(n, append(logs.Counter("Gateway.ConnectEvicted", g.Stats.ConnectEvicted.Load()),
			logs.Flow(src, dst), slog.Int("max_connecting", g.cfg.MaxConnecting))...)
	}
}

// denied counts and logs, at debug, a flow refused by policy; flow is
// logs.Flow's or logs.Hosts'.
func (g *Gateway) denied(proto string, flow slog.Attr) {
	g.Stats.Denied.Inc()
	if g.log.log.Enabled(context.Background(), slog.LevelDebug) {
		g.log.log.LogAttrs(context.Background(), slog.LevelDebug, "flow denied", slog.String("proto", proto), flow)
	}
}
