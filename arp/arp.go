// Package arp is GoNet's Address Resolution Protocol for IPv4 over Ethernet
// (RFC 826), with the cache behaviour RFC 1122 section 2.3.2 asks of a host.
//
// A Protocol serves one NIC. Its dealer goroutine handles the ARP packets
// the NIC deals to it: it answers requests for our addresses and learns the
// senders. Outgoing IPv4 datagrams pass through Output: with a fresh cache
// entry they go straight to the NIC; otherwise they wait, in a bounded queue,
// on the goroutine that resolves their next hop. That goroutine sends the
// requests, retries, and on the reply sends what waited, or after the last
// retry hands it to the Host, whose network layer answers its sender with
// ICMP host unreachable (RFC 1122 section 2.3.2.2).
//
// The package also checks addresses for conflicts (RFC 5227, acd.go):
// Probe asks whether another station holds an address before it is used,
// and Defend watches one in use.
package arp

import (
	"cmp"
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/dealer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Config tunes resolution and the cache. Zero fields take the defaults.
type Config struct {
	// RetryInterval is the wait for a reply before asking again (1 s, as
	// Linux's retrans_time).
	RetryInterval time.Duration
	// Requests is how many requests are sent before giving up (3, as
	// Linux's mcast_solicit).
	Requests int
	// CacheTTL is how long a learned entry is used without being
	// refreshed (60 s; RFC 1122 section 2.3.2.1 asks for a timeout).
	CacheTTL time.Duration
	// QueueLen bounds the packets waiting on one resolution (RFC 1122
	// section 2.3.2.2: "SHOULD save at least one").
	QueueLen int
	// MaxEntries bounds the cache; MaxPending bounds concurrent
	// resolutions.
	MaxEntries, MaxPending int
	// ACD times address conflict detection (RFC 5227, acd.go).
	ACD ACDConfig
}

func (c *Config) setDefaults() {
	c.RetryInterval = cmp.Or(c.RetryInterval, time.Second)
	c.Requests = cmp.Or(c.Requests, 3)
	c.CacheTTL = cmp.Or(c.CacheTTL, 60*time.Second)
	c.QueueLen = cmp.Or(c.QueueLen, 64)
	c.MaxEntries = cmp.Or(c.MaxEntries, 4096)
	c.MaxPending = cmp.Or(c.MaxPending, 256)
	c.ACD.setDefaults()
}

// Addresses tells ARP which protocol addresses the NIC owns.
type Addresses interface {
	// HasAddress reports whether a is assigned to the NIC.
	HasAddress(a netip.Addr) bool
	// SourceFor returns the NIC's address to use as the sender when
	// asking for dst.
	SourceFor(dst netip.Addr) (netip.Addr, bool)
}

// Host is told what ARP could not deliver.
type Host interface {
	// Unreachable takes a datagram that waited on a resolution that
	// failed, to answer its sender with the network layer's host
	// unreachable (RFC 1122 section 2.3.2.2: "the sender MUST be
	// notified"). It owns pkt: it must release it.
	Unreachable(nextHop netip.Addr, pkt *buffer.Packet)
}

// Stats are ARP's counters.
type Stats struct {
	InPackets        stats.Counter
	InRequests       stats.Counter
	InReplies        stats.Counter
	InMalformed      stats.Counter // too short, or not Ethernet/IPv4
	InBogusSender    stats.Counter // sender MAC multicast or our own
	InDropped        stats.Counter // dealer queue full
	OutRequests      stats.Counter
	OutReplies       stats.Counter
	OutGratuitous    stats.Counter
	CacheHits        stats.Counter
	CacheMisses      stats.Counter
	CacheFull        stats.Counter // entry not learned: cache at MaxEntries
	Resolved         stats.Counter
	ResolveFailed    stats.Counter
	QueueDrops       stats.Counter // waiting packets dropped: queue full, budget, too many resolutions, close
	UnresolvedDrops  stats.Counter // waiting packets dropped because resolution failed, each reported to its sender
	PendingResolutns stats.Gauge

	// Address conflict detection (RFC 5227).
	OutProbes         stats.Counter
	ProbeConflicts    stats.Counter // probes that found their address in use
	ProbesRateLimited stats.Counter // probes delayed past MaxConflicts conflicts
	Conflicts         stats.Counter // packets from another station claiming an address of ours
	Defences          stats.Counter // announcements sent in defence
	AddressesLost     stats.Counter // defended addresses given up
	Verifications     stats.Counter // defended addresses probed again when the link came up (Verify)
}

// Protocol is ARP on one NIC.
type Protocol struct {
	nic   *ethernet.NIC
	addrs Addresses
	host  Host // nil: failed resolutions drop silently
	cfg   Config
	env   *env.Env

	in      *dealer.Inbox[*buffer.Batch]
	done    chan struct{}
	wg      sync.WaitGroup // the dealer and every resolution
	closing sync.Once

	mu         sync.RWMutex
	cache      map[netip.Addr]entry
	pending    map[netip.Addr]*resolution
	probes     map[netip.Addr]*probe   // acd.go
	probeLimit probeLimit              // acd.go
	defended   map[netip.Addr]*defence // acd.go
	verifying  *verification           // the last LinkUp's, acd.go
	closed     bool

	log arpLog // log.go

	Stats Stats
}

type entry struct {
	mac     wire.MAC
	expires time.Time
}

// New returns ARP for nic, bound to the ARP EtherType. It is the link
// output of the IPv4 interface on nic (Output, OutputBroadcast), and learns
// from that interface which addresses it answers for when it is started:
// ARP is made first, then the interface that sends through it, then Start,
// before the NIC starts and before the interface has an address.
func New(nic *ethernet.NIC, cfg Config, e *env.Env) *Protocol {
	cfg.setDefaults()
	p := &Protocol{
		nic:      nic,
		cfg:      cfg,
		env:      e,
		done:     make(chan struct{}),
		cache:    map[netip.Addr]entry{},
		pending:  map[netip.Addr]*resolution{},
		probes:   map[netip.Addr]*probe{},
		defended: map[netip.Addr]*defence{},
	}
	// A full dealer queue drops: a flood of ARP must not stall the NIC.
	p.in = dealer.New[*buffer.Batch](256, &p.Stats.InDropped)
	p.log = newARPLog(p)
	nic.Bind(wire.EtherTypeARP, p)
	return p
}

// Start launches the dealer goroutine, which answers for addrs: the
// addresses of the IPv4 interface on the NIC. Datagrams whose next hop
// does not resolve go to host (nil: they are dropped, counted).
func (p *Protocol) Start(addrs Addresses, host Host) {
	p.addrs = addrs
	p.host = host
	p.wg.Add(1)
	go p.deal()
}

// Close stops the dealer and every resolution, dropping what waits.
func (p *Protocol) Close() {
	p.closing.Do(func() {
		p.mu.Lock()
		p.closed = true // no resolution starts from now on
		p.mu.Unlock()
		close(p.done)
		p.wg.Wait()
		p.in.Close()
	})
}

// Deliver hands a batch of ARP packets to the dealer. When the dealer's
// queue is full the batch is dropped and counted (InDropped).
func (p *Protocol) Deliver(b *buffer.Batch) { p.in.Deliver(b) }

// Sync returns once the dealer has handled every ARP packet delivered before
// the call: requests answered (the reply queued on the NIC), senders learnt,
// resolutions told their answer. It does not wait for what a resolution
// then sends, nor for frames the NIC has not yet dealt. It returns ctx's
// error if ctx ends first, and dealer.ErrClosed once ARP is closed.
func (p *Protocol) Sync(ctx context.Context) error { return p.in.Sync(ctx) }

func (p *Protocol) deal() {
	defer p.wg.Done()
	for {
		select {
		case e := <-p.in.C():
			if b, ok := e.Open(); ok {
				for _, pk := range b.Pkts {
					p.handle(pk.Bytes())
					pk.Release()
				}
				b.Put()
			}
		case <-p.done:
			return
		}
	}
}

// handle runs RFC 826's packet reception algorithm on one packet.
func (p *Protocol) handle(b []byte) {
	p.Stats.InPackets.Inc()
	a, ok := wire.ParseARP(b)
	if !ok {
		p.Stats.InMalformed.Inc()
		return
	}
	op := a.Op()
	switch op {
	case wire.ARPRequest:
		p.Stats.InRequests.Inc()
	case wire.ARPReply:
		p.Stats.InReplies.Inc()
	default:
		p.Stats.InMalformed.Inc()
		return
	}
	sha, spa, tpa := a.SenderMAC(), a.SenderIP(), a.TargetIP()
	if sha.IsMulticast() || sha == p.nic.MAC() {
		p.Stats.InBogusSender.Inc()
		return
	}
	if p.checkConflict(op, sha, spa, tpa) {
		// Another station claims an address we defend: the defence
		// has answered, and nothing of the packet is learnt.
		return
	}
	// "If the pair <protocol type, sender protocol address> is already in
	// my translation table, update the sender hardware address field of the
	// entry with the new information ... and set Merge_flag to true."
	// An all-zeros sender is an RFC 5227 probe: learn nothing from it.
	merged := false
	if spa.IsValid() && !spa.IsUnspecified() {
		merged = p.refresh(spa, sha)
	}
	// "?Am I the target protocol address?"
	if !p.addrs.HasAddress(tpa) {
		return
	}
	if !merged && spa.IsValid() && !spa.IsUnspecified() {
		p.learn(spa, sha)
	}
	if op == wire.ARPRequest {
		p.send(wire.ARPFields{
			Op:        wire.ARPReply,
			SenderMAC: p.nic.MAC(), SenderIP: tpa,
			TargetMAC: sha, TargetIP: spa,
		}, sha)
		p.Stats.OutReplies.Inc()
	}
}

// refresh updates an existing entry and wakes a resolution waiting on it.
func (p *Protocol) refresh(ip netip.Addr, mac wire.MAC) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.cache[ip]
	if ok {
		p.cache[ip] = entry{mac, p.env.Clock.Now().Add(p.cfg.CacheTTL)}
	}
	p.wake(ip, mac)
	return ok
}

