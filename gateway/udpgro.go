package gateway

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"github.com/gonetstack/gonet/stats"
	"golang.org/x/sys/unix"
)

// Host to guest, a flow's host socket is read with recvmmsg(2): what
// queued on it while the relay's goroutine waited for a CPU comes in one
// system call, up to maxHostReads datagrams, where a read(2) each cost a
// sixth of the gateway's CPU in the bench's internet→guest UDP.
//
// Each datagram read needs a buffer it cannot be cut in (a datagram may
// be 65507 bytes), so a read offers relay buffers one to a slot, and
// only as many as the flow's last reads found waiting: a read that fills
// every slot offers twice as many next time, one that fills fewer than
// half offers half. A flow that sends a datagram now and then reads into
// one buffer, as a read(2) would, and a flow holds none between reads.
// While the gateway's relays hold batchBuffersCap buffers, reads offer
// one: the slots are memory on demand, bounded for the whole gateway.
//
// Each slot may also bring a run of datagrams whole (UDP_GRO, Linux 5.0):
// a sender's own segmentation offload (a QUIC server's UDP_SEGMENT on
// this machine, across a veth or the loopback), or the receive offload of
// a NIC that gathers a flow's datagrams, reaches the relay as one slot of
// up to 64 KiB with the size of its segments in a control message, where
// the kernel would otherwise cut it apart at the socket. The relay writes
// the datagrams to the guest one after another, so that they leave
// through the TAP as a run again (link/tap/uso.go). A kernel that knows
// no UDP_GRO refuses the option, and every slot is one datagram.

// maxHostReads bounds the slots, and so the datagrams or runs, of a read.
const maxHostReads = 16

// batchBuffersCap bounds the relay buffers (16 MiB) past which a read
// offers one slot, so that many busy flows do not each hold
// maxHostReads of them.
const batchBuffersCap = 256

// hostReads reads a flow's host socket. Its headers, vectors and control
// buffers are the flow's, so that a read allocates nothing.
type hostReads struct {
	held  *stats.Gauge // the gateway's relay buffers lent
	offer int          // the slots the next read offers, 1 to maxHostReads
	hdrs  [maxHostReads]unix.Mmsghdr
	iovs  [maxHostReads]unix.Iovec
	oobs  [maxHostReads][unix.SizeofCmsghdr + 8]byte // UDP_GRO's segment size, an int
	bufs  [maxHostReads]*[relayBufferSize]byte
	got   [maxHostReads]hostSlot
}

// hostSlot is what one slot of a read brought: one datagram, or a run of
// them, each of size bytes but the last (size 0 for one datagram).
type hostSlot struct {
	b    []byte
	size int
	cut  bool // a run longer than the buffer, its whole segments kept
}

func newHostReads(held *stats.Gauge) *hostReads { return &hostReads{held: held, offer: 1} }

// enableGRO asks the kernel to hand the socket runs whole, and reports
// whether it took the option.
func enableGRO(rc syscall.RawConn) bool {
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1)
	}); cerr != nil {
		return false
	}
	return err == nil
}

// read reads what the socket has queued, up to the slots it offers, and
// returns what each slot brought; the slots' buffers are lent until
// release. It borrows no buffer when it fails (EAGAIN included).
func (r *hostReads) read(fd int) ([]hostSlot, error) {
	k := r.offer
	if k > 1 && r.held.Load() >= batchBuffersCap {
		k = 1
	}
	for i := range k {
		r.bufs[i] = borrowBuffer(r.held)
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(relayBufferSize)
		h := &r.hdrs[i].Hdr
		h.Iov, h.Iovlen = &r.iovs[i], 1
		h.Control = &r.oobs[i][0]
		h.SetControllen(len(r.oobs[i]))
		h.Flags = 0
	}
	m, err := r.recvmmsg(fd, k)
	for i := m; i < k; i++ {
		r.giveBack(i)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case m == k:
		r.offer = min(2*k, maxHostReads)
	case 2*m < k:
		r.offer = max(k/2, 1)
	}
	for i := range m {
		n := int(r.hdrs[i].Len)
		size := segmentSize(r.oobs[i][:], int(r.hdrs[i].Hdr.Controllen), n)
		cut := r.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 && size > 0
		if cut {
			// A run longer than the buffer (a NIC's GRO beyond 64
			// KiB, where an administrator raised gro_max_size): the
			// segments that fit whole are kept, the one cut short is
			// not.
			n -= n % size
		}
		r.got[i] = hostSlot{b: r.bufs[i][:n], size: size, cut: cut}
	}
	return r.got[:m], nil
}

// recvmmsg reads into the first k slots and returns how many it filled.
func (r *hostReads) recvmmsg(fd, k int) (int, error) {
	for {
		m, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&r.hdrs[0])), uintptr(k), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(m), nil
	}
}

// release gives back the buffers of the slots the last read filled.
func (r *hostReads) release(slots []hostSlot) {
	for i := range slots {
		r.giveBack(i)
		r.got[i] = hostSlot{}
	}
}

// giveBack returns slot i's buffer, and lets go of it in the slot's
// vector too, so that the flow holds no buffer between reads.
func (r *hostReads) giveBack(i int) {
	returnBuffer(r.held, r.bufs[i])
	r.bufs[i], r.iovs[i].Base = nil, nil
}

// segmentSize returns a slot's run's segment size from its UDP_GRO control
// message (oob, of which the kernel wrote controllen bytes), 0 when there
// is none or it does not describe the slot's n bytes.
func segmentSize(oob []byte, controllen, n int) int {
	if controllen < unix.CmsgLen(4) || len(oob) < unix.CmsgLen(4) {
		return 0
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	if h.Level != unix.SOL_UDP || h.Type != unix.UDP_GRO || int(h.Len) < unix.CmsgLen(4) {
		return 0
	}
	size := int(int32(binary.NativeEndian.Uint32(oob[unix.CmsgLen(0):])))
	if size <= 0 || size >= n {
		return 0
	}
	return size
}
