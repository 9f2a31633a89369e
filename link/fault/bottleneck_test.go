package fault

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
)

var epoch = time.Unix(1000, 0)

// admit decides each frame's fate exactly: the serialisation time at the
// rate behind the frames ahead, then the delay; a frame the queue has no
// room for dropped and counted; an idle port taking any frame.
func TestBottleneckAdmitsAsAnOutputPort(t *testing.T) {
	type arrival struct {
		at   time.Duration // since epoch
		size int
		due  time.Duration // since epoch; -1: tail-dropped
	}
	const us = time.Microsecond
	for _, tt := range []struct {
		name     string
		cfg      Config
		arrivals []arrival
	}{
		{"no rate: the delay alone", Config{Delay: 20 * time.Millisecond}, []arrival{
			{0, 1500, 20 * time.Millisecond}, {0, 1500, 20 * time.Millisecond}, {5 * us, 64, 20*time.Millisecond + 5*us},
		}},
		{"no rate, no delay: due at once", Config{}, []arrival{{0, 1500, -2}}},
		{"back to back at 100 Mbit/s", Config{Rate: 100e6, Delay: time.Millisecond}, []arrival{
			// 1500 bytes take 120 µs.
			{0, 1500, 120*us + time.Millisecond},
			{0, 1500, 240*us + time.Millisecond},
			{10 * us, 1500, 360*us + time.Millisecond},
		}},
		{"an idle port starts at the arrival", Config{Rate: 100e6}, []arrival{
			{0, 1500, 120 * us}, {500 * us, 1500, 620 * us}, {620 * us, 100, 628 * us},
		}},
		{"fractions of a nanosecond carried", Config{Rate: 3e6}, []arrival{
			// 1000 bytes at 3 Mbit/s: 2666666.67 ns each.
			{0, 1000, 2666666 * time.Nanosecond},
			{0, 1000, 5333333 * time.Nanosecond},
			{0, 1000, 8000000 * time.Nanosecond},
		}},
		{"a super-segment takes its whole length", Config{Rate: 1e9, Delay: 50 * time.Millisecond, Queue: 1 << 20}, []arrival{
			{0, 65000, 520*us + 50*time.Millisecond}, {0, 1500, 532*us + 50*time.Millisecond},
		}},
		{"tail drop when the queue would overflow", Config{Rate: 100e6, Queue: 4500}, []arrival{
			{0, 1500, 120 * us}, // on the wire, still counted as waiting
			{0, 1500, 240 * us},
			{0, 1500, 360 * us},
			{0, 1500, -1}, // 4500 bytes waiting: no room
			{0, 64, -1},
			{120 * us, 1500, 480 * us}, // one serialised: room again
			{120 * us, 1500, -1},
		}},
		{"an idle port takes a frame larger than its queue", Config{Rate: 100e6, Queue: 1000}, []arrival{
			{0, 1500, 120 * us}, {0, 1500, -1}, {120 * us, 1500, 240 * us},
		}},
		{"the default queue", Config{Rate: 10e6}, slices.Concat(
			slices.Repeat([]arrival{{0, 1024, -3}}, DefaultQueue/1024),
			[]arrival{{0, 1, -1}},
		)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var st Direction
			s := shaper{cfg: &tt.cfg, st: &st}
			var drops uint64
			var last time.Time
			for i, a := range tt.arrivals {
				due, ok := s.admit(epoch.Add(a.at), a.size)
				switch {
				case a.due == -1:
					drops++
					if ok {
						t.Errorf("frame %d (%d bytes at %v) admitted, due %v; want it tail-dropped", i, a.size, a.at, due.Sub(epoch))
					}
				case a.due == -2:
					if !ok || !due.IsZero() {
						t.Errorf("frame %d: due %v, %v; want the zero time, admitted", i, due, ok)
					}
				case a.due == -3:
					if !ok || due.Before(last) {
						t.Errorf("frame %d: due %v, %v; want admitted, no earlier than %v", i, due.Sub(epoch), ok, last.Sub(epoch))
					}
					last = due
				case !ok || due.Sub(epoch) != a.due:
					t.Errorf("frame %d (%d bytes at %v): due %v, admitted %v; want due %v", i, a.size, a.at, due.Sub(epoch), ok, a.due)
				}
			}
			if got := st.TailDropped.Load(); got != drops {
				t.Errorf("TailDropped = %d, want %d", got, drops)
			}
		})
	}
}

