package ethernet

import (
	"testing"

	"github.com/gonetstack/gonet/buffer"
)

// The benchmarks below price the three ways a packet can cross from one
// layer's goroutine to the next, per packet, so that ARCHITECTURE.md can say
// which hops are worth a goroutine: a direct call (fused layers), a channel
// send per packet, and a channel send per batch of buffer.MaxBatch.

var sink int

// work stands for a dealer's per-packet work on the far side of the hop.
func work(p *buffer.Packet) { sink += p.Len() }

func BenchmarkHopFunctionCall(b *testing.B) {
	pool := buffer.NewPool()
	p := pool.Get(64)
	defer p.Release()
	b.ReportAllocs()
	for b.Loop() {
		work(p)
	}
}

func BenchmarkHopChannelPerPacket(b *testing.B) {
	pool := buffer.NewPool()
	p := pool.Get(64)
	defer p.Release()
	ch := make(chan *buffer.Packet, 1024)
	done := make(chan struct{})
	go func() {
		for q := range ch {
			work(q)
		}
		close(done)
	}()
	b.ReportAllocs()
	for b.Loop() {
		ch <- p
	}
	close(ch)
	<-done
}

func BenchmarkHopChannelPerBatch(b *testing.B) {
	pool := buffer.NewPool()
	p := pool.Get(64)
	defer p.Release()
	ch := make(chan *buffer.Batch, 16)
	done := make(chan struct{})
	go func() {
		for bt := range ch {
			for _, q := range bt.Pkts {
				work(q)
			}
			bt.Put()
		}
		close(done)
	}()
	b.ReportAllocs()
	bt := buffer.GetBatch()
	for b.Loop() {
		bt.Pkts = append(bt.Pkts, p)
		if bt.Full() {
			ch <- bt
			bt = buffer.GetBatch()
		}
	}
	close(ch)
	<-done
}
