package bridge

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// PortStats are a port's counters. Rx counts what the port received from
// its endpoint, Tx what the bridge wrote to it.
type PortStats struct {
	RxFrames stats.Counter
	RxBytes  stats.Counter
	TxFrames stats.Counter // frames the endpoint took
	TxBytes  stats.Counter
	// Flooded counts frames received and sent to every other port: to a
	// group address, or to a station not in the table.
	Flooded stats.Counter
	// Filtered counts frames received for a station learnt on this same
	// port, which has had them already (802.1D-2004 section 7.7.2).
	Filtered stats.Counter
	// Reserved counts frames received for 01-80-C2-00-00-0X, which a
	// bridge does not relay (7.12.6).
	Reserved stats.Counter
	// BadSource counts frames received with a group source address, which
	// no station sends (IEEE 802-2014 section 8.2.2); dropped, as Linux's
	// bridge does.
	BadSource stats.Counter
	// Runts counts frames received shorter than an Ethernet header.
	Runts stats.Counter
	// QueueFull counts frames for this port dropped because its transmit
	// queue was full: the port's endpoint is slower than what comes in.
	QueueFull stats.Counter
	// Leaving counts frames for this port dropped because it was leaving
	// the bridge: queued, or on their way, when it failed or was removed.
	Leaving stats.Counter
	// TooBig counts frames for this port longer than its MTU allows.
	TooBig stats.Counter
	// OffloadDropped counts frames for this port carrying a TCP super-
	// segment it cannot cut up, or a partial checksum whose place lies
	// outside the frame.
	OffloadDropped stats.Counter
	// CsumCompleted counts partial checksums the bridge completed for a
	// port without checksum offload.
	CsumCompleted stats.Counter
	Queued        stats.Gauge // frames in the transmit queue now
}

// Port is one of a bridge's ports.
type Port struct {
	name     string
	ep       link.Endpoint
	caps     link.Capabilities
	maxFrame int
	b        *Bridge
	stats    PortStats

	// txq carries batches to the writer; QueueLen frames at most wait in
	// it (stats.Queued), so a send never blocks. qmu orders sends with
	// qclosed, after which none is made.
	txq     chan *buffer.Batch
	qmu     sync.Mutex
	qclosed bool

	leaving  chan struct{} // closed when the port starts leaving the bridge
	stopped  chan struct{} // closed when it has left: its goroutines ended
	running  atomic.Int32  // its goroutines still running
	downOnce sync.Once

	// The reader's scratch, reused for every batch.
	decisions []decision
	outs      map[*Port]*buffer.Batch
}

func newPort(b *Bridge, name string, ep link.Endpoint) *Port {
	p := &Port{
		name:      name,
		ep:        ep,
		caps:      ep.Capabilities(),
		maxFrame:  link.MaxFrame(ep.MTU()),
		b:         b,
		txq:       make(chan *buffer.Batch, b.cfg.QueueLen),
		leaving:   make(chan struct{}),
		stopped:   make(chan struct{}),
		decisions: make([]decision, buffer.MaxBatch),
		outs:      make(map[*Port]*buffer.Batch),
	}
	p.running.Store(2)
	return p
}

// Name returns the port's name.
func (p *Port) Name() string { return p.name }

// MAC returns the hardware address of the port's endpoint.
func (p *Port) MAC() net.HardwareAddr { return p.ep.MAC() }

// Endpoint returns the port's endpoint.
func (p *Port) Endpoint() link.Endpoint { return p.ep }

// Stats returns the port's live counters.
func (p *Port) Stats() *PortStats { return &p.stats }

// Done is closed when the port has left the bridge, removed or failed: its
// goroutines have ended and its stations are forgotten.
func (p *Port) Done() <-chan struct{} { return p.stopped }

// shutdown stops the port: no frame is queued for it from now on, and its
// endpoint is closed, which wakes its reader; its writer empties the
// queue.
func (p *Port) shutdown() {
	p.downOnce.Do(func() {
		p.qmu.Lock()
		p.qclosed = true
		p.qmu.Unlock()
		close(p.leaving)
		p.ep.Close()
	})
}

