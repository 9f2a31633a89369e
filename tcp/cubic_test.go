package tcp

import (
	"math"
	"testing"
	"time"

	"github.com/gonetstack/gonet/seqnum"
)

// CUBIC (RFC 9438) in isolation: the algorithm is driven by a synthetic
// flow on a timeline of its own, which starts in 2000 so that a reading of
// the wall clock would show as a window gone mad.

const testMSS = 1000

var epoch2000 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// flow is a bulk sender that always has data: it keeps the window full,
// and each ACK acknowledges one segment, the ACKs of a window spread over
// one round trip.
type flow struct {
	t        testing.TB
	cc       CongestionControl
	now      time.Time
	una, max seqnum.Value
	srtt     time.Duration
}

func newFlow(t testing.TB, cc CongestionControl) *flow {
	f := &flow{t: t, cc: cc, now: epoch2000, una: 1000}
	f.max = f.una.Add(seqnum.Size(cc.CWnd()))
	return f
}

// ack acknowledges n bytes dt after the previous ACK, with RTT sample
// rtt, and refills the window.
func (f *flow) ack(n int, rtt, dt time.Duration) {
	f.now = f.now.Add(dt)
	inflight := int(f.max.Sub(f.una))
	f.una = f.una.Add(seqnum.Size(n))
	if rtt > 0 {
		f.srtt = rtt
	}
	f.cc.OnAck(AckEvent{Acked: n, Inflight: inflight, RTT: rtt, SRTT: f.srtt, SndUna: f.una, SndMax: f.max, Now: f.now})
	f.max = seqnum.Max(f.max, f.una.Add(seqnum.Size(f.cc.CWnd())))
}

// roundTrip acknowledges the window in flight, a segment at a time, over
// rtt.
func (f *flow) roundTrip(rtt time.Duration) {
	n := max(int(f.max.Sub(f.una))/testMSS, 1)
	for range n {
		f.ack(testMSS, rtt, rtt/time.Duration(n))
	}
}

// until runs round trips of rtt until cond holds, for at most limit.
func (f *flow) until(rtt, limit time.Duration, cond func() bool) {
	f.t.Helper()
	end := f.now.Add(limit)
	for !cond() {
		if f.now.After(end) {
			f.t.Fatalf("not reached after %v: cwnd %d", limit, f.cc.CWnd())
		}
		f.roundTrip(rtt)
	}
}

// afterLoss returns CUBIC in congestion avoidance right after a loss at
// a window of w segments, found by duplicate ACKs and repaired.
func afterLoss(t *testing.T, w int) (*cubic, *flow) {
	c := newCubic(testMSS, nil)
	c.cwnd = w * testMSS
	c.hs.stop()
	c.OnEnterRecovery(c.cwnd)
	c.OnExitRecovery(c.cwnd)
	return c, newFlow(t, c)
}

func segs(bytes float64) float64 { return bytes / testMSS }

