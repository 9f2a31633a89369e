package shm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

var (
	macL = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	macD = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
)

// pair returns the two sides of a link over a socket in a temporary
// directory: l accepted with lo, d dialled with do. Both are closed when
// the test ends.
func pair(t testing.TB, lo, do Options) (l, d *Endpoint) {
	t.Helper()
	if lo.MAC == nil {
		lo.MAC = macL
	}
	if do.MAC == nil {
		do.MAC = macD
	}
	path := filepath.Join(t.TempDir(), "ring.sock")
	ln, err := Listen(path, lo)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		var err error
		l, err = ln.Accept()
		accepted <- err
	}()
	d, err = Dial(path, do)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, d
}

// counters returns e's counters by name, for failure messages.
func counters(e *Endpoint) map[string]int64 {
	m := map[string]int64{}
	stats.Walk("", e.Stats(), func(n string, v int64) {
		if v != 0 {
			m[n] = v
		}
	})
	return m
}

// frame returns a frame of n bytes whose contents tell seq and n.
func frame(pool *buffer.Pool, n int, seq uint32) *buffer.Packet {
	p := pool.Get(n)
	b := p.Bytes()
	for i := range b {
		b[i] = byte(seq*7 + uint32(i)*13)
	}
	b[0], b[1], b[2], b[3] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	return p
}

func seqOf(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// readN reads until n frames have arrived and returns copies of them.
func readN(t testing.TB, e *Endpoint, n int) []*buffer.Packet {
	t.Helper()
	pool := buffer.NewPool()
	room := e.Capabilities().RxFrameSize(e.MTU())
	pkts := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range pkts {
		pkts[i] = pool.Get(room)
	}
	var got []*buffer.Packet
	for len(got) < n {
		for _, p := range pkts {
			p.SetLen(room)
		}
		k, err := e.ReadBatch(pkts[:min(len(pkts), n-len(got))])
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d frames: %v", len(got), n, err)
		}
		for _, p := range pkts[:k] {
			got = append(got, pool.Clone(p))
		}
	}
	return got
}

// lendTail makes p's data from head on loans, as TCP's payload is
// (link.Capabilities.TxGather): two of them, whose bytes p's own buffer
// no longer holds until they are read into place.
func lendTail(p *buffer.Packet, head int) {
	b := p.Bytes()
	tail := bytes.Clone(b[head:])
	clear(b[head:])
	half := len(tail) / 2
	p.Borrow(tail[:half], nopLender{})
	p.Borrow(tail[half:], nopLender{})
}

type nopLender struct{}

func (nopLender) Return() {}

// gso is the metadata of a TCP super-segment of a frame over the MTU.
var gso = buffer.Offload{Flags: buffer.NeedsCsum, GSOType: buffer.GSOTCPv4, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}

// Every frame length from the shortest Ethernet frame to a 64 KiB
// super-segment crosses whole, with its offload metadata, both ways, and
// so does a frame that ends in loans.
func TestFramesOfEverySizeCross(t *testing.T) {
	l, d := pair(t, Options{Offload: true}, Options{Offload: true})
	if c := l.Capabilities(); !c.TSO || !c.RxGSO || !c.TxChecksum || !c.RxChecksum {
		t.Fatalf("capabilities %+v with offloads on both sides", c)
	}
	var sizes []int
	for n := 60; n <= 1600; n++ {
		sizes = append(sizes, n)
	}
	for n := 1601; n < link.MaxGSOFrame; n += 61 {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, link.MaxGSOFrame-1, link.MaxGSOFrame)
	if testing.Short() || raceEnabled {
		var some []int
		for i := 0; i < len(sizes); i += 5 {
			some = append(some, sizes[i])
		}
		sizes = append(some, link.MaxGSOFrame)
	}
	pool := buffer.NewPool()
	for _, dir := range []struct {
		name     string
		from, to *Endpoint
	}{{"listener to dialler", l, d}, {"dialler to listener", d, l}} {
		t.Run(dir.name, func(t *testing.T) {
			for start := 0; start < len(sizes); start += 16 {
				batch := sizes[start:min(start+16, len(sizes))]
				var pkts []*buffer.Packet
				for i, n := range batch {
					p := frame(pool, n, uint32(start+i))
					if n > link.MaxFrame(1500) {
						p.Offload = gso
					} else if n%2 == 0 {
						p.Offload = buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 34, CsumOffset: 6}
					}
					if i%3 == 1 {
						lendTail(p, 54)
					}
					pkts = append(pkts, p)
				}
				if _, err := dir.from.WriteBatch(pkts); err != nil {
					t.Fatal(err)
				}
				got := readN(t, dir.to, len(pkts))
				for i, p := range got {
					if !bytes.Equal(p.Bytes(), pkts[i].Bytes()) || p.Offload != pkts[i].Offload {
						t.Fatalf("frame of %d bytes (%+v) arrived as %d bytes (%+v), contents equal %v",
							pkts[i].Len(), pkts[i].Offload, p.Len(), p.Offload, bytes.Equal(p.Bytes(), pkts[i].Bytes()))
					}
					p.Release()
					pkts[i].Release()
				}
			}
			if s := dir.from.Stats(); s.TxRingFull.Load()+s.TxErrors.Load() != 0 || s.TxGathered.Load() == 0 {
				t.Errorf("sender's counters %v; want no drops, and frames gathered from loans", counters(dir.from))
			}
		})
	}
}

