package ipv4

import (
	"net/netip"
	"slices"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/wire"
)

// Reassembly (RFC 791 section 3.2, RFC 1122 section 3.3.2, RFC 815).
//
// Each datagram under reassembly has an assembler goroutine that owns its
// fragments and its timer. The dealer owns the map from datagram to
// assembler and the accounting of bytes held: it reserves before it hands a
// fragment on, and releases when the assembler reports. An assembler reports
// exactly once, on reasmDone, whose capacity is the bound on assemblers, so
// it never blocks; the dealer never blocks sending to an assembler either.
//
// When MaxReassemblies datagrams are pending, a new one evicts the oldest
// (as Linux evicts the oldest queues over its memory threshold) rather than
// being refused: otherwise a burst of incomplete datagrams would lock
// reassembly out for the whole timeout, which a fragment flood could do at
// will. An evicted assembler leaves the map at once and reports like any
// other; at most MaxReassemblies can be on their way out.
//
// Policy for hostile fragments, as Linux has since 2018 and RFC 5722 asks of
// IPv6: a fragment that overlaps another (other than an exact duplicate)
// discards the whole datagram, and one that would make it exceed 65535 bytes
// discards it too: such a datagram is never built.

// fragKey identifies a datagram (RFC 791: source, destination, protocol and
// identification).
type fragKey struct {
	src, dst netip.Addr
	id       uint16
	proto    uint8
}

type assembler struct {
	key      fragKey
	in       chan *buffer.Packet
	stop     chan struct{} // closed by the dealer to evict
	born     uint64        // creation order, owned by the dealer
	reserved int           // owned by the dealer
}

// assemblerQueue bounds the fragments waiting for an assembler to take
// them: at 1500 bytes of MTU a 65535-byte datagram has 45.
const assemblerQueue = 64

type reasmOutcome uint8

const (
	reasmDone reasmOutcome = iota
	reasmTimeout
	reasmOverlap
	reasmOversize
	reasmMalformed
	reasmStopped
	reasmEvicted
)

type reasmResult struct {
	a       *assembler
	outcome reasmOutcome
	// datagram is the whole datagram when outcome is reasmDone.
	datagram *buffer.Packet
	// first is the fragment at offset zero on a timeout, when it came:
	// RFC 792 and RFC 1122 section 3.3.2 quote it in the time exceeded
	// message, and send none without it.
	first *buffer.Packet
}

// reassemble hands fragment pk to its datagram's assembler, starting one
// if needed. It runs in the dealer.
func (p *Protocol) reassemble(pk *buffer.Packet, h wire.IPv4) {
	p.Stats.ReasmReqds.Inc()
	key := fragKey{h.Src(), h.Dst(), h.ID(), h.Protocol()}
	a := p.reasm[key]
	if a == nil {
		// Evicted assemblers report at once; in a burst, take their
		// reports here so that eviction never has to refuse.
		for p.reasmEvicting >= p.cfg.MaxReassemblies {
			p.reassembled(<-p.reasmDone)
		}
		if len(p.reasm) >= p.cfg.MaxReassemblies {
			p.evictOldest()
		}
		p.reasmBorn++
		a = &assembler{key: key, in: make(chan *buffer.Packet, assemblerQueue), stop: make(chan struct{}), born: p.reasmBorn}
	}
	n := pk.Len()
	if p.reasmBytes+n > p.cfg.MaxReassemblyBytes || !p.env.Budget.Reserve(n) {
		p.refuseFragment(pk)
		return
	}
	select {
	case a.in <- pk:
	default:
		p.env.Budget.Release(n)
		p.refuseFragment(pk)
		return
	}
	a.reserved += n
	p.reasmBytes += n
	p.Stats.ReasmBytes.Add(int64(n))
	if p.reasm[key] == nil {
		p.reasm[key] = a
		p.Stats.ReasmActive.Add(1)
		p.wg.Add(1)
		go p.assemble(a)
	}
}

// evictOldest stops the longest-running assembly; its report comes later.
func (p *Protocol) evictOldest() {
	var oldest *assembler
	for _, a := range p.reasm {
		if oldest == nil || a.born < oldest.born {
			oldest = a
		}
	}
	delete(p.reasm, oldest.key)
	p.Stats.ReasmActive.Add(-1)
	p.Stats.ReasmEvictions.Inc()
	p.reasmEvicting++
	close(oldest.stop)
}

func (p *Protocol) refuseFragment(pk *buffer.Packet) {
	p.Stats.ReasmLimit.Inc()
	p.Stats.ReasmFails.Inc()
	pk.Release()
}

// reassembled takes an assembler's report in the dealer.
func (p *Protocol) reassembled(r reasmResult) {
	a := r.a
	if p.reasm[a.key] == a {
		delete(p.reasm, a.key)
		p.Stats.ReasmActive.Add(-1)
	} else {
		p.reasmEvicting-- // evicted earlier; its key may have a new assembler
	}
	// Fragments queued after the assembler stopped reading are ours now.
	for {
		select {
		case pk := <-a.in:
			pk.Release()
			continue
		default:
		}
		break
	}
	p.env.Budget.Release(a.reserved)
	p.reasmBytes -= a.reserved
	p.Stats.ReasmBytes.Add(-int64(a.reserved))
	switch r.outcome {
	case reasmDone:
		p.Stats.ReasmOKs.Inc()
		p.deliver(r.datagram, wire.IPv4(r.datagram.Bytes()))
		return
	case reasmTimeout:
		p.Stats.ReasmTimeouts.Inc()
		p.logReasmTimeout(a.key)
		if r.first != nil {
			p.errorsTimeExceeded(r.first)
		}
	case reasmOverlap:
		p.Stats.ReasmOverlaps.Inc()
	case reasmOversize:
		p.Stats.ReasmOversize.Inc()
	case reasmMalformed:
		p.Stats.ReasmMalformed.Inc()
	case reasmEvicted: // counted when evicted
	case reasmStopped:
		return
	}
	p.Stats.ReasmFails.Inc()
}

