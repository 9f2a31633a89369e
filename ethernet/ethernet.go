// Package ethernet is GoNet's link-layer dealer. A NIC owns one link
// endpoint: its receive goroutine reads batches of frames, checks that each
// is for us (our MAC, broadcast, or a multicast address a protocol listens
// to: filter.go), strips the header and deals
// the frames by EtherType to the protocols bound to them, one batch per
// protocol; its transmit goroutine drains frames queued by any sender and
// writes them to the link in batches. On a link with several queues
// (Multiqueue) there is a receive and a transmit goroutine per queue, and
// each flow's frames go out through one of them (queue.go).
package ethernet

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Handler is a protocol bound to an EtherType. Deliver takes ownership of
// the batch and its packets; each packet's data starts at the protocol's
// header. Deliver is called from the NIC's receive goroutine and must not
// block for long: a dealer hands the batch to its own goroutine.
//
// The handler is not told which NIC the batch came from: a protocol that
// serves one NIC (ARP) knows it, and a network layer that serves them all
// (IPv4) receives without naming a link type, so that it needs no import of
// this package. One that must tell interfaces apart binds a handler per NIC.
type Handler interface {
	Deliver(b *buffer.Batch)
}

// Stats are a NIC's counters, after the kernel's /sys/class/net statistics.
type Stats struct {
	RxFrames   stats.Counter
	RxBytes    stats.Counter
	RxNotForUs stats.Counter // destination neither our MAC, broadcast nor multicast
	// RxMulticastFiltered counts frames to a multicast address no
	// protocol listens to (filter.go).
	RxMulticastFiltered stats.Counter
	RxTruncated         stats.Counter // shorter than an Ethernet header
	RxUnknownType       stats.Counter // no protocol bound to the EtherType
	RxLinkErrors        stats.Counter // ReadBatch failed other than by close
	TxFrames            stats.Counter
	TxBytes             stats.Counter
	TxLinkErrors        stats.Counter // frames the endpoint did not take
	TxDroppedClose      stats.Counter // frames sent after StopReceive or Close
	RxCopied            stats.Counter // frames copied out of a large read buffer (copyBreak)
	// Super-segments (buffer.Offload.GSOType) read from and written to a
	// link with offloads, each counted once in RxFrames or TxFrames.
	RxGSO, TxGSO stats.Counter
	// RxGSO6 counts the RxGSO that were TCP over IPv6: the kernel hands
	// a TAP reader super-segments of each family only if it asked for
	// that family's TSO (TUNSETOFFLOAD), and without them every segment
	// of that family crosses at the MTU.
	RxGSO6 stats.Counter
	// RxUSO counts the UDP runs read (Offload.GSOType GSOUDPL4) and cut
	// into datagrams, RxUSODatagrams the datagrams they held, and
	// RxUSODropped the runs dropped whole for headers that do not hold
	// together (uso.go). Each run counts once in RxFrames and RxGSO.
	RxUSO, RxUSODatagrams, RxUSODropped stats.Counter
}

// txQueueLen bounds the frames waiting for the transmit goroutine. Senders
// block when it is full, which is the stack's backpressure towards sockets.
const txQueueLen = 1024

// NIC is a network interface: a link endpoint with its dealers.
type NIC struct {
	name     string
	ep       link.Endpoint
	mac      wire.MAC
	mtu      int
	pool     *buffer.Pool
	handlers map[uint16]Handler
	// mq is the endpoint's queues when it has more than one, else nil.
	mq Multiqueue

	// tx are the transmit queues, one per link queue, each drained by a
	// transmit goroutine of its own.
	tx      []chan *buffer.Packet
	done    chan struct{}
	sendMu  sync.RWMutex // Send holds it shared; Close exclusively, to end sending
	closed  bool         // guarded by sendMu
	stopRx  sync.Once
	closing sync.Once
	epErr   error
	rxWG    sync.WaitGroup
	txWG    sync.WaitGroup
	started bool
	// stopping is set by StopReceive before it closes the endpoint: a
	// close without it is the link's own doing (log.go).
	stopping atomic.Bool
	log      nicLog      // log.go
	filter   filterState // filter.go
	flush    flushState  // flush.go
	Stats    Stats
}

