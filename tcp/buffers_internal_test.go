package tcp

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/wire"
)

// The send buffer against a plain byte slice: random writes, reads and
// loans at random offsets and discards from the front. A packet keeps the
// bytes it borrowed after the buffer discards them, until it is released
// or reads them.
func TestSendBufferMatchesASlice(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bud := budget.New(1 << 30)
	pool := buffer.NewPool()
	var s sendBuffer
	var model []byte
	type lent struct {
		pk   *buffer.Packet
		want []byte
	}
	var loans []lent
	next := byte(0)
	for step := 0; step < 20000; step++ {
		switch r.IntN(6) {
		case 0:
			b := make([]byte, r.IntN(3*chunkSize))
			for i := range b {
				b[i] = next
				next++
			}
			if n := s.write(b, bud); n != len(b) {
				t.Fatalf("wrote %d of %d", n, len(b))
			}
			model = append(model, b...)
		case 1:
			if len(model) == 0 {
				continue
			}
			off := r.IntN(len(model))
			n := r.IntN(len(model) - off + 1)
			got := make([]byte, n)
			s.copyAt(got, off)
			if !bytes.Equal(got, model[off:off+n]) {
				t.Fatalf("step %d: copyAt(%d, %d) differs", step, off, n)
			}
		case 2:
			n := r.IntN(len(model) + 1)
			s.discard(n, bud)
			model = model[n:]
		case 3:
			if len(model) == 0 {
				continue
			}
			off := r.IntN(len(model))
			n := min(r.IntN(len(model)-off+1), buffer.MaxSize-64)
			pk := pool.Get(64 + n)
			s.lendTo(pk, off, n)
			if pk.Borrowed() != n {
				t.Fatalf("step %d: lendTo(%d, %d) lent %d", step, off, n, pk.Borrowed())
			}
			loans = append(loans, lent{pk, bytes.Clone(model[off : off+n])})
		case 4:
			if len(loans) == 0 {
				continue
			}
			i := r.IntN(len(loans))
			l := loans[i]
			if r.IntN(2) == 0 {
				if got := l.pk.Bytes()[64:]; !bytes.Equal(got, l.want) {
					t.Fatalf("step %d: a packet's %d borrowed bytes changed", step, len(l.want))
				}
			}
			l.pk.Release()
			loans = append(loans[:i], loans[i+1:]...)
		case 5:
			limit := 1 + r.IntN(70<<10)
			k, ran := s.fill(limit, bud, func(space [][]byte) int {
				free := 0
				for _, b := range space {
					free += len(b)
				}
				// Five slices: 64 KiB at least, whatever the tail.
				if free > limit || free < min(limit, 4*chunkSize) {
					t.Fatalf("step %d: fill of %d handed %d bytes of space", step, limit, free)
				}
				k := r.IntN(free + 1)
				for i, left := 0, k; left > 0; i++ {
					b := space[i][:min(left, len(space[i]))]
					for j := range b {
						b[j] = next
						next++
					}
					model = append(model, b...)
					left -= len(b)
				}
				return k
			})
			if !ran || k > limit {
				t.Fatalf("step %d: fill of %d: %d, ran %v", step, limit, k, ran)
			}
		}
		if s.n != len(model) {
			t.Fatalf("step %d: buffer holds %d, model %d", step, s.n, len(model))
		}
	}
	s.discard(s.n, bud)
	for _, l := range loans {
		if got := l.pk.Bytes()[64:]; !bytes.Equal(got, l.want) {
			t.Fatalf("a packet's %d borrowed bytes changed after the buffer emptied", len(l.want))
		}
		l.pk.Release()
	}
	if bud.Used() != 0 {
		t.Fatalf("%d bytes of budget left", bud.Used())
	}
	if n := pool.Outstanding(); n != 0 {
		t.Fatalf("%d packets outstanding", n)
	}
}

// A fill holds memory only for what its reader put: a reader that finds
// nothing (a relay's socket with no data) leaves the buffer and the budget
// as they were, and a budget that allows no chunk does not run it.
func TestSendBufferFillHoldsOnlyWhatItRead(t *testing.T) {
	bud := budget.New(1 << 20)
	var s sendBuffer
	if k, ran := s.fill(64<<10, bud, func([][]byte) int { return 0 }); k != 0 || !ran {
		t.Fatalf("empty read: %d, ran %v", k, ran)
	}
	if len(s.chunks) != 0 || bud.Used() != 0 {
		t.Fatalf("empty read left %d chunks, %d bytes of budget", len(s.chunks), bud.Used())
	}
	s.write(make([]byte, 100), bud)
	k, _ := s.fill(64<<10, bud, func(space [][]byte) int {
		if len(space) != 5 || len(space[0]) != chunkSize-s.head-100 { // head: lineOffset
			t.Errorf("space after 100 bytes: %d slices, the first %d bytes", len(space), len(space[0]))
		}
		return chunkSize // the first chunk's tail and the head of the next
	})
	if k != chunkSize || s.n != chunkSize+100 || len(s.chunks) != 2 || bud.Used() != 2*chunkSize {
		t.Fatalf("fill: %d bytes, buffer %d in %d chunks, budget %d", k, s.n, len(s.chunks), bud.Used())
	}
	tight := budget.New(1) // less than a chunk
	var t2 sendBuffer
	if _, ran := t2.fill(1<<10, tight, func([][]byte) int { t.Error("read ran without room"); return 0 }); ran {
		t.Fatal("fill ran with no budget")
	}
	s.discard(s.n, bud)
	if bud.Used() != 0 {
		t.Fatalf("%d bytes of budget left", bud.Used())
	}
}

