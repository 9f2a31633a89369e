package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

// heapMemory returns memory of g's size from the Go heap, 8-byte aligned
// as a mapping is page-aligned, for tests of the rings without a mapping.
func heapMemory(g geometry) []byte {
	words := make([]uint64, (g.size()+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), g.size())
}

// The free-running indices wrap at 2^32 in the middle of a ring's life:
// the arithmetic on them is modular, so frames cross the wrap like any
// other.
func TestIndicesWrapAtTwoToThe32(t *testing.T) {
	g := geometry{ringSize: 8, dataSize: 8192}
	mem := heapMemory(g)
	r := g.ring(mem, 0)
	start := ^uint32(0) - 20
	r.prod.Store(start)
	r.cons.Store(start)
	p := newProducer(r)
	p.head, p.pub, p.tail = start, start, start
	c := consumer{r: r, tail: start, maxFrame: link.MaxFrame(1500), mtuFrame: link.MaxFrame(1500)}
	pool := buffer.NewPool()
	out := make([]*buffer.Packet, 8)
	for i := range out {
		out[i] = pool.Get(link.MaxFrame(1500))
	}
	for seq := uint32(0); seq < 64; seq += 5 {
		var sent [][]byte
		for i := range uint32(5) {
			f := frame(pool, 60+int(seq+i)*20, seq+i)
			if !p.put([][]byte{f.Bytes()}, buffer.Offload{}) {
				t.Fatalf("frame %d: ring full at head %d, tail %d", seq+i, p.head, p.tail)
			}
			sent = append(sent, f.Bytes())
		}
		p.publish()
		n, _, err := c.take(out)
		if n != 5 || err != nil {
			t.Fatalf("at index %d: took %d frames of 5: %v", c.tail, n, err)
		}
		for i, f := range out[:n] {
			if !bytes.Equal(f.Bytes(), sent[i]) {
				t.Fatalf("frame %d came back different", seq+uint32(i))
			}
		}
		if err := p.refresh(); err != nil {
			t.Fatal(err)
		}
	}
	if c.tail >= start {
		t.Fatalf("consumer index %d has not wrapped past 2^32 from %d", c.tail, start)
	}
}

// FuzzConsumer gives the consumer shared memory whose indices,
// descriptors and data are whatever the fuzzer writes, as a hostile peer
// could, and checks that it never panics or reads outside the mapping,
// that every frame it returns is the one its descriptor names, within the
// link's bounds, and that it stops at a violation.
func FuzzConsumer(f *testing.F) {
	g := geometry{ringSize: 8, dataSize: 4096}
	good := make([]byte, 8*descSize)
	for i := range 8 {
		d := descriptor{offset: uint32(i * 128), length: 60 + uint32(i)}
		d.encode(good[i*descSize:])
	}
	f.Add(good, uint32(8), uint8(8), false)
	f.Add(good, uint32(3), uint8(2), true)
	f.Add(good, uint32(9), uint8(8), false)
	f.Add(good[:40], uint32(1), uint8(1), true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint32(1), uint8(4), false)
	f.Fuzz(func(t *testing.T, raw []byte, prod uint32, batch uint8, offload bool) {
		mem := heapMemory(g)
		r := g.ring(mem, 0)
		// The fuzzer's bytes fill the descriptors, then the data
		// area, repeated.
		if len(raw) > 0 {
			for i := 0; i < len(r.desc); i += len(raw) {
				copy(r.desc[i:], raw)
			}
			for i := range r.data {
				r.data[i] = raw[i%len(raw)] ^ byte(i)
			}
		}
		r.prod.Store(prod)
		const mtu = 1500
		c := consumer{r: r, maxFrame: maxFrame(mtu, offload), mtuFrame: link.MaxFrame(mtu), offload: offload}
		pool := buffer.NewPool()
		pkts := make([]*buffer.Packet, 1+int(batch)%16)
		for i := range pkts {
			pkts[i] = pool.Get(c.maxFrame)
		}
		n, bytesIn, err := c.take(pkts)
		var v violation
		if err != nil && !errors.As(err, &v) {
			t.Fatalf("error %v is not a violation", err)
		}
		if prod > g.ringSize && (n != 0 || err == nil) {
			t.Fatalf("producer index %d past a ring of %d: took %d frames, err %v", prod, g.ringSize, n, err)
		}
		if n > int(min(prod, g.ringSize)) || n > len(pkts) {
			t.Fatalf("took %d frames of %d published into %d packets", n, prod, len(pkts))
		}
		total := 0
		for i, p := range pkts[:n] {
			d := r.desc[i*descSize:]
			off, length := binary.LittleEndian.Uint32(d[descOffset:]), binary.LittleEndian.Uint32(d[descLength:])
			if length < link.EthernetHeaderLen || int(length) > c.maxFrame || uint64(off)+uint64(length) > uint64(g.dataSize) {
				t.Fatalf("frame %d at %d+%d taken, outside the bounds", i, off, length)
			}
			if !bytes.Equal(p.Bytes(), r.data[off:off+length]) {
				t.Fatalf("frame %d is not the bytes its descriptor names", i)
			}
			total += p.Len()
		}
		if total != bytesIn {
			t.Fatalf("%d bytes counted, %d taken", bytesIn, total)
		}
		if err == nil && n < min(int(prod), len(pkts)) && prod <= g.ringSize {
			t.Fatalf("took %d of %d frames and stopped without a violation", n, prod)
		}
		if r.cons.Load() != uint32(n) {
			t.Fatalf("consumer index %d after %d frames", r.cons.Load(), n)
		}
	})
}
