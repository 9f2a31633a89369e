package gateway

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/internal/gsorun"
)

// Guest to host, a UDP flow's datagrams go out in batches: what queued in
// the guest's endpoint while the relay was sending (udp.Connected's
// ReadDatagrams), each run of equal sizes as one send with UDP generic
// segmentation offload (the UDP_SEGMENT control message, Linux 4.18): the
// kernel's send path, which is most of a relayed datagram's cost, runs
// once per run and cuts the segments at the end of it, where one write(2)
// a datagram ran it for each. The payloads are not copied: the send's
// vectors point into the stack's buffers.

// maxGSOPayload is the most UDP payload one send may carry, all segments
// together: one IPv4 datagram's (65535 less its header and UDP's), which
// an IPv6 one exceeds.
const maxGSOPayload = 65535 - 20 - 8

// maxGSOSegments is the most datagrams one send carries. The kernel takes
// 64, but they then reach the receiver as one burst: a kernel socket with
// the default receive buffer (212992 bytes, some 90 datagrams of 1472
// bytes) dropped more of them, in the bench's gw-udp at 1 Gbit/s, than
// runs of 16 lost it; 16 keeps most of the saving of a send per run.
const maxGSOSegments = 16

// hostBatch sends batches of a flow's datagrams to its connected host
// socket. Its vectors and control message are the flow's, so that a send
// allocates nothing.
type hostBatch struct {
	rc    syscall.RawConn
	noGSO bool // the kernel refused a segmented send: one datagram a send from then on
	iov   [maxGSOSegments]unix.Iovec
	oob   [unix.SizeofCmsghdr + unsafe.Sizeof(uintptr(0))]byte // UDP_SEGMENT and its segment size, a uint16 in a word
	msg   unix.Msghdr

	// A batch's state while the poller waits out a full socket buffer.
	payloads [][]byte
	sent     int // datagrams of payloads sent
	segments int // of them, in segmented sends
	err      error
	write    func(fd uintptr) bool // send, bound once
}

func newHostBatch(rc syscall.RawConn) *hostBatch {
	b := &hostBatch{rc: rc}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b.oob[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	b.write = b.send
	return b
}

// sendAll sends payloads, in order, and returns how many it sent, how many
// of those in segmented sends, and the first error; on an error the rest
// are not sent.
func (b *hostBatch) sendAll(payloads [][]byte) (sent, segmented int, err error) {
	b.payloads, b.sent, b.segments, b.err = payloads, 0, 0, nil
	if werr := b.rc.Write(b.write); werr != nil && b.err == nil {
		b.err = werr // the socket was closed
	}
	b.payloads = nil
	return b.sent, b.segments, b.err
}

// send is the poller's write function: it sends what is left of the batch
// and reports false, to wait, when the socket's buffer is full.
func (b *hostBatch) send(fd uintptr) bool {
	for b.sent < len(b.payloads) {
		rest := b.payloads[b.sent:]
		n := b.run(rest)
		var err error
		if n > 1 {
			err = b.sendSegmented(int(fd), rest[:n])
			if err == syscall.EINVAL || err == syscall.EIO || err == syscall.ENOPROTOOPT {
				// A kernel or a path that takes no segmented send
				// (a segment larger than the route's MTU, say):
				// one datagram a send for this flow.
				b.noGSO = true
				continue
			}
		} else {
			n = 1
			err = writeFD(int(fd), rest[0])
		}
		switch err {
		case nil:
			b.sent += n
			if n > 1 {
				b.segments += n
			}
		case syscall.EAGAIN:
			return false
		default:
			b.err = err
			return true
		}
	}
	return true
}

// run is how many of payloads, from the first, one segmented send can
// carry (gsorun.Len), within maxGSOSegments and maxGSOPayload; 1 without
// GSO.
func (b *hostBatch) run(payloads [][]byte) int {
	if b.noGSO {
		return 1
	}
	return gsorun.Len(len(payloads), maxGSOSegments, maxGSOPayload, func(i int) (int, bool) { return len(payloads[i]), true })
}

// sendSegmented sends payloads, the first's size all but the last, as one
// sendmsg(2) with UDP_SEGMENT.
func (b *hostBatch) sendSegmented(fd int, payloads [][]byte) error {
	for i, p := range payloads {
		b.iov[i] = unix.Iovec{Base: unsafe.SliceData(p)}
		b.iov[i].SetLen(len(p))
	}
	binary.NativeEndian.PutUint16(b.oob[unix.CmsgLen(0):], uint16(len(payloads[0])))
	b.msg.Iov = &b.iov[0]
	b.msg.SetIovlen(len(payloads))
	b.msg.Control = &b.oob[0]
	b.msg.SetControllen(len(b.oob))
	var errno syscall.Errno
	for {
		_, _, errno = unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.msg)), 0)
		if errno != syscall.EINTR {
			break
		}
	}
	clear(b.iov[:len(payloads)]) // no reference to the stack's buffers once sent
	if errno != 0 {
		return errno
	}
	return nil
}

// writeFD writes one datagram to a non-blocking socket, retrying an
// interrupted write.
func writeFD(fd int, p []byte) error {
	for {
		_, err := syscall.Write(fd, p)
		if err != syscall.EINTR {
			return err
		}
	}
}