// Without offloads on both sides, the link carries frames up to the MTU
// with no metadata: longer frames and partial checksums are refused and
// counted, and a DataValid flag from another link is dropped.
func TestWithoutOffloadsFramesStopAtTheMTU(t *testing.T) {
	l, d := pair(t, Options{Offload: true}, Options{})
	if c := l.Capabilities(); c != (link.Capabilities{}) {
		t.Fatalf("capabilities %+v when only one side offered offloads", c)
	}
	pool := buffer.NewPool()
	ok := frame(pool, link.MaxFrame(1500), 1)
	ok.Offload = buffer.Offload{Flags: buffer.DataValid}
	long := frame(pool, link.MaxFrame(1500)+1, 2)
	partial := frame(pool, 100, 3)
	partial.Offload = buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 34, CsumOffset: 16}
	runt := frame(pool, link.EthernetHeaderLen-1, 4)
	n, err := d.WriteBatch([]*buffer.Packet{ok, long, partial, runt})
	if n != 4 || err != nil {
		t.Fatalf("WriteBatch took %d of 4 frames: %v", n, err)
	}
	if got := d.Stats().TxErrors.Load(); got != 3 {
		t.Errorf("TxErrors %d, want 3 (too long, partial checksum, runt)", got)
	}
	got := readN(t, l, 1)
	if !bytes.Equal(got[0].Bytes(), ok.Bytes()) || got[0].Offload != (buffer.Offload{}) {
		t.Errorf("frame arrived as %d bytes with %+v", got[0].Len(), got[0].Offload)
	}
}

// A ring whose descriptors, or whose data area, are all taken drops what
// does not fit, counted, without blocking; what fitted arrives in order,
// and once read the ring takes frames again.
func TestFullRingDrops(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		size int
		fits int
	}{
		{"descriptors", Options{RingSize: 8}, 60, 8},
		// 4096 bytes hold two 1514-byte frames (1536 with alignment).
		{"data area", Options{RingSize: 8, DataSize: 4096}, 1514, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, d := pair(t, tc.opts, tc.opts)
			pool := buffer.NewPool()
			for round := range 3 {
				var pkts []*buffer.Packet
				for i := range 20 {
					pkts = append(pkts, frame(pool, tc.size, uint32(round*100+i)))
				}
				before := l.Stats().TxRingFull.Load()
				if n, err := l.WriteBatch(pkts); n != len(pkts) || err != nil {
					t.Fatalf("WriteBatch took %d of %d: %v", n, len(pkts), err)
				}
				if full := l.Stats().TxRingFull.Load() - before; full != uint64(20-tc.fits) {
					t.Fatalf("round %d: %d frames dropped, want %d", round, full, 20-tc.fits)
				}
				got := readN(t, d, tc.fits)
				for i, p := range got {
					if !bytes.Equal(p.Bytes(), pkts[i].Bytes()) {
						t.Fatalf("round %d: frame %d is seq %d, want %d", round, i, seqOf(p.Bytes()), seqOf(pkts[i].Bytes()))
					}
				}
				if n, _, err := d.rx.take(make([]*buffer.Packet, 1)); n != 0 || err != nil {
					t.Fatalf("after the frames that fitted, %d more (%v)", n, err)
				}
			}
		})
	}
}

// Frames of many lengths through a small ring wrap its indices and its
// data area many times over, and arrive whole and in order.
func TestWrapAround(t *testing.T) {
	// 16 KiB holds 8 frames of 1514 bytes (1536 with alignment), and a
	// wrap's padding: no frame is dropped.
	l, d := pair(t, Options{RingSize: 8, DataSize: 16384}, Options{})
	pool := buffer.NewPool()
	rng := rand.New(rand.NewPCG(1, 2))
	var seq uint32
	for range 3000 {
		var pkts []*buffer.Packet
		for range 1 + rng.IntN(8) {
			pkts = append(pkts, frame(pool, 60+rng.IntN(1515-60), seq))
			seq++
		}
		if _, err := l.WriteBatch(pkts); err != nil {
			t.Fatal(err)
		}
		if full := l.Stats().TxRingFull.Load(); full != 0 {
			t.Fatalf("%d frames dropped", full)
		}
		for i, p := range readN(t, d, len(pkts)) {
			if !bytes.Equal(p.Bytes(), pkts[i].Bytes()) {
				t.Fatalf("frame seq %d of %d bytes arrived as seq %d of %d bytes", seqOf(pkts[i].Bytes()), pkts[i].Len(), seqOf(p.Bytes()), p.Len())
			}
		}
	}
	if l.tx.pos < 100*16384 {
		t.Errorf("the data area wrapped only %d times", l.tx.pos/16384)
	}
}