// learn adds a new entry, making room by sweeping expired ones.
func (p *Protocol) learn(ip netip.Addr, mac wire.MAC) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.env.Clock.Now()
	if len(p.cache) >= p.cfg.MaxEntries {
		for k, e := range p.cache {
			if !now.Before(e.expires) {
				delete(p.cache, k)
			}
		}
		if len(p.cache) >= p.cfg.MaxEntries {
			p.Stats.CacheFull.Inc()
			return
		}
	}
	p.cache[ip] = entry{mac, now.Add(p.cfg.CacheTTL)}
	p.wake(ip, mac)
}

// wake tells the resolution of ip, if any, its answer; p.mu is held.
func (p *Protocol) wake(ip netip.Addr, mac wire.MAC) {
	if r := p.pending[ip]; r != nil {
		select {
		case r.reply <- mac:
		default: // already told
		}
	}
}

// send builds an ARP packet and queues it on the NIC to dst.
func (p *Protocol) send(f wire.ARPFields, dst wire.MAC) {
	// Pad to the 46-byte minimum Ethernet payload, as real NICs would.
	pk := p.env.Pool.Get(46)
	b := pk.Bytes()
	wire.EncodeARP(b, &f)
	clear(b[wire.ARPLen:])
	p.nic.Send(dst, wire.EtherTypeARP, pk)
}