// NewNIC returns a NIC on ep named name, taking buffers from pool. Bind
// protocols, then Start it. On an endpoint with several queues
// (Multiqueue) it attaches them all.
func NewNIC(name string, ep link.Endpoint, pool *buffer.Pool) (*NIC, error) {
	hw := ep.MAC()
	if len(hw) != 6 {
		return nil, fmt.Errorf("nic %s: hardware address %v is not a 6-byte Ethernet address", name, hw)
	}
	n := &NIC{
		name:     name,
		ep:       ep,
		mac:      wire.MAC(hw),
		mtu:      ep.MTU(),
		pool:     pool,
		handlers: map[uint16]Handler{},
		done:     make(chan struct{}),
	}
	queues := 1
	if mq, ok := ep.(Multiqueue); ok {
		k, err := mq.AttachQueues()
		if err != nil {
			return nil, fmt.Errorf("nic %s: %w", name, err)
		}
		if k > 1 {
			n.mq, queues = mq, k
		}
	}
	n.tx = make([]chan *buffer.Packet, queues)
	for q := range n.tx {
		n.tx[q] = make(chan *buffer.Packet, txQueueLen)
	}
	return n, nil
}

// Queues returns how many queues the NIC reads and writes: the link's, or
// one.
func (n *NIC) Queues() int { return len(n.tx) }

// Name returns the NIC's name.
func (n *NIC) Name() string { return n.name }

// MAC returns the NIC's hardware address.
func (n *NIC) MAC() wire.MAC { return n.mac }

// MTU returns the largest IP datagram the link carries.
func (n *NIC) MTU() int { return n.mtu }

// HardwareAddr returns the MAC as a net.HardwareAddr.
func (n *NIC) HardwareAddr() net.HardwareAddr { return net.HardwareAddr(n.mac[:]) }

// Bind deals frames of etherType to h. It must be called before Start.
func (n *NIC) Bind(etherType uint16, h Handler) {
	if n.started {
		panic("ethernet: Bind after Start")
	}
	n.handlers[etherType] = h
}

// Start launches the receive and transmit goroutines, a pair per queue.
func (n *NIC) Start() {
	n.started = true
	n.rxWG.Add(len(n.tx))
	n.txWG.Add(len(n.tx))
	for q := range n.tx {
		go n.receive(q)
		go n.transmit(q)
	}
}

// Send queues an Ethernet frame carrying pkt to dst, prepending the header.
// The NIC takes ownership of pkt. It blocks while the transmit queue is
// full, and drops the packet once the NIC is closed. On a link with
// several queues the frame goes to its flow's (flowQueue), so that a
// flow's frames stay in order.
func (n *NIC) Send(dst wire.MAC, etherType uint16, pkt *buffer.Packet) {
	wire.EncodeEthernet(pkt.Prepend(wire.EthernetHeaderLen), &wire.EthernetFields{Dst: dst, Src: n.mac, Type: etherType})
	pkt.Offload.Prepended(wire.EthernetHeaderLen)
	tx := n.tx[0]
	if len(n.tx) > 1 {
		tx = n.tx[flowQueue(pkt.Head(), len(n.tx))]
	}
	n.sendMu.RLock()
	defer n.sendMu.RUnlock()
	if n.closed {
		n.Stats.TxDroppedClose.Inc()
		pkt.Release()
		return
	}
	select {
	case tx <- pkt:
		n.flush.queuedOne()
	case <-n.done:
		n.Stats.TxDroppedClose.Inc()
		pkt.Release()
	}
}

