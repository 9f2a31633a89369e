package ethernet_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/wire"
)

// multiqueue is a link with several queues each way, in memory: the test
// puts frames on a queue's receive side and reads what the NIC wrote on
// each queue.
type multiqueue struct {
	mac      net.HardwareAddr
	rx       []chan []byte
	mu       sync.Mutex
	tx       [][][]byte // frames written, per queue
	attached bool
	closed   chan struct{}
	once     sync.Once
}

var _ ethernet.Multiqueue = (*multiqueue)(nil)

func newMultiqueue(queues int) *multiqueue {
	m := &multiqueue{mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}, tx: make([][][]byte, queues), closed: make(chan struct{})}
	for range queues {
		m.rx = append(m.rx, make(chan []byte, 64))
	}
	return m
}

func (m *multiqueue) AttachQueues() (int, error) { m.attached = true; return len(m.rx), nil }

func (m *multiqueue) ReadQueue(q int, pkts []*buffer.Packet) (int, error) {
	select {
	case f := <-m.rx[q]:
		pkts[0].SetLen(len(f))
		copy(pkts[0].Bytes(), f)
		return 1, nil
	case <-m.closed:
		return 0, link.ErrClosed
	}
}

func (m *multiqueue) WriteQueue(q int, pkts []*buffer.Packet) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range pkts {
		m.tx[q] = append(m.tx[q], append([]byte(nil), p.Bytes()...))
	}
	return len(pkts), nil
}

func (m *multiqueue) ReadBatch(pkts []*buffer.Packet) (int, error)  { return m.ReadQueue(0, pkts) }
func (m *multiqueue) WriteBatch(pkts []*buffer.Packet) (int, error) { return m.WriteQueue(0, pkts) }
func (m *multiqueue) MTU() int                                      { return 1500 }
func (m *multiqueue) MAC() net.HardwareAddr                         { return m.mac }
func (m *multiqueue) Capabilities() link.Capabilities               { return link.Capabilities{} }
func (m *multiqueue) Close() error                                  { m.once.Do(func() { close(m.closed) }); return nil }

// collector is a protocol that keeps what it is dealt, from any queue's
// goroutine.
type collector struct {
	mu     sync.Mutex
	frames int
	got    chan struct{}
}

func (c *collector) Deliver(b *buffer.Batch) {
	c.mu.Lock()
	c.frames += len(b.Pkts)
	c.mu.Unlock()
	b.Release()
	c.got <- struct{}{}
}

// The host's and its peer's addresses in the frames sent.
var host, peer = netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.1")

// On a link with several queues the NIC reads every queue, and sends each
// flow's frames through one queue, in the order sent, spreading flows
// over all of them.
func TestNICUsesEveryQueue(t *testing.T) {
	const queues, flows, perFlow = 2, 16, 8
	m := newMultiqueue(queues)
	pool := buffer.NewPool()
	n, err := ethernet.NewNIC("mq0", m, pool)
	if err != nil {
		t.Fatal(err)
	}
	if !m.attached || n.Queues() != queues {
		t.Fatalf("NIC has %d queues (attached: %v), want %d", n.Queues(), m.attached, queues)
	}
	c := &collector{got: make(chan struct{}, 2*queues)}
	n.Bind(wire.EtherTypeIPv4, c)
	n.Start()

	// In: a frame on each queue reaches the protocol.
	for q := range queues {
		f := make([]byte, wire.EthernetHeaderLen+wire.IPv4MinHeaderLen)
		wire.EncodeEthernet(f, &wire.EthernetFields{Dst: wire.MAC(m.mac), Src: wire.MAC{2, 0, 0, 0, 0, 2}, Type: wire.EtherTypeIPv4})
		m.rx[q] <- f
	}
	for q := range queues {
		select {
		case <-c.got:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of the %d frames in reached the protocol", q, queues)
		}
	}

	// Out: perFlow datagrams of each flow, interleaved.
	for seq := range uint32(perFlow) {
		for port := range uint16(flows) {
			p := pool.Get(wire.IPv4MinHeaderLen + wire.UDPHeaderLen + 4)
			b := p.Bytes()
			wire.EncodeIPv4(b, &wire.IPv4Fields{TotalLen: len(b), TTL: 64, Protocol: wire.ProtoUDP,
				Src: host, Dst: peer})
			wire.EncodeUDP(b[wire.IPv4MinHeaderLen:], &wire.UDPFields{SrcPort: 9, DstPort: 40000 + port})
			binary.BigEndian.PutUint32(b[wire.IPv4MinHeaderLen+wire.UDPHeaderLen:], seq)
			n.Send(wire.MAC{2, 0, 0, 0, 0, 2}, wire.EtherTypeIPv4, p)
		}
	}
	// Close drops what is still queued: the frames leave first, which
	// on a loaded machine took longer than Close took to come.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	n.Close()

	queueOf := map[uint16]int{}
	next := map[uint16]uint32{}
	for q, frames := range m.tx {
		if len(frames) == 0 {
			t.Errorf("queue %d sent nothing of %d flows", q, flows)
		}
		for _, f := range frames {
			ip := f[wire.EthernetHeaderLen:]
			port := binary.BigEndian.Uint16(ip[wire.IPv4MinHeaderLen+2:])
			seq := binary.BigEndian.Uint32(ip[wire.IPv4MinHeaderLen+wire.UDPHeaderLen:])
			if first, seen := queueOf[port]; seen && first != q {
				t.Errorf("flow to port %d went out on queues %d and %d", port, first, q)
			}
			queueOf[port] = q
			if seq != next[port] {
				t.Errorf("flow to port %d: datagram %d sent after %d", port, seq, next[port])
			}
			next[port] = seq + 1
		}
	}
	for port := range uint16(flows) {
		if got := next[40000+port]; got != perFlow {
			t.Errorf("flow to port %d: %d of %d datagrams sent", 40000+port, got, perFlow)
		}
	}
	if got := pool.Outstanding(); got != 0 {
		t.Errorf("%d packets outstanding after Close", got)
	}
}
