package pipe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

// frame returns a packet from pool holding an Ethernet frame from src to dst
// of the given length, whose payload starts with seq.
func frame(pool *buffer.Pool, dst, src net.HardwareAddr, length int, seq uint32) *buffer.Packet {
	p := pool.Get(length)
	b := p.Bytes()
	clear(b)
	copy(b[0:6], dst)
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:14], 0x88b5) // IEEE 802 local experimental
	if length >= 18 {
		binary.BigEndian.PutUint32(b[14:18], seq)
	}
	return p
}

func seqOf(p *buffer.Packet) uint32 { return binary.BigEndian.Uint32(p.Bytes()[14:18]) }

// readBufs returns n packets with room for a frame of the pipe's MTU.
func readBufs(pool *buffer.Pool, mtu, n int) []*buffer.Packet {
	pkts := make([]*buffer.Packet, n)
	for i := range pkts {
		pkts[i] = pool.Get(link.MaxFrame(mtu))
	}
	return pkts
}

func release(pkts []*buffer.Packet) {
	for _, p := range pkts {
		p.Release()
	}
}

// checkNoLeaks closes both ends and checks that neither the pipe's pool nor
// the test's holds a packet.
func checkNoLeaks(t *testing.T, a, b *Endpoint, pool *buffer.Pool) {
	t.Helper()
	a.Close()
	b.Close()
	if n := a.pool.Outstanding(); n != 0 {
		t.Errorf("pipe pool: %d packets outstanding after Close", n)
	}
	if n := pool.Outstanding(); n != 0 {
		t.Errorf("test pool: %d packets outstanding", n)
	}
}

func TestFramesCrossInBothDirectionsWithOffload(t *testing.T) {
	tests := []struct {
		name     string
		from, to func(a, b *Endpoint) *Endpoint
	}{
		{"a to b", func(a, b *Endpoint) *Endpoint { return a }, func(a, b *Endpoint) *Endpoint { return b }},
		{"b to a", func(a, b *Endpoint) *Endpoint { return b }, func(a, b *Endpoint) *Endpoint { return a }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := buffer.NewPool()
			a, b := New(1500, macA, macB)
			from, to := tt.from(a, b), tt.to(a, b)
			out := frame(pool, to.MAC(), from.MAC(), 100, 7)
			out.Offload = buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 34, CsumOffset: 6}
			if n, err := from.WriteBatch([]*buffer.Packet{out}); n != 1 || err != nil {
				t.Fatalf("WriteBatch = %d, %v; want 1, nil", n, err)
			}
			in := readBufs(pool, 1500, 4)
			n, err := to.ReadBatch(in)
			if n != 1 || err != nil {
				t.Fatalf("ReadBatch = %d, %v; want 1, nil", n, err)
			}
			if !bytes.Equal(in[0].Bytes(), out.Bytes()) {
				t.Errorf("frame read differs from frame written:\n got %x\nwant %x", in[0].Bytes(), out.Bytes())
			}
			if in[0].Offload != out.Offload {
				t.Errorf("offload read %+v, want %+v", in[0].Offload, out.Offload)
			}
			if got := from.Stats().TxFrames.Load(); got != 1 {
				t.Errorf("sender TxFrames = %d, want 1", got)
			}
			if got := to.Stats().RxBytes.Load(); got != 100 {
				t.Errorf("receiver RxBytes = %d, want 100", got)
			}
			out.Release()
			release(in)
			checkNoLeaks(t, a, b, pool)
		})
	}
}

func TestWriteCopiesSoCallerKeepsOwnership(t *testing.T) {
	pool := buffer.NewPool()
	a, b := New(1500, macA, macB)
	out := frame(pool, macB, macA, 60, 1)
	a.WriteBatch([]*buffer.Packet{out})
	binary.BigEndian.PutUint32(out.Bytes()[14:18], 99) // the caller reuses its packet
	out.Release()

	in := readBufs(pool, 1500, 1)
	if _, err := b.ReadBatch(in); err != nil {
		t.Fatal(err)
	}
	if got := seqOf(in[0]); got != 1 {
		t.Errorf("frame read carries seq %d; the writer's later change leaked through (want 1)", got)
	}
	release(in)
	checkNoLeaks(t, a, b, pool)
}