// Both sides write and read at once, each with its own goroutines, as a
// stack does: every frame arrives once, in order. A writer that finds the
// ring full sends the frame again, so that none is missing.
func TestConcurrentReadWrite(t *testing.T) {
	l, d := pair(t, Options{RingSize: 64}, Options{})
	const frames = 50000
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, dir := range []struct{ from, to *Endpoint }{{l, d}, {d, l}} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			pool := buffer.NewPool()
			rng := rand.New(rand.NewPCG(3, 4))
			for seq := uint32(0); seq < frames; {
				var pkts []*buffer.Packet
				for range 1 + rng.IntN(buffer.MaxBatch) {
					pkts = append(pkts, frame(pool, 60+rng.IntN(1455), seq+uint32(len(pkts))))
				}
				before := dir.from.Stats().TxRingFull.Load()
				if _, err := dir.from.WriteBatch(pkts); err != nil {
					errs <- err
					return
				}
				// Drops are the last frames of the batch: resend from the
				// first dropped.
				seq += uint32(len(pkts)) - uint32(dir.from.Stats().TxRingFull.Load()-before)
				for _, p := range pkts {
					p.Release()
				}
				if dir.from.Stats().TxRingFull.Load() != before {
					time.Sleep(10 * time.Microsecond)
				}
			}
		}()
		go func() {
			defer wg.Done()
			pool := buffer.NewPool()
			pkts := make([]*buffer.Packet, buffer.MaxBatch)
			for i := range pkts {
				pkts[i] = pool.Get(link.MaxFrame(1500))
			}
			for want := uint32(0); want < frames; {
				for _, p := range pkts {
					p.SetLen(link.MaxFrame(1500))
				}
				n, err := dir.to.ReadBatch(pkts)
				if err != nil {
					errs <- err
					return
				}
				for _, p := range pkts[:n] {
					if got := seqOf(p.Bytes()); got != want {
						errs <- fmt.Errorf("frame seq %d, want %d", got, want)
						return
					}
					want++
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if l.Stats().WakeupsSent.Load() == 0 && d.Stats().WakeupsSent.Load() == 0 {
		t.Log("no reader ever slept")
	}
}

// Close wakes a ReadBatch blocked on an empty ring, which returns
// link.ErrClosed.
func TestCloseWakesABlockedReader(t *testing.T) {
	l, _ := pair(t, Options{}, Options{})
	done := make(chan error, 1)
	go func() {
		pkts := []*buffer.Packet{buffer.NewPool().Get(link.MaxFrame(1500))}
		_, err := l.ReadBatch(pkts)
		done <- err
	}()
	for l.Stats().Sleeps.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, link.ErrClosed) {
			t.Errorf("ReadBatch returned %v, want link.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadBatch still blocked 5s after Close")
	}
	if _, err := l.WriteBatch(nil); !errors.Is(err, link.ErrClosed) {
		t.Errorf("WriteBatch after Close: %v", err)
	}
}

// When one side closes, the other's link goes down: a blocked ReadBatch
// wakes with an error wrapping ErrLinkDown (and net.ErrClosed, so that a
// NIC stops reading), and WriteBatch refuses frames, counted.
func TestPeerCloseTakesTheLinkDown(t *testing.T) {
	l, d := pair(t, Options{}, Options{})
	done := make(chan error, 1)
	go func() {
		pkts := []*buffer.Packet{buffer.NewPool().Get(link.MaxFrame(1500))}
		_, err := l.ReadBatch(pkts)
		done <- err
	}()
	d.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrLinkDown) || !errors.Is(err, net.ErrClosed) {
			t.Errorf("ReadBatch returned %v, want ErrLinkDown", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadBatch still blocked 5s after the peer closed")
	}
	if _, err := l.WriteBatch([]*buffer.Packet{frame(buffer.NewPool(), 60, 0)}); !errors.Is(err, ErrLinkDown) {
		t.Errorf("WriteBatch on a link down: %v", err)
	}
	if s := l.Stats(); s.PeerGone.Load() != 1 || s.TxDown.Load() != 1 || s.Garbage.Load() != 0 {
		t.Errorf("counters %v, want PeerGone and TxDown 1", counters(l))
	}
}

// A dialler whose MTU is not the listener's is refused, and told why.
func TestHandshakeRefusesAnotherMTU(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.sock")
	ln, err := Listen(path, Options{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		accepted <- err
	}()
	if _, err := Dial(path, Options{MTU: 9000}); err == nil {
		t.Fatal("Dial with MTU 9000 to a listener of MTU 1500 succeeded")
	} else {
		t.Logf("dialler: %v", err)
	}
	if err := <-accepted; err == nil {
		t.Fatal("Accept succeeded")
	}
	if ln.Stats().Refused.Load() != 1 {
		t.Errorf("Refused %d, want 1", ln.Stats().Refused.Load())
	}
}

// The producer rings the eventfd only for a consumer that sleeps: batches
// published while the peer is awake (here, not reading at all) cost no
// wake-up; one published while it blocks costs one, and wakes it.
func TestWakeupOnlyForASleepingPeer(t *testing.T) {
	l, d := pair(t, Options{}, Options{})
	pool := buffer.NewPool()
	for i := range 10 {
		if _, err := l.WriteBatch([]*buffer.Packet{frame(pool, 60, uint32(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if w := l.Stats().WakeupsSent.Load(); w != 0 {
		t.Fatalf("%d wake-ups sent to a peer that was not sleeping", w)
	}
	readN(t, d, 10)
	if s := d.Stats().Sleeps.Load(); s != 0 {
		t.Fatalf("reader slept %d times with frames waiting", s)
	}
	got := make(chan error, 1)
	go func() {
		_, err := d.ReadBatch([]*buffer.Packet{pool.Get(link.MaxFrame(1500))})
		got <- err
	}()
	for d.Stats().Sleeps.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := l.WriteBatch([]*buffer.Packet{frame(pool, 60, 10)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the sleeping reader was not woken in 5s")
	}
	if w := l.Stats().WakeupsSent.Load(); w != 1 {
		t.Errorf("%d wake-ups sent for one sleep, want 1", w)
	}
}

// A ReadBatch given a packet too small for the link's longest frame (64
// KiB with offloads) says so before taking any frame, so that the
// caller's mistake loses nothing.
func TestReadBatchRefusesSmallPackets(t *testing.T) {
	l, d := pair(t, Options{Offload: true}, Options{Offload: true})
	pool := buffer.NewPool()
	if _, err := l.WriteBatch([]*buffer.Packet{frame(pool, 60, 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadBatch([]*buffer.Packet{pool.Get(link.MaxGSOFrame), pool.Get(link.MaxFrame(1500))}); err == nil {
		t.Fatal("ReadBatch took a 1514-byte packet on a link of 64 KiB frames")
	}
	if got := readN(t, d, 1); seqOf(got[0].Bytes()) != 1 {
		t.Errorf("the frame after the refused read is seq %d", seqOf(got[0].Bytes()))
	}
}

// A reader that finds its ring empty polls it for Options.Spin before it
// sleeps: a frame published meanwhile is taken with no sleep and no
// wake-up, and with a negative Spin the reader sleeps at once.
func TestSpinBeforeSleep(t *testing.T) {
	for _, tc := range []struct {
		name       string
		spin       time.Duration
		wantSleeps bool
	}{
		{"a frame within the spin is taken without sleeping", 10 * time.Second, false},
		{"a negative spin sleeps at once", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, d := pair(t, Options{}, Options{Spin: tc.spin})
			pool := buffer.NewPool()
			got := make(chan error, 1)
			go func() {
				_, err := d.ReadBatch([]*buffer.Packet{pool.Get(link.MaxFrame(1500))})
				got <- err
			}()
			if tc.wantSleeps {
				for d.Stats().Sleeps.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
			} else {
				time.Sleep(20 * time.Millisecond)
			}
			if _, err := l.WriteBatch([]*buffer.Packet{frame(pool, 60, 1)}); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			st, lt := d.Stats(), l.Stats()
			if tc.wantSleeps {
				if st.SpinHits.Load() != 0 || lt.WakeupsSent.Load() != 1 {
					t.Fatalf("spin hits %d, wake-ups %d; want 0 and 1", st.SpinHits.Load(), lt.WakeupsSent.Load())
				}
				return
			}
			if st.Sleeps.Load() != 0 || st.SpinHits.Load() != 1 || lt.WakeupsSent.Load() != 0 {
				t.Fatalf("sleeps %d, spin hits %d, wake-ups %d; want 0, 1 and 0", st.Sleeps.Load(), st.SpinHits.Load(), lt.WakeupsSent.Load())
			}
		})
	}
}
