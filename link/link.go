// Package link defines how GoNet reaches a wire: an Endpoint moves batches of
// Ethernet frames in and out. Implementations are siblings of this package:
// tap (a Linux TAP device), stream (a VM's stream socket, QEMU's framing),
// shm (two processes over shared-memory rings), pipe (two stacks in one
// process), and the
// wrappers fault (loss, duplication, reordering, corruption, delay) and pcap
// (a capture file of every frame in and out).
package link

import (
	"crypto/rand"
	"fmt"
	"net"

	"github.com/gonetstack/gonet/buffer"
)

// Endpoint is one network interface's wire.
//
// ReadBatch and WriteBatch may be called concurrently with each other, but
// each by one goroutine at a time: the stack has one reader and one writer
// per endpoint.
type Endpoint interface {
	// ReadBatch blocks until at least one frame has arrived, then fills
	// pkts[0:n] with as many queued frames as fit, without blocking again.
	// The caller provides the packets, each with room for MaxFrame()
	// bytes; ReadBatch sets their length and offload metadata. After Close
	// it returns ErrClosed.
	ReadBatch(pkts []*buffer.Packet) (n int, err error)

	// WriteBatch sends the frames in pkts, each a whole Ethernet frame with
	// its offload metadata. The caller keeps ownership: the endpoint copies
	// or writes before it returns. It returns how many frames were taken;
	// a frame the device refuses is counted and skipped, not retried.
	WriteBatch(pkts []*buffer.Packet) (n int, err error)

	// MTU is the largest IP packet the link carries, Ethernet header
	// excluded.
	MTU() int

	// MAC is the endpoint's hardware address.
	MAC() net.HardwareAddr

	// Capabilities tells which offloads the endpoint does.
	Capabilities() Capabilities

	// Close stops the endpoint and wakes a blocked ReadBatch.
	Close() error
}

// StateWatcher is an Endpoint whose link can go down and come back up while
// it is open, as a cable is pulled out and plugged in again: a TAP device
// whose kernel side is set down and up. A host that comes back to a link
// may find another network there, and what it sent while the link was down
// went nowhere, so the layers above look again when it comes up: router
// solicitations (RFC 4861 section 6.3.7), duplicate address detection (RFC
// 4862 section 5.4), mDNS's probes (RFC 6762 section 8.1).
type StateWatcher interface {
	// Up reports whether the link is up now.
	Up() bool
	// WatchState has f called with the link's state at each change
	// after it returns, in order, from a goroutine of the endpoint's,
	// until Close. f must not block.
	WatchState(f func(up bool))
}

// IsUp reports whether ep's link is up: always, for an endpoint that
// cannot tell (no StateWatcher).
func IsUp(ep Endpoint) bool {
	w, ok := ep.(StateWatcher)
	return !ok || w.Up()
}

// WatchState has f told of the changes of ep's state, if ep tells them
// (StateWatcher); for a wrapper, which passes its inner endpoint's on.
func WatchState(ep Endpoint, f func(up bool)) {
	if w, ok := ep.(StateWatcher); ok {
		w.WatchState(f)
	}
}

// Capabilities are the offloads an endpoint performs for the stack. With
// none set, every frame carries complete checksums and is at most
// MaxFrame(MTU) long.
type Capabilities struct {
	// TxChecksum: frames out may carry partial checksums (Offload.NeedsCsum).
	TxChecksum bool
	// RxChecksum: frames in may carry partial or pre-validated checksums.
	RxChecksum bool
	// TSO: frames out may be TCP super-segments (Offload.GSOType), which
	// the endpoint or the device behind it cuts into segments of
	// Offload.GSOSize; they need TxChecksum too.
	TSO bool
	// RxGSO: frames in may be TCP super-segments or UDP runs
	// (buffer.GSOUDPL4, which ethernet.NIC cuts into datagrams) of up to
	// MaxGSOFrame bytes, longer than the MTU (the kernel's TSO or UDP GSO
	// towards a TAP device, or its GRO): a reader gives ReadBatch packets
	// of RxFrameSize.
	RxGSO bool
	// TxGather: frames out may end in loans (buffer.Packet.Borrow), which
	// the endpoint writes from where they are, with the frame's head, in
	// one write; TCP then lends its payload instead of copying it into the
	// frame. It goes with TxChecksum: a checksum in software would read
	// the payload and so copy it.
	TxGather bool
}

// MaxGSOFrame is the longest frame an endpoint with RxGSO reads: the
// largest packet buffer. The kernel keeps its TSO frames below 64 KiB
// (gso_max_size, less the room tcp_tso_autosize leaves for headers).
const MaxGSOFrame = buffer.MaxSize

// RxFrameSize is the room each packet given to ReadBatch needs on an
// endpoint with these capabilities and MTU.
func (c Capabilities) RxFrameSize(mtu int) int {
	if c.RxGSO {
		return MaxGSOFrame
	}
	return MaxFrame(mtu)
}

// EthernetHeaderLen is the length of an untagged Ethernet II header.
const EthernetHeaderLen = 14

// MaxFrame returns the largest frame an endpoint with this MTU carries.
func MaxFrame(mtu int) int { return mtu + EthernetHeaderLen }

// ErrClosed is returned by an endpoint's methods after Close. It wraps
// net.ErrClosed, so errors.Is(err, net.ErrClosed) holds.
var ErrClosed = fmt.Errorf("link: %w", net.ErrClosed)

// HardwareAddr returns the hardware address an endpoint takes from its
// options: mac, checked to be a unicast Ethernet address, or when mac is
// nil a random unicast one with the locally administered bit set (IEEE
// 802-2014 section 8.2.2), so that it cannot clash with a vendor's.
func HardwareAddr(mac net.HardwareAddr) (net.HardwareAddr, error) {
	if mac == nil {
		mac = make(net.HardwareAddr, 6)
		if _, err := rand.Read(mac); err != nil {
			return nil, fmt.Errorf("random MAC: %w", err)
		}
		mac[0] = mac[0]&^0x01 | 0x02
		return mac, nil
	}
	if len(mac) != 6 || mac[0]&1 != 0 {
		return nil, fmt.Errorf("MAC %v is not a unicast Ethernet address", mac)
	}
	return append(net.HardwareAddr(nil), mac...), nil
}
