package shm

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

// A peer that writes garbage into the shared memory takes the link down:
// the side that finds it returns ErrLinkDown and counts it, reads and
// writes nothing outside the mapping, does not panic, and closes the
// socket, so that the peer's side goes down too. Each case has the
// dialler publish one good 60-byte frame (descriptor 0 of ring 1), then
// spoil what the listener will read.
func TestGarbageTakesTheLinkDown(t *testing.T) {
	setDesc := func(d *Endpoint, field int, v uint32) {
		b := d.tx.r.desc[field:]
		switch field {
		case descFlags, descGSOType:
			b[0] = byte(v)
		case descOffset, descLength:
			binary.LittleEndian.PutUint32(b, v)
		default:
			binary.LittleEndian.PutUint16(b, uint16(v))
		}
	}
	for _, tc := range []struct {
		name    string
		offload bool
		spoil   func(d *Endpoint)
		// onWrite: the listener finds it when it writes, not when it
		// reads.
		onWrite bool
	}{
		{name: "producer index past the ring", spoil: func(d *Endpoint) { d.tx.r.prod.Store(1000) }},
		{name: "producer index behind the consumer", spoil: func(d *Endpoint) { d.tx.r.prod.Store(^uint32(0)) }},
		{name: "length zero", spoil: func(d *Endpoint) { setDesc(d, descLength, 0) }},
		{name: "runt", spoil: func(d *Endpoint) { setDesc(d, descLength, link.EthernetHeaderLen-1) }},
		{name: "length over the MTU", spoil: func(d *Endpoint) { setDesc(d, descLength, uint32(link.MaxFrame(1500)+1)) }},
		{name: "length of 4 GiB", spoil: func(d *Endpoint) { setDesc(d, descLength, ^uint32(0)) }},
		{name: "offset beyond the data area", spoil: func(d *Endpoint) { setDesc(d, descOffset, DefaultDataSize) }},
		{name: "offset near 4 GiB", spoil: func(d *Endpoint) { setDesc(d, descOffset, ^uint32(0)-10) }},
		{name: "frame running past the data area", spoil: func(d *Endpoint) { setDesc(d, descOffset, DefaultDataSize-59) }},
		{name: "offload metadata without offloads", spoil: func(d *Endpoint) { setDesc(d, descFlags, buffer.DataValid) }},
		{name: "unknown offload flag", offload: true, spoil: func(d *Endpoint) { setDesc(d, descFlags, 0x80) }},
		{name: "unknown GSO type", offload: true, spoil: func(d *Endpoint) { setDesc(d, descGSOType, 2) }},
		{name: "super-segment without a segment size", offload: true, spoil: func(d *Endpoint) {
			setDesc(d, descGSOType, buffer.GSOTCPv4)
		}},
		{name: "headers longer than the frame", offload: true, spoil: func(d *Endpoint) {
			setDesc(d, descGSOType, buffer.GSOTCPv4)
			setDesc(d, descGSOSize, 1448)
			setDesc(d, descHdrLen, 61)
		}},
		{name: "checksum beyond the frame", offload: true, spoil: func(d *Endpoint) {
			setDesc(d, descFlags, buffer.NeedsCsum)
			setDesc(d, descCsumStart, 50)
			setDesc(d, descCsumOffset, 9)
		}},
		{name: "frame over the MTU not a super-segment", offload: true, spoil: func(d *Endpoint) {
			setDesc(d, descLength, uint32(link.MaxFrame(1500)+1))
		}},
		{name: "consumer index ahead of the producer", onWrite: true, spoil: func(d *Endpoint) { d.rx.r.cons.Store(5) }},
		{name: "consumer index gone back", onWrite: true, spoil: func(d *Endpoint) { d.rx.r.cons.Store(^uint32(0)) }},
		{name: "a message on the socket", spoil: func(d *Endpoint) { d.conn.Write([]byte("hello again")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Offload: tc.offload}
			l, d := pair(t, o, o)
			pool := buffer.NewPool()
			if _, err := d.WriteBatch([]*buffer.Packet{frame(pool, 60, 1)}); err != nil {
				t.Fatal(err)
			}
			tc.spoil(d)
			var err error
			if tc.onWrite {
				_, err = l.WriteBatch([]*buffer.Packet{frame(pool, 60, 2)})
			} else {
				// The message on the socket arrives on its own time.
				deadline := time.Now().Add(5 * time.Second)
				for err == nil && time.Now().Before(deadline) {
					pkts := []*buffer.Packet{pool.Get(l.Capabilities().RxFrameSize(1500))}
					_, err = l.ReadBatch(pkts)
				}
			}
			if !errors.Is(err, ErrLinkDown) {
				t.Fatalf("listener: %v, want ErrLinkDown", err)
			}
			t.Logf("listener: %v", err)
			if g := l.Stats().Garbage.Load(); g != 1 {
				t.Errorf("Garbage %d, want 1", g)
			}
			if _, err := l.ReadBatch([]*buffer.Packet{pool.Get(link.MaxGSOFrame)}); !errors.Is(err, ErrLinkDown) {
				t.Errorf("listener's next read: %v, want ErrLinkDown", err)
			}
			// The dialler learns through the socket.
			done := make(chan error, 1)
			go func() {
				_, err := d.ReadBatch([]*buffer.Packet{pool.Get(link.MaxGSOFrame)})
				for err == nil {
					_, err = d.ReadBatch([]*buffer.Packet{pool.Get(link.MaxGSOFrame)})
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, ErrLinkDown) || d.Stats().PeerGone.Load() != 1 {
					t.Errorf("dialler: %v, PeerGone %d", err, d.Stats().PeerGone.Load())
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the dialler's link still up 5s after the listener found garbage")
			}
		})
	}
}
