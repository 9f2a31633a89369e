package gateway

import (
	"encoding/binary"
	"errors"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Host to guest, a flow's host socket takes the kernel's UDP runs whole
// (UDP_GRO, Linux 5.0): a sender's own segmentation offload (a QUIC
// server's UDP_SEGMENT on this machine, across a veth or the loopback),
// or the receive offload of a NIC that gathers a flow's datagrams, reaches
// the relay as one read of up to 64 KiB with the size of its segments in
// a control message, where the kernel would otherwise cut it apart at the
// socket and the relay read each datagram with a system call of its own.
// The relay writes the datagrams to the guest one after another, so that
// they leave through the TAP as a run again (link/tap/uso.go). A kernel
// that knows no UDP_GRO refuses the option, and every read is one
// datagram, as before.

// hostRead reads a flow's host socket with recvmsg(2) and its UDP_GRO
// control message. Its header, vector and control buffer are the flow's,
// so that a read allocates nothing.
type hostRead struct {
	msg unix.Msghdr
	iov unix.Iovec
	oob [unix.SizeofCmsghdr + 8]byte // UDP_GRO's segment size, an int
}

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

// read reads into b what the socket has next: one datagram, or a run of
// them, each of size bytes but the last (size 0 for one datagram).
func (r *hostRead) read(fd int, b []byte) (n, size int, err error) {
	r.iov.Base = &b[0]
	r.iov.SetLen(len(b))
	r.msg.Iov, r.msg.Iovlen = &r.iov, 1
	r.msg.Control = &r.oob[0]
	r.msg.SetControllen(len(r.oob))
	for {
		m, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&r.msg)), 0)
		if errno == unix.EINTR {
			continue
		}
		r.iov.Base = nil // hold no buffer past the read
		if errno != 0 {
			return 0, 0, errno
		}
		n, size = int(m), r.segmentSize(int(m))
		if r.msg.Flags&unix.MSG_TRUNC != 0 && size > 0 {
			// A run longer than b (a NIC's GRO beyond 64 KiB, where
			// an administrator raised gro_max_size): the segments that
			// fit whole are kept, the one cut short is not.
			n -= n % size
			err = errRunCut
		}
		return n, size, err
	}
}

// errRunCut reports a run longer than the read's buffer, whose tail was
// lost; the whole segments before it were read.
var errRunCut = errors.New("gateway: a UDP run longer than the relay's buffer was cut")

// segmentSize returns the run's segment size from the UDP_GRO control
// message, 0 when there is none or it does not describe n bytes.
func (r *hostRead) segmentSize(n int) int {
	if int(r.msg.Controllen) < unix.CmsgLen(4) {
		return 0
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&r.oob[0]))
	if h.Level != unix.SOL_UDP || h.Type != unix.UDP_GRO || int(h.Len) < unix.CmsgLen(4) {
		return 0
	}
	size := int(int32(binary.NativeEndian.Uint32(r.oob[unix.CmsgLen(0):])))
	if size <= 0 || size >= n {
		return 0
	}
	return size
}