// Section 4.6 and 4.2: a loss at 1000 segments leaves ssthresh and cwnd at
// 700, W_max at 1000 and, once congestion avoidance begins, K =
// cbrt((1000-700)/0.4) = 9.086 s; the window then follows W_cubic(t) =
// 0.4(t-K)^3 + 1000: concave up to W_max, flat around K, convex after it.
// With a 100 ms RTT and a window this large the cubic region dominates
// Reno's.
func TestCubicWindowFollowsTheCubicCurve(t *testing.T) {
	c, f := afterLoss(t, 1000)
	if c.SSThresh() != 700*testMSS || c.CWnd() != 700*testMSS || c.wMax != 1000*testMSS {
		t.Fatalf("after the loss: ssthresh %d cwnd %d W_max %v, want 700000 700000 1000000", c.SSThresh(), c.CWnd(), c.wMax)
	}
	const rtt = 100 * time.Millisecond
	f.roundTrip(rtt)
	wantK := math.Cbrt(300 / 0.4)
	if math.Abs(c.k-wantK) > 1e-9 {
		t.Fatalf("K = %v, want %v", c.k, wantK)
	}
	start := c.epoch
	w := func(t float64) float64 { return 0.4*math.Pow(t-wantK, 3) + 1000 }
	prev := c.CWnd()
	for _, at := range []float64{1, 3, 5, 7, wantK, 10, 12, 14} {
		f.until(rtt, 20*time.Second, func() bool { return f.now.Sub(start).Seconds() >= at })
		got := segs(float64(c.CWnd()))
		// The window aims one RTT ahead and reaches its aim within an
		// RTT, so it lies between W_cubic(t) and W_cubic(t+RTT).
		lo, hi := w(at)-0.5, w(at+rtt.Seconds()+0.05)+0.5
		if got < lo || got > hi {
			t.Errorf("t = %.2f s: cwnd %.1f segments, want W_cubic in [%.1f, %.1f]", at, got, lo, hi)
		}
		if c.CWnd() < prev {
			t.Errorf("t = %.2f s: cwnd fell from %d to %d", at, prev, c.CWnd())
		}
		prev = c.CWnd()
		if c.wCubic(at) < c.wEst {
			t.Errorf("t = %.2f s: Reno-friendly at a 100 ms RTT (W_est %.1f)", at, segs(c.wEst))
		}
	}
	// The plateau: around K the window stays within a segment of W_max.
	f.until(rtt, 10*time.Second, func() bool { return f.now.Sub(start).Seconds() >= wantK-0.5 })
	a := c.CWnd()
	f.until(rtt, 10*time.Second, func() bool { return f.now.Sub(start).Seconds() >= wantK+0.5 })
	if d := c.CWnd() - a; d > 2*testMSS {
		t.Errorf("the window grew %d bytes in the second around K, want at most 2 segments", d)
	}
}

// Section 4.3: at a small RTT Reno would grow faster than the cubic
// curve, and CUBIC takes W_est: alpha_cubic = 3(1-0.7)/(1+0.7) segments per
// RTT while W_est is below the window before the loss, one after it.
func TestCubicRenoFriendlyRegionAtSmallRTT(t *testing.T) {
	c, f := afterLoss(t, 100)
	const rtt = time.Millisecond
	for range 20 {
		f.roundTrip(rtt)
	}
	alpha := 3 * (1 - 0.7) / (1 + 0.7)
	got, want := segs(float64(c.CWnd())), 70+20*alpha
	if math.Abs(got-want) > 1 {
		t.Errorf("after 20 RTTs: cwnd %.2f segments, want W_est about %.2f", got, want)
	}
	tt := f.now.Sub(c.epoch).Seconds()
	if wc := segs(c.wCubic(tt)); wc > got-5 {
		t.Errorf("W_cubic %.2f is near cwnd %.2f: not the Reno-friendly region", wc, got)
	}
	// Past the window before the loss (100 segments), W_est grows as
	// Reno's, one segment per RTT.
	f.until(rtt, time.Second, func() bool { return c.wEst >= 101*testMSS })
	a := c.CWnd()
	for range 10 {
		f.roundTrip(rtt)
	}
	if d := segs(float64(c.CWnd() - a)); d < 9 || d > 11 {
		t.Errorf("10 RTTs past W_max grew the window by %.1f segments, want 10", d)
	}
}

// Section 4.7: a loss before the window regains the last W_max means
// another flow is taking its share: W_max = cwnd(1+beta)/2, below where the
// loss happened; a loss at or above W_max sets W_max = cwnd.
func TestCubicFastConvergence(t *testing.T) {
	c, f := afterLoss(t, 100)
	const rtt = 100 * time.Millisecond
	f.until(rtt, 10*time.Second, func() bool { return c.CWnd() >= 90*testMSS })
	at := float64(c.CWnd())
	c.OnEnterRecovery(c.CWnd())
	if want := at * 1.7 / 2; math.Abs(c.wMax-want) > 1 {
		t.Errorf("W_max %.0f after a loss at %.0f below W_max 100000, want %.0f", c.wMax, at, want)
	}
	if want := int(math.Round(at * 0.7)); c.SSThresh() != want || c.CWnd() != want {
		t.Errorf("ssthresh %d cwnd %d, want %d", c.SSThresh(), c.CWnd(), want)
	}
	c.OnExitRecovery(c.CWnd())
	cwndEpoch := float64(c.CWnd())
	f.roundTrip(rtt)
	if want := math.Cbrt((at*0.85 - cwndEpoch) / testMSS / 0.4); math.Abs(c.k-want) > 1e-9 {
		t.Errorf("K = %v, want %v", c.k, want)
	}
	// Now past W_max: a loss there sets W_max to the window.
	f.until(rtt, 20*time.Second, func() bool { return float64(c.CWnd()) > c.wMax+testMSS })
	at = float64(c.CWnd())
	c.OnEnterRecovery(c.CWnd())
	if c.wMax != at {
		t.Errorf("W_max %.0f after a loss above it at %.0f, want the window", c.wMax, at)
	}
}

