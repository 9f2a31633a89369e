package tcp

import (
	"fmt"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/seqnum"
)

// CongestionControl decides the congestion window. The sender owns loss
// detection and recovery (when to retransmit what: RFC 5681, RFC 6582,
// RFC 6675, RFC 8985); the congestion control only answers how much may
// be in flight, told of each event. NewReno (below) and CUBIC (cubic.go,
// the default) implement it.
type CongestionControl interface {
	// Name is the algorithm's name, as Config.Congestion and
	// Conn.SetCongestion take it.
	Name() string
	// CWnd and SSThresh are in bytes.
	CWnd() int
	SSThresh() int
	// OnAck is told of newly acknowledged bytes outside recovery.
	OnAck(a AckEvent)
	// OnEnterRecovery is told of a loss found by duplicate ACKs (fast
	// retransmit), with the bytes in flight.
	OnEnterRecovery(inflight int)
	// OnRecoveryAck is told of each ACK during NewReno fast recovery: a
	// duplicate (acked 0) or a partial acknowledgement of acked bytes.
	// SACK recovery (RFC 6675) does not call it: pipe, against SSThresh,
	// paces it instead.
	OnRecoveryAck(acked int)
	// OnExitRecovery is told of the ACK that ends fast recovery.
	OnExitRecovery(inflight int)
	// OnRTO is told of a retransmission timeout.
	OnRTO(inflight int)
	// OnIdle is told that the connection sent nothing for longer than an
	// RTO (RFC 5681 section 4.1: restart from the restart window).
	OnIdle()
	// SetMSS updates the sender's maximum segment size.
	SetMSS(mss int)
}

// AckEvent is an acknowledgement of new data outside recovery, as the
// sender saw it.
type AckEvent struct {
	// Acked is the bytes newly acknowledged; Inflight the most bytes in
	// flight (SND.MAX - SND.UNA) since the current window of data began,
	// at least the flight before the ACK (sender.go, flightUse).
	Acked, Inflight int
	// RTT is the sample this ACK gave, zero if none (Karn's rule); SRTT
	// the smoothed RTT after it (RFC 6298), zero before any sample.
	RTT, SRTT time.Duration
	// SndUna is SND.UNA after the ACK, SndMax the highest sequence number
	// sent: HyStart++ ends a round when SND.UNA passes the SND.MAX of the
	// round's start (RFC 9406 section 4.2).
	SndUna, SndMax seqnum.Value
	// Now is the time on the stack's clock.
	Now time.Time
}

// newCongestion makes the named congestion control; st takes its counters.
func newCongestion(name string, mss int, st *Stats) (CongestionControl, error) {
	switch name {
	case "cubic":
		return newCubic(mss, st), nil
	case "newreno", "reno":
		return newNewReno(mss), nil
	}
	return nil, fmt.Errorf("tcp: unknown congestion control %q: %w", name, syscall.ENOENT)
}

// congestion makes the stack's congestion control for a new connection.
// An unknown Config.Congestion falls back to the default, CUBIC.
func (p *Protocol) congestion(mss int) CongestionControl {
	cc, err := newCongestion(p.cfg.Congestion, mss, &p.Stats)
	if err != nil {
		cc = newCubic(mss, &p.Stats)
	}
	return cc
}

// seeder is implemented by GoNet's congestion controls: one that takes
// over a connection mid-way starts from the window in force, not from the
// initial window (see Conn.SetCongestion).
type seeder interface {
	seed(cwnd, ssthresh int, inRecovery bool)
}

// initialWindow is RFC 6928's initial window: min(10*MSS, max(2*MSS, 14600)).
func initialWindow(mss int) int { return min(10*mss, max(2*mss, 14600)) }

// newReno is RFC 5681's congestion control with RFC 6582's fast recovery.
type newReno struct {
	mss      int
	cwnd     int
	ssthresh int
	// acc accumulates acknowledged bytes in congestion avoidance, so the
	// window grows by one MSS per window of data (RFC 5681 section 3.1,
	// the byte-counting variant of RFC 3465).
	acc int
}

func newNewReno(mss int) *newReno {
	return &newReno{mss: mss, cwnd: initialWindow(mss), ssthresh: 1 << 30}
}

