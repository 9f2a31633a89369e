package bridge

import (
	"encoding/binary"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/wire"
)

// The forwarding process of IEEE 802.1D-2004 section 7.7, with the learning
// process of 7.8 run on the same frames: for each frame received on a port,
// learn its source, then choose the ports it goes out on. The bridge has
// no spanning tree, so every port is forwarding (7.7.1's active topology
// is the whole bridge; loops are the operator's to avoid).

// decision is where one frame goes: to one port, to every port but the one
// it came in on, or (neither) nowhere.
type decision struct {
	to    *Port
	flood bool
}

// decide runs 7.7 and 7.8 on frame f received on p at now. The caller holds
// the filtering database's lock.
func (p *Port) decide(f []byte, now time.Time) decision {
	if len(f) < link.EthernetHeaderLen {
		p.stats.Runts.Inc()
		return decision{}
	}
	var dst, src mac
	copy(dst[:], f[0:6])
	copy(src[:], f[6:12])
	if src.isGroup() {
		p.stats.BadSource.Inc()
		return decision{}
	}
	// 7.8: every valid frame received teaches where its sender is, those
	// the bridge then keeps to itself included.
	p.b.fdb.lockedLearn(src, p, now)
	if dst.isReserved() {
		p.stats.Reserved.Inc()
		return decision{}
	}
	// 7.7.2: a group address has no dynamic entry, and an individual one
	// without an entry is unknown; both go out on every other port.
	if dst.isGroup() {
		p.stats.Flooded.Inc()
		return decision{flood: true}
	}
	to := p.b.fdb.lockedLookup(dst, now)
	switch to {
	case nil:
		p.stats.Flooded.Inc()
		return decision{flood: true}
	case p:
		// The station is on the segment the frame came from and has
		// seen it there.
		p.stats.Filtered.Inc()
		return decision{}
	}
	return decision{to: to}
}

// forward decides for the batch frames received on p, under one hold of
// the table's lock, then queues each frame on its ports. The frames passed
// on are taken: their slots in frames become nil.
func (p *Port) forward(frames []*buffer.Packet) {
	b := p.b
	var bytes int
	for _, f := range frames {
		bytes += f.Len()
	}
	p.stats.RxFrames.Add(uint64(len(frames)))
	p.stats.RxBytes.Add(uint64(bytes))

	now := b.cfg.Clock.Now()
	dec := p.decisions[:len(frames)]
	b.fdb.mu.Lock()
	for i, f := range frames {
		dec[i] = p.decide(f.Bytes(), now)
	}
	b.fdb.mu.Unlock()

	ports := *b.ports.Load()
	for i, f := range frames {
		switch d := dec[i]; {
		case d.to != nil:
			p.queue(d.to, f)
			frames[i] = nil
		case d.flood:
			var last *Port
			for _, q := range ports {
				if q == p {
					continue
				}
				if last != nil {
					p.queue(last, b.pool.Clone(f))
				}
				last = q
			}
			if last != nil {
				p.queue(last, f)
				frames[i] = nil
			}
		}
	}
	for q, batch := range p.outs {
		q.enqueue(batch)
	}
	clear(p.outs)
}

// queue adds pk to the batch bound for q.
func (p *Port) queue(q *Port, pk *buffer.Packet) {
	batch := p.outs[q]
	if batch == nil {
		batch = buffer.GetBatch()
		p.outs[q] = batch
	}
	batch.Pkts = append(batch.Pkts, pk)
}

// fit makes pk fit the port's endpoint, or reports that it cannot: a
// frame longer than the MTU allows is dropped; offload metadata the
// endpoint does not take (link.Capabilities) is done in software, or the
// frame dropped. Each drop is counted.
func (p *Port) fit(pk *buffer.Packet) bool {
	o := &pk.Offload
	if o.GSOType != buffer.GSONone {
		if !p.caps.TSO {
			p.stats.OffloadDropped.Inc()
			return false
		}
	} else if pk.Len() > p.maxFrame {
		p.stats.TooBig.Inc()
		return false
	}
	if p.caps.TxChecksum {
		return true
	}
	if o.Flags&buffer.NeedsCsum != 0 {
		if !completeChecksum(pk.Bytes(), int(o.CsumStart), int(o.CsumOffset)) {
			p.stats.OffloadDropped.Inc()
			return false
		}
		p.stats.CsumCompleted.Inc()
	}
	// An endpoint without offloads carries complete checksums and no
	// metadata (link.Capabilities).
	*o = buffer.Offload{}
	return true
}

// completeChecksum finishes a partial checksum as a device would (virtio
// 1.1 section 5.1.6.2): the field at start+offset holds the pseudo-
// header's sum, and the checksum of everything from start, field included,
// goes in its place. It reports false when the field lies outside f.
func completeChecksum(f []byte, start, offset int) bool {
	at := start + offset
	if start > len(f) || at+2 > len(f) {
		return false
	}
	binary.BigEndian.PutUint16(f[at:], wire.Checksum(f[start:], 0))
	return true
}
