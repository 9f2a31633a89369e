//go:build linux

// Package tap is a link endpoint on a Linux TAP device: the stack's frames
// go to the kernel as if they arrived on an Ethernet interface, and the
// kernel's frames for that interface come back to the stack.
//
// The device's file is non-blocking and registered with the Go runtime's
// poller (as wireguard-go does for TUN), so a ReadBatch waiting for traffic
// parks its goroutine rather than a thread, and Close wakes it. Once a frame
// is in, ReadBatch drains more with non-blocking reads until the kernel has
// none or the batch is full: one wake-up per batch, not per frame.
//
// The endpoint is the device's wire side: its MAC is the stack's own, not
// the kernel interface's, which keeps its own address (Documentation/
// networking/tuntap.rst).
//
// With Options.Queues above one the device is opened with IFF_MULTI_QUEUE:
// a descriptor per queue, each with its own queue of frames in the kernel,
// so that a reader and a writer per queue (ethernet.NIC's, one per core)
// move frames in parallel. The kernel steers the frames of a flow towards
// the endpoint to the queue that flow's frames were last written on
// (tun_flow_update, keyed by a symmetric hash of addresses and ports),
// else by that hash; so a writer that keeps each flow on one queue gets
// its replies on that queue too.
package tap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// DefaultMTU is the MTU of Options with none given: Ethernet's (RFC 894).
const DefaultMTU = 1500

// MaxMTU is the largest MTU Open accepts: the kernel's for a TAP device
// (drivers/net/tun.c: 65535, MAX_MTU, less the Ethernet header), 65521.
// Such a frame fits a packet's data (buffer.MaxSize), while the virtio-net
// header is read into and written from the packet's headroom in front of
// it. It covers slirp4netns's 65520.
const MaxMTU = 65535 - link.EthernetHeaderLen

// A compile-time check that a frame of MaxMTU fits a packet's data.
const _ = uint(buffer.MaxSize - (MaxMTU + link.EthernetHeaderLen))

// MinMTU is the smallest MTU Open accepts: the 68 bytes every IPv4 link
// must carry (RFC 791 section 3.2).
const MinMTU = 68

// VNetHdrLen is the length of struct virtio_net_hdr (virtio 1.1 section
// 5.1.6), which the kernel puts in front of every frame when Options.VNetHdr
// is set; Open sets it with TUNSETVNETHDRSZ so a device left by another
// program with a different size cannot confuse the framing.
const VNetHdrLen = 10

// DefaultTxQueueLen is the kernel's queue of frames towards the endpoint
// (the device's txqueuelen, per queue) that Open sets with none given.
// The kernel's own default is 1000 frames, which a burst overflows while
// the reader is busy: a thousand clients each sending a segment and an
// ACK at once, and the kernel drops the rest (the device's tx_dropped,
// read as TAP.<nic>.TxDropped), each drop a retransmission timeout for
// the sender. 16384 holds a burst of 5000 clients' requests and ACKs
// with room to spare; it costs the kernel an array of 16384 pointers per
// queue (128 KiB), and frames only while they wait.
const DefaultTxQueueLen = 16384

// MaxQueues is the most queues a device has: the kernel's MAX_TAP_QUEUES.
const MaxQueues = 256

