package dhcp

import (
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/internal/logs"
)

// What the server logs: one event per change of a lease, with the
// client's MAC and the address, never one per message. A lease granted or
// released is info; a renewal, which every client sends at T1, is debug; an
// address a client declined (someone else uses it) is a warning; an
// exhausted pool, which a client retrying its DISCOVER hits again and
// again, a rate-limited warning.

// serverLog is the server's logging.
type serverLog struct {
	log       *slog.Logger
	exhausted *logs.Repeated
}

func newServerLog(cfg *Config) serverLog {
	log := logs.OrDiscard(cfg.Logger)
	return serverLog{
		log:       log,
		exhausted: logs.NewRepeated(log, cfg.Clock, slog.LevelWarn, "DHCP pool exhausted: a client gets no offer", 0),
	}
}

// granted logs a lease granted to hw on a, or renewed.
func (s *Server) granted(hw []byte, a netip.Addr, renewed bool) {
	if renewed {
		s.log.log.Debug("DHCP lease renewed", "mac", net.HardwareAddr(hw).String(), "addr", a.String(),
			"lease", s.cfg.LeaseTime.String())
		return
	}
	s.log.log.Info("DHCP lease granted", "mac", net.HardwareAddr(hw).String(), "addr", a.String(),
		"lease", s.cfg.LeaseTime.String())
}

// released logs a lease its client gave back.
func (s *Server) released(hw []byte, a netip.Addr) {
	s.log.log.Info("DHCP lease released", "mac", net.HardwareAddr(hw).String(), "addr", a.String())
}

// declined logs an address a client found in use, out of the pool for
// hold.
func (s *Server) declined(hw []byte, a netip.Addr, hold time.Duration) {
	s.log.log.Warn("DHCP address declined: another host uses it", "mac", net.HardwareAddr(hw).String(),
		"addr", a.String(), "hold", hold.String())
}

// poolExhausted counts and logs, as the rate allows, a DISCOVER from hw
// that found no free address.
func (s *Server) poolExhausted(hw []byte) {
	s.Stats.PoolExhausted.Inc()
	if n, ok := s.log.exhausted.Allow(); ok {
		s.log.exhausted.Log(n, append(logs.Counter("DHCP.PoolExhausted", s.Stats.PoolExhausted.Load()),
			slog.String("mac", net.HardwareAddr(hw).String()), slog.Int("pool", s.cfg.PoolSize))...)
	}
}
