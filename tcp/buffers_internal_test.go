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

// The send buffer against a plain byte slice: random writes, reads at
// random offsets and discards from the front.
func TestSendBufferMatchesASlice(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bud := budget.New(1 << 30)
	var s sendBuffer
	var model []byte
	next := byte(0)
	for step := 0; step < 20000; step++ {
		switch r.IntN(3) {
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
		}
		if s.n != len(model) {
			t.Fatalf("step %d: buffer holds %d, model %d", step, s.n, len(model))
		}
	}
	s.discard(s.n, bud)
	if bud.Used() != 0 {
		t.Fatalf("%d bytes of budget left", bud.Used())
	}
}

// BenchmarkSendBufferCopyAt copies super-segments out of the send buffer
// into packets laid out as sendSegment lays them out (the payload 16-byte
// aligned). A super-segment of 45 full segments moves the next one's
// source by its length: 45·1448 bytes (IPv4 over a 1500-byte link) keep
// the sources 8-byte aligned, 45·1428 (IPv6) leave half of them on 4 mod
// 8. On Intel CPUs with ERMS and FSRM, Go's memmove copies 2 KiB or more
// to a 16-byte-aligned destination with REP MOVSQ whatever the source's
// alignment; elsewhere it uses AVX loads, which do not care. The "src"
// sub-benchmarks copy one super-segment from each alignment, in cache;
// the "stream" ones walk a 4 MiB buffer (the default send buffer) as a
// bulk sender of either family does. The "split" ones copy the bytes up
// to the source's next 16-byte boundary first, which leaves the rest a
// misaligned destination and so AVX on every CPU: what copyAt would do if
// Intel's REP MOVSQ proves slow from a misaligned source.
func BenchmarkSendBufferCopyAt(b *testing.B) {
	const window = 4 << 20
	pool := buffer.NewPool()
	bud := budget.New(1 << 30)
	var s sendBuffer
	s.write(make([]byte, window), bud)
	defer s.discard(s.n, bud)
	run := func(name string, n int, next func(off int) int, split bool) {
		b.Run(name, func(b *testing.B) {
			hl := wire.TCPMinHeaderLen + 12 // timestamps
			pk := pool.Get(hl + n)
			defer pk.Release()
			dst := pk.Bytes()[hl:]
			b.SetBytes(int64(n))
			off := 0
			for b.Loop() {
				if split {
					pos := s.head + off
					src := s.chunks[pos/chunkSize][pos%chunkSize:]
					k := int(-uintptr(unsafe.Pointer(&src[0])) & 15)
					s.copyAt(dst[:k], off)
					s.copyAt(dst[k:], off+k)
				} else {
					s.copyAt(dst, off)
				}
				off = next(off)
			}
		})
	}
	for _, split := range []bool{false, true} {
		name := map[bool]string{false: "", true: "split_"}[split]
		for _, srcOff := range []int{0, 4, 8, 12} {
			run(fmt.Sprintf("%ssrc=%d_mod_16", name, srcOff), 45*1428, func(int) int { return chunkSize + srcOff }, split)
		}
		for _, mss := range []int{1448, 1428} {
			n := 45 * mss
			run(fmt.Sprintf("%sstream_mss=%d", name, mss), n, func(off int) int { return (off + n) % (window - n) }, split)
		}
	}
}