// Options configure Open.
type Options struct {
	// MTU is the largest IP packet carried; 0 means DefaultMTU. Open sets
	// the kernel interface's MTU to it too, so both sides agree.
	MTU int
	// MAC is the stack's hardware address on the wire; nil means a random
	// locally administered unicast address.
	MAC net.HardwareAddr
	// VNetHdr opens the device with IFF_VNET_HDR: every frame carries a
	// virtio-net header, translated to and from buffer.Packet.Offload. The
	// kernel's offloads stay off (TUNSETOFFLOAD 0): it sends only complete
	// checksums and frames within the MTU.
	VNetHdr bool
	// Offload implies VNetHdr and turns the offloads on both ways. Frames
	// out may carry partial checksums and be TCP super-segments, which
	// the kernel finishes and cuts up (a frame written with a virtio-net
	// header is taken whatever TUNSETOFFLOAD says). Frames in may too:
	// TUNSETOFFLOAD with TUN_F_CSUM, TUN_F_TSO4 and TUN_F_TSO6 tells the kernel that
	// the reader takes them, so it leaves checksums partial and sends
	// super-segments of up to 64 KiB instead of cutting them to the MTU;
	// with TUN_F_USO4 and TUN_F_USO6 too (Linux 6.2, asked for where the
	// kernel knows them), its UDP runs whole (uso.go).
	// Capabilities then advertises TxChecksum, RxChecksum, TSO and RxGSO.
	// The setting outlives the descriptor on a persistent device: a
	// later reader without Offload would get such frames, so it opens
	// with TUNSETOFFLOAD 0 again.
	Offload bool
	// Queues is how many queues the device has each way, at most
	// MaxQueues; 0 means DefaultQueues(). With one the device is opened
	// as a plain TAP; with more, with IFF_MULTI_QUEUE, a descriptor per
	// queue, and all but the first detached until AttachQueues (so that a
	// reader of ReadBatch alone, as a wrapper, misses no frame). The
	// kernel refuses (EINVAL) to attach a multi-queue descriptor to a
	// persistent device made without IFF_MULTI_QUEUE, and the other way
	// round.
	Queues int
	// TxQueueLen is how many frames the kernel holds for each queue's
	// reader before it drops (txqueuelen); 0 means DefaultTxQueueLen.
	// Open sets it on the device, persistent or not.
	TxQueueLen int
	// Spin is the longest a queue's reader polls the device, yielding
	// the processor between looks, before it waits in the runtime's
	// poller; 0 means link.DefaultSpin, and a negative value never
	// polls. It polls that long while frames keep coming within it, and
	// less, down to not at all, while they come later (link.Spin).
	Spin time.Duration
}

// DefaultQueues is the number of queues of Options with none given: one,
// the plain device. ethernet.NIC runs a reader and a writer per queue;
// ARCHITECTURE.md says what more queues bought where they were measured.
func DefaultQueues() int { return 1 }

// Stats are the endpoint's counters.
type Stats struct {
	RxFrames stats.Counter // frames read from the kernel
	RxBytes  stats.Counter // bytes of those frames, virtio-net header excluded
	// RxErrors counts reads that failed or returned a frame too short to
	// hold its headers or too long for the MTU (the kernel interface's MTU
	// was raised behind the endpoint's back); the frame is skipped.
	RxErrors stats.Counter
	TxFrames stats.Counter // frames the kernel took
	TxBytes  stats.Counter // bytes of those frames, virtio-net header excluded
	// TxErrors counts frames refused and skipped, whatever the cause:
	// the counters after it tell the causes apart, and what is in
	// TxErrors and none of them is an error the kernel has no other
	// reason for.
	TxErrors stats.Counter
	// TxMalformed counts frames the endpoint refused before the kernel
	// saw them: shorter than an Ethernet header, or longer than
	// link.MaxFrame(MTU) without being a super-segment.
	TxMalformed stats.Counter
	// TxDown counts frames the kernel refused because its interface is
	// down (EIO), as a NIC without carrier drops.
	TxDown stats.Counter
	// TxInvalid counts frames the kernel refused as malformed (EINVAL:
	// a virtio-net header it cannot take).
	TxInvalid stats.Counter
	// TxNoBufs counts frames the kernel had no memory for (ENOBUFS,
	// ENOMEM) after txTries tries.
	TxNoBufs stats.Counter
	// TxRetries counts writes tried again after ENOBUFS or ENOMEM.
	TxRetries stats.Counter
	// SpinHits counts the reads that found the device empty, polled it
	// (Options.Spin) and found a frame before they had to wait in the
	// poller.
	SpinHits stats.Counter
	// TxWaits counts the times a write found the device not writable
	// (EAGAIN) and waited for it in the poller before trying again: the
	// frame is not lost.
	TxWaits stats.Counter

	// With Offload: frames read that were TCP super-segments or UDP runs
	// or had partial checksums, and frames written that were or had.
	RxGSO, RxCsumPartial stats.Counter
	TxGSO, TxCsumPartial stats.Counter
	// RxUSO counts the RxGSO that were UDP runs
	// (VIRTIO_NET_HDR_GSO_UDP_L4), which ethernet.NIC cuts into
	// datagrams.
	RxUSO stats.Counter
	// TxGathered counts frames written from loans as well as from their
	// own buffer (link.Capabilities.TxGather): TCP payload the frame did
	// not copy.
	TxGathered stats.Counter
	// TxUSO counts UDP datagrams written in runs, a run of a flow's
	// datagrams a frame with UDP segmentation offload (uso.go);
	// TxUSORefused the times the kernel refused such a frame, after
	// which every datagram is written alone.
	TxUSO, TxUSORefused stats.Counter

	// LinkUps and LinkDowns count the device's changes of state
	// (link.StateWatcher: its kernel side set up or down); StateLost
	// counts the times the kernel's messages of them were lost (the
	// state was then read outright) or could no longer be read.
	LinkUps, LinkDowns, StateLost stats.Counter
}

