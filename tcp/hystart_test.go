package tcp

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gonetstack/gonet/seqnum"
)

// HyStart++ (RFC 9406) in isolation: rounds of ACKs with chosen RTT
// samples.

// hsRig feeds a hyStart rounds of ACKs of one segment each. The first ACK
// of a round covers the SND.MAX recorded when the previous round began;
// the others stay short of the SND.MAX this round begins with.
type hsRig struct {
	t   *testing.T
	st  Stats
	h   hyStart
	una seqnum.Value
	end seqnum.Value
	inc int // the growth the last round earned
}

func newHSRig(t *testing.T) *hsRig {
	r := &hsRig{t: t, una: 5000, end: 5000}
	r.h = newHyStart(&r.st)
	return r
}

// ack feeds one ACK of a segment with an RTT sample (zero: none); first
// starts a round.
func (r *hsRig) ack(first bool, rtt time.Duration) (exit bool) {
	if first {
		r.una = r.end.Add(testMSS)
		r.end = r.una.Add(1000 * testMSS)
	} else {
		r.una = r.una.Add(testMSS)
	}
	inc, exit := r.h.onAck(&AckEvent{Acked: testMSS, RTT: rtt, SndUna: r.una, SndMax: r.end}, testMSS)
	r.inc += inc
	return exit
}

// round feeds one round, an ACK per sample, and reports at which ACK
// HyStart++ ended, if it did.
func (r *hsRig) round(rtts ...time.Duration) (exitAt int) {
	r.inc = 0
	for i, rtt := range rtts {
		if r.ack(i == 0, rtt) {
			return i
		}
	}
	return -1
}

func repeat(d time.Duration, n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}

const ms = time.Millisecond

// Section 4.2: when a round's minimum RTT, over at least N_RTT_SAMPLE
// samples, rises by RttThresh = clamp(lastRoundMinRTT/8, 4 ms, 16 ms) over
// the last round's, slow start gives way to CSS, which grows the window by
// a quarter of slow start's; CSS_ROUNDS rounds later, the partial first
// one counted, HyStart++ ends in congestion avoidance.
func TestHyStartExitsOnRTTIncrease(t *testing.T) {
	r := newHSRig(t)
	r.round(repeat(10*ms, 8)...)
	r.round(repeat(10*ms, 8)...)
	if r.h.phase != hsSlowStart || r.inc != 8*testMSS {
		t.Fatalf("phase %v, growth %d in a steady round, want slow start and 8000", r.h.phase, r.inc)
	}
	// 14 ms = 10 ms + 4 ms: the eighth sample decides.
	for i := range 7 {
		r.ack(i == 0, 14*ms)
		if r.h.phase != hsSlowStart {
			t.Fatalf("CSS after %d samples", i+1)
		}
	}
	r.ack(false, 14*ms)
	if r.h.phase != hsCSS || r.st.HyStartDelayDetect.Load() != 1 || r.h.cssBaselineMinRTT != 14*ms {
		t.Fatalf("after 8 samples 4 ms up: phase %v, DelayDetect %d, baseline %v; want CSS, 1, 14ms",
			r.h.phase, r.st.HyStartDelayDetect.Load(), r.h.cssBaselineMinRTT)
	}
	// CSS grows by a quarter; the partial round counts, so four more
	// rounds end it, at the first ACK of the fifth.
	for i := range 4 {
		if at := r.round(repeat(14*ms, 8)...); at >= 0 {
			t.Fatalf("HyStart++ ended in CSS round %d", i+2)
		}
		if r.inc != 2*testMSS {
			t.Errorf("CSS round %d grew the window by %d, want 2000 (a quarter)", i+2, r.inc)
		}
	}
	if at := r.round(repeat(14*ms, 8)...); at != 0 {
		t.Fatalf("HyStart++ ended at ACK %d of the round after the fifth CSS round, want 0", at)
	}
	if r.h.active() || r.st.HyStartCSSExits.Load() != 1 {
		t.Errorf("after CSS_ROUNDS: active %v, CSSExits %d", r.h.active(), r.st.HyStartCSSExits.Load())
	}
}

// RttThresh is lastRoundMinRTT/8, clamped to [4 ms, 16 ms]: a rise just
// short of it stays in slow start, a rise of it leaves.
func TestHyStartThreshold(t *testing.T) {
	for _, tt := range []struct {
		base, thresh time.Duration
	}{
		{1 * ms, 4 * ms},
		{40 * ms, 5 * ms},
		{100 * ms, 12500 * time.Microsecond},
		{300 * ms, 16 * ms},
	} {
		for _, rise := range []time.Duration{tt.thresh - time.Microsecond, tt.thresh} {
			r := newHSRig(t)
			r.round(repeat(tt.base, 8)...)
			r.round(repeat(tt.base+rise, 8)...)
			if want := rise >= tt.thresh; (r.h.phase == hsCSS) != want {
				t.Errorf("base %v, rise %v: phase %v, want CSS %v", tt.base, rise, r.h.phase, want)
			}
		}
	}
}

// Jitter is not a rise: while every eight samples hold one near the base,
// a round's minimum stays near it however high the others go, and slow
// start goes on. (Eight high samples in a row are a rise, as far as
// HyStart++ can tell; CSS is its remedy if they were not.)
func TestHyStartIgnoresNoise(t *testing.T) {
	r := newHSRig(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		rtts := make([]time.Duration, 16)
		for i := range rtts {
			rtts[i] = 10*ms + time.Duration(rng.Int64N(int64(40*ms)))
		}
		for _, i := range []int{rng.IntN(8), 8 + rng.IntN(8)} {
			rtts[i] = 10*ms + time.Duration(rng.Int64N(int64(3*ms)))
		}
		r.round(rtts...)
		if r.h.phase != hsSlowStart {
			t.Fatalf("left slow start on jitter: %v", rtts)
		}
	}
	if n := r.st.HyStartDelayDetect.Load(); n != 0 {
		t.Errorf("DelayDetect = %d", n)
	}
}

