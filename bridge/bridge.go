// Package bridge is a learning Ethernet switch: the transparent bridging of
// IEEE 802.1D-2004 (a MAC bridge without the spanning tree) between ports
// that are any link.Endpoint: TAP devices, stream sockets, pipes, shared-
// memory rings.
//
// Each port has a reader goroutine and a writer goroutine. The reader takes
// a batch of frames from its endpoint and runs the forwarding process
// (section 7.7, forward.go) and the learning process (7.8) on it against the
// filtering database (7.9, fdb.go), which all readers share under one lock,
// taken once per batch. It then hands each destination port its share of
// the batch through that port's bounded transmit queue, whose writer
// goroutine alone writes to the endpoint (7.7.4's queuing). A port whose
// queue is full drops what does not fit and counts it, so a slow port never
// stalls the others; a port whose endpoint fails is removed and logged, and
// the others carry on.
//
// Forwarding decisions are made in the readers rather than in one central
// dealer: a dealer would add a channel hop for every batch and put every
// port's decisions on one goroutine, hence one core, while readers decide
// in parallel and meet only at the table's lock, once per batch of up to
// buffer.MaxBatch frames. This follows the cost model the stack's own
// dealers were measured against (a channel operation per batch, not per
// frame); the bridge itself has not been benchmarked yet.
//
// Offloads: a frame may carry offload metadata (buffer.Packet.Offload) from
// an endpoint with RxChecksum or RxGSO. On the way out to a port that
// cannot take it the writer completes a partial checksum in software; a
// TCP super-segment or a UDP run it does not cut up but drops and counts
// (OffloadDropped), so a bridge whose ports mix such endpoints with others
// should open them without receive offloads, as gonet bridge opens its
// TAP devices.
package bridge

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// DefaultAgeingTime is how long a station's entry lasts without a frame
// from it: 802.1D-2004 table 7-5's recommended value.
const DefaultAgeingTime = 300 * time.Second

// DefaultTableSize bounds the filtering database: enough for a segment of
// thousands of stations, small enough that a flood of forged source
// addresses costs a few hundred kilobytes.
const DefaultTableSize = 4096

// DefaultQueueLen is how many frames a port's transmit queue holds: the
// order of a NIC's transmit ring.
const DefaultQueueLen = 1024

// Config configures New. The zero value is usable.
type Config struct {
	// AgeingTime is how long an entry lasts unrefreshed; 0 means
	// DefaultAgeingTime.
	AgeingTime time.Duration
	// TableSize bounds the filtering database; 0 means DefaultTableSize.
	TableSize int
	// QueueLen bounds each port's transmit queue, in frames; 0 means
	// DefaultQueueLen.
	QueueLen int
	// Clock times the entries; clock.Real{} when nil.
	Clock clock.Clock
	// Logger takes ports added, removed and failed; nothing per frame.
	// Discarded when nil.
	Logger *slog.Logger
}

// Stats are the bridge's own counters; each port has its own (PortStats).
type Stats struct {
	Learnt stats.Counter // entries created by the learning process
	Aged   stats.Counter // entries removed for age
	// Moved counts stations seen on a port other than the one their entry
	// named: the entry follows them.
	Moved stats.Counter
	// TableFull counts entries evicted, the oldest first, to make room in
	// a full table.
	TableFull stats.Counter
	Entries   stats.Gauge   // entries in the table now
	PortsLost stats.Counter // ports removed because their endpoint failed
}

// Bridge is a learning Ethernet bridge. Its methods may be called from any
// goroutine.
type Bridge struct {
	cfg   Config
	log   *slog.Logger
	pool  *buffer.Pool
	fdb   *fdb
	stats Stats

	mu     sync.Mutex // guards byName and closed, and serialises publishing ports
	byName map[string]*Port
	closed bool
	// ports is every port now, sorted by name, replaced (not changed) when
	// one comes or goes, so that readers flood without taking mu.
	ports atomic.Pointer[[]*Port]
	wg    sync.WaitGroup // every port's goroutines
}