// Endpoint is a TAP device. It implements link.Endpoint.
type Endpoint struct {
	name    string
	mtu     int
	mac     net.HardwareAddr
	vnetHdr bool
	offload bool
	spin    time.Duration // Options.Spin, each queue's reader's limit
	// queues are the device's queues; the first is ReadBatch's and
	// WriteBatch's, the others are detached until AttachQueues.
	queues     []*queue
	attachOnce sync.Once
	attachErr  error
	stats      Stats
	state      *stateWatch // the device's state, from rtnetlink

	noUSO     atomic.Bool // the kernel refused a UDP segmentation offload frame (uso.go)
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// sysWrite is writev(2), which writes a frame's pieces (its head and
	// its loans, buffer.Packet.Slices) as one; a test puts a fake in its
	// place to see each outcome of a write counted.
	sysWrite func(fd int, pieces [][]byte) (int, error)
}

var _ link.Endpoint = (*Endpoint)(nil)

// queue is one of the device's queues: a descriptor of /dev/net/tun
// attached to it, registered with the runtime's poller, and the state of
// its reads and writes.
type queue struct {
	e      *Endpoint
	file   *os.File
	rc     syscall.RawConn
	rd, wr batchOp           // ReadBatch's and WriteBatch's state
	pieces [][]byte          // the frame being written, as writev(2) takes it
	usoHdr [usoHeadroom]byte // a run's headers (uso.go)
	// pollFn is readSome that never waits: poll's RawConn callback.
	pollFn func(fd uintptr) bool
	spin   *link.Spin // how long read polls now
}

// Open attaches to the TAP device called name, creating it (not persistent:
// it goes away when the endpoint closes) when it does not exist. A name
// with a pattern such as "gn%d" lets the kernel number the device; Name
// tells the result. The device is found or created in the network namespace
// of the calling thread (runtime.LockOSThread and setns choose another).
func Open(name string, opts Options) (*Endpoint, error) {
	e := &Endpoint{name: name, mtu: opts.MTU, vnetHdr: opts.VNetHdr || opts.Offload, offload: opts.Offload, spin: opts.Spin, sysWrite: unix.Writev}
	if e.spin == 0 {
		e.spin = link.DefaultSpin
	}
	if e.mtu == 0 {
		e.mtu = DefaultMTU
	}
	if e.mtu < MinMTU || e.mtu > MaxMTU {
		return nil, fmt.Errorf("tap %s: MTU %d outside %d..%d", name, e.mtu, MinMTU, MaxMTU)
	}
	queues := opts.Queues
	if queues == 0 {
		queues = DefaultQueues()
	}
	if queues < 1 || queues > MaxQueues {
		return nil, fmt.Errorf("tap %s: %d queues outside 1..%d", name, queues, MaxQueues)
	}
	qlen := opts.TxQueueLen
	if qlen == 0 {
		qlen = DefaultTxQueueLen
	}
	if qlen < 1 {
		return nil, fmt.Errorf("tap %s: transmit queue length %d below 1", name, qlen)
	}
	mac, err := link.HardwareAddr(opts.MAC)
	if err != nil {
		return nil, fmt.Errorf("tap %s: %w", name, err)
	}
	e.mac = mac

	for i := range queues {
		// The first TUNSETIFF names the device (a pattern such as "gn%d"
		// becomes gn0); the others attach to that name.
		q, err := e.openQueue(queues > 1)
		if err != nil {
			e.closeQueues()
			return nil, err
		}
		e.queues = append(e.queues, q)
		if i > 0 {
			// Detached until AttachQueues: the kernel steers nothing
			// to a queue no one reads yet.
			if err := q.setQueue(unix.IFF_DETACH_QUEUE); err != nil {
				e.closeQueues()
				return nil, err
			}
		}
	}
	if err := e.setKernelMTU(); err != nil {
		e.closeQueues()
		return nil, err
	}
	if err := e.setTxQueueLen(qlen); err != nil {
		e.closeQueues()
		return nil, err
	}
	if e.state, err = e.watchState(); err != nil {
		e.closeQueues()
		return nil, err
	}
	return e, nil
}