// exit marks one of the port's goroutines ended. After the last, the
// stations its reader may have learnt as the port was leaving are
// forgotten too.
func (p *Port) exit() {
	if p.running.Add(-1) == 0 {
		p.b.fdb.flush(p)
		close(p.stopped)
	}
	p.b.wg.Done()
}

// failed reports err from the endpoint: unless the port is leaving
// anyway, the endpoint has failed and the port goes.
func (p *Port) failed(err error) {
	select {
	case <-p.leaving:
	default:
		p.b.detach(p, err)
	}
}

// readLoop reads batches from the endpoint and forwards them until it
// fails or the port leaves.
func (p *Port) readLoop() {
	defer p.exit()
	size := p.caps.RxFrameSize(p.ep.MTU())
	rx := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range rx {
		rx[i] = p.b.pool.Get(size)
	}
	defer func() {
		for _, pk := range rx {
			pk.Release()
		}
	}()
	for {
		n, err := p.ep.ReadBatch(rx)
		if err != nil {
			p.failed(err)
			return
		}
		p.forward(rx[:n])
		// forward took the frames it passed on; their slots get new
		// packets, the dropped ones are read into again.
		for i := range n {
			if rx[i] == nil {
				rx[i] = p.b.pool.Get(size)
			}
		}
	}
}

// enqueue hands batch to the port's writer, or drops what does not fit
// its queue, counted. The batch is the port's from then on.
func (p *Port) enqueue(batch *buffer.Batch) {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if p.qclosed {
		p.stats.Leaving.Add(uint64(len(batch.Pkts)))
		batch.Release()
		return
	}
	room := int64(p.b.cfg.QueueLen) - p.stats.Queued.Load()
	if over := int64(len(batch.Pkts)) - room; over > 0 {
		keep := max(room, 0)
		for _, pk := range batch.Pkts[keep:] {
			pk.Release()
		}
		clear(batch.Pkts[keep:])
		batch.Pkts = batch.Pkts[:keep]
		p.stats.QueueFull.Add(uint64(over))
	}
	if len(batch.Pkts) == 0 {
		batch.Put()
		return
	}
	p.stats.Queued.Add(int64(len(batch.Pkts)))
	p.txq <- batch // never blocks: each batch queued holds a frame counted in Queued
}

// writeLoop writes the queued batches to the endpoint until it fails or
// the port leaves.
func (p *Port) writeLoop() {
	defer p.exit()
	for {
		select {
		case batch := <-p.txq:
			err := p.write(batch)
			if err != nil {
				p.failed(err)
				p.drain()
				return
			}
		case <-p.leaving:
			p.drain()
			return
		}
	}
}

// drain releases what is left in the queue once no more comes.
func (p *Port) drain() {
	<-p.leaving
	for {
		select {
		case batch := <-p.txq:
			p.stats.Queued.Add(-int64(len(batch.Pkts)))
			p.stats.Leaving.Add(uint64(len(batch.Pkts)))
			batch.Release()
		default:
			return
		}
	}
}

// write sends batch's frames, fitted to the endpoint, and releases it.
func (p *Port) write(batch *buffer.Batch) error {
	queued := len(batch.Pkts)
	defer func() {
		p.stats.Queued.Add(-int64(queued))
		batch.Release()
	}()
	pkts := batch.Pkts[:0]
	for _, pk := range batch.Pkts {
		if p.fit(pk) {
			pkts = append(pkts, pk)
		} else {
			pk.Release()
		}
	}
	clear(batch.Pkts[len(pkts):])
	batch.Pkts = pkts
	if len(pkts) == 0 {
		return nil
	}
	n, err := p.ep.WriteBatch(pkts)
	var bytes int
	for _, pk := range pkts[:n] {
		bytes += pk.Len()
	}
	p.stats.TxFrames.Add(uint64(n))
	p.stats.TxBytes.Add(uint64(bytes))
	return err
}
