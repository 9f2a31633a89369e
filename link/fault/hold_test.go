package fault

import (
	"slices"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// The bounded hold of reordered frames (hold.go), on a virtual clock.

// awaitPeer waits up to five seconds for n frames to be queued at the
// peer, written by a goroutine of the fault endpoint.
func (r *rig) awaitPeer(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.peer.Queued() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d frames reached the peer within 5s, want %d", r.peer.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdDirection drives one direction of a rig in the hold tests: put
// offers frames to the fault endpoint, await returns what it let out once
// want frames have come, and arrived says how many have without waiting.
type holdDirection struct {
	name    string
	st      func(*Endpoint) *Direction
	put     func(r *rig, t *testing.T, from, to uint32)
	await   func(r *rig, t *testing.T, want int) []uint32
	arrived func(r *rig) int
}

var holdDirections = []holdDirection{
	{
		name: "written",
		st:   func(e *Endpoint) *Direction { return &e.Stats().Tx },
		put:  func(r *rig, t *testing.T, from, to uint32) { r.send(t, from, to) },
		await: func(r *rig, t *testing.T, want int) []uint32 {
			r.awaitPeer(t, want)
			return seqs(r.drainPeer(t))
		},
		arrived: func(r *rig) int { return r.peer.Queued() },
	},
	{
		name: "read",
		st:   func(e *Endpoint) *Direction { return &e.Stats().Rx },
		put: func(r *rig, t *testing.T, from, to uint32) {
			r.inject(t, from, to)
			r.awaitRx(t, uint64(to)) // shaped, so held and its timer armed
		},
		await: func(r *rig, t *testing.T, want int) []uint32 { return seqs(r.readN(t, want)) },
		// Delivered frames wait in the rx line for ReadBatch; the
		// test reads only once it expects them.
		arrived: func(r *rig) int { return r.f.rxLine.len() },
	},
}

func TestLoneHeldFrameGoesOutAfterTheHold(t *testing.T) {
	for _, dir := range holdDirections {
		for _, tt := range []struct {
			name  string
			hold  time.Duration // Config.ReorderHold
			delay time.Duration // Config.Delay
			want  time.Duration // the hold it must wait
		}{
			{"default hold", 0, 0, DefaultReorderHold},
			{"hold=2ms", 2 * time.Millisecond, 0, 2 * time.Millisecond},
			// Released by the timer, a frame still takes the delayed
			// way: the tx pump, or a delivery due Delay later.
			{"hold=2ms,delay=10ms", 2 * time.Millisecond, 10 * time.Millisecond, 2 * time.Millisecond},
		} {
			t.Run(dir.name+"/"+tt.name, func(t *testing.T) {
				clk := clock.NewVirtual(time.Unix(1000, 0))
				r := newRig(t, Config{Reorder: 1, ReorderHold: tt.hold, Delay: tt.delay, Seed: 1, Clock: clk})
				st := dir.st(r.f)
				dir.put(r, t, 0, 1)
				if n := st.Reordered.Load(); n != 1 {
					t.Fatalf("Reordered = %d, want the lone frame held", n)
				}
				clk.Advance(tt.want - time.Nanosecond)
				if n := dir.arrived(r); n != 0 || st.HoldExpired.Load() != 0 {
					t.Fatalf("a nanosecond before the hold ran out: %d frames out, HoldExpired %d; want none", n, st.HoldExpired.Load())
				}
				clk.Advance(time.Nanosecond)
				var got []uint32
				if tt.delay > 0 {
					// Released now, the frame is delayed as any other.
					var read chan [][]byte
					if dir.name == "read" {
						read = make(chan [][]byte, 1)
						go func() {
							frames, err := r.readFrames(1)
							if err != nil {
								t.Error(err)
							}
							read <- frames
						}()
					}
					// The tx pump, or ReadBatch, arms a timer only for a
					// frame not yet due.
					clk.WaitPending(1)
					if n := r.peer.Queued(); n != 0 {
						t.Fatalf("%d frames out before the delay after the hold", n)
					}
					clk.Advance(tt.delay)
					if read != nil {
						got = seqs(<-read)
					}
				}
				if got == nil {
					got = dir.await(r, t, 1)
				}
				if !slices.Equal(got, []uint32{0}) {
					t.Errorf("after the hold: %v, want [0]", got)
				}
				if n := st.Delayed.Load(); n != boolCount(tt.delay > 0) {
					t.Errorf("Delayed = %d with delay %v", n, tt.delay)
				}
				if n := st.HoldExpired.Load(); n != 1 {
					t.Errorf("HoldExpired = %d, want 1", n)
				}
				if n := clk.Pending(); n != 0 {
					t.Errorf("%d timers still armed with nothing held", n)
				}
			})
		}
	}
}

func TestHeldFrameFollowsTheNextFrameBeforeItsTime(t *testing.T) {
	for _, dir := range holdDirections {
		t.Run(dir.name, func(t *testing.T) {
			clk := clock.NewVirtual(time.Unix(1000, 0))
			// With Reorder 1 frame 0 is held and frame 1, which may not
			// be held as one frame already is, passes it.
			r := newRig(t, Config{Reorder: 1, Seed: 1, Clock: clk})
			st := dir.st(r.f)
			dir.put(r, t, 0, 1)
			clk.Advance(DefaultReorderHold / 2)
			dir.put(r, t, 1, 2)
			if got := dir.await(r, t, 2); !slices.Equal(got, []uint32{1, 0}) {
				t.Errorf("half the hold later the next frame came: %v, want [1 0]", got)
			}
			if n := clk.Pending(); n != 0 {
				t.Errorf("%d timers still armed once the next frame released the held one", n)
			}
			clk.Advance(DefaultReorderHold)
			if n := dir.arrived(r); n != 0 || st.HoldExpired.Load() != 0 {
				t.Errorf("past the hold: %d more frames out, HoldExpired %d; want none", n, st.HoldExpired.Load())
			}
		})
	}
}

func TestCloseReleasesAHeldFrame(t *testing.T) {
	for _, delay := range []time.Duration{0, 10 * time.Millisecond} {
		t.Run("delay="+delay.String(), func(t *testing.T) {
			clk := clock.NewVirtual(time.Unix(1000, 0))
			r := newRig(t, Config{Reorder: 1, Delay: delay, Seed: 1, Clock: clk})
			for _, dir := range holdDirections {
				dir.put(r, t, 0, 1)
			}
			for _, s := range []*shaper{&r.f.rx, &r.f.tx} {
				s.mu.Lock()
				n := len(s.held)
				s.mu.Unlock()
				if n != 1 {
					t.Fatalf("%d frames held, want 1 each way", n)
				}
			}
			r.f.Close()
			if n := r.f.pool.Outstanding(); n != 0 {
				t.Errorf("%d packets outstanding after Close", n)
			}
			if n := clk.Pending(); n != 0 {
				t.Errorf("%d timers still armed after Close", n)
			}
			// A hold timer that fired anyway sends nothing.
			clk.Advance(time.Hour)
			if n := r.peer.Queued(); n != 0 {
				t.Errorf("%d frames reached the peer after Close", n)
			}
		})
	}
}

func boolCount(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
