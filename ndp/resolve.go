package ndp

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ipv6"
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

// startResolutionLocked makes an INCOMPLETE entry for addr and starts the
// goroutine that resolves it (section 7.2.2: "the sender creates an entry
// in the INCOMPLETE state, initiates Address Resolution, and then queues
// the data packet pending completion"). The source of the datagram that
// asked picks the solicitation's source. p.mu is held.
func (p *Protocol) startResolutionLocked(addr netip.Addr, pkt *buffer.Packet) *neighbor {
	if p.resolving >= p.cfg.MaxPending {
		return nil
	}
	var src netip.Addr
	if h, err := wire.ParseIPv6(pkt.Bytes()); err == wire.IPv6OK {
		src = h.Src()
	}
	src, ok := p.sourceForLocked(src)
	if !ok {
		return nil // no address to ask from: nothing could answer us
	}
	n := p.newEntryLocked(addr, Incomplete)
	if n == nil {
		return nil
	}
	r := &resolution{
		addr:  addr,
		src:   src,
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
// goroutine running resolve owns it and the packets in its queue.
type resolution struct {
	addr, src netip.Addr
	reply     chan wire.MAC
	queue     *buffer.Queue
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
		p.mu.Lock()
		retrans := p.params.retrans
		p.mu.Unlock()
		if sent == MaxMulticastSolicit {
			p.finish(r, wire.MAC{}, false)
			return
		}
		p.send(p.neighborSolicitation(r.src, group, r.addr))
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