// Section 4.8: a timeout sets ssthresh as a loss does and cwnd to one
// segment; slow start climbs back (RFC 5681's, not HyStart++), and the
// next congestion avoidance stage starts with K = 0 and W_max = the window
// it starts at. A second timeout before any new ACK holds ssthresh (RFC
// 5681 section 3.1), and so does one in fast recovery.
func TestCubicTimeout(t *testing.T) {
	c, f := afterLoss(t, 100)
	const rtt = 100 * time.Millisecond
	f.until(rtt, 10*time.Second, func() bool { return c.CWnd() >= 80*testMSS })
	at := c.CWnd()
	c.OnRTO(at)
	want := int(math.Round(float64(at) * 0.7))
	if c.SSThresh() != want || c.CWnd() != testMSS {
		t.Fatalf("after a timeout at %d: ssthresh %d cwnd %d, want %d %d", at, c.SSThresh(), c.CWnd(), want, testMSS)
	}
	c.OnRTO(testMSS)
	if c.SSThresh() != want || c.CWnd() != testMSS {
		t.Fatalf("after a second timeout: ssthresh %d cwnd %d, want %d %d", c.SSThresh(), c.CWnd(), want, testMSS)
	}
	f.max = f.una.Add(testMSS) // go-back-N: one segment in flight
	// A stretch ACK of 4 segments grows slow start by RFC 3465's 2.
	f.ack(4*testMSS, 0, rtt)
	if c.CWnd() != 3*testMSS {
		t.Errorf("slow start after a timeout: cwnd %d after an ACK of 4 segments, want 3000", c.CWnd())
	}
	f.until(rtt, 10*time.Second, func() bool { return c.CWnd() >= c.SSThresh() })
	f.roundTrip(rtt)
	if c.k != 0 || c.wEst < c.wMax || math.Abs(c.wMax-float64(c.SSThresh())) > 3*testMSS {
		t.Errorf("first stage after a timeout: K %v W_max %.0f W_est %.0f ssthresh %d, want K 0 and W_max the window at its start", c.k, c.wMax, c.wEst, c.SSThresh())
	}
	// A timeout during fast recovery keeps the recovery's ssthresh.
	c.OnEnterRecovery(c.CWnd())
	th := c.SSThresh()
	c.OnRecoveryAck(0)
	c.OnRTO(c.CWnd())
	if c.SSThresh() != th || c.CWnd() != testMSS {
		t.Errorf("timeout in recovery: ssthresh %d cwnd %d, want %d %d", c.SSThresh(), c.CWnd(), th, testMSS)
	}
}

// Section 4.6: never below two segments on a loss.
func TestCubicReductionFloor(t *testing.T) {
	c := newCubic(testMSS, nil)
	c.cwnd = 2 * testMSS
	c.OnEnterRecovery(c.cwnd)
	if c.SSThresh() != 2*testMSS || c.CWnd() != 2*testMSS {
		t.Errorf("loss at 2 segments: ssthresh %d cwnd %d, want 2000 2000", c.SSThresh(), c.CWnd())
	}
}

// Far beyond K the curve is steep; the target is capped at 1.5 cwnd
// (section 4.2), so one RTT grows the window by half at most.
func TestCubicGrowthCappedAtOneAndAHalf(t *testing.T) {
	c, f := afterLoss(t, 100)
	const rtt = 100 * time.Millisecond
	f.roundTrip(rtt)
	f.now = f.now.Add(60 * time.Second)
	a := c.CWnd()
	f.roundTrip(rtt)
	if c.CWnd() > a*3/2+testMSS {
		t.Errorf("one RTT grew cwnd from %d to %d: more than 1.5 times", a, c.CWnd())
	}
	if c.CWnd() < a*5/4 {
		t.Errorf("one RTT far beyond K grew cwnd from %d to %d only", a, c.CWnd())
	}
}