func TestReadBatchTakesWhatFitsAndLeavesTheRest(t *testing.T) {
	pool := buffer.NewPool()
	a, b := New(1500, macA, macB)
	var out []*buffer.Packet
	for i := range 5 {
		out = append(out, frame(pool, macB, macA, 64, uint32(i)))
	}
	a.WriteBatch(out)
	release(out)

	in := readBufs(pool, 1500, 3)
	var got []uint32
	for _, want := range []int{3, 2} {
		n, err := b.ReadBatch(in)
		if n != want || err != nil {
			t.Fatalf("ReadBatch = %d, %v; want %d, nil", n, err, want)
		}
		for _, p := range in[:n] {
			got = append(got, seqOf(p))
		}
	}
	if want := []uint32{0, 1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("frames read in order %v, want %v", got, want)
	}
	if q := b.Queued(); q != 0 {
		t.Errorf("Queued = %d after reading everything", q)
	}
	release(in)
	checkNoLeaks(t, a, b, pool)
}

func TestReadBatchBlocksUntilAFrameArrives(t *testing.T) {
	pool := buffer.NewPool()
	a, b := New(1500, macA, macB)
	in := readBufs(pool, 1500, 2)
	type result struct {
		n   int
		err error
	}
	done := make(chan result)
	go func() {
		n, err := b.ReadBatch(in)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("ReadBatch returned %d, %v with nothing written", r.n, r.err)
	case <-time.After(20 * time.Millisecond):
	}
	out := frame(pool, macB, macA, 64, 42)
	a.WriteBatch([]*buffer.Packet{out})
	out.Release()
	r := <-done
	if r.n != 1 || r.err != nil {
		t.Fatalf("ReadBatch = %d, %v; want 1, nil", r.n, r.err)
	}
	if seqOf(in[0]) != 42 {
		t.Errorf("read seq %d, want 42", seqOf(in[0]))
	}
	release(in)
	checkNoLeaks(t, a, b, pool)
}

func TestFullQueueDropsAndCounts(t *testing.T) {
	pool := buffer.NewPool()
	a, b := New(1500, macA, macB)
	const extra = 10
	for i := range QueueLen + extra {
		out := frame(pool, macB, macA, 64, uint32(i))
		if n, err := a.WriteBatch([]*buffer.Packet{out}); n != 1 || err != nil {
			t.Fatalf("WriteBatch #%d = %d, %v; want 1, nil (drops are taken, not refused)", i, n, err)
		}
		out.Release()
	}
	if got := a.Stats().TxDropped.Load(); got != extra {
		t.Errorf("TxDropped = %d, want %d", got, extra)
	}
	if got := a.Stats().TxFrames.Load(); got != QueueLen {
		t.Errorf("TxFrames = %d, want %d", got, QueueLen)
	}
	// The oldest frames survive, as on a NIC ring that drops at the tail.
	in := readBufs(pool, 1500, QueueLen+extra)
	n, _ := b.ReadBatch(in)
	if n != QueueLen || seqOf(in[0]) != 0 || seqOf(in[n-1]) != QueueLen-1 {
		t.Errorf("read %d frames, seq %d..%d; want %d frames, seq 0..%d", n, seqOf(in[0]), seqOf(in[n-1]), QueueLen, QueueLen-1)
	}
	release(in)
	checkNoLeaks(t, a, b, pool)
}

func TestMalformedFramesAreCountedAndSkipped(t *testing.T) {
	tests := []struct {
		name   string
		length int
		errors uint64
	}{
		{"runt shorter than an Ethernet header", link.EthernetHeaderLen - 1, 1},
		{"bare Ethernet header", link.EthernetHeaderLen, 0},
		{"full-size frame", link.MaxFrame(1500), 0},
		{"one byte over MaxFrame", link.MaxFrame(1500) + 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := buffer.NewPool()
			a, b := New(1500, macA, macB)
			out := frame(pool, macB, macA, tt.length, 0)
			n, err := a.WriteBatch([]*buffer.Packet{out})
			out.Release()
			if n != 1 || err != nil {
				t.Fatalf("WriteBatch = %d, %v; want 1, nil", n, err)
			}
			if got := a.Stats().TxErrors.Load(); got != tt.errors {
				t.Errorf("TxErrors = %d, want %d", got, tt.errors)
			}
			if got, want := b.Queued(), 1-int(tt.errors); got != want {
				t.Errorf("peer has %d frames queued, want %d", got, want)
			}
			checkNoLeaks(t, a, b, pool)
		})
	}
}

