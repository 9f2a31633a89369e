package tcp

import (
	"time"

	"github.com/gonetstack/gonet/seqnum"
)

// HyStart++ (RFC 9406): slow start that watches the round-trip time and
// leaves before the queue it builds overflows. When a round's minimum RTT
// rises by a threshold over the previous round's, slow start gives way to
// Conservative Slow Start (CSS), which grows a quarter as fast; if the RTT
// falls back the exit was spurious and slow start resumes, and after
// CSS_ROUNDS rounds of CSS the connection enters congestion avoidance. It
// runs in the initial slow start only (section 4.2: later slow starts
// have the ssthresh a loss found to stop at).

// The constants of RFC 9406 section 4.3.
const (
	hsMinRTTThresh     = 4 * time.Millisecond
	hsMaxRTTThresh     = 16 * time.Millisecond
	hsMinRTTDivisor    = 8
	hsNRTTSample       = 8
	hsCSSGrowthDivisor = 4
	hsCSSRounds        = 5
	// hsL bounds the growth per ACK, in segments: "L = 8 if non-paced",
	// and GoNet does not pace.
	hsL = 8
)

// hsInfinity stands for the RFC's "infinity": no RTT measured.
const hsInfinity = time.Duration(1<<63 - 1)

type hsPhase uint8

const (
	hsSlowStart hsPhase = iota
	hsCSS
	hsDone // congestion avoidance, or a later slow start
)

func (p hsPhase) String() string {
	return [...]string{"slow start", "CSS", "done"}[p]
}

// hyStart is HyStart++'s state for one connection.
type hyStart struct {
	st    *Stats
	phase hsPhase
	// windowEnd is SND.MAX at the start of the current round; inRound
	// says it is set.
	windowEnd seqnum.Value
	inRound   bool

	lastRoundMinRTT    time.Duration
	currentRoundMinRTT time.Duration
	rttSampleCount     int
	cssBaselineMinRTT  time.Duration
	cssRounds          int // rounds ended in CSS, the partial first one included
	cssAcc             int // bytes acknowledged in CSS not yet turned into window
}

func newHyStart(st *Stats) hyStart {
	return hyStart{
		st:                 st,
		lastRoundMinRTT:    hsInfinity,
		currentRoundMinRTT: hsInfinity,
		cssBaselineMinRTT:  hsInfinity,
	}
}

// active reports whether HyStart++ still governs slow start.
func (h *hyStart) active() bool { return h.phase != hsDone }

// stop ends HyStart++: a loss was found (section 4.2: "If loss or ECN-
// marking is observed anytime during standard slow start or CSS, enter
// congestion avoidance"), or the connection left slow start otherwise.
func (h *hyStart) stop() { h.phase = hsDone }

// onAck takes an acknowledgement in slow start and returns how many bytes
// the window grows by, and whether CSS has run its course, so that the
// caller enters congestion avoidance with ssthresh = cwnd.
func (h *hyStart) onAck(a *AckEvent, mss int) (inc int, exit bool) {
	// Rounds (section 4.2), by sequence numbers: "When windowEnd is
	// ACKed, the current round ends": the ACK covers the first byte sent
	// after the round began, so its sample, and those after it, time
	// data sent in the round just ended, and belong to the next.
	if !h.inRound || a.SndUna.GreaterThan(h.windowEnd) {
		if h.inRound && h.phase == hsCSS {
			h.cssRounds++
			if h.cssRounds >= hsCSSRounds {
				// "If CSS_ROUNDS rounds are complete, enter congestion
				// avoidance by setting the ssthresh to the current cwnd."
				h.phase = hsDone
				h.st.HyStartCSSExits.Inc()
				return 0, true
			}
		}
		h.inRound = true
		h.windowEnd = a.SndMax
		h.lastRoundMinRTT = h.currentRoundMinRTT
		h.currentRoundMinRTT = hsInfinity
		h.rttSampleCount = 0
	}
	n := min(a.Acked, hsL*mss)
	if h.phase == hsCSS {
		// "cwnd = cwnd + (min(N, L * SMSS) / CSS_GROWTH_DIVISOR)", with
		// the remainder kept for the next ACK.
		h.cssAcc += n
		inc = h.cssAcc / hsCSSGrowthDivisor
		h.cssAcc %= hsCSSGrowthDivisor
	} else {
		inc = n
	}
	if a.RTT <= 0 {
		return inc, false // no sample (Karn's rule)
	}
	h.currentRoundMinRTT = min(h.currentRoundMinRTT, a.RTT)
	h.rttSampleCount++
	if h.rttSampleCount < hsNRTTSample {
		return inc, false
	}
	switch h.phase {
	case hsSlowStart:
		if h.currentRoundMinRTT == hsInfinity || h.lastRoundMinRTT == hsInfinity {
			break
		}
		thresh := max(hsMinRTTThresh, min(h.lastRoundMinRTT/hsMinRTTDivisor, hsMaxRTTThresh))
		if h.currentRoundMinRTT >= h.lastRoundMinRTT+thresh {
			h.cssBaselineMinRTT = h.currentRoundMinRTT
			h.phase = hsCSS
			h.cssRounds = 0 // the partial round now under way counts as the first
			h.cssAcc = 0
			h.st.HyStartDelayDetect.Inc()
		}
	case hsCSS:
		if h.currentRoundMinRTT < h.cssBaselineMinRTT {
			// The RTT fell below where it stood when slow start was left:
			// the exit was spurious; "resume slow start including
			// HyStart++".
			h.cssBaselineMinRTT = hsInfinity
			h.phase = hsSlowStart
			h.st.HyStartSpurious.Inc()
		}
	}
	return inc, false
}
