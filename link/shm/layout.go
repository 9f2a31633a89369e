package shm

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/gonetstack/gonet/buffer"
)

// The shared memory, all integers little-endian, offsets in bytes:
//
//	0                 header: magic, version, ring size, data size
//	lineSize × 1      ring 0's producer line: producer index
//	lineSize × 2      ring 0's consumer line: consumer index, consumer sleeping
//	lineSize × 3      ring 1's producer line
//	lineSize × 4      ring 1's consumer line
//	pageSize          ring 0's descriptors, ringSize × descSize bytes, page-rounded
//	…                 ring 1's descriptors
//	…                 ring 0's data area, dataSize bytes
//	…                 ring 1's data area
//
// Ring 0 carries frames from the listening side to the dialling side, ring
// 1 the other way. Each index has a line to itself, written by one side
// only, so that the producer's stores do not bounce the line the consumer
// writes (false sharing). The line is 128 bytes, not 64: Intel's adjacent-
// line prefetcher pulls lines in pairs, and Apple's cores have 128-byte
// lines.
const (
	magic     = 0x6d68_5374_654e_6f47 // "GoNetShm" read as a little-endian uint64
	version   = 1
	pageSize  = 4096
	lineSize  = 128
	descSize  = 32
	dataAlign = 64 // frames start on a cache line of the data area
)

// Header fields, from the start of the mapping.
const (
	hdrMagic    = 0  // uint64
	hdrVersion  = 8  // uint32
	hdrRingSize = 12 // uint32: descriptors per ring
	hdrDataSize = 16 // uint32: bytes of data area per ring
)

// Index fields: the producer line holds the producer index, the consumer
// line the consumer index and, after it, the consumer's sleeping flag.
const (
	idxProducer = 0 // uint32, on the producer line
	idxConsumer = 0 // uint32, on the consumer line
	idxSleeping = 4 // uint32, on the consumer line: 1 while the consumer waits on its eventfd
)

// Descriptor fields: where a frame lies in the data area, and its offload
// metadata (virtio-net header's, buffer.Offload).
const (
	descOffset     = 0  // uint32, from the start of the ring's data area
	descLength     = 4  // uint32
	descFlags      = 8  // uint8
	descGSOType    = 9  // uint8
	descHdrLen     = 10 // uint16
	descGSOSize    = 12 // uint16
	descCsumStart  = 14 // uint16
	descCsumOffset = 16 // uint16
)

// Ring and data-area bounds.
const (
	MinRingSize = 8
	MaxRingSize = 1 << 15
	// MaxDataSize bounds a data area: 1 GiB keeps every offset and
	// length within a uint32 with room to add them.
	MaxDataSize = 1 << 30
)

// geometry is the shape of the shared memory: what the listener chose and
// the handshake told the dialler.
type geometry struct {
	ringSize uint32 // descriptors per ring, a power of two
	dataSize uint32 // bytes of data area per ring, a multiple of pageSize
}

// check reports a geometry that cannot carry frames of maxFrame bytes, or
// that is out of bounds.
func (g geometry) check(maxFrame int) error {
	switch {
	case g.ringSize < MinRingSize || g.ringSize > MaxRingSize || bits.OnesCount32(g.ringSize) != 1:
		return fmt.Errorf("ring size %d is not a power of two in %d..%d", g.ringSize, MinRingSize, MaxRingSize)
	case g.dataSize%pageSize != 0 || g.dataSize > MaxDataSize:
		return fmt.Errorf("data area of %d bytes is not a multiple of %d up to %d", g.dataSize, pageSize, MaxDataSize)
	case uint64(g.dataSize) < 2*alignUp(uint64(maxFrame)):
		// Two frames at least, so that one can be written while the
		// other is read.
		return fmt.Errorf("data area of %d bytes holds fewer than two frames of %d bytes", g.dataSize, maxFrame)
	}
	return nil
}

func alignUp(n uint64) uint64 { return (n + dataAlign - 1) &^ (dataAlign - 1) }

func (g geometry) descBytes() int { return (int(g.ringSize)*descSize + pageSize - 1) &^ (pageSize - 1) }

// descOff and dataOff are where ring r's descriptors and data area start.
func (g geometry) descOff(r int) int { return pageSize + r*g.descBytes() }
func (g geometry) dataOff(r int) int { return pageSize + 2*g.descBytes() + r*int(g.dataSize) }

// size is the length of the whole mapping.
func (g geometry) size() int { return g.dataOff(2) }

// writeHeader fills in a fresh mapping's header; the indices and flags
// start at zero, as a fresh memfd does.
func (g geometry) writeHeader(mem []byte) {
	binary.LittleEndian.PutUint64(mem[hdrMagic:], magic)
	binary.LittleEndian.PutUint32(mem[hdrVersion:], version)
	binary.LittleEndian.PutUint32(mem[hdrRingSize:], g.ringSize)
	binary.LittleEndian.PutUint32(mem[hdrDataSize:], g.dataSize)
}