// openQueue opens a descriptor of /dev/net/tun and attaches it to the
// device as a queue, registered with the runtime's poller.
func (e *Endpoint) openQueue(multi bool) (*queue, error) {
	ifr, err := unix.NewIfreq(e.name)
	if err != nil {
		return nil, fmt.Errorf("tap %s: interface name: %w", e.name, err)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tap %s: open /dev/net/tun: %w", e.name, err)
	}
	if err := e.attach(fd, ifr, multi); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// With the descriptor non-blocking, os.NewFile registers it with the
	// runtime poller; RawConn.Read and Write then wait there on EAGAIN.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tap %s: set non-blocking: %w", e.name, err)
	}
	q := &queue{e: e, file: os.NewFile(uintptr(fd), "/dev/net/tun")}
	q.rd.fn, q.wr.fn, q.pollFn = q.readSome, q.writeSome, q.pollSome
	q.spin = link.NewSpin(e.spin)
	if q.rc, err = q.file.SyscallConn(); err != nil {
		q.file.Close()
		return nil, fmt.Errorf("tap %s: %w", e.name, err)
	}
	return q, nil
}

// closeQueues closes the descriptors opened so far, for an Open that
// fails.
func (e *Endpoint) closeQueues() {
	for _, q := range e.queues {
		q.file.Close()
	}
}

// attach binds fd to the device named in ifr with TUNSETIFF and configures
// framing.
func (e *Endpoint) attach(fd int, ifr *unix.Ifreq, multi bool) error {
	// IFF_NO_PI: no 4-byte packet-information prefix; frames start with
	// the Ethernet header (or the virtio-net header).
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if e.vnetHdr {
		flags |= unix.IFF_VNET_HDR
	}
	if multi {
		flags |= unix.IFF_MULTI_QUEUE
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("tap %s: TUNSETIFF: %w", e.name, err)
	}
	e.name = ifr.Name() // the kernel fills in a pattern such as "gn%d"

	if e.vnetHdr {
		if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, VNetHdrLen); err != nil {
			return fmt.Errorf("tap %s: TUNSETVNETHDRSZ: %w", e.name, err)
		}
		var offloads int
		if e.offload {
			offloads = unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6 | tunFUSO4 | tunFUSO6
		}
		err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offloads)
		if err == unix.EINVAL && offloads&tunFUSO4 != 0 {
			// A kernel before 6.2 knows no UDP segmentation offload
			// and refuses the request whole: ask again without it.
			err = unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offloads&^(tunFUSO4|tunFUSO6))
		}
		if err != nil {
			return fmt.Errorf("tap %s: TUNSETOFFLOAD: %w", e.name, err)
		}
	}
	return nil
}

// setQueue attaches (IFF_ATTACH_QUEUE) or detaches (IFF_DETACH_QUEUE) the
// queue with TUNSETQUEUE: a detached queue keeps its descriptor, but the
// kernel steers no frame to it and refuses its writes.
func (q *queue) setQueue(flag uint16) error {
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return fmt.Errorf("tap %s: TUNSETQUEUE: %w", q.e.name, err)
	}
	ifr.SetUint16(flag)
	var ioctlErr error
	if err := q.rc.Control(func(fd uintptr) { ioctlErr = unix.IoctlIfreq(int(fd), unix.TUNSETQUEUE, ifr) }); err != nil {
		return fmt.Errorf("tap %s: TUNSETQUEUE: %w", q.e.name, err)
	}
	if ioctlErr != nil {
		return fmt.Errorf("tap %s: TUNSETQUEUE %#x: %w", q.e.name, flag, ioctlErr)
	}
	return nil
}