// receive is the NIC's receive dealer of link queue q: it reads a batch
// from the link, and deals it by EtherType. Link reading and Ethernet
// demultiplexing are fused into this one goroutine: the demultiplexing is
// a few comparisons per frame, far cheaper than the channel hop that
// separating them would cost (see ARCHITECTURE.md). The dealers of
// several queues deal to the same handlers, whose Deliver is safe for
// concurrent use.
func (n *NIC) receive(q int) {
	defer n.rxWG.Done()
	frame := n.ep.Capabilities().RxFrameSize(n.mtu)
	pkts := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range pkts {
		pkts[i] = n.pool.Get(frame)
	}
	defer func() {
		for _, p := range pkts {
			p.Release()
		}
	}()
	// Per-type batches being filled during one pass; there are few types.
	var out [4]rxSlot
	// run holds a UDP run's datagrams as it is cut apart (uso.go).
	run := make([]*buffer.Packet, 0, maxRunDatagrams)
	for {
		for _, p := range pkts {
			p.SetLen(frame)
		}
		cnt, err := n.read(q, pkts)
		if err != nil {
			if isClosed(err) {
				if q == 0 { // every queue's reader sees the close; one says so
					n.linkClosed(err)
				}
				return
			}
			n.readFailed(err)
			continue
		}
		for i := 0; i < cnt; i++ {
			p := pkts[i]
			n.Stats.RxFrames.Inc()
			n.Stats.RxBytes.Add(uint64(p.Len()))
			if p.Offload.GSOType != buffer.GSONone {
				n.Stats.RxGSO.Inc()
				if p.Offload.GSOType == buffer.GSOTCPv6 {
					n.Stats.RxGSO6.Inc()
				}
			}
			eth, ok := wire.ParseEthernet(p.Bytes())
			if !ok {
				n.Stats.RxTruncated.Inc()
				continue
			}
			if dst := eth.Dst(); dst != n.mac {
				if !dst.IsMulticast() {
					n.Stats.RxNotForUs.Inc()
					continue
				}
				if !n.takesMulticast(dst) {
					n.Stats.RxMulticastFiltered.Inc()
					continue
				}
			}
			typ := eth.Type()
			h := n.handlers[typ]
			if h == nil {
				n.Stats.RxUnknownType.Inc()
				continue
			}
			p.TrimFront(wire.EthernetHeaderLen)
			// Find or open the batch for this type.
			j := 0
			for ; j < len(out) && out[j].batch != nil && out[j].typ != typ; j++ {
			}
			if j == len(out) {
				n.Stats.RxUnknownType.Inc() // more types in one batch than slots: cannot happen with 3 types bound
				continue
			}
			if out[j].batch == nil {
				out[j].typ, out[j].h, out[j].batch = typ, h, buffer.GetBatch()
			}
			if p.Offload.GSOType == buffer.GSOUDPL4 {
				run = n.cutRun(p, run[:0])
				for _, d := range run {
					out[j].add(d)
				}
				clear(run)
				continue // p stays in the ring
			}
			if q := n.copyBreak(p, frame); q != nil {
				out[j].add(q)
				continue // p stays in the ring
			}
			out[j].add(p)
			// The handler owns p now: put a fresh buffer in its slot.
			pkts[i] = n.pool.Get(frame)
		}
		for j := range out {
			if out[j].batch == nil {
				break
			}
			out[j].h.Deliver(out[j].batch)
			out[j].batch = nil
		}
		for i := 0; i < cnt; i++ {
			pkts[i].Reset()
		}
	}
}

// rxSlot is the batch a receive pass fills for one EtherType's handler.
type rxSlot struct {
	typ   uint16
	h     Handler
	batch *buffer.Batch
}

// add appends p to the slot's batch, handing the batch to the handler
// first when it is full: a UDP run cut apart (uso.go) brings more
// packets than the frames read.
func (s *rxSlot) add(p *buffer.Packet) {
	if s.batch.Full() {
		s.h.Deliver(s.batch)
		s.batch = buffer.GetBatch()
	}
	s.batch.Pkts = append(s.batch.Pkts, p)
}