// Announce broadcasts a gratuitous ARP request for ip (RFC 5227 section 3,
// RFC 5944 section 4.6: sender and target both ip), so that neighbours
// update caches that held another address for it.
func (p *Protocol) Announce(ip netip.Addr) {
	p.send(wire.ARPFields{
		Op:        wire.ARPRequest,
		SenderMAC: p.nic.MAC(), SenderIP: ip,
		TargetIP: ip,
	}, wire.Broadcast)
	p.Stats.OutGratuitous.Inc()
}

// Lookup returns ip's hardware address if the cache holds a fresh entry.
func (p *Protocol) Lookup(ip netip.Addr) (wire.MAC, bool) {
	p.mu.RLock()
	e, ok := p.cache[ip]
	p.mu.RUnlock()
	if !ok || !p.env.Clock.Now().Before(e.expires) {
		return wire.MAC{}, false
	}
	return e.mac, true
}

// Entry is a cache entry as Entries reports it.
type Entry struct {
	IP      netip.Addr
	MAC     wire.MAC
	Expires time.Time
}

// Entries returns a snapshot of the cache, expired entries included.
func (p *Protocol) Entries() []Entry {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]Entry, 0, len(p.cache))
	for ip, e := range p.cache {
		out = append(out, Entry{ip, e.mac, e.expires})
	}
	return out
}

// Output sends an IPv4 datagram to the next hop nextHop, resolving its
// hardware address first when the cache has no fresh entry. It takes
// ownership of pkt. The limited broadcast address and multicast groups map
// to their Ethernet addresses without asking.
func (p *Protocol) Output(nextHop netip.Addr, pkt *buffer.Packet) {
	if mac, ok := staticMAC(nextHop); ok {
		p.nic.Send(mac, wire.EtherTypeIPv4, pkt)
		return
	}
	if mac, ok := p.Lookup(nextHop); ok {
		p.Stats.CacheHits.Inc()
		p.nic.Send(mac, wire.EtherTypeIPv4, pkt)
		return
	}
	p.Stats.CacheMisses.Inc()
	p.enqueue(nextHop, pkt)
}