// sized returns a frame of size bytes from macA to macB carrying seq.
func (r *rig) sized(seq uint32, size int) *buffer.Packet {
	p := r.pool.Get(size)
	b := p.Bytes()
	clear(b)
	copy(b[0:6], macB)
	copy(b[6:12], macA)
	binary.BigEndian.PutUint16(b[12:14], 0x88b5)
	binary.BigEndian.PutUint32(b[14:18], seq)
	return p
}

// sendSized writes frames from..to-1 of size bytes through the fault
// endpoint, in one batch.
func (r *rig) sendSized(t *testing.T, from, to uint32, size int) {
	t.Helper()
	var batch []*buffer.Packet
	for seq := from; seq < to; seq++ {
		batch = append(batch, r.sized(seq, size))
	}
	if n, err := r.f.WriteBatch(batch); n != len(batch) || err != nil {
		t.Fatalf("WriteBatch = %d, %v; want %d, nil", n, err, len(batch))
	}
	for _, p := range batch {
		p.Release()
	}
}

// arrival is a frame the peer received, and when on the virtual clock.
type arrival struct {
	seq uint32
	at  time.Time
}

// runTx moves clk up to until, letting the tx pump write what is due, and
// returns what reached the peer, stamped with the virtual time it came at.
// With exact, the clock stops at every timer on the way, so that each frame
// is stamped with its due time; without, it jumps to until at once (the
// frames due by then must fit the pipe's queue). written is the frames
// written through the fault endpoint so far: before each step the test
// waits until every one of them is accounted for (lost, tail-dropped, in
// the tx line or at the peer) and the pump has armed its timer for the
// next, so that no frame comes later than its due time.
func (r *rig) runTx(t *testing.T, clk *clock.Virtual, until time.Time, written uint64, exact bool) []arrival {
	t.Helper()
	var got []arrival
	pkts := make([]*buffer.Packet, 32)
	for i := range pkts {
		pkts[i] = r.pool.Get(r.f.frameSize)
	}
	defer func() {
		for _, p := range pkts {
			p.Release()
		}
	}()
	giveUp := time.Now().Add(20 * time.Second)
	for {
		for {
			st := &r.f.Stats().Tx
			ps := r.inner.Stats()
			accounted := st.Dropped.Load()+st.TailDropped.Load()+uint64(r.f.txLine.len())+ps.TxFrames.Load()+ps.TxDropped.Load() == written+st.Duplicated.Load()
			next, armed := clk.NextDeadline()
			if accounted && (r.f.txLine.len() == 0 || armed && next.After(clk.Now())) {
				break
			}
			if time.Now().After(giveUp) {
				t.Fatalf("the tx pump did not settle at %v: %d frames in its line, timer armed %v", clk.Now().Sub(epoch), r.f.txLine.len(), armed)
			}
			time.Sleep(20 * time.Microsecond)
		}
		for r.peer.Queued() > 0 {
			n, err := r.peer.ReadBatch(pkts)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pkts[:n] {
				got = append(got, arrival{binary.BigEndian.Uint32(p.Bytes()[14:18]), clk.Now()})
			}
		}
		if !clk.Now().Before(until) {
			return got
		}
		step := until
		if next, armed := clk.NextDeadline(); exact && armed && next.Before(until) {
			step = next
		}
		clk.Set(step)
	}
}

