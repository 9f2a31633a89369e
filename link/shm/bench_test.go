package shm

import (
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

// BenchmarkRingWriteRead moves batches of 64 frames of 1514 bytes through
// a ring, writer and reader in one goroutine, so that it measures the
// ring's own cost per frame (copies in and out, descriptors, indices)
// without scheduling: ns/op is per frame, and frames/s is reported.
func BenchmarkRingWriteRead(b *testing.B) {
	l, d := pair(b, Options{}, Options{})
	pool := buffer.NewPool()
	out := make([]*buffer.Packet, buffer.MaxBatch)
	in := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range out {
		out[i] = frame(pool, link.MaxFrame(1500), uint32(i))
		in[i] = pool.Get(link.MaxFrame(1500))
	}
	b.SetBytes(int64(link.MaxFrame(1500)))
	b.ResetTimer()
	for moved := 0; moved < b.N; {
		if _, err := l.WriteBatch(out); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < len(out); {
			n, err := d.ReadBatch(in)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
		moved += len(out)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
	if l.Stats().TxRingFull.Load() != 0 {
		b.Fatalf("%d frames dropped", l.Stats().TxRingFull.Load())
	}
}
