package ethernet

import (
	"log/slog"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/internal/logs"
)

// What a NIC logs: its link failing. A read or write that fails may fail
// again at once, batch after batch (a TAP device whose carrier is gone), so
// each is a rate-limited warning naming the NIC, the error and the counter
// that moved; the frames that cross are never logged.

// nicLog is a NIC's logging; the zero value logs nothing.
type nicLog struct {
	log          *slog.Logger
	readFailed   *logs.Repeated
	writeFailed  *logs.Repeated
	linkVanished bool // logged that the link closed under the NIC
}

// SetLogger has the NIC log its link's failures on log, rate-limited on c.
// It must be called before Start; without it the NIC logs nothing.
func (n *NIC) SetLogger(log *slog.Logger, c clock.Clock) {
	if n.started {
		panic("ethernet: SetLogger after Start")
	}
	log = logs.OrDiscard(log).With(slog.String("nic", n.name))
	n.log = nicLog{
		log:         log,
		readFailed:  logs.NewRepeated(log, c, slog.LevelWarn, "link read failed", 0),
		writeFailed: logs.NewRepeated(log, c, slog.LevelWarn, "link write failed: frames dropped", 0),
	}
}

// readFailed counts and logs a failed read from the link.
func (n *NIC) readFailed(err error) {
	n.Stats.RxLinkErrors.Inc()
	if r := n.log.readFailed; r != nil {
		if s, ok := r.Allow(); ok {
			r.Log(s, append(logs.Counter("NIC."+n.name+".RxLinkErrors", n.Stats.RxLinkErrors.Load()),
				slog.String("err", err.Error()))...)
		}
	}
}

// writeFailed logs a write to the link that left unsent frames unsent;
// transmit has counted them.
func (n *NIC) writeFailed(err error, unsent int) {
	if r := n.log.writeFailed; r != nil {
		if s, ok := r.Allow(); ok {
			msg := "short write"
			if err != nil {
				msg = err.Error()
			}
			r.Log(s, append(logs.Counter("NIC."+n.name+".TxLinkErrors", n.Stats.TxLinkErrors.Load()),
				slog.String("err", msg), slog.Int("unsent", unsent))...)
		}
	}
}

// linkClosed logs that the link closed under a NIC that was not stopped:
// nothing more will be received on it.
func (n *NIC) linkClosed(err error) {
	if n.log.log != nil && !n.stopping.Load() {
		n.log.log.Error("link closed: the NIC receives nothing more", "err", err)
	}
}