// Frames written in a burst through a bottleneck arrive one serialisation
// time apart after the delay: the rate within 1% (exactly, in fact), the
// first frame's delay exact, and nothing dropped while the queue holds the
// burst.
func TestBottleneckHonoursTheRate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		rate  int64
		delay time.Duration
		size  int
		n     uint32
	}{
		{"10 Mbit/s, 1500 bytes, 20 ms", 10e6, 20 * time.Millisecond, 1500, 200},
		{"100 Mbit/s, 1500 bytes, 50 ms", 100e6, 50 * time.Millisecond, 1500, 500},
		{"1 Gbit/s, 64 bytes, no delay", 1e9, 0, 64, 500},
		{"3 Mbit/s, 1000 bytes, 1 ms", 3e6, time.Millisecond, 1000, 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewVirtual(epoch)
			r := newRig(t, Config{Rate: tt.rate, Delay: tt.delay, Queue: int(tt.n) * tt.size, Clock: clk})
			r.sendSized(t, 0, tt.n, tt.size)
			ser := time.Duration(int64(tt.size) * 8 * int64(time.Second) / tt.rate)
			got := r.runTx(t, clk, epoch.Add(tt.delay+time.Duration(tt.n+1)*ser+time.Second), uint64(tt.n), true)
			if len(got) != int(tt.n) {
				t.Fatalf("%d frames arrived, want %d (%d tail-dropped)", len(got), tt.n, r.f.Stats().Tx.TailDropped.Load())
			}
			for i, a := range got {
				if a.seq != uint32(i) {
					t.Fatalf("frame %d arrived as the %dth", a.seq, i)
				}
			}
			if first := got[0].at.Sub(epoch); first != tt.delay+ser {
				t.Errorf("the first frame arrived at %v, want the delay and its serialisation, %v", first, tt.delay+ser)
			}
			span := got[len(got)-1].at.Sub(got[0].at)
			rate := float64(int(tt.n)-1) * float64(tt.size) * 8 / span.Seconds()
			if rate < float64(tt.rate)*0.99 || rate > float64(tt.rate)*1.01 {
				t.Errorf("frames arrived at %.4g bit/s, want %d within 1%%", rate, tt.rate)
			}
		})
	}
}

// A burst larger than the queue loses its tail, counted; frames written
// once the queue has drained get through.
func TestBottleneckQueueOverflowDropsAndCounts(t *testing.T) {
	clk := clock.NewVirtual(epoch)
	r := newRig(t, Config{Rate: 100e6, Queue: 15000, Delay: time.Millisecond, Clock: clk})
	r.sendSized(t, 0, 30, 1500)
	// Ten frames of 1500 bytes fill 15000 bytes; the other 20 are dropped.
	if got := r.f.Stats().Tx.TailDropped.Load(); got != 20 {
		t.Errorf("TailDropped = %d after a burst of 30 into a queue of 10, want 20", got)
	}
	// 600 µs later five have been serialised: five more fit.
	got := r.runTx(t, clk, epoch.Add(600*time.Microsecond), 30, true)
	r.sendSized(t, 30, 40, 1500)
	if got := r.f.Stats().Tx.TailDropped.Load(); got != 25 {
		t.Errorf("TailDropped = %d after 10 more with 5 places free, want 25", got)
	}
	got = append(got, r.runTx(t, clk, epoch.Add(time.Second), 40, true)...)
	var seqs []uint32
	for _, a := range got {
		seqs = append(seqs, a.seq)
	}
	want := slices.Concat(upTo(10), []uint32{30, 31, 32, 33, 34})
	if !slices.Equal(seqs, want) {
		t.Errorf("the peer got %v, want %v", seqs, want)
	}
	if d := r.f.Stats().Tx.Dropped.Load(); d != 0 {
		t.Errorf("Dropped = %d, want 0: tail drops are not random losses", d)
	}
}

// The delay line holds a path's whole bandwidth-delay product, 12.5 MB at
// 1 Gbit/s and 100 ms, written at the rate: the writer never waits and no
// frame is lost.
func TestDelayLineHoldsABandwidthDelayProduct(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 13 MB through the delay line")
	}
	clk := clock.NewVirtual(epoch)
	const (
		rate   = 1e9
		delay  = 100 * time.Millisecond
		size   = 1500
		batch  = 32
		period = batch * size * 8 * time.Second / rate // 384 µs: the rate exactly
		rounds = int(delay/period) + 40                // past a BDP in flight
	)
	r := newRig(t, Config{Rate: rate, Delay: delay, Queue: 1 << 20, Clock: clk})
	var got []arrival
	var peak int
	for i := range rounds {
		start := time.Now()
		r.sendSized(t, uint32(i*batch), uint32((i+1)*batch), size)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("WriteBatch of round %d took %v: the line made the writer wait", i, d)
		}
		peak = max(peak, r.f.txLine.len())
		got = append(got, r.runTx(t, clk, epoch.Add(time.Duration(i+1)*period), uint64((i+1)*batch), false)...)
	}
	// The rest arrive at the rate, a round's worth each period.
	for i := range int(delay/period) + 2 {
		got = append(got, r.runTx(t, clk, epoch.Add(time.Duration(rounds+i+1)*period), uint64(rounds*batch), false)...)
	}
	// Written at the rate, what is in flight is a BDP give or take the
	// frames of a round.
	if peak*size < 12_500_000-batch*size {
		t.Errorf("at most %d frames (%d bytes) were in flight, want a BDP of 12.5 MB", peak, peak*size)
	}
	if len(got) != rounds*batch {
		t.Errorf("%d of %d frames arrived (%d tail-dropped, %d dropped by the pipe)", len(got), rounds*batch,
			r.f.Stats().Tx.TailDropped.Load(), r.inner.Stats().TxDropped.Load())
	}
}