// AttachQueues attaches the queues Open left detached and returns how
// many queues the device has (Options.Queues). A program that reads and
// writes every queue through ReadQueue and WriteQueue calls it first
// (ethernet.NIC does); until then the kernel sends every frame to the
// first queue, ReadBatch's, so that a reader that knows one queue (a pcap
// or fault wrapper around the endpoint) misses none. Later calls return
// the first's result.
func (e *Endpoint) AttachQueues() (int, error) {
	e.attachOnce.Do(func() {
		for _, q := range e.queues[1:] {
			if err := q.setQueue(unix.IFF_ATTACH_QUEUE); err != nil {
				e.attachErr = err
				return
			}
		}
	})
	if e.attachErr != nil {
		return 0, e.attachErr
	}
	return len(e.queues), nil
}

// setKernelMTU sets the interface's MTU with SIOCSIFMTU.
func (e *Endpoint) setKernelMTU() error {
	return e.ifIoctl(unix.SIOCSIFMTU, "SIOCSIFMTU", uint32(e.mtu))
}

// setTxQueueLen sets the interface's txqueuelen with SIOCSIFTXQLEN. The
// kernel sizes each queue's ring of frames towards the reader by it
// (tun_queue_resize), and drops what a full ring cannot take.
func (e *Endpoint) setTxQueueLen(n int) error {
	return e.ifIoctl(unix.SIOCSIFTXQLEN, "SIOCSIFTXQLEN", uint32(n))
}

// ifIoctl sets one of the interface's values (its MTU, its txqueuelen: the
// same field of struct ifreq) with an ioctl on a socket of the
// interface's namespace (netdevice(7)).
func (e *Endpoint) ifIoctl(req uint, name string, v uint32) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tap %s: socket for %s: %w", e.name, name, err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(e.name)
	if err != nil {
		return fmt.Errorf("tap %s: interface name: %w", e.name, err)
	}
	ifr.SetUint32(v)
	if err := unix.IoctlIfreq(s, req, ifr); err != nil {
		return fmt.Errorf("tap %s: %s %d: %w", e.name, name, v, err)
	}
	return nil
}

// ReadBatch blocks until the kernel sends a frame, then reads as many more
// as are waiting, up to len(pkts). Each packet needs room for
// Capabilities().RxFrameSize(MTU()) bytes and, with VNetHdr, VNetHdrLen bytes of
// headroom for the virtio-net header, which is read in front of the frame
// and decoded into Offload. It reads the first queue, the only one
// attached unless AttachQueues was called.
func (e *Endpoint) ReadBatch(pkts []*buffer.Packet) (int, error) {
	return e.queues[0].read(pkts)
}

// ReadQueue is ReadBatch on queue q, 0 <= q < AttachQueues(). Each queue
// has one reader at a time.
func (e *Endpoint) ReadQueue(q int, pkts []*buffer.Packet) (int, error) {
	return e.queues[q].read(pkts)
}

// read is ReadBatch on the queue.
func (q *queue) read(pkts []*buffer.Packet) (int, error) {
	e := q.e
	if err := e.checkRoom(pkts); err != nil {
		return 0, err
	}
	if len(pkts) == 0 {
		return 0, nil
	}
	r := &q.rd
	r.pkts, r.n, r.err = pkts, 0, nil
	var err error
	if q.spin.Budget() <= 0 {
		// Not polling now: read, or wait in the poller and read, as
		// one call, and learn from a wait whether to poll again.
		start := time.Now()
		r.waited = false
		err = q.rc.Read(r.fn)
		if r.waited {
			q.spin.Adapt(time.Since(start))
		}
	} else if err = q.rc.Read(q.pollFn); err == nil && r.n == 0 && r.err == nil {
		// The device is empty: poll it for a while, then wait.
		idle := time.Now()
		if err = q.poll(); err == nil && r.n == 0 && r.err == nil {
			err = q.rc.Read(r.fn)
		}
		q.spin.Adapt(time.Since(idle))
	}
	n, readErr := r.n, r.err
	r.pkts, r.err = nil, nil
	if n > 0 {
		// Frames read before an error are delivered; a lasting error
		// shows on the next call.
		return n, nil
	}
	if e.closed.Load() {
		return 0, link.ErrClosed
	}
	if err == nil {
		err = readErr
	}
	return 0, fmt.Errorf("tap %s: read: %w", e.name, err)
}

