package fault

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

const mtu = 1500

// rig is a fault endpoint over one end of a pipe; peer is the plain other
// end, from which the test writes what the fault endpoint reads and reads
// what it writes.
type rig struct {
	f     *Endpoint
	inner *pipe.Endpoint
	peer  *pipe.Endpoint
	pool  *buffer.Pool // the test's own packets
	wg    sync.WaitGroup
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	a, b := pipe.New(mtu, macA, macB)
	r := &rig{f: New(a, cfg), inner: a, peer: b, pool: buffer.NewPool()}
	t.Cleanup(func() {
		r.f.Close()
		r.peer.Close()
		r.wg.Wait() // collectors end with their endpoints
		if n := r.f.pool.Outstanding(); n != 0 {
			t.Errorf("fault endpoint's pool: %d packets outstanding after Close", n)
		}
		if n := r.pool.Outstanding(); n != 0 {
			t.Errorf("test pool: %d packets outstanding", n)
		}
	})
	return r
}

// frame returns a frame whose payload is seq followed by filler.
func (r *rig) frame(dst, src net.HardwareAddr, seq uint32) *buffer.Packet {
	p := r.pool.Get(64)
	b := p.Bytes()
	copy(b[0:6], dst)
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:14], 0x88b5)
	binary.BigEndian.PutUint32(b[14:18], seq)
	for i := 18; i < len(b); i++ {
		b[i] = byte(seq) + byte(i)
	}
	return p
}