// BenchmarkSendBufferCopyAt copies super-segments out of the send buffer
// into packets laid out as sendSegment lays them out: the payload 64-byte
// aligned, where the TAP's kernel side copies it to a page-aligned
// fragment. A super-segment of 45 full segments moves the next one's
// source by its length: 45·1448 bytes (IPv4 over a 1500-byte link) leave
// half of IPv4's sources off the destination's 16-byte alignment, 45·1428
// (IPv6) three quarters, half of them not even 8-byte aligned. On AMD, Go's
// memmove copies with AVX loads, which hardly care; on Intel CPUs with
// ERMS and FSRM it copies 2 KiB or more to a 16-byte-aligned destination
// with REP MOVSQ, and the rest with AVX from a source the destination's
// alignment does not match. The "src" sub-benchmarks copy one
// super-segment from each alignment, in cache; the "stream" ones walk a
// 4 MiB buffer (the default send buffer) as a bulk sender of either family
// does. The "matched" ones shift the destination to the source's alignment
// (mod 64), as a payload placed by its stream offset would be: what the
// copy would cost if the kernel's copy out of the packet took the
// misalignment instead. Since a link that gathers (the TAP and the ring
// with offloads) takes a super-segment's payload as loans (lendTo), this
// copy is what the other links pay: plain TAPs, the stream link, the
// fault and pcap wrappers.
func BenchmarkSendBufferCopyAt(b *testing.B) {
	const window = 4 << 20
	pool := buffer.NewPool()
	bud := budget.New(1 << 30)
	var s sendBuffer
	s.write(make([]byte, window), bud)
	defer s.discard(s.n, bud)
	run := func(name string, n int, next func(off int) int, matched bool) {
		b.Run(name, func(b *testing.B) {
			hl := wire.TCPMinHeaderLen + 12 // timestamps
			pk := pool.Get(hl + 64 + n)
			defer pk.Release()
			dst := pk.Bytes()[hl:]
			b.SetBytes(int64(n))
			off := 0
			for b.Loop() {
				d := dst[:n]
				if matched {
					pos := s.head + off
					src := uintptr(unsafe.Pointer(&s.chunks[pos/chunkSize].b[pos%chunkSize]))
					shift := (src - uintptr(unsafe.Pointer(&dst[0]))) & 63
					d = dst[shift : shift+uintptr(n)]
				}
				s.copyAt(d, off)
				off = next(off)
			}
		})
	}
	for _, matched := range []bool{false, true} {
		name := map[bool]string{false: "", true: "matched_"}[matched]
		for _, srcOff := range []int{0, 4, 8, 12} {
			run(fmt.Sprintf("%ssrc=%d_mod_16", name, srcOff), 45*1428, func(int) int { return chunkSize + srcOff }, matched)
		}
		for _, mss := range []int{1448, 1428} {
			n := 45 * mss
			run(fmt.Sprintf("%sstream_mss=%d", name, mss), n, func(off int) int { return (off + n) % (window - n) }, matched)
		}
	}
}

// An emptied buffer starts its next chunk at the writer's offset in a
// cache line, whatever offset the writer has reached: a writer the buffer
// drained under goes on from the middle of its own buffer (lineOffset).
func TestSendBufferStartsAlignedWithTheWriter(t *testing.T) {
	bud := budget.New(1 << 30)
	src := make([]byte, 64<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	for _, off := range []int{0, 4, 8, 1428, 3 * 1428, 64 + 12} {
		var s sendBuffer
		s.write(src[:100], bud)
		s.discard(100, bud) // acknowledged: the buffer is empty
		n := s.write(src[off:off+40000], bud)
		if n != 40000 {
			t.Fatalf("offset %d: wrote %d of 40000", off, n)
		}
		dst := uintptr(unsafe.Pointer(&s.chunks[0].b[s.head]))
		if d, w := dst%64, uintptr(unsafe.Pointer(&src[off]))%64; d != w {
			t.Errorf("offset %d: the first byte at %d in a line, the writer's at %d", off, d, w)
		}
		got := make([]byte, n)
		s.copyAt(got, 0)
		if !bytes.Equal(got, src[off:off+n]) {
			t.Errorf("offset %d: the buffer holds other bytes than were written", off)
		}
		s.discard(n, bud)
	}
	if bud.Used() != 0 {
		t.Errorf("%d bytes of budget held after every byte was acknowledged", bud.Used())
	}
}