func TestReadBatchRefusesSmallPacketsWithoutLosingFrames(t *testing.T) {
	pool := buffer.NewPool()
	a, b := New(1500, macA, macB)
	out := frame(pool, macB, macA, 64, 5)
	a.WriteBatch([]*buffer.Packet{out})
	out.Release()

	small := shortPacket(pool, 100)
	_, err := b.ReadBatch([]*buffer.Packet{small})
	if err == nil || !strings.Contains(err.Error(), "packet 0 has room for 100 bytes") {
		t.Errorf("ReadBatch with a short packet: err = %v, want one naming the packet and its room", err)
	}
	if b.Queued() != 1 {
		t.Errorf("the refused read lost the queued frame: %d queued, want 1", b.Queued())
	}
	in := readBufs(pool, 1500, 1)
	if n, err := b.ReadBatch(in); n != 1 || err != nil || seqOf(in[0]) != 5 {
		t.Errorf("ReadBatch after the refusal = %d, %v; want the frame with seq 5", n, err)
	}
	small.Release()
	release(in)
	checkNoLeaks(t, a, b, pool)
}

// shortPacket returns a packet with room for only room bytes: pools round
// sizes up, so it moves the data's start forward instead.
func shortPacket(pool *buffer.Pool, room int) *buffer.Packet {
	p := pool.Get(0)
	p.SetLen(p.Cap() - room)
	p.TrimFront(p.Len())
	return p
}

func TestCloseWakesABlockedReader(t *testing.T) {
	pool := buffer.NewPool()
	a, b := New(1500, macA, macB)
	in := readBufs(pool, 1500, 1)
	errc := make(chan error)
	go func() {
		_, err := b.ReadBatch(in)
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the reader block; Close must wake it either way
	b.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, link.ErrClosed) || !errors.Is(err, net.ErrClosed) {
			t.Errorf("ReadBatch after Close: err = %v, want link.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the blocked ReadBatch")
	}
	release(in)
	checkNoLeaks(t, a, b, pool)
}

func TestClose(t *testing.T) {
	pool := buffer.NewPool()
	a, b := New(1500, macA, macB)

	// One frame each way waits when b closes.
	toB := frame(pool, macB, macA, 64, 1)
	toA := frame(pool, macA, macB, 64, 2)
	a.WriteBatch([]*buffer.Packet{toB})
	b.WriteBatch([]*buffer.Packet{toA})
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	if n := a.pool.Outstanding(); n != 1 {
		t.Errorf("after b.Close the pipe holds %d frames, want 1 (the one queued for a; b's queue is discarded)", n)
	}

	in := readBufs(pool, 1500, 1)
	t.Run("closed end refuses reads and writes", func(t *testing.T) {
		if _, err := b.ReadBatch(in); !errors.Is(err, link.ErrClosed) {
			t.Errorf("ReadBatch on the closed end: err = %v, want link.ErrClosed", err)
		}
		if n, err := b.WriteBatch([]*buffer.Packet{toA}); n != 0 || !errors.Is(err, link.ErrClosed) {
			t.Errorf("WriteBatch on the closed end = %d, %v; want 0, link.ErrClosed", n, err)
		}
	})
	t.Run("peer still reads what was queued before", func(t *testing.T) {
		if n, err := a.ReadBatch(in); n != 1 || err != nil || seqOf(in[0]) != 2 {
			t.Errorf("a.ReadBatch = %d, %v; want the frame b wrote before closing", n, err)
		}
	})
	t.Run("peer writes are dropped as on an unplugged cable", func(t *testing.T) {
		before := a.Stats().TxDropped.Load()
		if n, err := a.WriteBatch([]*buffer.Packet{toB}); n != 1 || err != nil {
			t.Errorf("a.WriteBatch to a closed peer = %d, %v; want 1, nil", n, err)
		}
		if got := a.Stats().TxDropped.Load() - before; got != 1 {
			t.Errorf("TxDropped grew by %d, want 1", got)
		}
	})
	toA.Release()
	toB.Release()
	release(in)
	checkNoLeaks(t, a, b, pool)
}

// TestConcurrentWriterAndReaderKeepOrder runs a writer and a reader on their
// own goroutines (under -race this checks the locking): every frame sent is
// either read, whole and in order, or counted as dropped.
func TestConcurrentWriterAndReaderKeepOrder(t *testing.T) {
	const total = 20000
	pool := buffer.NewPool()
	a, b := New(1500, macA, macB)
	length := func(seq uint32) int { return 64 + int(seq)%1400 }

	var read uint64
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		in := readBufs(pool, 1500, 32)
		defer release(in)
		next := uint32(0)
		for {
			n, err := b.ReadBatch(in)
			if err != nil {
				return
			}
			for _, p := range in[:n] {
				seq := seqOf(p)
				if seq < next || p.Len() != length(seq) {
					t.Errorf("read frame %d of %d bytes after frame %d; want increasing seqs, %d bytes", seq, p.Len(), next-1, length(seq))
				}
				next = seq + 1
			}
			read += uint64(n)
		}
	}()

	batch := make([]*buffer.Packet, 0, 16)
	for seq := uint32(0); seq < total; {
		batch = batch[:0]
		for ; len(batch) < cap(batch) && seq < total; seq++ {
			batch = append(batch, frame(pool, macB, macA, length(seq), seq))
		}
		if _, err := a.WriteBatch(batch); err != nil {
			t.Fatalf("WriteBatch: %v", err)
		}
		release(batch)
	}
	for deadline := time.Now().Add(5 * time.Second); b.Queued() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	b.Close()
	<-readerDone

	dropped := a.Stats().TxDropped.Load()
	if read+dropped != total {
		t.Errorf("read %d + dropped %d = %d, want %d", read, dropped, read+dropped, total)
	}
	if got := b.Stats().RxFrames.Load(); got != read {
		t.Errorf("RxFrames = %d, reader counted %d", got, read)
	}
	checkNoLeaks(t, a, b, pool)
}

