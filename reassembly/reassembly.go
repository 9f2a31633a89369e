// Package reassembly puts fragmented datagrams back together for either IP
// family: IPv4's (RFC 791 section 3.2, RFC 1122 section 3.3.2, RFC 815)
// and IPv6's (RFC 8200 section 4.5). What differs between the families is
// a type parameter (the key that names a datagram) and a Family the network
// layer implements (how the whole datagram's header is rebuilt, and what is
// done with a datagram once whole or timed out); the goroutines, the limits
// and the policy for hostile fragments are one implementation.
//
// Each datagram under reassembly has an assembler goroutine that owns its
// fragments and its timer, on the stack's clock. The network layer's dealer
// owns the Reassembler: the map from datagram to assembler and the
// accounting of bytes held. It reserves before it hands a fragment on, and
// releases when the assembler reports. An assembler reports exactly once,
// on a channel whose capacity is the bound on assemblers, so it never
// blocks; the dealer never blocks sending to an assembler either (a full
// assembler queue refuses the fragment, counted).
//
// When MaxDatagrams datagrams are pending, a new one evicts the oldest (as
// Linux evicts the oldest queues over its memory threshold) rather than
// being refused: otherwise a burst of incomplete datagrams would lock
// reassembly out for the whole timeout, which a fragment flood could do at
// will. An evicted assembler leaves the map at once and reports like any
// other; at most MaxDatagrams can be on their way out.
//
// Policy for hostile fragments, as Linux has had for IPv4 since 2018 and
// RFC 5722 asks of IPv6: a fragment that overlaps another (other than an
// exact duplicate) discards the whole datagram, and so does one that would
// make it exceed the family's largest datagram: such a datagram is never
// built.
package reassembly

import (
	"slices"
	"sync"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/stats"
)

// Config bounds reassembly. Every field must be set: the families have
// their own defaults.
type Config struct {
	// Timeout bounds the wait for a datagram's missing fragments.
	Timeout time.Duration
	// MaxDatagrams bounds the datagrams under reassembly at once.
	MaxDatagrams int
	// MaxBytes bounds the fragment bytes held at once, besides the
	// stack's memory budget.
	MaxBytes int
	// MaxLen is the longest whole datagram, header included: 65535 for
	// IPv4 (the total length field), the fixed header plus 65535 of
	// payload for IPv6 (or less, where buffers are smaller).
	MaxLen int
}

// Counters are the outcome counters, which stay the family's own fields
// (ipv4.Stats, ipv6.Stats) so that each keeps its names; the Reassembler
// counts through these pointers. Every field must be set.
type Counters struct {
	Reqds      *stats.Counter // fragments taken
	OKs        *stats.Counter // datagrams reassembled
	Fails      *stats.Counter // datagrams (or refused fragments) given up on, for any reason
	Timeouts   *stats.Counter
	Overlaps   *stats.Counter
	Oversize   *stats.Counter // would exceed MaxLen
	Malformed  *stats.Counter // inconsistent length or unaligned fragment
	Duplicates *stats.Counter
	Limit      *stats.Counter // fragment refused: too many datagrams or bytes in reassembly
	Evictions  *stats.Counter // oldest datagram dropped to make room for a new one
	Active     *stats.Gauge   // datagrams under reassembly
	Bytes      *stats.Gauge   // fragment bytes held
}

// Family is what a network layer does that reassembly cannot: its methods
// run in the dealer's goroutine (Rebuild in an assembler's).
type Family[K comparable] interface {
	// Rebuild fixes the header of a whole datagram: whole holds the
	// first fragment's first head bytes, then the reassembled data;
	// first is the first fragment, header and all (IPv6 reads the
	// Fragment header's next header there).
	Rebuild(whole []byte, head int, first []byte)
	// Reassembled takes ownership of the whole datagram key names,
	// which came in on the interface named in: its first fragment's.
	Reassembled(key K, whole *buffer.Packet, in string)
	// TimedOut says key's datagram timed out; first is the fragment at
	// offset zero, whose owner it becomes, or nil when that never came
	// (RFC 792 and RFC 1122 section 3.3.2, RFC 8200 section 4.5 and RFC
	// 4443 section 3.3 quote it in a Time Exceeded message, and send
	// none without it).
	TimedOut(key K, first *buffer.Packet)
}

// Fragment is one fragment, parsed by the family.
type Fragment struct {
	Pkt *buffer.Packet
	// Head is how many of Pkt's bytes the whole datagram keeps from its
	// first fragment, in front of the data: IPv4's header, IPv6's
	// unfragmentable part.
	Head int
	// Data is where the fragment's data starts in Pkt: Head, or past a
	// header the whole datagram loses (IPv6's Fragment header).
	Data int
	// Offset is the fragment's offset in the data, in bytes.
	Offset int
	// More says more fragments follow (IPv4's MF, IPv6's M flag).
	More bool
	// In is the name of the interface the fragment came in on; the
	// whole datagram keeps its first fragment's, as it keeps its header.
	In string
}

