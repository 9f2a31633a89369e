package tcp

import (
	"math"
	"time"
)

// CUBIC (RFC 9438), GoNet's default congestion control, as Linux's. After a
// loss the window follows a cubic function of the time since congestion
// avoidance began, W_cubic(t) = C*(t-K)^3 + W_max (section 4.2): concave
// up to the W_max where the loss happened, flat around it, then convex as
// it probes beyond. It never grows slower than Reno would on the same path
// (the Reno-friendly region, section 4.3). Slow start is HyStart++
// (hystart.go) the first time, RFC 5681's after a loss.
//
// The RFC counts in segments and seconds; the interface counts bytes, so
// the window is kept in bytes and W_cubic scaled by the MSS. Time is the
// stack's clock, as the sender passes it in each AckEvent.

// The constants of RFC 9438 section 4.1.1.
const (
	cubicC    = 0.4 // segments per second cubed
	cubicBeta = 0.7
	// cubicAlpha is Reno's additive increase that gives the same average
	// window as Reno with beta 0.5 (section 4.3): 3*(1-beta)/(1+beta).
	cubicAlpha = 3 * (1 - cubicBeta) / (1 + cubicBeta)
)

// noSSThresh is ssthresh before any congestion: "arbitrarily high" (RFC
// 5681 section 3.1), which marks the initial slow start.
const noSSThresh = 1 << 30

// cubic is one connection's CUBIC state.
type cubic struct {
	mss      int
	cwnd     int // bytes
	ssthresh int // bytes
	hs       hyStart

	// The current congestion avoidance stage (section 4.2): epoch is
	// t_epoch, zero until the first ACK in congestion avoidance after a
	// congestion event; k is K in seconds.
	epoch time.Time
	k     float64
	// wMax is W_max in bytes: the window before the last reduction, or
	// (zero) none, after a timeout or a slow start left without loss,
	// which make the next stage start with K = 0 and W_max = cwnd
	// (sections 4.8 and 4.10).
	wMax float64
	// cwndPrior is the window at the last reduction, and wEst the
	// Reno-friendly estimate W_est (section 4.3), both in bytes.
	cwndPrior float64
	wEst      float64
	// acc holds the fraction of a byte of growth the last ACKs earned.
	acc float64

	inRecovery bool
	// rtoHeld: a timeout has reduced ssthresh and no new data has been
	// acknowledged since, so another timeout holds it (RFC 5681 section
	// 3.1: "the value of ssthresh is held constant").
	rtoHeld bool
}

func newCubic(mss int, st *Stats) *cubic {
	if st == nil {
		st = new(Stats)
	}
	return &cubic{mss: mss, cwnd: initialWindow(mss), ssthresh: noSSThresh, hs: newHyStart(st)}
}

func (c *cubic) Name() string   { return "cubic" }
func (c *cubic) CWnd() int      { return c.cwnd }
func (c *cubic) SSThresh() int  { return c.ssthresh }
func (c *cubic) SetMSS(mss int) { c.mss = mss }

// seed takes over a window from another algorithm: a new stage starts at
// the current window as after a timeout, and HyStart++ runs only if the
// initial slow start was still under way.
func (c *cubic) seed(cwnd, ssthresh int, inRecovery bool) {
	c.cwnd, c.ssthresh, c.inRecovery = cwnd, ssthresh, inRecovery
	c.wMax, c.cwndPrior, c.epoch, c.acc = 0, float64(cwnd), time.Time{}, 0
	if ssthresh < noSSThresh {
		c.hs.stop()
	}
}

func (c *cubic) OnAck(a AckEvent) {
	c.rtoHeld = false
	// Grow only when the window was the limit (RFC 9438 section 5.8,
	// windowLimited).
	cwndLimited := windowLimited(a, c.cwnd, c.ssthresh, c.mss)
	if c.cwnd < c.ssthresh {
		if c.hs.active() {
			inc, exit := c.hs.onAck(&a, c.mss)
			if cwndLimited {
				c.cwnd += inc
			}
			if exit {
				// Section 4.10: slow start left without a loss, so W_max
				// is undefined; congestion avoidance starts with K = 0
				// and W_max = cwnd.
				c.ssthresh = c.cwnd
				c.cwndPrior, c.wMax, c.epoch = float64(c.cwnd), 0, time.Time{}
			}
			return
		}
		if cwndLimited {
			// Slow start after a loss, with RFC 3465's L = 2 MSS.
			c.cwnd += min(a.Acked, 2*c.mss)
		}
		return
	}
	c.hs.stop()
	if cwndLimited {
		c.avoid(a)
	}
}

// wCubic is W_cubic(t) in bytes (section 4.2, figure 1).
func (c *cubic) wCubic(t float64) float64 {
	d := t - c.k
	return cubicC*d*d*d*float64(c.mss) + c.wMax
}

