package gateway

import (
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/tcp"
)

// Relaying a terminated TCP flow: the guest's connection ends in GoNet's
// TCP, the host's in the kernel's, and a goroutine per direction carries
// the bytes between them (the CSP way: each direction a process, joined
// only by the two sockets). What one side says about its end is said to the
// other: a FIN becomes CloseWrite, a reset becomes a reset.
//
// Each byte is copied once, and neither direction holds a buffer while the
// flow is idle. Guest to host, io.Copy runs the guest connection's WriteTo,
// which hands the host socket the received segments' bytes where they lie.
// Host to guest, the goroutine waits for the host socket to become
// readable through the runtime's poller (syscall.RawConn) and reads it
// with readv(2) straight into GoNet's send buffer (tcp.Conn.Fill), which
// gives back the space a read that found nothing did not use. Both
// directions are bounded by the sockets' own buffers: a side that does not
// read stops the other from writing (backpressure), and nothing queues in
// between.

// relayBufferSize is the most one host read takes: a TSO super-segment's
// worth, so that a bulk flow costs one read per 64 KiB, and more than the
// largest UDP datagram (relayBuffers are the UDP relay's).
const relayBufferSize = 64 << 10

var relayBuffers = sync.Pool{New: func() any { return new([relayBufferSize]byte) }}

// RelayStats counts what the relays did, summed over flows.
type RelayStats struct {
	TCPFlows        stats.Counter // flows relayed
	TCPActive       stats.Gauge   // flows being relayed now
	BytesToHost     stats.Counter // guest to host
	BytesToGuest    stats.Counter // host to guest
	FinsToHost      stats.Counter // the guest's FIN carried as CloseWrite
	FinsToGuest     stats.Counter // the host's FIN carried as CloseWrite
	ResetsFromGuest stats.Counter // the guest reset (or stopped reading): the host side is reset
	ResetsFromHost  stats.Counter // the host reset (or stopped reading): the guest side is reset
	BuffersHeld     stats.Gauge   // relay buffers lent now, to UDP flows: none for idle flows (TCP reads into GoNet's send buffer)
}

// hostSocket is the host's side of a relayed flow: a *net.TCPConn that an
// inbound forward accepted, or a hostTCP that the gateway connected
// (dial.go).
type hostSocket interface {
	Write(b []byte) (int, error)
	SyscallConn() (syscall.RawConn, error)
	CloseWrite() error
	SetLinger(sec int) error
	Close() error
}

// relayTCP carries one flow between guest and host until both directions
// have ended, then closes both sockets. It returns when the flow is over.
// rec, which the caller may list (Gateway.Flows), counts the flow's bytes.
// The host's socket has keepalive on (the caller's to set): the guest's
// connection keeps none of its own (the guest has one if it wants one),
// and a host peer that vanished must be noticed so that its flow's
// resources are let go.
func relayTCP(guest *tcp.Conn, host hostSocket, st *RelayStats, rec *flowRecord) {
	st.TCPFlows.Inc()
	st.TCPActive.Add(1)
	defer st.TCPActive.Add(-1)
	f := &tcpFlow{guest: guest, host: host, st: st, rec: rec}
	// The caller's goroutine carries the direction of the side that
	// opened the flow, which usually speaks first (a client's request),
	// so that its first bytes leave without waiting for a new goroutine
	// to be scheduled; the new one carries the answer.
	first, second := f.guestToHost, f.hostToGuest
	if rec.info.Inbound {
		first, second = second, first
	}
	done := make(chan struct{})
	go func() {
		second()
		close(done)
	}()
	first()
	<-done
	guest.Close()
	host.Close()
}

// tcpFlow is a relayed flow's two sockets, and the resets said once.
type tcpFlow struct {
	guest *tcp.Conn
	host  hostSocket
	st    *RelayStats
	rec   *flowRecord
	reset sync.Once
}

// guestToHost carries the guest's bytes to the host until the guest's FIN,
// then the FIN; or a reset either way.
func (f *tcpFlow) guestToHost() {
	w := &hostWriter{f: f}
	_, err := f.guest.WriteTo(w)
	switch {
	case w.err != nil:
		// The host peer reset, or went away: so does the guest's.
		f.resetGuest()
	case err != nil:
		f.resetHost()
	default:
		f.st.FinsToHost.Inc()
		if f.host.CloseWrite() != nil {
			f.resetGuest()
		}
	}
}