// write sends frames with sequence numbers from..to-1 through w in batches
// of eight. It may run on any goroutine.
func (r *rig) write(t *testing.T, w link.Endpoint, dst, src net.HardwareAddr, from, to uint32) {
	t.Helper()
	var batch []*buffer.Packet
	flush := func() {
		if n, err := w.WriteBatch(batch); n != len(batch) || err != nil {
			t.Errorf("WriteBatch = %d, %v; want %d, nil", n, err, len(batch))
		}
		for _, p := range batch {
			p.Release()
		}
		batch = batch[:0]
	}
	for seq := from; seq < to; seq++ {
		batch = append(batch, r.frame(dst, src, seq))
		if len(batch) == 8 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// send writes frames from..to-1 through the fault endpoint.
func (r *rig) send(t *testing.T, from, to uint32) { r.write(t, r.f, macB, macA, from, to) }

// inject writes frames from..to-1 from the peer for the fault endpoint to
// read.
func (r *rig) inject(t *testing.T, from, to uint32) { r.write(t, r.peer, macA, macB, from, to) }

// drainPeer returns copies of the frames queued at the peer, which the
// fault endpoint has written.
func (r *rig) drainPeer(t *testing.T) [][]byte {
	t.Helper()
	var got [][]byte
	pkts := make([]*buffer.Packet, 32)
	for i := range pkts {
		pkts[i] = r.pool.Get(link.MaxFrame(mtu))
	}
	for r.peer.Queued() > 0 {
		n, err := r.peer.ReadBatch(pkts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkts[:n] {
			got = append(got, bytes.Clone(p.Bytes()))
		}
	}
	for _, p := range pkts {
		p.Release()
	}
	return got
}

// readN reads from the fault endpoint until it has count frames; it fails
// the test if they do not come within five seconds.
func (r *rig) readN(t *testing.T, count int) [][]byte {
	t.Helper()
	got, err := r.readFrames(count)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// readFrames is readN for goroutines other than the test's.
func (r *rig) readFrames(count int) ([][]byte, error) {
	watchdog := time.AfterFunc(5*time.Second, func() { r.f.Close() })
	defer watchdog.Stop()
	var got [][]byte
	pkts := make([]*buffer.Packet, 8)
	for i := range pkts {
		pkts[i] = r.pool.Get(link.MaxFrame(mtu))
	}
	defer func() {
		for _, p := range pkts {
			p.Release()
		}
	}()
	for len(got) < count {
		n, err := r.f.ReadBatch(pkts)
		if err != nil {
			return got, fmt.Errorf("ReadBatch after %d of %d frames: %w", len(got), count, err)
		}
		for _, p := range pkts[:n] {
			got = append(got, bytes.Clone(p.Bytes()))
		}
	}
	if len(got) != count {
		return got, fmt.Errorf("read %d frames, want %d", len(got), count)
	}
	return got, nil
}

// collector reads an endpoint on its own goroutine until it closes.
type collector struct {
	mu     sync.Mutex
	frames [][]byte
}

// collect starts a collector on ep; the rig's cleanup waits for it.
func (r *rig) collect(ep link.Endpoint) *collector {
	c := &collector{}
	pkts := make([]*buffer.Packet, 16)
	for i := range pkts {
		pkts[i] = r.pool.Get(link.MaxFrame(mtu))
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			n, err := ep.ReadBatch(pkts)
			if err != nil {
				for _, p := range pkts {
					p.Release()
				}
				return
			}
			c.mu.Lock()
			for _, p := range pkts[:n] {
				c.frames = append(c.frames, bytes.Clone(p.Bytes()))
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// waitFor waits up to five seconds for the collector to hold n frames and
// returns them.
func (c *collector) waitFor(t *testing.T, n int) [][]byte {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		got := len(c.frames)
		c.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("collected %d frames within 5s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.frames) != n {
		t.Fatalf("collected %d frames, want exactly %d", len(c.frames), n)
	}
	return slices.Clone(c.frames)
}

// readable returns how many frames the rx side delivers once the pump has
// shaped everything: those that survived and their duplicates, a frame
// held back to be reordered included, as its hold is bounded. Call it
// after awaitRx.
func (r *rig) readable() int {
	st := &r.f.Stats().Rx
	// Loading Frames first orders the other reads after the pump's last
	// changes (the pump counts a frame last).
	frames := st.Frames.Load()
	return int(frames - st.Dropped.Load() + st.Duplicated.Load())
}

// awaitRx waits until the rx pump has taken count frames from the pipe.
func (r *rig) awaitRx(t *testing.T, count uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.f.Stats().Rx.Frames.Load() < count {
		if time.Now().After(deadline) {
			t.Fatalf("fault endpoint read %d frames within 5s, want %d (peer dropped %d, inner queued %d)", r.f.Stats().Rx.Frames.Load(), count, r.peer.Stats().TxDropped.Load(), r.inner.Queued())
		}
		time.Sleep(time.Millisecond)
	}
}

// expireHolds moves clk past the hold bound and waits until the hold
// timers have sent on what they held. Call it when no frame is on its way
// into the fault endpoint.
func (r *rig) expireHolds(clk *clock.Virtual) {
	clk.Advance(r.f.cfg.reorderHold())
	r.f.rx.pending.Wait()
	r.f.tx.pending.Wait()
}

// assertNothingToRead checks that ReadBatch has nothing to return: it must
// still be blocked when the endpoint closes.
func (r *rig) assertNothingToRead(t *testing.T) {
	t.Helper()
	pkts := []*buffer.Packet{r.pool.Get(link.MaxFrame(mtu))}
	defer pkts[0].Release()
	type result struct {
		n   int
		err error
	}
	done := make(chan result)
	go func() {
		n, err := r.f.ReadBatch(pkts)
		done <- result{n, err}
	}()
	time.Sleep(20 * time.Millisecond)
	r.f.Close()
	if res := <-done; res.n != 0 || !errors.Is(res.err, link.ErrClosed) {
		t.Errorf("ReadBatch = %d, %v; want it blocked until Close (0, link.ErrClosed)", res.n, res.err)
	}
}

func seqs(frames [][]byte) []uint32 {
	s := make([]uint32, len(frames))
	for i, f := range frames {
		s[i] = binary.BigEndian.Uint32(f[14:18])
	}
	return s
}

func upTo(n uint32) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(i)
	}
	return s
}

func TestNoFaultsPassEveryFrameUnchanged(t *testing.T) {
	r := newRig(t, Config{Seed: 1})
	r.send(t, 0, 100)
	if got := r.drainPeer(t); !slices.Equal(seqs(got), upTo(100)) {
		t.Errorf("written: peer got seqs %v, want 0..99 in order", seqs(got))
	}
	r.inject(t, 0, 100)
	got := r.readN(t, 100)
	if !slices.Equal(seqs(got), upTo(100)) {
		t.Errorf("read: got seqs %v, want 0..99 in order", seqs(got))
	}
	want := r.frame(macA, macB, 42)
	if !bytes.Equal(got[42], want.Bytes()) {
		t.Errorf("frame 42 read as %x, want %x", got[42], want.Bytes())
	}
	want.Release()
	for dir, st := range map[string]*Direction{"rx": &r.f.Stats().Rx, "tx": &r.f.Stats().Tx} {
		if st.Frames.Load() != 100 || st.Dropped.Load()+st.Duplicated.Load()+st.Reordered.Load()+st.Corrupted.Load()+st.Delayed.Load() != 0 {
			t.Errorf("%s stats: %d frames and some faults; want 100 frames, no faults", dir, st.Frames.Load())
		}
	}
}

func TestOffloadMetadataPassesThrough(t *testing.T) {
	r := newRig(t, Config{})
	off := buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 34, CsumOffset: 6}
	p := r.frame(macB, macA, 1)
	p.Offload = off
	r.f.WriteBatch([]*buffer.Packet{p})
	r.peer.WriteBatch([]*buffer.Packet{p})
	p.Release()

	in := []*buffer.Packet{r.pool.Get(link.MaxFrame(mtu))}
	defer in[0].Release()
	if _, err := r.peer.ReadBatch(in); err != nil || in[0].Offload != off {
		t.Errorf("written: peer read offload %+v (%v), want %+v", in[0].Offload, err, off)
	}
	in[0].Offload = buffer.Offload{}
	if _, err := r.f.ReadBatch(in); err != nil || in[0].Offload != off {
		t.Errorf("read: offload %+v (%v), want %+v", in[0].Offload, err, off)
	}
}

func TestLossOneDropsEverything(t *testing.T) {
	r := newRig(t, Config{Loss: 1, Seed: 1})
	r.send(t, 0, 50)
	if got := r.drainPeer(t); len(got) != 0 {
		t.Errorf("written: peer got %d frames, want none", len(got))
	}
	r.inject(t, 0, 50)
	r.awaitRx(t, 50)
	r.assertNothingToRead(t)
	for dir, st := range map[string]*Direction{"rx": &r.f.Stats().Rx, "tx": &r.f.Stats().Tx} {
		if st.Dropped.Load() != 50 {
			t.Errorf("%s Dropped = %d, want 50", dir, st.Dropped.Load())
		}
	}
}

func TestDupOneDeliversEveryFrameTwice(t *testing.T) {
	r := newRig(t, Config{Dup: 1, Seed: 1})
	var want []uint32
	for i := range uint32(20) {
		want = append(want, i, i)
	}
	r.send(t, 0, 20)
	got := r.drainPeer(t)
	if !slices.Equal(seqs(got), want) {
		t.Errorf("written: peer got seqs %v, want %v", seqs(got), want)
	}
	r.inject(t, 0, 20)
	if got := r.readN(t, 40); !slices.Equal(seqs(got), want) {
		t.Errorf("read: got seqs %v, want %v", seqs(got), want)
	}
	for dir, st := range map[string]*Direction{"rx": &r.f.Stats().Rx, "tx": &r.f.Stats().Tx} {
		if st.Duplicated.Load() != 20 {
			t.Errorf("%s Duplicated = %d, want 20", dir, st.Duplicated.Load())
		}
	}
}

func TestReorderOneSwapsEachPair(t *testing.T) {
	// On a clock that does not move, so that the last frame of an odd
	// count stays held until another comes (or Close releases it: the
	// rig's cleanup checks the pool).
	clk := clock.NewVirtual(time.Unix(1000, 0))
	r := newRig(t, Config{Reorder: 1, Seed: 1, Clock: clk})
	// Frame 0 is held, goes out after 1; then 2 is held, and so on.
	want := []uint32{1, 0, 3, 2, 5, 4}
	r.send(t, 0, 7)
	if got := r.drainPeer(t); !slices.Equal(seqs(got), want) {
		t.Errorf("written: peer got seqs %v, want %v", seqs(got), want)
	}
	r.inject(t, 0, 7)
	if got := r.readN(t, 6); !slices.Equal(seqs(got), want) {
		t.Errorf("read: got seqs %v, want %v", seqs(got), want)
	}
	for dir, st := range map[string]*Direction{"rx": &r.f.Stats().Rx, "tx": &r.f.Stats().Tx} {
		if st.Reordered.Load() != 4 {
			t.Errorf("%s Reordered = %d, want 4", dir, st.Reordered.Load())
		}
	}
}

func TestCorruptOneFlipsOneBitPastTheEthernetHeader(t *testing.T) {
	r := newRig(t, Config{Corrupt: 1, Seed: 3})
	check := func(dir string, got [][]byte) {
		t.Helper()
		for i, f := range got {
			orig := r.frame(macB, macA, uint32(i))
			if dir == "read" {
				orig.Release()
				orig = r.frame(macA, macB, uint32(i))
			}
			want := orig.Bytes()
			if !bytes.Equal(f[:link.EthernetHeaderLen], want[:link.EthernetHeaderLen]) {
				t.Errorf("%s frame %d: Ethernet header changed", dir, i)
			}
			flipped := 0
			for j := range f {
				flipped += bits.OnesCount8(f[j] ^ want[j])
			}
			if flipped != 1 {
				t.Errorf("%s frame %d: %d bits differ, want 1", dir, i, flipped)
			}
			orig.Release()
		}
	}
	r.send(t, 0, 30)
	check("written", r.drainPeer(t))
	r.inject(t, 0, 30)
	check("read", r.readN(t, 30))
	if r.f.Stats().Tx.Corrupted.Load() != 30 || r.f.Stats().Rx.Corrupted.Load() != 30 {
		t.Errorf("Corrupted = %d tx, %d rx; want 30 each", r.f.Stats().Tx.Corrupted.Load(), r.f.Stats().Rx.Corrupted.Load())
	}
}

func TestWriteLeavesTheCallersPacketsAlone(t *testing.T) {
	// The clock stays put, so that frame 10 releases frame 9, not the
	// hold timer.
	r := newRig(t, Config{Corrupt: 1, Reorder: 1, Seed: 1, Clock: clock.NewVirtual(time.Unix(1000, 0))})
	p := r.frame(macB, macA, 9)
	want9 := bytes.Clone(p.Bytes())
	r.f.WriteBatch([]*buffer.Packet{p})
	if !bytes.Equal(p.Bytes(), want9) {
		t.Errorf("WriteBatch corrupted the caller's packet")
	}
	// Released while the endpoint holds frame 9 back; the pool may well
	// hand the same buffer out again for frame 10.
	p.Release()
	q := r.frame(macB, macA, 10)
	r.f.WriteBatch([]*buffer.Packet{q})
	q.Release()

	got := r.drainPeer(t)
	if len(got) != 2 {
		t.Fatalf("peer got %d frames, want 2", len(got))
	}
	flipped := 0
	for i := range got[1] {
		flipped += bits.OnesCount8(got[1][i] ^ want9[i])
	}
	if flipped != 1 {
		t.Errorf("frame held back is %x, %d bits from frame 9 (want 1: its copy, corrupted once)", got[1], flipped)
	}
}

// TestSameSeedSameFaults replays a mix of faults: the same seed gives the
// same frames in the same order, also when traffic in the other direction
// differs; another seed gives another run. The hold timer changes only
// when a held frame goes, never a frame's fate: it draws nothing.
func TestSameSeedSameFaults(t *testing.T) {
	cfg := Config{Loss: 0.2, Dup: 0.1, Reorder: 0.1, Corrupt: 0.1, Seed: 7}
	type result struct {
		tx, rx  [][]byte
		expired uint64 // frames the hold timers released, both ways
	}
	// run sends 400 frames each way in rounds of 40 on a virtual clock;
	// with expireEachRound it moves the clock past the hold after each
	// round, so that the timer releases a frame held at a round's end,
	// else only after the last.
	run := func(cfg Config, rxTraffic, expireEachRound bool) result {
		clk := clock.NewVirtual(time.Unix(1000, 0))
		cfg.Clock = clk
		r := newRig(t, cfg)
		c := r.collect(r.f)
		var res result
		for i := uint32(0); i < 400; i += 40 {
			last := i+40 == 400
			r.send(t, i, i+40)
			if rxTraffic {
				r.inject(t, i, i+40)
				r.awaitRx(t, uint64(i+40)) // pace the writes to keep the pipe from dropping
			}
			if expireEachRound || last {
				r.expireHolds(clk)
			}
			res.tx = append(res.tx, r.drainPeer(t)...)
		}
		if rxTraffic {
			res.rx = c.waitFor(t, r.readable())
		}
		res.expired = r.f.Stats().Rx.HoldExpired.Load() + r.f.Stats().Tx.HoldExpired.Load()
		return res
	}
	r1 := run(cfg, true, true)
	r2 := run(cfg, false, true)
	r3 := run(cfg, true, true)
	other := cfg
	other.Seed = 8
	r4 := run(other, true, true)
	r5 := run(cfg, true, false)

	if !slices.EqualFunc(r1.tx, r2.tx, bytes.Equal) {
		t.Errorf("traffic read changed the faults on frames written: %d vs %d frames", len(r1.tx), len(r2.tx))
	}
	if !slices.EqualFunc(r1.tx, r3.tx, bytes.Equal) || !slices.EqualFunc(r1.rx, r3.rx, bytes.Equal) || r1.expired != r3.expired {
		t.Errorf("same seed, different runs: %d/%d frames written, %d/%d read, %d/%d released by the hold timer",
			len(r1.tx), len(r3.tx), len(r1.rx), len(r3.rx), r1.expired, r3.expired)
	}
	if slices.EqualFunc(r1.tx, r4.tx, bytes.Equal) || slices.EqualFunc(r1.rx, r4.rx, bytes.Equal) {
		t.Errorf("seeds 7 and 8 made the same faults")
	}
	// Holds that end by the timer rather than by the next round's first
	// frame: the same frames, only in another order.
	if r1.expired <= r5.expired {
		t.Fatalf("%d frames released by the hold timer after every round, %d after the last: the test proves nothing", r1.expired, r5.expired)
	}
	sorted := func(frames [][]byte) [][]byte { return slices.SortedFunc(slices.Values(frames), bytes.Compare) }
	if !slices.EqualFunc(sorted(r1.tx), sorted(r5.tx), bytes.Equal) || !slices.EqualFunc(sorted(r1.rx), sorted(r5.rx), bytes.Equal) {
		t.Errorf("the hold timer changed the fates of frames: %d/%d frames written, %d/%d read", len(r1.tx), len(r5.tx), len(r1.rx), len(r5.rx))
	}
	if slices.EqualFunc(r1.tx, r5.tx, bytes.Equal) && slices.EqualFunc(r1.rx, r5.rx, bytes.Equal) {
		t.Errorf("frames released by the hold timer came in the order the next frame would have released them in")
	}
	// Sanity of the mix: 400 frames with 20% loss.
	if n := len(r1.tx); n < 250 || n > 400 {
		t.Errorf("%d of 400 frames written survived 20%% loss and 10%% duplication", n)
	}
}

// TestReseedForgetsEarlierTraffic pins down what a benchmark reseeding
// before each flow relies on: after Reseed, the frames that follow meet
// the fates of a new endpoint's with that seed, in both directions,
// however many frames crossed before.
func TestReseedForgetsEarlierTraffic(t *testing.T) {
	const seed = 5
	// run makes an endpoint with cfg, sends before frames each way,
	// reseeds it when asked and returns the fates of the 200 frames sent
	// each way after.
	run := func(cfg Config, before int, reseed bool) (tx, rx [][]byte) {
		r := newRig(t, cfg)
		col := r.collect(r.f)
		r.send(t, 0, uint32(before))
		r.inject(t, 0, uint32(before))
		r.awaitRx(t, uint64(before))
		r.drainPeer(t)
		preRx := r.readable()
		col.waitFor(t, preRx)
		if reseed {
			r.f.Reseed(seed)
		}
		r.send(t, 1000, 1200)
		r.inject(t, 1000, 1200)
		r.awaitRx(t, uint64(before+200))
		return r.drainPeer(t), col.waitFor(t, r.readable())[preRx:]
	}
	cfg := Config{Loss: 0.3, Corrupt: 0.1}
	fresh := cfg
	fresh.Seed = seed
	wantTx, wantRx := run(fresh, 0, false)
	if len(wantTx) == 200 || len(wantRx) == 200 {
		t.Fatalf("no frame lost of 200 at 30%% loss: the test proves nothing")
	}
	cfg.Seed = 1
	for _, before := range []int{0, 37, 150} {
		tx, rx := run(cfg, before, true)
		if !slices.EqualFunc(tx, wantTx, bytes.Equal) || !slices.EqualFunc(rx, wantRx, bytes.Equal) {
			t.Errorf("after %d frames each way and Reseed(%d): %d written and %d read of 200, want %d and %d as from a new endpoint seeded %d, the same frames",
				before, seed, len(tx), len(rx), len(wantTx), len(wantRx), seed)
		}
	}
}

func TestFaultRatesFollowTheProbabilities(t *testing.T) {
	const total = 4000
	r := newRig(t, Config{Loss: 0.25, Dup: 0.1, Reorder: 0.05, Corrupt: 0.02, Seed: 99})
	for i := uint32(0); i < total; i += 200 {
		r.send(t, i, i+200)
		r.drainPeer(t) // keep the pipe's queue from overflowing
	}
	st := &r.f.Stats().Tx
	for _, c := range []struct {
		name string
		got  uint64
		p    float64
	}{
		{"Dropped", st.Dropped.Load(), 0.25},
		{"Duplicated", st.Duplicated.Load(), 0.1 * 0.75},
		{"Corrupted", st.Corrupted.Load(), 0.02 * 0.75},
	} {
		// Within five standard deviations of the binomial mean.
		mean := c.p * total
		sd := 5 * math.Sqrt(mean*(1-c.p))
		if float64(c.got) < mean-sd || float64(c.got) > mean+sd {
			t.Errorf("%s = %d of %d, want about %.0f", c.name, c.got, total, mean)
		}
	}
	if st.Reordered.Load() == 0 {
		t.Errorf("Reordered = 0 with probability 0.05 over %d frames", total)
	}
}

func TestDelayHoldsFramesUntilDue(t *testing.T) {
	const delay = 10 * time.Millisecond
	clk := clock.NewVirtual(time.Unix(1000, 0))
	t.Run("written", func(t *testing.T) {
		r := newRig(t, Config{Delay: delay, Clock: clk})
		start := time.Now()
		r.send(t, 0, 10) // must not wait for the delay: the clock is not moving
		if time.Since(start) > time.Second {
			t.Errorf("WriteBatch took %v", time.Since(start))
		}
		clk.WaitPending(1) // the tx pump has armed its timer
		if q := r.peer.Queued(); q != 0 {
			t.Fatalf("%d frames arrived before the delay passed", q)
		}
		clk.Advance(delay - time.Nanosecond)
		if q := r.peer.Queued(); q != 0 {
			t.Fatalf("%d frames arrived a nanosecond early", q)
		}
		clk.Advance(time.Nanosecond)
		deadline := time.Now().Add(5 * time.Second)
		for r.peer.Queued() < 10 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := r.drainPeer(t); !slices.Equal(seqs(got), upTo(10)) {
			t.Errorf("after the delay the peer got %v, want 0..9", seqs(got))
		}
		if r.f.Stats().Tx.Delayed.Load() != 10 {
			t.Errorf("Tx.Delayed = %d, want 10", r.f.Stats().Tx.Delayed.Load())
		}
	})
	t.Run("read", func(t *testing.T) {
		r := newRig(t, Config{Delay: delay, Clock: clk})
		r.inject(t, 0, 10)
		r.awaitRx(t, 10)
		got := make(chan [][]byte)
		go func() {
			frames, err := r.readFrames(10)
			if err != nil {
				t.Error(err)
			}
			got <- frames
		}()
		clk.WaitPending(1) // ReadBatch waits for the first frame's due time
		select {
		case g := <-got:
			t.Fatalf("ReadBatch returned %v before the delay passed", seqs(g))
		case <-time.After(10 * time.Millisecond):
		}
		clk.Advance(delay)
		if g := <-got; !slices.Equal(seqs(g), upTo(10)) {
			t.Errorf("after the delay read %v, want 0..9", seqs(g))
		}
		if r.f.Stats().Rx.Delayed.Load() != 10 {
			t.Errorf("Rx.Delayed = %d, want 10", r.f.Stats().Rx.Delayed.Load())
		}
	})
	t.Run("close releases frames in flight", func(t *testing.T) {
		r := newRig(t, Config{Delay: delay, Clock: clk, Reorder: 0.5})
		r.send(t, 0, 10)
		r.inject(t, 0, 10)
		r.awaitRx(t, 10)
		if r.f.pool.Outstanding() == 0 {
			t.Fatal("no frames in flight before Close; the test proves nothing")
		}
		r.f.Close()
		if n := r.f.pool.Outstanding(); n != 0 {
			t.Errorf("%d packets outstanding after Close", n)
		}
	})
}

func TestDelayOnTheWallClock(t *testing.T) {
	const delay = 20 * time.Millisecond
	r := newRig(t, Config{Delay: delay})
	start := time.Now()
	r.send(t, 0, 1)
	r.inject(t, 0, 1)
	r.readN(t, 1)
	if d := time.Since(start); d < delay {
		t.Errorf("frame read after %v, want at least %v", d, delay)
	}
	for r.peer.Queued() == 0 && time.Since(start) < 5*time.Second {
		time.Sleep(time.Millisecond)
	}
	if d := time.Since(start); d < delay {
		t.Errorf("frame written arrived after %v, want at least %v", d, delay)
	}
	r.drainPeer(t)
}

func TestClose(t *testing.T) {
	t.Run("wakes a blocked reader", func(t *testing.T) {
		r := newRig(t, Config{})
		r.assertNothingToRead(t)
	})
	t.Run("closes the inner endpoint", func(t *testing.T) {
		r := newRig(t, Config{})
		if err := r.f.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		p := r.frame(macA, macB, 1)
		defer p.Release()
		r.peer.WriteBatch([]*buffer.Packet{p})
		if got := r.peer.Stats().TxDropped.Load(); got != 1 {
			t.Errorf("peer's write to the closed inner end: TxDropped = %d, want 1", got)
		}
		if n, err := r.f.WriteBatch([]*buffer.Packet{p}); n != 0 || !errors.Is(err, link.ErrClosed) {
			t.Errorf("WriteBatch after Close = %d, %v; want 0, link.ErrClosed", n, err)
		}
		if err := r.f.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
	t.Run("inner closed underneath ends reads and writes", func(t *testing.T) {
		a, b := pipe.New(mtu, macA, macB)
		f := New(a, Config{})
		defer b.Close()
		defer f.Close()
		a.Close()
		pool := buffer.NewPool()
		p := pool.Get(link.MaxFrame(mtu))
		defer p.Release()
		if _, err := f.ReadBatch([]*buffer.Packet{p}); !errors.Is(err, net.ErrClosed) {
			t.Errorf("ReadBatch over a closed inner endpoint: %v, want net.ErrClosed", err)
		}
		if _, err := f.WriteBatch([]*buffer.Packet{p}); !errors.Is(err, net.ErrClosed) {
			t.Errorf("WriteBatch over a closed inner endpoint: %v, want net.ErrClosed", err)
		}
	})
}

func TestReadBatchRefusesPacketsWithoutRoom(t *testing.T) {
	r := newRig(t, Config{})
	p := r.pool.Get(0)
	defer p.Release()
	p.SetLen(p.Cap() - 100)
	p.TrimFront(p.Len())
	_, err := r.f.ReadBatch([]*buffer.Packet{p})
	if want := "fault: ReadBatch: packet 0 has room for 100 bytes, frames need 1514"; err == nil || err.Error() != want {
		t.Errorf("ReadBatch: %v, want %q", err, want)
	}
}

func TestNewPanicsOnInvalidConfig(t *testing.T) {
	a, b := pipe.New(mtu, macA, macB)
	defer a.Close()
	defer b.Close()
	defer func() {
		if r := recover(); r == nil || fmt.Sprint(r) != "fault: loss=2 is not a probability in [0, 1]" {
			t.Errorf("New with loss=2 panicked with %v", r)
		}
	}()
	New(a, Config{Loss: 2})
}

// TestConcurrentTraffic runs readers and writers on their own goroutines
// under every fault (for -race), then checks that every frame is accounted
// for.
func TestConcurrentTraffic(t *testing.T) {
	const total = 2000
	r := newRig(t, Config{Loss: 0.1, Dup: 0.1, Reorder: 0.1, Corrupt: 0.1, Delay: 100 * time.Microsecond, Seed: 5})
	read := r.collect(r.f)
	written := r.collect(r.peer)
	var writers sync.WaitGroup
	writers.Add(2)
	go func() {
		defer writers.Done()
		for i := uint32(0); i < total; i += 50 {
			r.inject(t, i, i+50)
			time.Sleep(100 * time.Microsecond) // stay within the pipe's queue
		}
	}()
	go func() {
		defer writers.Done()
		for i := uint32(0); i < total; i += 50 {
			r.send(t, i, i+50)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	writers.Wait()

	// Frames the pipes dropped never reached the next stage.
	r.awaitRx(t, total-r.peer.Stats().TxDropped.Load())
	read.waitFor(t, r.readable())

	tx := &r.f.Stats().Tx
	if got := tx.Frames.Load(); got != total {
		t.Errorf("Tx.Frames = %d, want %d", got, total)
	}
	// The writers have returned, so the writer-side state is settled;
	// delayed frames, and a frame held to be reordered, may still be on
	// their way.
	sent := int(tx.Frames.Load() - tx.Dropped.Load() + tx.Duplicated.Load())
	deadline := time.Now().Add(5 * time.Second)
	for {
		written.mu.Lock()
		got := len(written.frames)
		written.mu.Unlock()
		lost := int(r.inner.Stats().TxDropped.Load() + r.f.Stats().TxErrors.Load())
		if got+lost == sent {
			break
		}
		if got+lost > sent || time.Now().After(deadline) {
			t.Fatalf("peer got %d frames and %d were lost on the way, want %d in all", got, lost, sent)
		}
		time.Sleep(time.Millisecond)
	}
}