// OutputBroadcast sends an IPv4 datagram to the Ethernet broadcast address
// (for a subnet-directed broadcast).
func (p *Protocol) OutputBroadcast(pkt *buffer.Packet) {
	p.nic.Send(wire.Broadcast, wire.EtherTypeIPv4, pkt)
}

// staticMAC maps addresses that need no resolution: 255.255.255.255 and
// multicast groups (RFC 1112 section 6.4).
func staticMAC(ip netip.Addr) (wire.MAC, bool) {
	a := ip.As4()
	if a == [4]byte{255, 255, 255, 255} {
		return wire.Broadcast, true
	}
	if ip.IsMulticast() {
		return wire.MAC{0x01, 0x00, 0x5e, a[1] & 0x7f, a[2], a[3]}, true
	}
	return wire.MAC{}, false
}

// enqueue parks pkt on the resolution of nextHop, starting one if needed.
func (p *Protocol) enqueue(nextHop netip.Addr, pkt *buffer.Packet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.Stats.QueueDrops.Inc()
		pkt.Release()
		return
	}
	r := p.pending[nextHop]
	if r == nil {
		if len(p.pending) >= p.cfg.MaxPending {
			p.Stats.QueueDrops.Inc()
			pkt.Release()
			return
		}
		r = &resolution{ip: nextHop, reply: make(chan wire.MAC, 1), queue: buffer.NewQueue(p.cfg.QueueLen, p.env.Budget)}
		p.pending[nextHop] = r
		p.Stats.PendingResolutns.Add(1)
		p.wg.Add(1)
		go p.resolve(r)
	}
	if !r.queue.Put(pkt) {
		p.Stats.QueueDrops.Inc()
	}
}

// resolution is one outstanding request: the goroutine running resolve owns
// it and the packets in its queue.
type resolution struct {
	ip    netip.Addr
	reply chan wire.MAC
	queue *buffer.Queue
}

// resolve asks for r.ip until a reply or the last retry, then sends or drops
// what waited (RFC 1122 section 2.3.2.1: at most one request a second).
func (p *Protocol) resolve(r *resolution) {
	defer p.wg.Done()
	src, ok := p.addrs.SourceFor(r.ip)
	if !ok {
		p.finish(r, wire.MAC{}, false)
		return
	}
	ask := func() {
		p.send(wire.ARPFields{Op: wire.ARPRequest, SenderMAC: p.nic.MAC(), SenderIP: src, TargetIP: r.ip}, wire.Broadcast)
		p.Stats.OutRequests.Inc()
	}
	ask()
	timer := p.env.Clock.NewTimer(p.cfg.RetryInterval)
	defer timer.Stop()
	for sent := 1; ; {
		select {
		case mac := <-r.reply:
			p.finish(r, mac, true)
			return
		case <-timer.C():
			if sent >= p.cfg.Requests {
				p.finish(r, wire.MAC{}, false)
				return
			}
			ask()
			sent++
			timer.Reset(p.cfg.RetryInterval)
		case <-p.done:
			p.finish(r, wire.MAC{}, false)
			return
		}
	}
}

// finish retires r and sends what waited on it, or, when the resolution
// failed, hands each datagram to the Host for its sender to be told (RFC
// 1122 section 2.3.2.2), as neighbour discovery does (RFC 4861 section
// 7.2.2). On close they are dropped: nothing failed to resolve.
func (p *Protocol) finish(r *resolution, mac wire.MAC, resolved bool) {
	p.mu.Lock()
	delete(p.pending, r.ip)
	p.mu.Unlock()
	p.Stats.PendingResolutns.Add(-1)
	if resolved {
		p.Stats.Resolved.Inc()
	} else {
		p.Stats.ResolveFailed.Inc()
	}
	closing := false
	select {
	case <-p.done:
		closing = true
	default:
	}
	// No one puts on r.queue once r is out of pending: drain it.
	dropped := 0
	for pk := r.queue.Take(); pk != nil; pk = r.queue.Take() {
		switch {
		case resolved:
			p.nic.Send(mac, wire.EtherTypeIPv4, pk)
		case closing:
			p.Stats.QueueDrops.Inc()
			pk.Release()
		default:
			p.Stats.UnresolvedDrops.Inc()
			dropped++
			if p.host == nil {
				pk.Release()
			} else {
				p.host.Unreachable(r.ip, pk)
			}
		}
	}
	if !resolved {
		p.unresolved(r.ip, dropped)
	}
}