// batchOp is the state of one direction's ReadBatch or WriteBatch across
// the RawConn callback. It lives in the queue, with the callback bound
// to it once, because a closure capturing the call's variables would put
// them on the heap: three allocations per batch, which with super-segments
// were more than one per frame. Each direction of a queue has one caller
// at a time.
type batchOp struct {
	pkts []*buffer.Packet
	n    int
	err  error
	fn   func(fd uintptr) bool
	// waited is set when a read found the device empty and left the
	// poller to wait for it.
	waited bool
}

// readSome is read's RawConn callback: it reads frames into q.rd.pkts
// until they are full or the kernel has none; it reports whether the
// poller need not wait.
func (q *queue) readSome(fd uintptr) bool {
	r := &q.rd
	for r.n < len(r.pkts) {
		ok, err := q.e.readOne(int(fd), r.pkts[r.n])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			r.waited = r.waited || r.n == 0
			return r.n > 0 // wait in the poller only for the first frame
		case err != nil:
			r.err = err
			return true
		case ok:
			r.n++
		}
	}
	return true
}

// poll reads the empty device again and again for up to the queue's
// current spin, yielding the processor between looks, until a read finds
// frames or fails (link.Spin says why). Each look is a read(2) that finds
// nothing, under a microsecond, where a shared-memory ring's is a load.
func (q *queue) poll() error {
	spin := q.spin.Budget()
	if spin <= 0 {
		return nil
	}
	r := &q.rd
	for deadline := time.Now().Add(spin); time.Now().Before(deadline); {
		runtime.Gosched()
		if err := q.rc.Read(q.pollFn); err != nil || r.err != nil {
			return err
		}
		if r.n > 0 {
			q.e.stats.SpinHits.Inc()
			return nil
		}
	}
	return nil
}

// pollSome is readSome that never waits in the poller: the look poll
// takes, and read's first.
func (q *queue) pollSome(fd uintptr) bool {
	q.readSome(fd)
	return true
}

// readOne reads one frame into p; ok is false when the frame was unusable
// and skipped.
func (e *Endpoint) readOne(fd int, p *buffer.Packet) (ok bool, err error) {
	hdr := 0
	if e.vnetHdr {
		hdr = VNetHdrLen
	}
	// Read into all the packet's room, more than the MTU allows, so that a
	// frame too long for the MTU shows as such instead of being cut short
	// unnoticed.
	p.Prepend(hdr)
	p.SetLen(p.Cap())
	m, err := unix.Read(fd, p.Bytes())
	// Only a super-segment may exceed the MTU (RxGSO); one that fills the
	// whole buffer may have been cut short.
	long := m > hdr+link.MaxFrame(e.mtu) && (!e.offload || m >= len(p.Bytes()) || p.Bytes()[1] == buffer.GSONone)
	if err != nil || m < hdr+link.EthernetHeaderLen || long {
		p.TrimFront(hdr)
		p.SetLen(0)
		if err != unix.EAGAIN && err != unix.EINTR {
			e.stats.RxErrors.Inc() // a failed read, a runt or a frame over the MTU
		}
		return false, err
	}
	if e.vnetHdr {
		p.Offload = decodeVNetHdr(p.Bytes()[:VNetHdrLen])
		p.TrimFront(VNetHdrLen)
		switch p.Offload.GSOType {
		case buffer.GSONone:
		case buffer.GSOUDPL4:
			e.stats.RxGSO.Inc()
			e.stats.RxUSO.Inc()
		default:
			e.stats.RxGSO.Inc()
		}
		if p.Offload.Flags&buffer.NeedsCsum != 0 {
			e.stats.RxCsumPartial.Inc()
		}
	} else {
		p.Offload = buffer.Offload{}
	}
	p.SetLen(m - hdr)
	e.stats.RxFrames.Inc()
	e.stats.RxBytes.Add(uint64(m - hdr))
	return true, nil
}