// avoid is congestion avoidance (sections 4.2 to 4.5) for one ACK.
func (c *cubic) avoid(a AckEvent) {
	cwnd := float64(c.cwnd)
	if c.epoch.IsZero() {
		// The stage begins: K = cubic_root((W_max - cwnd_epoch)/C), in
		// segments. Without a W_max, or below the window (a window that
		// outgrew it in slow start), K = 0 and W_max = cwnd_epoch.
		c.epoch = a.Now
		if c.wMax <= cwnd {
			c.wMax, c.k = cwnd, 0
		} else {
			c.k = math.Cbrt((c.wMax - cwnd) / float64(c.mss) / cubicC)
		}
		c.wEst = cwnd
		c.acc = 0
	}
	t := a.Now.Sub(c.epoch).Seconds()
	// Section 4.3: W_est grows by alpha_cubic segments per window
	// acknowledged, and by Reno's one once it passes the window at the
	// last reduction.
	alpha := cubicAlpha
	if c.wEst >= c.cwndPrior {
		alpha = 1
	}
	c.wEst += alpha * float64(a.Acked) * float64(c.mss) / cwnd
	if c.wCubic(t) < c.wEst {
		// The Reno-friendly region: "cwnd SHOULD be set to W_est"; set,
		// never lowered, on an ACK.
		c.cwnd = max(c.cwnd, int(c.wEst))
		return
	}
	// The concave (4.4) and convex (4.5) regions: toward W_cubic one RTT
	// ahead, the target kept within [cwnd, 1.5*cwnd], by
	// (target - cwnd)/cwnd segments per segment acknowledged.
	target := min(max(c.wCubic(t+a.SRTT.Seconds()), cwnd), 1.5*cwnd)
	c.acc += (target - cwnd) * float64(a.Acked) / cwnd
	if n := int(c.acc); n > 0 {
		c.cwnd += n
		c.acc -= float64(n)
	}
}

// reduce is the multiplicative decrease of section 4.6 with the fast
// convergence of section 4.7, for a congestion event at window cwnd.
func (c *cubic) reduce() {
	cwnd := float64(c.cwnd)
	if cwnd < c.wMax {
		// Fast convergence: the window fell short of the last W_max, so
		// a new flow is taking its share; give up more of the plateau.
		c.wMax = cwnd * (1 + cubicBeta) / 2
	} else {
		c.wMax = cwnd
	}
	c.cwndPrior = cwnd
	// ssthresh from cwnd, not FlightSize, as Linux: section 4.6 allows it
	// where the window does not grow while application-limited (OnAck).
	c.ssthresh = max(int(math.Round(cwnd*cubicBeta)), 2*c.mss)
	c.epoch, c.acc = time.Time{}, 0
	c.hs.stop()
}

// OnEnterRecovery: section 4.6, "cwnd = max(ssthresh, 2)" for a loss.
func (c *cubic) OnEnterRecovery(int) {
	c.reduce()
	c.cwnd = c.ssthresh
	c.inRecovery = true
	c.rtoHeld = false
}

// OnRecoveryAck is fast recovery's own (RFC 5681 section 3.2 step 4, RFC
// 6582 section 3.2 step 5), as NewReno's: CUBIC changes only the reduction.
func (c *cubic) OnRecoveryAck(acked int) { c.cwnd = recoveryWindow(c.cwnd, acked, c.mss) }

// OnExitRecovery deflates the window as RFC 6582 section 3.2 step 6 does;
// the next ACK in congestion avoidance starts a stage at that window.
func (c *cubic) OnExitRecovery(inflight int) {
	c.cwnd = exitWindow(c.ssthresh, inflight, c.mss)
	c.inRecovery = false
}

// OnRTO: section 4.8. ssthresh as for a loss, cwnd one segment, and the
// next congestion avoidance stage starts with K = 0 and W_max = cwnd. A
// timeout in fast recovery, or one repeated before any new ACK, does not
// reduce ssthresh again: the loss it reports was answered already.
func (c *cubic) OnRTO(int) {
	if !c.inRecovery && !c.rtoHeld {
		c.reduce()
	}
	c.cwnd = c.mss
	c.wMax, c.epoch, c.acc = 0, time.Time{}, 0
	c.inRecovery = false
	c.rtoHeld = true
	c.hs.stop()
}

// OnIdle restarts from the initial window after an idle period (RFC 5681
// section 4.1); the stage ends with it, so time spent idle does not count
// towards the cubic curve (RFC 9438 section 5.8).
func (c *cubic) OnIdle() {
	c.cwnd = min(c.cwnd, initialWindow(c.mss))
	c.epoch, c.acc = time.Time{}, 0
}
