package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LinkStats are the first counters of the kernel's struct
// rtnl_link_stats64 for an interface, those ip -s link shows, from the
// kernel's side: on a TAP device Tx is what the kernel handed the program
// that holds the device, and TxDropped the frames it dropped for that
// program, its queue being full.
type LinkStats struct {
	RxPackets, TxPackets uint64
	RxBytes, TxBytes     uint64
	RxErrors, TxErrors   uint64
	RxDropped, TxDropped uint64
}

// Conn is a route netlink socket kept open for repeated requests. A socket
// belongs to the network namespace of the thread that opened it, whichever
// thread uses it later: opened inside a guest's namespace, it reads the
// guest's interfaces from anywhere in the process. Safe for concurrent use.
type Conn struct {
	mu  sync.Mutex
	fd  int
	seq uint32
	buf []byte
}

// connTimeout bounds the wait for the kernel's answer, so that a reader
// (a Prometheus scrape) is never held for ever.
const connTimeout = 2 * time.Second

// Dial opens a route netlink socket in the calling thread's network
// namespace.
func Dial() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("rtnl: netlink socket: %w", err)
	}
	tv := unix.NsecToTimeval(connTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rtnl: netlink socket timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rtnl: binding netlink socket: %w", err)
	}
	return &Conn{fd: fd, buf: make([]byte, 64<<10)}, nil
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// errNoStats64 is a link answer without IFLA_STATS64.
var errNoStats64 = errors.New("no IFLA_STATS64 in the kernel's answer")

// LinkStats returns the counters of the interface named name in the
// socket's namespace (RTM_GETLINK by IFLA_IFNAME; the answer's
// IFLA_STATS64).
func (c *Conn) LinkStats(name string) (LinkStats, error) {
	st, err := c.linkStats(name)
	if err != nil {
		return LinkStats{}, fmt.Errorf("rtnl: counters of link %s: %w", name, err)
	}
	return st, nil
}

func (c *Conn) linkStats(name string) (LinkStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return LinkStats{}, errors.New("netlink socket closed")
	}
	c.seq++
	msg := unix.IfInfomsg{Family: unix.AF_UNSPEC}
	body := append(append([]byte(nil), structBytes(&msg)...), appendAttr(nil, unix.IFLA_IFNAME, append([]byte(name), 0))...)
	hdr := unix.NlMsghdr{
		Len:   uint32(unix.SizeofNlMsghdr + len(body)),
		Type:  unix.RTM_GETLINK,
		Flags: unix.NLM_F_REQUEST,
		Seq:   c.seq,
	}
	req := append(append([]byte(nil), structBytes(&hdr)...), body...)
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return LinkStats{}, err
	}
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if err != nil {
			return LinkStats{}, err
		}
		msgs, err := syscall.ParseNetlinkMessage(c.buf[:n])
		if err != nil {
			return LinkStats{}, err
		}
		for i := range msgs {
			m := &msgs[i]
			if m.Header.Seq != c.seq {
				continue // the answer to an earlier request that timed out
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return LinkStats{}, errShortAck
				}
				if errno := -int32(binary.NativeEndian.Uint32(m.Data[:4])); errno != 0 {
					return LinkStats{}, unix.Errno(errno)
				}
				return LinkStats{}, errNoStats64
			case unix.RTM_NEWLINK:
				return parseStats64(m)
			}
		}
	}
}

// parseStats64 reads IFLA_STATS64 out of a link message.
func parseStats64(m *syscall.NetlinkMessage) (LinkStats, error) {
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return LinkStats{}, err
	}
	for _, a := range attrs {
		if a.Attr.Type != unix.IFLA_STATS64 {
			continue
		}
		var v [8]uint64
		if len(a.Value) < len(v)*8 {
			return LinkStats{}, fmt.Errorf("IFLA_STATS64 of %d bytes, want at least %d", len(a.Value), len(v)*8)
		}
		for i := range v {
			v[i] = binary.NativeEndian.Uint64(a.Value[8*i:])
		}
		return LinkStats{
			RxPackets: v[0], TxPackets: v[1], RxBytes: v[2], TxBytes: v[3],
			RxErrors: v[4], TxErrors: v[5], RxDropped: v[6], TxDropped: v[7],
		}, nil
	}
	return LinkStats{}, errNoStats64
}