func (r *newReno) Name() string         { return "newreno" }
func (r *newReno) CWnd() int            { return r.cwnd }
func (r *newReno) SSThresh() int        { return r.ssthresh }
func (r *newReno) SetMSS(mss int)       { r.mss = mss }
func (r *newReno) OnIdle()              { r.cwnd = min(r.cwnd, initialWindow(r.mss)) }
func (r *newReno) lossThresh(f int) int { return max(f/2, 2*r.mss) }

func (r *newReno) seed(cwnd, ssthresh int, _ bool) {
	r.cwnd, r.ssthresh, r.acc = cwnd, ssthresh, 0
}

// windowLimited reports whether the window was the sender's limit when an
// ACK came, so that it may grow (RFC 5681 section 3.1, RFC 7661): an
// application-limited sender must not inflate it without use. In slow
// start the window doubles each round, so a sender held back by the peer's
// receive window, which opens as fast in the same rounds, would stop
// growing its window while using half of it; there it counts as used
// while at least half of it is in flight, as Linux's tcp_is_cwnd_limited
// has it. On a 100 Mbit/s 40 ms path that made 1 MB to the kernel take
// 0.53 s where the kernel's own sender takes 0.34; with it, 0.36.
func windowLimited(a AckEvent, cwnd, ssthresh, mss int) bool {
	if cwnd < ssthresh {
		return 2*a.Inflight >= cwnd
	}
	return a.Inflight+mss >= cwnd
}

func (r *newReno) OnAck(a AckEvent) {
	if !windowLimited(a, r.cwnd, r.ssthresh, r.mss) {
		return
	}
	if r.cwnd < r.ssthresh {
		// Slow start, with RFC 3465's limit of L=2 MSS per ACK.
		r.cwnd += min(a.Acked, 2*r.mss)
		return
	}
	r.acc += a.Acked
	if r.acc >= r.cwnd {
		r.acc -= r.cwnd
		r.cwnd += r.mss
	}
}

// OnEnterRecovery: RFC 6582 section 3.2 step 3 (RFC 5681 section 3.2
// steps 2-3): ssthresh = max(FlightSize/2, 2*SMSS), cwnd = ssthresh+3*SMSS.
func (r *newReno) OnEnterRecovery(inflight int) {
	r.ssthresh = r.lossThresh(inflight)
	r.cwnd = r.ssthresh + 3*r.mss
}

// OnRecoveryAck: a duplicate inflates the window by one MSS (RFC 5681 step
// 4); a partial ACK deflates it by the amount acknowledged and adds back one
// MSS if that was at least one (RFC 6582 section 3.2 step 5).
func (r *newReno) OnRecoveryAck(acked int) { r.cwnd = recoveryWindow(r.cwnd, acked, r.mss) }

// recoveryWindow is cwnd after an ACK in fast recovery: inflated by one
// MSS for a duplicate (RFC 5681 section 3.2 step 4); deflated by what a
// partial ACK acknowledged, one MSS added back if that was at least one
// (RFC 6582 section 3.2 step 5). NewReno and CUBIC share it: CUBIC
// changes only the reduction.
func recoveryWindow(cwnd, acked, mss int) int {
	if acked == 0 {
		return cwnd + mss
	}
	cwnd -= acked
	if acked >= mss {
		cwnd += mss
	}
	return max(cwnd, mss)
}

// exitWindow is cwnd as fast recovery ends: RFC 6582 section 3.2 step 6,
// option 1, min(ssthresh, max(FlightSize, SMSS) + SMSS).
func exitWindow(ssthresh, inflight, mss int) int { return min(ssthresh, max(inflight, mss)+mss) }

// OnExitRecovery: RFC 6582 section 3.2 step 6, option 1:
// cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
func (r *newReno) OnExitRecovery(inflight int) {
	r.cwnd = exitWindow(r.ssthresh, inflight, r.mss)
	r.acc = 0
}

// OnRTO: RFC 5681 section 3.1 equation 4, and a loss window of one MSS.
func (r *newReno) OnRTO(inflight int) {
	r.ssthresh = r.lossThresh(inflight)
	r.cwnd = r.mss
	r.acc = 0
}