// Fewer than N_RTT_SAMPLE samples in a round decide nothing: ACKs without
// a sample (Karn's rule) do not count.
func TestHyStartNeedsEightSamples(t *testing.T) {
	r := newHSRig(t)
	r.round(repeat(10*ms, 8)...)
	rtts := append(repeat(30*ms, 7), repeat(0, 10)...)
	r.round(rtts...)
	if r.h.phase != hsSlowStart {
		t.Errorf("phase %v after a round of 7 samples", r.h.phase)
	}
}

// A CSS round whose minimum RTT falls below the baseline it was entered
// with shows the exit spurious: slow start resumes, HyStart++ included.
func TestHyStartSpuriousCSS(t *testing.T) {
	r := newHSRig(t)
	r.round(repeat(10*ms, 8)...)
	r.round(repeat(20*ms, 8)...)
	if r.h.phase != hsCSS {
		t.Fatalf("phase %v", r.h.phase)
	}
	r.round(repeat(19*ms, 8)...)
	if r.h.phase != hsSlowStart || r.st.HyStartSpurious.Load() != 1 {
		t.Fatalf("phase %v, Spurious %d after the RTT fell below the baseline", r.h.phase, r.st.HyStartSpurious.Load())
	}
	r.round(repeat(19*ms, 8)...)
	if r.inc != 8*testMSS {
		t.Errorf("growth %d back in slow start, want 8000", r.inc)
	}
	// The rise is measured from the last round again.
	r.round(repeat(23*ms, 8)...)
	if r.h.phase != hsCSS || r.h.cssRounds != 0 {
		t.Errorf("phase %v CSS rounds %d after a second rise", r.h.phase, r.h.cssRounds)
	}
}

// Growth per ACK is bounded by L = 8 segments (section 4.3, no pacing).
func TestHyStartGrowthCap(t *testing.T) {
	r := newHSRig(t)
	inc, _ := r.h.onAck(&AckEvent{Acked: 20 * testMSS, SndUna: 100, SndMax: 200}, testMSS)
	if inc != 8*testMSS {
		t.Errorf("an ACK of 20 segments grew the window by %d, want 8000", inc)
	}
}

// CUBIC's slow start is HyStart++: a flow whose RTT climbs as its queue
// builds leaves slow start before any loss, with ssthresh = cwnd, and then
// starts congestion avoidance with K = 0 and W_max = cwnd (RFC 9438
// section 4.10).
func TestCubicHyStartLeavesSlowStartBeforeLoss(t *testing.T) {
	var st Stats
	c := newCubic(testMSS, &st)
	f := newFlow(t, c)
	// A 20 ms path with a bottleneck of 100 segments per RTT: beyond that
	// the queue adds delay in proportion.
	rtt := func() time.Duration {
		w := c.CWnd() / testMSS
		return 20*ms + time.Duration(max(w-100, 0))*20*ms/100
	}
	detectedAt := 0
	for c.SSThresh() == noSSThresh {
		if f.now.Sub(epoch2000) > 10*time.Second {
			t.Fatalf("still in slow start at cwnd %d", c.CWnd())
		}
		f.roundTrip(rtt())
		if detectedAt == 0 && st.HyStartDelayDetect.Load() > 0 {
			detectedAt = c.CWnd() / testMSS
		}
	}
	if st.HyStartDelayDetect.Load() != 1 || st.HyStartCSSExits.Load() != 1 {
		t.Errorf("DelayDetect %d CSSExits %d, want 1 1", st.HyStartDelayDetect.Load(), st.HyStartCSSExits.Load())
	}
	// The rise shows in the first round beyond the 100 segments the path
	// holds (at 160 segments: 12 ms up), at its eighth sample; CSS then
	// grows the window by a quarter a round, for the rest of that round
	// and four more.
	if detectedAt != 160+8+(160-8)/4 {
		t.Errorf("the round CSS began in ended at %d segments, want 206", detectedAt)
	}
	if w := c.CWnd() / testMSS; w < detectedAt*5/4*5/4*5/4*5/4-2 || w > detectedAt*5/4*5/4*5/4*5/4+2 {
		t.Errorf("HyStart++ ended at %d segments, want 4 CSS rounds after %d, about %d", w, detectedAt, detectedAt*625/256)
	}
	f.roundTrip(rtt())
	if c.k != 0 || c.wMax != float64(c.SSThresh()) {
		t.Errorf("first stage: K %v W_max %v ssthresh %d, want 0 and W_max = ssthresh", c.k, c.wMax, c.SSThresh())
	}
}

// A loss in slow start ends HyStart++; the slow start after it is RFC
// 5681's.
func TestCubicLossEndsHyStart(t *testing.T) {
	c := newCubic(testMSS, nil)
	f := newFlow(t, c)
	f.roundTrip(10 * ms)
	c.OnEnterRecovery(c.CWnd())
	c.OnExitRecovery(0)
	if c.hs.active() {
		t.Fatal("HyStart++ still active after a loss")
	}
	f.max = f.una.Add(seqnum.Size(c.CWnd()))
	a := c.CWnd()
	f.ack(8*testMSS, 10*ms, ms)
	if c.CWnd() != a+2*testMSS {
		t.Errorf("slow start after a loss grew %d on an ACK of 8 segments, want 2000", c.CWnd()-a)
	}
}