// hostWriter is the host socket as guestToHost's writer: it counts what
// it wrote, and keeps the write error apart from the guest's own.
type hostWriter struct {
	f   *tcpFlow
	err error
}

func (w *hostWriter) Write(b []byte) (int, error) {
	n, err := w.f.host.Write(b)
	w.f.st.BytesToHost.Add(uint64(n))
	w.f.rec.carriedToHost(uint64(n))
	if err != nil {
		w.err = err
	}
	return n, err
}

// hostToGuest carries the host's bytes to the guest until the host's FIN,
// then the FIN; or a reset either way.
func (f *tcpFlow) hostToGuest() {
	rc, err := f.host.SyscallConn()
	if err != nil {
		f.resetGuest()
		return
	}
	// One read function for the flow: the host socket is an interface
	// (hostSocket), so what the function captures goes to the heap, once
	// here rather than at every read.
	var (
		n          int
		rerr, werr error
		iov        [maxFillSpace]unix.Iovec
		fd         int
	)
	readv := func(space [][]byte) int {
		n, rerr = readvFD(fd, iov[:], space)
		return n
	}
	read := func(sfd uintptr) bool {
		// Straight into GoNet's send buffer (tcp.Conn.Fill), which
		// gives back what a read that found nothing did not use.
		fd = int(sfd)
		_, werr = f.guest.Fill(relayBufferSize, readv)
		return werr != nil || rerr != syscall.EAGAIN // else the poller waits
	}
	for {
		n, rerr, werr = 0, nil, nil
		err := rc.Read(read)
		switch {
		case err != nil:
			// The host socket was closed: the other direction reset
			// the flow and has said so to both sides.
			return
		case werr != nil:
			f.resetHost()
			return
		case rerr != nil:
			f.resetGuest()
			return
		case n == 0:
			f.st.FinsToGuest.Inc()
			if f.guest.CloseWrite() != nil {
				f.resetHost()
			}
			return
		}
		f.st.BytesToGuest.Add(uint64(n))
		f.rec.carriedToGuest(uint64(n))
	}
}

// maxFillSpace is the most slices tcp.Conn.Fill hands a reader (64 KiB of
// its 16 KiB chunks and a partly filled one's tail).
const maxFillSpace = 5

// readvFD reads from a non-blocking socket into space with readv(2), its
// vectors built in iov, retrying an interrupted read.
func readvFD(fd int, iov []unix.Iovec, space [][]byte) (int, error) {
	iov = iov[:0]
	for _, b := range space[:min(len(space), cap(iov))] {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
	}
	if len(iov) == 0 {
		return 0, syscall.EINVAL
	}
	for {
		n, _, errno := unix.Syscall(unix.SYS_READV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, errno
	}
}

func (f *tcpFlow) getBuffer() *[relayBufferSize]byte { return borrowBuffer(&f.st.BuffersHeld) }

func (f *tcpFlow) putBuffer(b *[relayBufferSize]byte) { returnBuffer(&f.st.BuffersHeld, b) }

// borrowBuffer takes a relay buffer from the pool, counting it in held.
func borrowBuffer(held *stats.Gauge) *[relayBufferSize]byte {
	held.Add(1)
	return relayBuffers.Get().(*[relayBufferSize]byte)
}

// returnBuffer gives a relay buffer back to the pool.
func returnBuffer(held *stats.Gauge, b *[relayBufferSize]byte) {
	relayBuffers.Put(b)
	held.Add(-1)
}

// resetGuest resets the guest's connection, because the host's end reset
// or failed; closing the host socket too ends the other direction.
func (f *tcpFlow) resetGuest() {
	f.reset.Do(func() {
		f.st.ResetsFromHost.Inc()
		f.guest.SetLinger(0)
		f.guest.Close()
		f.host.SetLinger(0)
		f.host.Close()
	})
}

// resetHost resets the host's connection, because the guest's end reset
// or failed; closing the guest's too ends the other direction.
func (f *tcpFlow) resetHost() {
	f.reset.Do(func() {
		f.st.ResetsFromGuest.Inc()
		f.host.SetLinger(0)
		f.host.Close()
		f.guest.SetLinger(0)
		f.guest.Close()
	})
}