// With a bottleneck too, the same seed makes the same losses and tail
// drops: a run replays.
func TestBottleneckLossReplaysWithItsSeed(t *testing.T) {
	run := func(seed uint64) (arrived []uint32, lost, tail uint64) {
		clk := clock.NewVirtual(epoch)
		r := newRig(t, Config{Rate: 10e6, Queue: 20 * 1000, Delay: 5 * time.Millisecond, Loss: 0.1, Seed: seed, Clock: clk})
		rng := rand.New(rand.NewPCG(1, 2)) // the offered load, the same for every seed
		var seq uint32
		var got []arrival
		for step := range 50 {
			n := uint32(rng.IntN(8))
			r.sendSized(t, seq, seq+n, 1000)
			seq += n
			got = append(got, r.runTx(t, clk, epoch.Add(time.Duration(step+1)*time.Millisecond), uint64(seq), true)...)
		}
		got = append(got, r.runTx(t, clk, epoch.Add(time.Second), uint64(seq), true)...)
		for _, a := range got {
			arrived = append(arrived, a.seq)
		}
		st := &r.f.Stats().Tx
		if got, want := uint64(len(arrived))+st.Dropped.Load()+st.TailDropped.Load(), uint64(seq); got != want {
			t.Errorf("seed %d: %d frames arrived, lost or tail-dropped, want the %d written", seed, got, want)
		}
		return arrived, st.Dropped.Load(), st.TailDropped.Load()
	}
	a1, l1, t1 := run(7)
	a2, l2, t2 := run(7)
	if !slices.Equal(a1, a2) || l1 != l2 || t1 != t2 {
		t.Errorf("seed 7 twice: %d arrived, %d lost, %d tail-dropped, then %d, %d, %d", len(a1), l1, t1, len(a2), l2, t2)
	}
	if l1 == 0 || t1 == 0 {
		t.Errorf("seed 7: %d lost, %d tail-dropped; the test wants both", l1, t1)
	}
	if a3, _, _ := run(8); slices.Equal(a1, a3) {
		t.Errorf("seeds 7 and 8 made the same losses")
	}
}

// What the endpoint reads crosses the bottleneck too: frames injected at
// once are read one serialisation time apart after the delay. Run in a
// synctest bubble, where the wall clock the endpoint reads stands still
// until every goroutine waits, so that each frame is read at its due time
// to the nanosecond.
func TestBottleneckShapesWhatIsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			n     = 20
			size  = 1500
			rate  = 100e6
			delay = 5 * time.Millisecond
			ser   = size * 8 * time.Second / rate // 120 µs
		)
		r := newRig(t, Config{Rate: rate, Delay: delay, Queue: 10 * size})
		start := time.Now()
		var batch []*buffer.Packet
		for seq := range uint32(n) {
			p := r.sized(seq, size)
			copy(p.Bytes()[0:6], macA)
			copy(p.Bytes()[6:12], macB)
			batch = append(batch, p)
		}
		if _, err := r.peer.WriteBatch(batch); err != nil {
			t.Fatal(err)
		}
		for _, p := range batch {
			p.Release()
		}
		// The queue takes ten; the rest are tail-dropped.
		pkts := []*buffer.Packet{r.pool.Get(r.f.frameSize)}
		defer pkts[0].Release()
		for k := range 10 {
			if _, err := r.f.ReadBatch(pkts); err != nil {
				t.Fatal(err)
			}
			seq := binary.BigEndian.Uint32(pkts[0].Bytes()[14:18])
			if at, want := time.Since(start), delay+time.Duration(k+1)*ser; seq != uint32(k) || at != want {
				t.Errorf("read frame %d at %v, want frame %d at %v", seq, at, k, want)
			}
		}
		if got := r.f.Stats().Rx.TailDropped.Load(); got != n-10 {
			t.Errorf("Rx.TailDropped = %d, want %d", got, n-10)
		}
	})
}
