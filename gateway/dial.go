package gateway

import (
	"context"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The host's side of a guest's connection is connected here rather than by
// net.Dialer, because a relayed connection is the gateway's unit of work
// and the Dialer's costs are paid for each: it parses the address from a
// string, and for a context that can end it starts a goroutine to watch it
// and joins it with two channels, then parks the caller in the poller even
// when the connect has already completed. A connect to a peer on this
// machine (a container's host, a namespace over a veth) has: the kernel
// sends the SYN and takes the SYN-ACK within the connect(2) call. So
// dialHost makes the socket non-blocking with the options it needs,
// connects, and looks (poll(2), no wait) whether the connect is over; only
// if not does it wait in the runtime's poller, bounded by ctx.

// aLongTimeAgo is a deadline in the past: set on a socket, it ends a wait
// in the poller at once.
var aLongTimeAgo = time.Unix(1, 0)

// hostTCP is a host socket that dialHost connected: what the relay needs of
// it (hostSocket), over an *os.File so that reads and writes wait in the
// runtime's poller as a net.TCPConn's do.
type hostTCP struct {
	f      *os.File
	rc     syscall.RawConn
	remote netip.AddrPort
}

// dialHost connects a TCP socket to dst on the host, with TCP_NODELAY (as
// net.Dialer does: the relay forwards what the guest's segments carried,
// and waiting to coalesce would add the guest's round trip to each) and
// SO_KEEPALIVE (relayTCP's reason). It fails with the connect's errno, or
// with ctx's error when ctx ends first.
func dialHost(ctx context.Context, dst netip.AddrPort) (*hostTCP, error) {
	af := syscall.AF_INET
	var sa syscall.Sockaddr
	if dst.Addr().Is4() {
		sa = &syscall.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	} else {
		af, sa = syscall.AF_INET6, &syscall.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
	}
	fd, err := syscall.Socket(af, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if err := setSockopts(fd); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	err = syscall.Connect(fd, sa)
	switch err {
	case nil, syscall.EINPROGRESS, syscall.EINTR:
	default:
		syscall.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	// A non-blocking descriptor: NewFile registers it with the poller.
	h := &hostTCP{f: os.NewFile(uintptr(fd), "tcp"), remote: dst}
	if h.rc, err = h.f.SyscallConn(); err != nil {
		h.f.Close()
		return nil, err
	}
	if err := h.awaitConnect(ctx); err != nil {
		h.f.Close()
		return nil, err
	}
	return h, nil
}

// setSockopts gives a host socket its options before it connects.
func setSockopts(fd int) error {
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err != nil {
		return os.NewSyscallError("setsockopt", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1); err != nil {
		return os.NewSyscallError("setsockopt", err)
	}
	return nil
}

// awaitConnect returns once the connect in progress has completed or
// failed, or ctx has ended. It looks first without waiting; only a connect
// still in progress registers with ctx and waits for the socket to become
// writable (RFC 9293's ESTABLISHED, or an error).
func (h *hostTCP) awaitConnect(ctx context.Context) error {
	var connErr error
	over := func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, 0)
		switch {
		case err == unix.EINTR || (err == nil && n == 0):
			return false // still connecting
		case err != nil:
			connErr = os.NewSyscallError("poll", err)
			return true
		case fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0:
			errno, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_ERROR)
			switch {
			case err != nil:
				connErr = os.NewSyscallError("getsockopt", err)
			case errno != 0:
				connErr = os.NewSyscallError("connect", syscall.Errno(errno))
			default:
				connErr = os.NewSyscallError("connect", syscall.ECONNRESET)
			}
		}
		return true
	}
	var done bool
	if err := h.rc.Control(func(fd uintptr) { done = over(fd) }); err != nil {
		return err
	}
	if done {
		return connErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { h.f.SetWriteDeadline(aLongTimeAgo) })
	err := h.rc.Write(over)
	if !stop() {
		return ctx.Err() // the wait was cut short, or would have been
	}
	if err != nil {
		return err
	}
	return connErr
}

// Write writes b to the host's peer, waiting in the poller for room.
func (h *hostTCP) Write(b []byte) (int, error) { return h.f.Write(b) }

// SyscallConn is the socket's descriptor, for reads in the poller.
func (h *hostTCP) SyscallConn() (syscall.RawConn, error) { return h.rc, nil }

// CloseWrite sends the FIN: shutdown(2) of the writing side.
func (h *hostTCP) CloseWrite() error {
	return h.control(func(fd int) error { return syscall.Shutdown(fd, syscall.SHUT_WR) }, "shutdown")
}

// SetLinger sets SO_LINGER: 0 makes Close reset the connection.
func (h *hostTCP) SetLinger(sec int) error {
	l := &syscall.Linger{Onoff: 1, Linger: int32(sec)}
	if sec < 0 {
		l.Onoff, l.Linger = 0, 0
	}
	return h.control(func(fd int) error { return syscall.SetsockoptLinger(fd, syscall.SOL_SOCKET, syscall.SO_LINGER, l) }, "setsockopt")
}

// Close closes the socket, ending any wait in the poller.
func (h *hostTCP) Close() error { return h.f.Close() }

// LocalAddr is the socket's own address, which the kernel chose; an empty
// one once the socket is closed.
func (h *hostTCP) LocalAddr() net.Addr {
	var a net.TCPAddr
	h.control(func(fd int) error {
		sa, err := syscall.Getsockname(fd)
		if sa4, ok := sa.(*syscall.SockaddrInet4); ok {
			// Four bytes, as net's own: a 16-byte IP would read back as
			// the IPv4-mapped ::ffff:a.b.c.d through AddrPort.
			a = *net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), uint16(sa4.Port)))
		}
		return err
	}, "getsockname")
	return &a
}

// RemoteAddr is the address connected to.
func (h *hostTCP) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(h.remote) }

// control runs fn on the socket's descriptor, naming a failure by call.
func (h *hostTCP) control(fn func(fd int) error, call string) error {
	var err error
	if cerr := h.rc.Control(func(fd uintptr) { err = fn(int(fd)) }); cerr != nil {
		return cerr
	}
	return os.NewSyscallError(call, err)
}