// transmit is the NIC's transmit dealer of link queue q: it takes the
// first queued frame, drains up to a batch of more without blocking, and
// writes them together. Once the endpoint is closed its writes fail at
// once, so the dealer keeps draining (and releasing) until Close: a sender
// never waits on a dead link.
func (n *NIC) transmit(q int) {
	defer n.txWG.Done()
	tx := n.tx[q]
	batch := make([]*buffer.Packet, 0, buffer.MaxBatch)
	for {
		select {
		case p := <-tx:
			batch = append(batch, p)
		case <-n.done:
			n.drainTx()
			return
		}
	fill:
		for len(batch) < buffer.MaxBatch {
			select {
			case p := <-tx:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		sent, err := n.write(q, batch)
		// Frames the endpoint refuses because StopReceive closed it are
		// the stack's own shutdown (a protocol's last words as it
		// closes), not a fault of the link.
		unsent := &n.Stats.TxLinkErrors
		if isClosed(err) {
			unsent = &n.Stats.TxDroppedClose
		}
		for i, p := range batch {
			if i < sent {
				n.Stats.TxFrames.Inc()
				n.Stats.TxBytes.Add(uint64(p.Len()))
				if p.Offload.GSOType != buffer.GSONone {
					n.Stats.TxGSO.Inc()
				}
			} else {
				unsent.Inc()
			}
			p.Release()
		}
		if sent < len(batch) && !isClosed(err) {
			n.writeFailed(err, len(batch)-sent)
		}
		n.flush.handledSome(len(batch))
		clear(batch)
		batch = batch[:0]
	}
}

// drainTx releases frames still queued at close, in every queue.
func (n *NIC) drainTx() {
	for _, tx := range n.tx {
	drain:
		for {
			select {
			case p := <-tx:
				n.Stats.TxDroppedClose.Inc()
				p.Release()
			default:
				break drain
			}
		}
	}
}

// StopReceive closes the endpoint and waits for the receive goroutine to
// exit, so that nothing more is dealt to the protocols. Frames sent from
// then on are dropped by the closed endpoint (TxDroppedClose). A stack shuts
// down in three steps: StopReceive on every NIC, then the protocols, then
// Close, so that neither a protocol nor the NIC is left holding a packet.
func (n *NIC) StopReceive() error {
	n.stopRx.Do(func() {
		n.stopping.Store(true)
		n.epErr = n.ep.Close()
		n.rxWG.Wait()
	})
	return n.epErr
}

// Close stops the NIC's goroutines, closes its endpoint, and drops what is
// still queued for transmission. Send after Close drops its packet.
func (n *NIC) Close() error {
	err := n.StopReceive()
	n.closing.Do(func() {
		close(n.done) // wakes senders blocked on a full queue
		n.sendMu.Lock()
		n.closed = true
		n.sendMu.Unlock()
		n.txWG.Wait()
		n.drainTx()
	})
	return err
}

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

// copyBreak copies a frame read into a large buffer into one of its size,
// and returns the copy, or nil when the frame is large enough to keep its
// buffer. A NIC whose link delivers super-segments (link.Capabilities.RxGSO)
// reads every frame into a 64 KiB buffer; handing a 66-byte ACK or a
// 1514-byte segment over in one would hold 64 KiB for as long as a socket
// queues it, up to a thousandfold what the memory budget counts. So a
// frame that fits a smaller size class is copied into one: a 1514-byte
// frame costs a copy of about 100 ns, far less than the read that brought
// it (Linux's drivers do the same below their "copybreak"). p's data
// starts after the Ethernet header.
func (n *NIC) copyBreak(p *buffer.Packet, frame int) *buffer.Packet {
	if buffer.SizeClass(p.Len()) >= buffer.SizeClass(frame) {
		return nil
	}
	q := n.pool.Get(p.Len())
	copy(q.Bytes(), p.Bytes())
	q.Offload = p.Offload
	n.Stats.RxCopied.Inc()
	return q
}