// checkRoom reports a packet that cannot take a whole frame, before any is
// read, so that a caller's mistake loses no frame.
func (e *Endpoint) checkRoom(pkts []*buffer.Packet) error {
	size := e.Capabilities().RxFrameSize(e.mtu)
	for i, p := range pkts {
		if p.Cap() < size {
			return fmt.Errorf("tap %s: ReadBatch: packet %d has room for %d bytes, frames need %d", e.name, i, p.Cap(), size)
		}
		if e.vnetHdr && p.Headroom() < VNetHdrLen {
			return fmt.Errorf("tap %s: ReadBatch: packet %d has %d bytes of headroom, the virtio-net header needs %d", e.name, i, p.Headroom(), VNetHdrLen)
		}
	}
	return nil
}

// WriteBatch writes each frame to the kernel, through the first queue.
// With VNetHdr each frame's Offload is encoded into a virtio-net header in
// the packet's headroom for the duration of the write (the packet is as it
// was on return). A frame the kernel cannot take yet is not lost: on
// EAGAIN the write waits in the poller for the device to be writable
// (TxWaits), on ENOBUFS or ENOMEM it is tried again (TxRetries). Frames
// that are malformed or that the kernel refuses are counted in TxErrors
// and by cause, and skipped; they count among the frames taken.
func (e *Endpoint) WriteBatch(pkts []*buffer.Packet) (int, error) {
	return e.queues[0].write(pkts)
}

// WriteQueue is WriteBatch on queue q, 0 <= q < AttachQueues(). Each queue
// has one writer at a time. The kernel steers the frames towards the
// endpoint of each flow written here to this queue.
func (e *Endpoint) WriteQueue(q int, pkts []*buffer.Packet) (int, error) {
	return e.queues[q].write(pkts)
}

// write is WriteBatch on the queue.
func (q *queue) write(pkts []*buffer.Packet) (int, error) {
	e := q.e
	if e.closed.Load() {
		return 0, link.ErrClosed
	}
	w := &q.wr
	w.pkts, w.n, w.err = pkts, 0, nil
	err := q.rc.Write(w.fn)
	n, fatal := w.n, w.err
	w.pkts, w.err = nil, nil
	if err == nil {
		err = fatal
	}
	if err != nil && e.closed.Load() {
		return n, link.ErrClosed
	}
	if err != nil {
		return n, fmt.Errorf("tap %s: write: %w", e.name, err)
	}
	return n, nil
}

// txTries is how many times a frame is written while the kernel answers
// ENOBUFS or ENOMEM: a shortage of memory that may pass at once, and
// that a frame should not be lost to at its first sight.
const txTries = 3

// writeSome is write's RawConn callback: it writes q.wr.pkts from q.wr.n
// on; it reports false to wait for the device to be writable.
func (q *queue) writeSome(fd uintptr) bool {
	e, w := q.e, &q.wr
	tries := 0
	for w.n < len(w.pkts) {
		n := 1
		if e.offload && !e.noUSO.Load() {
			n = usoRun(w.pkts[w.n:])
		}
		var err error
		if n > 1 {
			if err = q.writeRun(int(fd), n); err == unix.EINVAL {
				continue // a frame each from now on
			}
		} else {
			err = q.writeOne(int(fd), w.pkts[w.n])
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			e.stats.TxWaits.Inc()
			return false // the kernel's queue is full: wait to be writable
		case err == unix.EBADFD:
			// The device is gone (tun_chr_write_iter with no tun):
			// every later frame would fail the same way.
			w.err = err
			return true
		case (err == unix.ENOBUFS || err == unix.ENOMEM) && tries+1 < txTries:
			tries++
			e.stats.TxRetries.Inc()
			continue
		case err != nil:
			for range n {
				e.countRefused(err)
			}
		}
		tries = 0
		w.n += n
	}
	return true
}

// countRefused counts a frame refused for err, in TxErrors and by cause.
func (e *Endpoint) countRefused(err error) {
	e.stats.TxErrors.Inc()
	switch err {
	case errMalformed:
		e.stats.TxMalformed.Inc()
	case unix.EIO:
		e.stats.TxDown.Inc()
	case unix.EINVAL:
		e.stats.TxInvalid.Inc()
	case unix.ENOBUFS, unix.ENOMEM:
		e.stats.TxNoBufs.Inc()
	}
}

