package ethernet

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/wire"
)

// Several queues: a link with more than one queue each way (a TAP device
// with IFF_MULTI_QUEUE, tap.Options.Queues) gets a receive and a transmit
// goroutine per queue, so that reading and writing the link, where the
// kernel does its part of every frame's work in the caller's thread, run
// on as many cores as there are queues. The receive goroutines deal to
// the same protocol dealers. Frames out are spread by flow: each flow's
// frames go through one queue, in the order sent, and the kernel, which
// remembers the queue a flow's frames were last written on, sends the
// flow's frames in on the same queue (drivers/net/tun.c, automatic flow
// steering), so that a flow's segments reach its connection in order too.

// Multiqueue is a link endpoint with several queues each way. Its
// ReadBatch and WriteBatch are queue 0's.
type Multiqueue interface {
	// AttachQueues readies every queue and returns how many there are.
	// Before it only queue 0 carries frames, so that a reader of
	// ReadBatch alone misses none.
	AttachQueues() (int, error)
	// ReadQueue is ReadBatch on queue q; each queue has one reader at a
	// time.
	ReadQueue(q int, pkts []*buffer.Packet) (int, error)
	// WriteQueue is WriteBatch on queue q; each queue has one writer at a
	// time.
	WriteQueue(q int, pkts []*buffer.Packet) (int, error)
}

// read reads a batch from link queue q.
func (n *NIC) read(q int, pkts []*buffer.Packet) (int, error) {
	if n.mq == nil {
		return n.ep.ReadBatch(pkts)
	}
	return n.mq.ReadQueue(q, pkts)
}

// write writes a batch to link queue q.
func (n *NIC) write(q int, pkts []*buffer.Packet) (int, error) {
	if n.mq == nil {
		return n.ep.WriteBatch(pkts)
	}
	return n.mq.WriteQueue(q, pkts)
}

// flowSeed keys the flow hash, per process, as the kernel keys its own.
var flowSeed = maphash.MakeSeed()

// flowQueue returns the queue, of queues, for an Ethernet frame: by a hash
// of its flow, the source and destination addresses and protocol, and the
// ports of TCP and UDP. A fragment of IPv4 has no ports to read: a
// fragmented datagram hashes by its addresses and protocol alone, so that
// its fragments stay together. A frame of no IP flow (ARP) takes queue 0.
// The hash need not match the kernel's: the kernel learns each flow's
// queue from the frames written on it.
func flowQueue(frame []byte, queues int) int {
	eth, ok := wire.ParseEthernet(frame)
	if !ok {
		return 0
	}
	var (
		key   [2*16 + 1 + 4]byte // addresses, protocol, ports
		addrs []byte
		proto uint8
		l4    []byte
	)
	switch eth.Type() {
	case wire.EtherTypeIPv4:
		h := wire.IPv4(eth.Payload())
		if len(h) < wire.IPv4MinHeaderLen || len(h) < h.HeaderLen() {
			return 0
		}
		src, dst := h.Src().As4(), h.Dst().As4()
		addrs = append(append(key[:0], src[:]...), dst[:]...)
		proto = h.Protocol()
		if !h.IsFragment() {
			l4 = h[h.HeaderLen():]
		}
	case wire.EtherTypeIPv6:
		h := wire.IPv6(eth.Payload())
		if len(h) < wire.IPv6HeaderLen {
			return 0
		}
		src, dst := h.Src().As16(), h.Dst().As16()
		addrs = append(append(key[:0], src[:]...), dst[:]...)
		// A datagram with extension headers hashes by the first of
		// them: the same for every datagram of a flow that has them.
		proto = h.NextHeader()
		l4 = h[wire.IPv6HeaderLen:]
	default:
		return 0
	}
	var sport, dport uint16
	if len(l4) >= 4 { // both ports, which TCP and UDP carry first
		switch proto {
		case wire.ProtoTCP:
			sport, dport = wire.TCP(l4).SrcPort(), wire.TCP(l4).DstPort()
		case wire.ProtoUDP:
			sport, dport = wire.UDP(l4).SrcPort(), wire.UDP(l4).DstPort()
		}
	}
	k := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(append(addrs, proto), sport), dport)
	return int(maphash.Bytes(flowSeed, k) % uint64(queues))
}