func (p *Protocol) errorsTimeExceeded(first *buffer.Packet) {
	if p.errors != nil {
		p.errors.SendError(wire.IPv4(first.Bytes()), wire.ICMPTimeExceeded, wire.ICMPCodeReassembly, 0)
	}
	first.Release()
}

// stopAssemblers runs as the dealer exits: it waits for every assembler's
// report and releases what they held.
func (p *Protocol) stopAssemblers() {
	for len(p.reasm) > 0 || p.reasmEvicting > 0 {
		r := <-p.reasmDone
		if r.datagram != nil {
			r.datagram.Release()
		}
		if r.first != nil {
			r.first.Release()
		}
		r.outcome = reasmStopped
		p.reassembled(r)
	}
}

// fragment is one held fragment: its payload covers [off, end).
type fragment struct {
	off, end int
	pk       *buffer.Packet
}

// assemble is an assembler goroutine: it collects a's fragments until the
// datagram is whole, a fragment breaks the policy, the timer fires, or the
// stack closes, and reports once.
func (p *Protocol) assemble(a *assembler) {
	defer p.wg.Done()
	var frags []fragment
	total := -1 // payload length, known once the last fragment came
	report := func(r reasmResult) {
		r.a = a
		for _, f := range frags {
			if f.pk != r.first {
				f.pk.Release()
			}
		}
		p.reasmDone <- r
	}
	timer := p.env.Clock.NewTimer(p.cfg.ReassemblyTimeout)
	defer timer.Stop()
	for {
		select {
		case pk := <-a.in:
			var outcome reasmOutcome
			frags, total, outcome = addFragment(frags, total, pk, p)
			if outcome != reasmDone {
				report(reasmResult{outcome: outcome})
				return
			}
			if complete(frags, total) {
				// The datagram takes the first fragment's header, whose
				// options can make it longer than the header each
				// fragment was checked with in addFragment.
				if wire.IPv4(frags[0].pk.Bytes()).HeaderLen()+total > wire.IPv4MaxTotalLen {
					report(reasmResult{outcome: reasmOversize})
					return
				}
				dg := p.build(frags, total)
				frags = nil // build released them
				report(reasmResult{outcome: reasmDone, datagram: dg})
				return
			}
		case <-timer.C():
			r := reasmResult{outcome: reasmTimeout}
			if len(frags) > 0 && frags[0].off == 0 {
				r.first = frags[0].pk
			}
			report(r)
			return
		case <-a.stop:
			report(reasmResult{outcome: reasmEvicted})
			return
		case <-p.done:
			report(reasmResult{outcome: reasmStopped})
			return
		}
	}
}

// addFragment inserts pk into frags, kept sorted by offset, and checks it
// against the policy. It returns reasmDone when pk was accepted or was an
// exact duplicate (released), and the failure otherwise (pk released).
func addFragment(frags []fragment, total int, pk *buffer.Packet, p *Protocol) ([]fragment, int, reasmOutcome) {
	h := wire.IPv4(pk.Bytes())
	off := h.FragmentOffset()
	end := off + len(h.Payload())
	fail := func(o reasmOutcome) ([]fragment, int, reasmOutcome) {
		pk.Release()
		return frags, total, o
	}
	if h.HeaderLen()+end > wire.IPv4MaxTotalLen {
		return fail(reasmOversize)
	}
	if h.MoreFragments() {
		// RFC 791: all fragments but the last carry multiples of 8 bytes.
		if (end-off)%8 != 0 || end == off || (total >= 0 && end > total) {
			return fail(reasmMalformed)
		}
	} else {
		if (total >= 0 && total != end) || (len(frags) > 0 && frags[len(frags)-1].end > end) {
			return fail(reasmMalformed)
		}
		total = end
	}
	i, _ := slices.BinarySearchFunc(frags, off, func(f fragment, off int) int { return f.off - off })
	if i < len(frags) && frags[i].off == off && frags[i].end == end {
		p.Stats.ReasmDuplicates.Inc()
		pk.Release()
		return frags, total, reasmDone
	}
	if (i > 0 && frags[i-1].end > off) || (i < len(frags) && frags[i].off < end) {
		return fail(reasmOverlap)
	}
	return slices.Insert(frags, i, fragment{off, end, pk}), total, reasmDone
}

// complete reports whether the fragments cover [0, total) without holes.
func complete(frags []fragment, total int) bool {
	if total < 0 {
		return false
	}
	next := 0
	for _, f := range frags {
		if f.off != next {
			return false
		}
		next = f.end
	}
	return next == total
}

// build copies the fragments into one datagram with the first fragment's
// header (RFC 791: options of the first fragment are those of the
// datagram). It releases the fragments.
func (p *Protocol) build(frags []fragment, total int) *buffer.Packet {
	first := wire.IPv4(frags[0].pk.Bytes())
	hl := first.HeaderLen()
	dg := p.env.Pool.Get(hl + total)
	b := dg.Bytes()
	copy(b, first[:hl])
	for _, f := range frags {
		copy(b[hl+f.off:], wire.IPv4(f.pk.Bytes()).Payload())
		f.pk.Release()
	}
	b[2], b[3] = byte((hl+total)>>8), byte(hl+total)
	b[6] &= 0x40 // keep DF, clear MF and the offset
	b[7] = 0
	b[10], b[11] = 0, 0
	c := wire.Checksum(b[:hl], 0)
	b[10], b[11] = byte(c>>8), byte(c)
	return dg
}