// errMalformed marks a frame the endpoint refuses before the kernel sees it.
var errMalformed = errors.New("malformed frame")

// writeOne writes one frame, with its virtio-net header when VNetHdr is
// on, from its pieces: a packet with loans (TCP's payload, left in its
// send buffer) is gathered from where they are (link.Capabilities.TxGather).
func (q *queue) writeOne(fd int, p *buffer.Packet) error {
	e := q.e
	size := p.Len()
	// A GSO super-segment may exceed the MTU: the kernel segments it.
	gso := e.vnetHdr && p.Offload.GSOType != buffer.GSONone
	if size < link.EthernetHeaderLen || size > link.MaxFrame(e.mtu) && !gso {
		return errMalformed
	}
	if e.vnetHdr {
		if p.Headroom() < VNetHdrLen {
			return errMalformed
		}
		encodeVNetHdr(p.Prepend(VNetHdrLen), p.Offload)
		defer p.TrimFront(VNetHdrLen)
	}
	q.pieces = p.Slices(q.pieces[:0])
	_, err := e.sysWrite(fd, q.pieces)
	clear(q.pieces) // hold no loan past the write
	if err != nil {
		return err
	}
	e.stats.TxFrames.Inc()
	e.stats.TxBytes.Add(uint64(size))
	if gso {
		e.stats.TxGSO.Inc()
	}
	if e.vnetHdr && p.Offload.Flags&buffer.NeedsCsum != 0 {
		e.stats.TxCsumPartial.Inc()
	}
	if p.Borrowed() != 0 {
		e.stats.TxGathered.Inc()
	}
	return nil
}

// encodeVNetHdr writes o as a struct virtio_net_hdr. A legacy header like
// this one is in the host's byte order: the kernel's tun_is_little_endian
// falls back to virtio_legacy_is_little_endian unless TUNSETVNETLE is set.
func encodeVNetHdr(b []byte, o buffer.Offload) {
	b[0] = o.Flags
	b[1] = o.GSOType
	binary.NativeEndian.PutUint16(b[2:4], o.HdrLen)
	binary.NativeEndian.PutUint16(b[4:6], o.GSOSize)
	binary.NativeEndian.PutUint16(b[6:8], o.CsumStart)
	binary.NativeEndian.PutUint16(b[8:10], o.CsumOffset)
}

// decodeVNetHdr is the inverse of encodeVNetHdr.
func decodeVNetHdr(b []byte) buffer.Offload {
	return buffer.Offload{
		Flags:      b[0],
		GSOType:    b[1],
		HdrLen:     binary.NativeEndian.Uint16(b[2:4]),
		GSOSize:    binary.NativeEndian.Uint16(b[4:6]),
		CsumStart:  binary.NativeEndian.Uint16(b[6:8]),
		CsumOffset: binary.NativeEndian.Uint16(b[8:10]),
	}
}

// Name returns the kernel interface's name.
func (e *Endpoint) Name() string { return e.name }

// MTU returns the MTU, which the kernel interface has too.
func (e *Endpoint) MTU() int { return e.mtu }

// MAC returns the stack's hardware address on this link. The caller must
// not modify it.
func (e *Endpoint) MAC() net.HardwareAddr { return e.mac }

// Capabilities returns every offload with Options.Offload, else none:
// without it every frame carries full checksums and fits the MTU.
func (e *Endpoint) Capabilities() link.Capabilities {
	if !e.offload {
		return link.Capabilities{}
	}
	return link.Capabilities{TxChecksum: true, RxChecksum: true, TSO: true, RxGSO: true, TxGather: true}
}

// Stats returns the endpoint's live counters.
func (e *Endpoint) Stats() *Stats { return &e.stats }

// Close detaches every queue from the device (deleting it unless it is
// persistent) and wakes a blocked ReadBatch or ReadQueue, which returns
// link.ErrClosed. Later calls
// return the first call's result.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		e.state.close()
		for _, q := range e.queues {
			if err := q.file.Close(); err != nil && e.closeErr == nil {
				e.closeErr = fmt.Errorf("tap %s: close: %w", e.name, err)
			}
		}
	})
	return e.closeErr
}
