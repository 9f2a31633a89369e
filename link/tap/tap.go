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
package tap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

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
	// super-segments of up to 64 KiB instead of cutting them to the MTU.
	// Capabilities then advertises TxChecksum, RxChecksum, TSO and RxGSO.
	// The setting outlives the descriptor on a persistent device: a
	// later reader without Offload would get such frames, so it opens
	// with TUNSETOFFLOAD 0 again.
	Offload bool
}

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
	// TxErrors counts frames refused, by the endpoint as malformed (shorter
	// than an Ethernet header, longer than link.MaxFrame(MTU)) or by the
	// kernel; each is skipped.
	TxErrors stats.Counter

	// With Offload: frames read that were TCP super-segments or had
	// partial checksums, and frames written that were or had.
	RxGSO, RxCsumPartial stats.Counter
	TxGSO, TxCsumPartial stats.Counter
}

// Endpoint is a TAP device. It implements link.Endpoint.
type Endpoint struct {
	name    string
	mtu     int
	mac     net.HardwareAddr
	vnetHdr bool
	offload bool
	file    *os.File
	rc      syscall.RawConn
	stats   Stats
	rd, wr  batchOp // ReadBatch's and WriteBatch's state

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var _ link.Endpoint = (*Endpoint)(nil)

// Open attaches to the TAP device called name, creating it (not persistent:
// it goes away when the endpoint closes) when it does not exist. A name
// with a pattern such as "gn%d" lets the kernel number the device; Name
// tells the result. The device is found or created in the network namespace
// of the calling thread (runtime.LockOSThread and setns choose another).
func Open(name string, opts Options) (*Endpoint, error) {
	e := &Endpoint{name: name, mtu: opts.MTU, vnetHdr: opts.VNetHdr || opts.Offload, offload: opts.Offload}
	e.rd.fn, e.wr.fn = e.readSome, e.writeSome
	if e.mtu == 0 {
		e.mtu = DefaultMTU
	}
	if e.mtu < MinMTU || e.mtu > MaxMTU {
		return nil, fmt.Errorf("tap %s: MTU %d outside %d..%d", name, e.mtu, MinMTU, MaxMTU)
	}
	mac, err := link.HardwareAddr(opts.MAC)
	if err != nil {
		return nil, fmt.Errorf("tap %s: %w", name, err)
	}
	e.mac = mac

	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return nil, fmt.Errorf("tap %s: interface name: %w", name, err)
	}

	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tap %s: open /dev/net/tun: %w", name, err)
	}
	if err := e.attach(fd, ifr); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// With the descriptor non-blocking, os.NewFile registers it with the
	// runtime poller; RawConn.Read and Write then wait there on EAGAIN.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tap %s: set non-blocking: %w", e.name, err)
	}
	e.file = os.NewFile(uintptr(fd), "/dev/net/tun")
	if e.rc, err = e.file.SyscallConn(); err != nil {
		e.file.Close()
		return nil, fmt.Errorf("tap %s: %w", e.name, err)
	}
	return e, nil
}

// attach binds fd to the device named in ifr with TUNSETIFF and configures
// framing and MTU.
func (e *Endpoint) attach(fd int, ifr *unix.Ifreq) error {
	// IFF_NO_PI: no 4-byte packet-information prefix; frames start with
	// the Ethernet header (or the virtio-net header).
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if e.vnetHdr {
		flags |= unix.IFF_VNET_HDR
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
			offloads = unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6
		}
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offloads); err != nil {
			return fmt.Errorf("tap %s: TUNSETOFFLOAD: %w", e.name, err)
		}
	}
	return e.setKernelMTU()
}

// setKernelMTU sets the interface's MTU with SIOCSIFMTU, an ioctl on any
// socket of the interface's namespace (netdevice(7)).
func (e *Endpoint) setKernelMTU() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tap %s: socket for SIOCSIFMTU: %w", e.name, err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(e.name)
	if err != nil {
		return fmt.Errorf("tap %s: interface name: %w", e.name, err)
	}
	ifr.SetUint32(uint32(e.mtu))
	if err := unix.IoctlIfreq(s, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("tap %s: SIOCSIFMTU %d: %w", e.name, e.mtu, err)
	}
	return nil
}

