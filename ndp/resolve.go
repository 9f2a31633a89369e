package ndp

import (
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/wire"
)

// Output sends an IPv6 datagram to the next hop nextHop: it is the IPv6
// layer's link output. pkt holds the datagram from its IPv6 header on; ndp
// adds the Ethernet header. Multicast destinations map to their Ethernet
// group address (RFC 2464 section 7) with no resolution; a unicast next hop
// is looked up in the neighbour cache and, when it has no usable entry,
// resolved first (RFC 4861 section 7.2.2) while pkt waits. Output takes
// ownership of pkt and never blocks on resolution.
func (p *Protocol) Output(nextHop netip.Addr, pkt *buffer.Packet) {
	if mac, ok := ipv6.MulticastMAC(nextHop); ok {
		p.nic.Send(mac, wire.EtherTypeIPv6, pkt)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.Stats.QueueDrops.Inc()
		pkt.Release()
		return
	}
	now := p.env.Clock.Now()
	nextHop = cacheKey(nextHop)
	n := p.cache[nextHop]
	// An entry still owned by its resolution, even one answered whose
	// queue is being sent, takes the datagram into the queue, behind
	// those that waited: datagrams leave in the order they came.
	if n != nil && n.res == nil {
		// REACHABLE, STALE, DELAY and PROBE all send to the cached
		// address (section 7.3.3); sending on a STALE entry starts the
		// wait for a confirmation.
		p.usedLocked(n, now)
		mac := n.mac
		p.mu.Unlock()
		p.Stats.CacheHits.Inc()
		p.nic.Send(mac, wire.EtherTypeIPv6, pkt)
		return
	}
	p.Stats.CacheMisses.Inc()
	if n == nil {
		if mac, ok := p.detourLocked(nextHop, pkt, now); ok {
			p.mu.Unlock()
			p.Stats.OptimisticDetours.Inc()
			p.nic.Send(mac, wire.EtherTypeIPv6, pkt)
			return
		}
		n = p.startResolutionLocked(nextHop, pkt)
		if n == nil {
			p.mu.Unlock()
			p.Stats.QueueDrops.Inc()
			pkt.Release()
			return
		}
	}
	// Queued under the lock, so that finish, which takes the entry's
	// resolution away under it, drains every packet queued.
	n.res.enqueue(p, pkt)
	p.mu.Unlock()
}

// sourceOf is the source address of the datagram in pkt, or the zero
// Addr.
func sourceOf(pkt *buffer.Packet) netip.Addr {
	if h, err := wire.ParseIPv6(pkt.Bytes()); err == wire.IPv6OK {
		return h.Src()
	}
	return netip.Addr{}
}

// detourLocked returns the link-layer address of a default router to send
// pkt through, for a neighbour nextHop not in the cache, when pkt comes
// from an optimistic address and we have no other to solicit nextHop
// from: a solicitation from an optimistic address may not carry our
// link-layer address (RFC 4429 section 2.2), and without it a neighbour
// that does not know us yet does not answer a multicast one (RFC 4861
// section 4.3 makes the option a MUST there; Linux ignores such a
// solicitation), so the datagram goes through a router we can already
// reach, which forwards it and may redirect us (RFC 4429 section 2.3,
// as Linux does). With no such router the solicitation goes without the
// option. p.mu is held.
func (p *Protocol) detourLocked(nextHop netip.Addr, pkt *buffer.Packet, now time.Time) (wire.MAC, bool) {
	src := sourceOf(pkt)
	if a := p.addrs[src]; a == nil || a.state != Optimistic {
		return wire.MAC{}, false
	}
	if from, ok := p.sourceForLocked(src); ok && p.sllaFromLocked(from) {
		return wire.MAC{}, false // a solicitation that can carry it
	}
	var best *neighbor
	var bestPref route.Preference
	for addr, r := range p.routers {
		n := p.cache[cacheKey(addr)]
		if n == nil || n.res != nil || cacheKey(addr) == nextHop {
			continue
		}
		if best == nil || r.pref > bestPref || r.pref == bestPref && addr.Less(best.addr) {
			best, bestPref = n, r.pref
		}
	}
	if best == nil {
		return wire.MAC{}, false
	}
	p.usedLocked(best, now)
	return best.mac, true
}