// TestNoAllocationPerFrame checks the steady state allocates nothing. It
// needs a build without -race: the race detector makes sync.Pool drop half
// of what is put back, at random, so every run allocates.
func TestNoAllocationPerFrame(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector; run without -race")
	}
	pool := buffer.NewPool()
	a, b := New(1500, macA, macB)
	out := make([]*buffer.Packet, 32)
	for i := range out {
		out[i] = frame(pool, macB, macA, 1514, uint32(i))
	}
	in := readBufs(pool, 1500, 32)
	allocs := testing.AllocsPerRun(200, func() {
		a.WriteBatch(out)
		b.ReadBatch(in)
	})
	if allocs != 0 {
		t.Errorf("a write and read of 32 frames allocated %v times, want 0", allocs)
	}
	release(out)
	release(in)
	checkNoLeaks(t, a, b, pool)
}

func TestNewRejectsImpossibleMTU(t *testing.T) {
	for _, mtu := range []int{0, -1, buffer.MaxSize} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d, ...) did not panic", mtu)
				}
			}()
			New(mtu, macA, macB)
		}()
	}
}

func TestMACIsCopied(t *testing.T) {
	mac := net.HardwareAddr{0x02, 1, 2, 3, 4, 5}
	a, b := New(1500, mac, macB)
	defer a.Close()
	defer b.Close()
	mac[5] = 0xff
	if a.MAC()[5] != 5 {
		t.Errorf("MAC() = %v changed with the caller's slice", a.MAC())
	}
	if a.MTU() != 1500 || a.Capabilities() != (link.Capabilities{}) {
		t.Errorf("MTU, Capabilities = %d, %+v; want 1500, none", a.MTU(), a.Capabilities())
	}
}

// BenchmarkWriteRead moves batches of 64 full-size frames from one end to the
// other; it reports allocations to show the hot path makes none.
func BenchmarkWriteRead(b *testing.B) {
	pool := buffer.NewPool()
	ea, eb := New(1500, macA, macB)
	defer ea.Close()
	defer eb.Close()
	out := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range out {
		out[i] = frame(pool, macB, macA, 1514, uint32(i))
	}
	in := readBufs(pool, 1500, buffer.MaxBatch)
	b.ReportAllocs()
	b.SetBytes(int64(len(out) * 1514))
	for b.Loop() {
		ea.WriteBatch(out)
		if n, err := eb.ReadBatch(in); n != len(out) || err != nil {
			b.Fatalf("ReadBatch = %d, %v", n, err)
		}
	}
	release(out)
	release(in)
}

// BenchmarkWriteReadConcurrent has the reader on its own goroutine, as
// between two stacks; the writer waits for room in the queue, so that what
// is measured is frames delivered, not frames dropped.
func BenchmarkWriteReadConcurrent(b *testing.B) {
	pool := buffer.NewPool()
	ea, eb := New(1500, macA, macB)
	out := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range out {
		out[i] = frame(pool, macB, macA, 1514, uint32(i))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		in := readBufs(pool, 1500, buffer.MaxBatch)
		defer release(in)
		for {
			if _, err := eb.ReadBatch(in); err != nil {
				return
			}
		}
	}()
	b.ReportAllocs()
	b.SetBytes(int64(len(out) * 1514))
	for b.Loop() {
		for eb.Queued() > QueueLen-len(out) {
			runtime.Gosched()
		}
		ea.WriteBatch(out)
	}
	b.StopTimer()
	eb.Close()
	<-done
	ea.Close()
	release(out)
	if d := ea.Stats().TxDropped.Load(); d != 0 {
		b.Errorf("%d frames dropped though the writer waited for room", d)
	}
}