// ReadBatch blocks until the kernel sends a frame, then reads as many more
// as are waiting, up to len(pkts). Each packet needs room for
// Capabilities().RxFrameSize(MTU()) bytes and, with VNetHdr, VNetHdrLen bytes of
// headroom for the virtio-net header, which is read in front of the frame
// and decoded into Offload.
func (e *Endpoint) ReadBatch(pkts []*buffer.Packet) (int, error) {
	if err := e.checkRoom(pkts); err != nil {
		return 0, err
	}
	if len(pkts) == 0 {
		return 0, nil
	}
	r := &e.rd
	r.pkts, r.n, r.err = pkts, 0, nil
	err := e.rc.Read(r.fn)
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
// the RawConn callback. It lives in the endpoint, with the callback bound
// to it once, because a closure capturing the call's variables would put
// them on the heap: three allocations per batch, which with super-segments
// were more than one per frame. Each direction has one caller at a time.
type batchOp struct {
	pkts []*buffer.Packet
	n    int
	err  error
	fn   func(fd uintptr) bool
}

// readSome is ReadBatch's RawConn callback: it reads frames into e.rd.pkts
// until they are full or the kernel has none; it reports whether the
// poller need not wait.
func (e *Endpoint) readSome(fd uintptr) bool {
	r := &e.rd
	for r.n < len(r.pkts) {
		ok, err := e.readOne(int(fd), r.pkts[r.n])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
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
		if p.Offload.GSOType != buffer.GSONone {
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

// WriteBatch writes each frame to the kernel. With VNetHdr each frame's
// Offload is encoded into a virtio-net header in the packet's headroom for
// the duration of the write (the packet is as it was on return). Frames that
// are malformed or that the kernel refuses are counted in TxErrors and
// skipped.
func (e *Endpoint) WriteBatch(pkts []*buffer.Packet) (int, error) {
	if e.closed.Load() {
		return 0, link.ErrClosed
	}
	w := &e.wr
	w.pkts, w.n, w.err = pkts, 0, nil
	err := e.rc.Write(w.fn)
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

// writeSome is WriteBatch's RawConn callback: it writes e.wr.pkts from
// e.wr.n on; it reports false to wait for the device to be writable.
func (e *Endpoint) writeSome(fd uintptr) bool {
	w := &e.wr
	for w.n < len(w.pkts) {
		err := e.writeOne(int(fd), w.pkts[w.n])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false // the kernel's queue is full: wait to be writable
		case err == unix.EBADFD:
			// The device is gone (tun_chr_write_iter with no tun):
			// every later frame would fail the same way.
			w.err = err
			return true
		case err != nil:
			e.stats.TxErrors.Inc()
		}
		w.n++
	}
	return true
}

// errMalformed marks a frame the endpoint refuses before the kernel sees it.
var errMalformed = errors.New("malformed frame")

// writeOne writes one frame, with its virtio-net header when VNetHdr is on.
func (e *Endpoint) writeOne(fd int, p *buffer.Packet) error {
	size := p.Len()
	// A GSO super-segment may exceed the MTU: the kernel segments it.
	gso := e.vnetHdr && p.Offload.GSOType != buffer.GSONone
	if size < link.EthernetHeaderLen || size > link.MaxFrame(e.mtu) && !gso {
		return errMalformed
	}
	b := p.Bytes()
	if e.vnetHdr {
		if p.Headroom() < VNetHdrLen {
			return errMalformed
		}
		encodeVNetHdr(p.Prepend(VNetHdrLen), p.Offload)
		b = p.Bytes()
		p.TrimFront(VNetHdrLen)
	}
	if _, err := unix.Write(fd, b); err != nil {
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
	return link.Capabilities{TxChecksum: true, RxChecksum: true, TSO: true, RxGSO: true}
}

// Stats returns the endpoint's live counters.
func (e *Endpoint) Stats() *Stats { return &e.stats }

// Close detaches from the device (deleting it unless it is persistent) and
// wakes a blocked ReadBatch, which returns link.ErrClosed. Later calls
// return the first call's result.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		if err := e.file.Close(); err != nil {
			e.closeErr = fmt.Errorf("tap %s: close: %w", e.name, err)
		}
	})
	return e.closeErr
}