// startResolutionLocked makes an INCOMPLETE entry for addr and starts the
// goroutine that resolves it (section 7.2.2: "the sender creates an entry
// in the INCOMPLETE state, initiates Address Resolution, and then queues
// the data packet pending completion"). The source of the datagram that
// asked picks each solicitation's source. p.mu is held.
func (p *Protocol) startResolutionLocked(addr netip.Addr, pkt *buffer.Packet) *neighbor {
	if p.resolving >= p.cfg.MaxPending {
		return nil
	}
	src := sourceOf(pkt)
	if _, ok := p.sourceForLocked(src); !ok {
		return nil // no address to ask from: nothing could answer us
	}
	n := p.newEntryLocked(addr, Incomplete)
	if n == nil {
		return nil
	}
	r := &resolution{
		addr:  addr,
		asker: src,
		reply: make(chan wire.MAC, 1),
		queue: buffer.NewQueue(p.cfg.QueueLen, p.env.Budget),
	}
	n.res = r
	p.resolving++
	p.Stats.PendingResolutions.Add(1)
	p.wg.Add(1)
	go p.resolve(r)
	return n
}

// resolution is address resolution of one neighbour under way: the
// goroutine running resolve owns it and the packets in its queue. asker
// is the source of the datagram that started it.
type resolution struct {
	addr, asker netip.Addr
	reply       chan wire.MAC
	queue       *buffer.Queue
}

// answer tells the resolution the neighbour's link-layer address; it never
// blocks, and a second answer is dropped.
func (r *resolution) answer(mac wire.MAC) {
	select {
	case r.reply <- mac:
	default:
	}
}

// enqueue parks pkt on the resolution, counting a drop: the queue is
// bounded and charged to the stack's memory budget (section 7.2.2), and
// drops the new arrival where the section would have the oldest replaced,
// as arp's does (buffer.Queue.Put says why).
func (r *resolution) enqueue(p *Protocol, pkt *buffer.Packet) {
	if !r.queue.Put(pkt) {
		p.Stats.QueueDrops.Inc()
	}
}

// resolve sends multicast solicitations for r.addr to its solicited-node
// group, RetransTimer apart, until an answer or MAX_MULTICAST_SOLICIT of
// them (section 7.2.2), then sends or drops what waited.
func (p *Protocol) resolve(r *resolution) {
	defer p.wg.Done()
	group := ipv6.SolicitedNode(r.addr)
	for sent := 0; ; sent++ {
		// The source is chosen for each solicitation: an optimistic
		// one may have passed DAD since, or another address may have.
		p.mu.Lock()
		retrans := p.params.retrans
		src, ok := p.sourceForLocked(r.asker)
		withMAC := p.sllaFromLocked(src)
		p.mu.Unlock()
		if sent == MaxMulticastSolicit || !ok {
			p.finish(r, wire.MAC{}, false)
			return
		}
		p.send(p.neighborSolicitation(src, group, r.addr, withMAC))
		t := p.env.Clock.NewTimer(retrans)
		select {
		case mac := <-r.reply:
			t.Stop()
			p.finish(r, mac, true)
			return
		case <-t.C():
		case <-p.done:
			t.Stop()
			p.finish(r, wire.MAC{}, false)
			return
		}
	}
}

// finish retires r and sends (resolved) or drops what waited on it. A
// failed resolution deletes the entry and hands each datagram to
// Host.Unreachable for its ICMPv6 error (section 7.2.2: "The sender MUST
// return ICMP destination unreachable indications with code 3 (Address
// Unreachable) for each packet queued awaiting address resolution").
func (p *Protocol) finish(r *resolution, mac wire.MAC, resolved bool) {
	p.mu.Lock()
	if n := p.cache[r.addr]; n != nil && n.res == r {
		n.res = nil
		if !resolved {
			p.deleteLocked(n)
		} else {
			// The datagrams about to go count as sent on the entry: a
			// STALE one (learnt from an unsolicited message) moves to
			// DELAY.
			p.usedLocked(n, p.env.Clock.Now())
		}
	}
	p.resolving--
	closed := p.closed
	p.mu.Unlock()
	p.Stats.PendingResolutions.Add(-1)
	if resolved {
		p.Stats.Resolved.Inc()
	} else {
		p.Stats.ResolveFailed.Inc()
	}
	// No one queues on r once its entry no longer points to it.
	for pk := r.queue.Take(); pk != nil; pk = r.queue.Take() {
		switch {
		case resolved:
			p.nic.Send(mac, wire.EtherTypeIPv6, pk)
		case closed || p.host == nil:
			p.Stats.UnresolvedDrops.Inc()
			pk.Release()
		default:
			p.Stats.UnresolvedDrops.Inc()
			p.host.Unreachable(r.addr, pk)
		}
	}
}