// checkHeader reports a mapping whose header does not say what the
// handshake said: the dialler reads the header once, to catch a listener
// that passed the wrong memory, and trusts only the handshake's values
// from then on.
func (g geometry) checkHeader(mem []byte) error {
	var h [pageSize]byte
	copy(h[:], mem)
	m, v := binary.LittleEndian.Uint64(h[hdrMagic:]), binary.LittleEndian.Uint32(h[hdrVersion:])
	rs, ds := binary.LittleEndian.Uint32(h[hdrRingSize:]), binary.LittleEndian.Uint32(h[hdrDataSize:])
	if m != magic || v != version || rs != g.ringSize || ds != g.dataSize {
		return fmt.Errorf("shared memory header (magic %#x, version %d, ring %d, data %d) disagrees with the handshake (ring %d, data %d)",
			m, v, rs, ds, g.ringSize, g.dataSize)
	}
	return nil
}

// ring is a view of one single-producer single-consumer ring in the
// mapping. Both sides of the link see the same memory, and either may
// write any of it: the producer and consumer (ring.go) keep their own
// indices privately and only read the other side's, checked.
type ring struct {
	prod     *atomic.Uint32 // published by the producer: frames written
	cons     *atomic.Uint32 // published by the consumer: frames taken
	sleeping *atomic.Uint32 // the consumer's "wake me" flag
	desc     []byte         // ringSize descriptors
	data     []byte         // the data area
	mask     uint32         // ringSize-1
}

// ring returns the view of ring r in mem, a mapping of g.size() bytes.
func (g geometry) ring(mem []byte, r int) ring {
	prodLine := lineSize * (1 + 2*r)
	consLine := lineSize * (2 + 2*r)
	return ring{
		prod:     atomicAt(mem, prodLine+idxProducer),
		cons:     atomicAt(mem, consLine+idxConsumer),
		sleeping: atomicAt(mem, consLine+idxSleeping),
		desc:     mem[g.descOff(r) : g.descOff(r)+int(g.ringSize)*descSize : g.descOff(r)+int(g.ringSize)*descSize],
		data:     mem[g.dataOff(r) : g.dataOff(r)+int(g.dataSize) : g.dataOff(r)+int(g.dataSize)],
		mask:     g.ringSize - 1,
	}
}

// atomicAt returns the uint32 at mem[off] as an atomic. That is sound
// here: the mapping is page-aligned (mmap), the offsets are multiples of
// 4, so every such word is naturally aligned, which is all the processor
// needs for an atomic access; and the memory is not the Go heap, so the
// collector neither moves nor frees it while the pointer lives (the
// endpoint unmaps it only once nothing can use it, under memMu). The
// other process's accesses are ordinary locked or aligned stores on the
// same physical page, so Go's sequentially consistent atomics order them
// as they order another goroutine's.
func atomicAt(mem []byte, off int) *atomic.Uint32 {
	if off%4 != 0 || off+4 > len(mem) {
		panic(fmt.Sprintf("shm: atomic at %d in %d bytes", off, len(mem)))
	}
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off]))
}

// descriptor is one ring entry, decoded from a private copy.
type descriptor struct {
	offset, length uint32
	offload        buffer.Offload
}

func (d *descriptor) encode(b []byte) {
	_ = b[descSize-1]
	binary.LittleEndian.PutUint32(b[descOffset:], d.offset)
	binary.LittleEndian.PutUint32(b[descLength:], d.length)
	b[descFlags] = d.offload.Flags
	b[descGSOType] = d.offload.GSOType
	binary.LittleEndian.PutUint16(b[descHdrLen:], d.offload.HdrLen)
	binary.LittleEndian.PutUint16(b[descGSOSize:], d.offload.GSOSize)
	binary.LittleEndian.PutUint16(b[descCsumStart:], d.offload.CsumStart)
	binary.LittleEndian.PutUint16(b[descCsumOffset:], d.offload.CsumOffset)
}

// decodeDescriptor decodes b, which must be a private copy: a field read
// twice from shared memory could change between the check and the use.
func decodeDescriptor(b *[descSize]byte) descriptor {
	return descriptor{
		offset: binary.LittleEndian.Uint32(b[descOffset:]),
		length: binary.LittleEndian.Uint32(b[descLength:]),
		offload: buffer.Offload{
			Flags:      b[descFlags],
			GSOType:    b[descGSOType],
			HdrLen:     binary.LittleEndian.Uint16(b[descHdrLen:]),
			GSOSize:    binary.LittleEndian.Uint16(b[descGSOSize:]),
			CsumStart:  binary.LittleEndian.Uint16(b[descCsumStart:]),
			CsumOffset: binary.LittleEndian.Uint16(b[descCsumOffset:]),
		},
	}
}