// New returns a bridge without ports.
func New(cfg Config) *Bridge {
	if cfg.AgeingTime <= 0 {
		cfg.AgeingTime = DefaultAgeingTime
	}
	if cfg.TableSize <= 0 {
		cfg.TableSize = DefaultTableSize
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{cfg: cfg, log: log, pool: buffer.NewPool(), byName: make(map[string]*Port)}
	b.fdb = newFDB(cfg.TableSize, cfg.AgeingTime, &b.stats)
	b.ports.Store(&[]*Port{})
	return b
}

// ErrClosed is returned by AddPort after Close.
var ErrClosed = errors.New("bridge: closed")

// AddPort attaches ep to the bridge as port name and starts forwarding to
// and from it. The bridge owns ep from then on, and closes it when the
// port is removed; on error, ep is closed too.
func (b *Bridge) AddPort(name string, ep link.Endpoint) error {
	if name == "" {
		ep.Close()
		return errors.New("bridge: a port needs a name")
	}
	p := newPort(b, name, ep)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		ep.Close()
		return ErrClosed
	}
	if _, dup := b.byName[name]; dup {
		b.mu.Unlock()
		ep.Close()
		return fmt.Errorf("bridge: port %s exists", name)
	}
	b.byName[name] = p
	b.publishLocked()
	b.wg.Add(2)
	b.mu.Unlock()
	go p.readLoop()
	go p.writeLoop()
	b.log.Info("bridge: port added", "port", name, "mac", ep.MAC().String(), "mtu", ep.MTU())
	return nil
}

// publishLocked stores a fresh snapshot of the ports. The caller holds mu.
func (b *Bridge) publishLocked() {
	ps := make([]*Port, 0, len(b.byName))
	for _, p := range b.byName {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(x, y *Port) int { return strings.Compare(x.name, y.name) })
	b.ports.Store(&ps)
}

// RemovePort detaches port name, closes its endpoint and waits for its
// goroutines to end.
func (b *Bridge) RemovePort(name string) error {
	b.mu.Lock()
	p := b.byName[name]
	b.mu.Unlock()
	if p == nil {
		return fmt.Errorf("bridge: no port %s", name)
	}
	b.detach(p, nil)
	<-p.stopped
	return nil
}

// detach takes p out of the bridge, once: it no longer receives frames,
// its stations are forgotten, its queue is emptied and its endpoint
// closed, which ends its goroutines. cause is the endpoint's failure, nil
// for a removal asked for.
func (b *Bridge) detach(p *Port, cause error) {
	b.mu.Lock()
	if b.byName[p.name] != p {
		b.mu.Unlock()
		return
	}
	delete(b.byName, p.name)
	b.publishLocked()
	b.mu.Unlock()
	if cause != nil {
		b.stats.PortsLost.Inc()
		b.log.Warn("bridge: port failed; removed", "port", p.name, "err", cause)
	} else {
		b.log.Info("bridge: port removed", "port", p.name)
	}
	p.shutdown()
	b.fdb.flush(p)
}

// Port returns port name, or nil when there is none.
func (b *Bridge) Port(name string) *Port {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byName[name]
}

// Ports returns the ports, sorted by name.
func (b *Bridge) Ports() []*Port { return slices.Clone(*b.ports.Load()) }

// Table returns the filtering database's entries, aged first, the most
// recently seen first.
func (b *Bridge) Table() []Station { return b.fdb.table(b.cfg.Clock.Now()) }

// Stats returns the bridge's live counters.
func (b *Bridge) Stats() *Stats { return &b.stats }

// Close removes every port, closing their endpoints, and waits for their
// goroutines. AddPort fails from then on.
func (b *Bridge) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	for _, p := range b.Ports() {
		b.detach(p, nil)
	}
	b.wg.Wait()
	return nil
}