// Reassembler is a network layer's reassembly state. All methods but New
// run in the dealer's goroutine.
type Reassembler[K comparable] struct {
	cfg Config
	env *env.Env
	c   Counters
	fam Family[K]

	live  map[K]*assembler[K]
	bytes int
	done  chan Result[K]
	stop  chan struct{} // closed by Stop
	wg    sync.WaitGroup
	// born numbers assemblers in creation order; evicting counts evicted
	// ones that have not reported yet.
	born     uint64
	evicting int
}

// New returns an empty Reassembler.
func New[K comparable](cfg Config, e *env.Env, c Counters, fam Family[K]) *Reassembler[K] {
	return &Reassembler[K]{
		cfg:  cfg,
		env:  e,
		c:    c,
		fam:  fam,
		live: map[K]*assembler[K]{},
		// Room for every assembler in the map and every evicted one.
		done: make(chan Result[K], 2*cfg.MaxDatagrams),
		stop: make(chan struct{}),
	}
}

type assembler[K comparable] struct {
	key      K
	in       chan Fragment
	evict    chan struct{} // closed by the dealer to evict
	born     uint64        // creation order, owned by the dealer
	reserved int           // owned by the dealer
}

// assemblerQueue bounds the fragments waiting for an assembler to take
// them: at 1500 bytes of MTU a 65535-byte datagram has 45.
const assemblerQueue = 64

type outcome uint8

const (
	outcomeDone outcome = iota
	outcomeTimeout
	outcomeOverlap
	outcomeOversize
	outcomeMalformed
	outcomeStopped
	outcomeEvicted
)

// Result is an assembler's report, which the dealer takes from Done and
// hands to Settle.
type Result[K comparable] struct {
	a       *assembler[K]
	outcome outcome
	// datagram is the whole datagram when outcome is outcomeDone, and
	// in the interface its first fragment came in on.
	datagram *buffer.Packet
	in       string
	// first is the fragment at offset zero on a timeout, when it came.
	first *buffer.Packet
}

// Done is the channel assemblers report on: the dealer selects on it and
// passes what it takes to Settle.
func (r *Reassembler[K]) Done() <-chan Result[K] { return r.done }

// Add hands fragment f of key's datagram to its assembler, starting one if
// needed, and takes ownership of f.Pkt.
func (r *Reassembler[K]) Add(key K, f Fragment) {
	r.c.Reqds.Inc()
	a := r.live[key]
	if a == nil {
		// Evicted assemblers report at once; in a burst, take their
		// reports here so that eviction never has to refuse.
		for r.evicting >= r.cfg.MaxDatagrams {
			r.Settle(<-r.done)
		}
		if len(r.live) >= r.cfg.MaxDatagrams {
			r.evictOldest()
		}
		r.born++
		a = &assembler[K]{key: key, in: make(chan Fragment, assemblerQueue), evict: make(chan struct{}), born: r.born}
	}
	n := f.Pkt.Len()
	if r.bytes+n > r.cfg.MaxBytes || !r.env.Budget.Reserve(n) {
		r.refuse(f.Pkt)
		return
	}
	select {
	case a.in <- f:
	default:
		r.env.Budget.Release(n)
		r.refuse(f.Pkt)
		return
	}
	a.reserved += n
	r.bytes += n
	r.c.Bytes.Add(int64(n))
	if r.live[key] == nil {
		r.live[key] = a
		r.c.Active.Add(1)
		r.wg.Add(1)
		go r.assemble(a)
	}
}

// evictOldest stops the longest-running assembly; its report comes later.
func (r *Reassembler[K]) evictOldest() {
	var oldest *assembler[K]
	for _, a := range r.live {
		if oldest == nil || a.born < oldest.born {
			oldest = a
		}
	}
	delete(r.live, oldest.key)
	r.c.Active.Add(-1)
	r.c.Evictions.Inc()
	r.evicting++
	close(oldest.evict)
}

func (r *Reassembler[K]) refuse(pk *buffer.Packet) {
	r.c.Limit.Inc()
	r.c.Fails.Inc()
	pk.Release()
}

// Settle takes an assembler's report in the dealer: it gives back what the
// assembler held, counts the outcome, and hands a whole or timed-out
// datagram to the family.
func (r *Reassembler[K]) Settle(res Result[K]) {
	a := res.a
	if r.live[a.key] == a {
		delete(r.live, a.key)
		r.c.Active.Add(-1)
	} else {
		r.evicting-- // evicted earlier; its key may have a new assembler
	}
	// Fragments queued after the assembler stopped reading are ours now.
	for {
		select {
		case f := <-a.in:
			f.Pkt.Release()
			continue
		default:
		}
		break
	}
	r.env.Budget.Release(a.reserved)
	r.bytes -= a.reserved
	r.c.Bytes.Add(-int64(a.reserved))
	switch res.outcome {
	case outcomeDone:
		r.c.OKs.Inc()
		r.fam.Reassembled(a.key, res.datagram, res.in)
		return
	case outcomeTimeout:
		r.c.Timeouts.Inc()
		r.fam.TimedOut(a.key, res.first)
	case outcomeOverlap:
		r.c.Overlaps.Inc()
	case outcomeOversize:
		r.c.Oversize.Inc()
	case outcomeMalformed:
		r.c.Malformed.Inc()
	case outcomeEvicted: // counted when evicted
	case outcomeStopped:
		return
	}
	r.c.Fails.Inc()
}