// An application-limited sender does not grow the window (section 5.8).
func TestCubicApplicationLimited(t *testing.T) {
	c, f := afterLoss(t, 100)
	a := c.CWnd()
	for range 1000 {
		f.now = f.now.Add(10 * time.Millisecond)
		c.OnAck(AckEvent{Acked: testMSS, Inflight: 10 * testMSS, RTT: 10 * time.Millisecond, SRTT: 10 * time.Millisecond, Now: f.now})
	}
	if c.CWnd() != a {
		t.Errorf("application-limited ACKs grew cwnd from %d to %d", a, c.CWnd())
	}
}

// Recovery inflates and deflates as RFC 6582 does, from CUBIC's reduced
// window, and exits to min(ssthresh, FlightSize + MSS).
func TestCubicRecovery(t *testing.T) {
	c := newCubic(testMSS, nil)
	c.cwnd = 20 * testMSS
	c.OnEnterRecovery(20 * testMSS)
	c.OnRecoveryAck(0)
	if c.CWnd() != 15*testMSS {
		t.Errorf("a duplicate in recovery: cwnd %d, want 15000", c.CWnd())
	}
	c.OnRecoveryAck(3 * testMSS)
	if c.CWnd() != 13*testMSS {
		t.Errorf("a partial ACK of 3 segments: cwnd %d, want 13000", c.CWnd())
	}
	c.OnExitRecovery(5 * testMSS)
	if c.CWnd() != 6*testMSS || c.SSThresh() != 14*testMSS {
		t.Errorf("recovery's end: cwnd %d ssthresh %d, want 6000 14000", c.CWnd(), c.SSThresh())
	}
}

// A switch of algorithm hands over the window in force.
func TestSeedCarriesTheWindow(t *testing.T) {
	for _, name := range []string{"cubic", "newreno"} {
		cc, err := newCongestion(name, testMSS, nil)
		if err != nil {
			t.Fatal(err)
		}
		cc.(seeder).seed(30*testMSS, 20*testMSS, false)
		if cc.CWnd() != 30*testMSS || cc.SSThresh() != 20*testMSS {
			t.Errorf("%s seeded: cwnd %d ssthresh %d, want 30000 20000", name, cc.CWnd(), cc.SSThresh())
		}
		f := newFlow(t, cc)
		f.roundTrip(10 * time.Millisecond)
		if cc.CWnd() < 30*testMSS || cc.CWnd() > 32*testMSS {
			t.Errorf("%s: one RTT of congestion avoidance from 30 segments: cwnd %d", name, cc.CWnd())
		}
	}
	if _, err := newCongestion("vegas", testMSS, nil); err == nil {
		t.Error("an unknown algorithm was made")
	}
}

// In slow start the window grows while at least half of it is in flight,
// as Linux's does: a sender held to half its window by the peer's
// receive window, which opens as fast, keeps growing with it; one using
// less does not.
func TestCubicSlowStartGrowsWhileHalfTheWindowIsUsed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inflight int // in segments, of a window of 20
		grows    bool
	}{
		{"the whole window in flight", 20, true},
		{"half the window in flight", 10, true},
		{"less than half in flight", 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCubic(testMSS, nil)
			c.cwnd = 20 * testMSS
			now := time.Unix(0, 0)
			c.OnAck(AckEvent{Acked: 2 * testMSS, Inflight: tc.inflight * testMSS, RTT: 40 * time.Millisecond,
				SRTT: 40 * time.Millisecond, SndUna: 2 * testMSS, SndMax: seqnum.Value(tc.inflight * testMSS), Now: now})
			if grew := c.CWnd() > 20*testMSS; grew != tc.grows {
				t.Errorf("cwnd %d after an ACK of 2 segments with %d in flight; grew %v, want %v", c.CWnd(), tc.inflight, grew, tc.grows)
			}
		})
	}
}