// Stop runs as the dealer exits: it stops every assembler, waits for their
// reports and releases what they held.
func (r *Reassembler[K]) Stop() {
	close(r.stop)
	for len(r.live) > 0 || r.evicting > 0 {
		res := <-r.done
		if res.datagram != nil {
			res.datagram.Release()
		}
		if res.first != nil {
			res.first.Release()
		}
		res.outcome = outcomeStopped
		r.Settle(res)
	}
	r.wg.Wait()
}

// held is one held fragment: its data covers [off, end) of the datagram's.
type held struct {
	off, end int
	f        Fragment
}

// assemble is an assembler goroutine: it collects a's fragments until the
// datagram is whole, a fragment breaks the policy, the timer fires, or the
// layer closes, and reports once.
func (r *Reassembler[K]) assemble(a *assembler[K]) {
	defer r.wg.Done()
	var frags []held
	total := -1 // data length, known once the last fragment came
	report := func(res Result[K]) {
		res.a = a
		for _, h := range frags {
			if h.f.Pkt != res.first {
				h.f.Pkt.Release()
			}
		}
		r.done <- res
	}
	timer := r.env.Clock.NewTimer(r.cfg.Timeout)
	defer timer.Stop()
	for {
		select {
		case f := <-a.in:
			var o outcome
			frags, total, o = r.add(frags, total, f)
			if o != outcomeDone {
				report(Result[K]{outcome: o})
				return
			}
			if complete(frags, total) {
				// The datagram takes the first fragment's header, which
				// can be longer than the header each fragment was
				// checked with in add (IPv4's options).
				if frags[0].f.Head+total > r.cfg.MaxLen {
					report(Result[K]{outcome: outcomeOversize})
					return
				}
				in := frags[0].f.In
				dg := r.build(frags, total)
				frags = nil // build released them
				report(Result[K]{outcome: outcomeDone, datagram: dg, in: in})
				return
			}
		case <-timer.C():
			res := Result[K]{outcome: outcomeTimeout}
			if len(frags) > 0 && frags[0].off == 0 {
				res.first = frags[0].f.Pkt
			}
			report(res)
			return
		case <-a.evict:
			report(Result[K]{outcome: outcomeEvicted})
			return
		case <-r.stop:
			report(Result[K]{outcome: outcomeStopped})
			return
		}
	}
}

// add inserts f into frags, kept sorted by offset, and checks it against
// the policy. It returns outcomeDone when f was accepted or was an exact
// duplicate (released), and the failure otherwise (f released).
func (r *Reassembler[K]) add(frags []held, total int, f Fragment) ([]held, int, outcome) {
	off := f.Offset
	end := off + f.Pkt.Len() - f.Data
	fail := func(o outcome) ([]held, int, outcome) {
		f.Pkt.Release()
		return frags, total, o
	}
	if f.Head+end > r.cfg.MaxLen {
		return fail(outcomeOversize)
	}
	if f.More {
		// RFC 791, RFC 8200 section 4.5: all fragments but the last
		// carry multiples of 8 bytes.
		if (end-off)%8 != 0 || end == off || (total >= 0 && end > total) {
			return fail(outcomeMalformed)
		}
	} else {
		if (total >= 0 && total != end) || (len(frags) > 0 && frags[len(frags)-1].end > end) {
			return fail(outcomeMalformed)
		}
		total = end
	}
	i, _ := slices.BinarySearchFunc(frags, off, func(h held, off int) int { return h.off - off })
	if i < len(frags) && frags[i].off == off && frags[i].end == end {
		r.c.Duplicates.Inc()
		f.Pkt.Release()
		return frags, total, outcomeDone
	}
	if (i > 0 && frags[i-1].end > off) || (i < len(frags) && frags[i].off < end) {
		return fail(outcomeOverlap)
	}
	return slices.Insert(frags, i, held{off, end, f}), total, outcomeDone
}

// complete reports whether the fragments cover [0, total) without holes.
func complete(frags []held, total int) bool {
	if total < 0 {
		return false
	}
	next := 0
	for _, h := range frags {
		if h.off != next {
			return false
		}
		next = h.end
	}
	return next == total
}

// build copies the fragments into one datagram behind the first fragment's
// header (RFC 791: the options of the first fragment are the datagram's;
// RFC 8200 section 4.5: the unfragmentable part is the first fragment's)
// and has the family fix that header. It releases the fragments.
func (r *Reassembler[K]) build(frags []held, total int) *buffer.Packet {
	first := frags[0].f
	dg := r.env.Pool.Get(first.Head + total)
	b := dg.Bytes()
	copy(b, first.Pkt.Bytes()[:first.Head])
	for _, h := range frags {
		copy(b[first.Head+h.off:], h.f.Pkt.Bytes()[h.f.Data:])
	}
	r.fam.Rebuild(b, first.Head, first.Pkt.Bytes())
	for _, h := range frags {
		h.f.Pkt.Release()
	}
	return dg
}
