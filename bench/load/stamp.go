package load

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Timestamps at the client's network device (Linux's
// Documentation/networking/timestamping.rst): a ping socket asked for
// software timestamps gets one for each request it sends, taken by the
// device's driver as the request leaves (the TAP driver and veth take it
// as they pass the frame on), on its error queue, and one for each reply,
// taken as the reply enters the kernel, with the reply. Their difference
// is the round trip without the client's own kernel and process.

// stampFlags asks for software timestamps of both directions, the
// transmit ones without a copy of the request (OPT_TSONLY).
const stampFlags = unix.SOF_TIMESTAMPING_TX_SOFTWARE | unix.SOF_TIMESTAMPING_RX_SOFTWARE |
	unix.SOF_TIMESTAMPING_SOFTWARE | unix.SOF_TIMESTAMPING_OPT_TSONLY

// pingConn is a ping socket (ICMP of the family over SOCK_DGRAM) whose
// requests and replies carry timestamps where the kernel allows it.
type pingConn struct {
	*net.UDPConn
	raw   syscall.RawConn
	stamp bool
	oob   []byte
}

// listenPing opens a ping socket of proto's family. Asking for receive
// timestamps turns the kernel's timestamping of every received packet on,
// machine-wide, while the socket is open: a clock read per packet, which
// every stack measured meets alike.
func listenPing(proto echo) (*pingConn, error) {
	fd, err := unix.Socket(proto.family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto.proto)
	if err != nil {
		return nil, fmt.Errorf("ping socket (ICMP protocol %d): %w", proto.proto, err)
	}
	stamp := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, stampFlags) == nil
	f := os.NewFile(uintptr(fd), "ping")
	pc, err := net.FilePacketConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("ping socket (ICMP protocol %d): %w", proto.proto, err)
	}
	c, ok := pc.(*net.UDPConn)
	if !ok {
		pc.Close()
		return nil, fmt.Errorf("ping socket (ICMP protocol %d): a %T, not a datagram socket", proto.proto, pc)
	}
	raw, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &pingConn{UDPConn: c, raw: raw, stamp: stamp, oob: make([]byte, 512)}, nil
}

// lastSent is when the last request sent left the device: the newest
// transmit timestamp on the error queue, which it empties. Called once
// the request's reply is in, it never waits: the driver stamped the
// request before the server could answer it.
func (c *pingConn) lastSent() (time.Time, bool) {
	if !c.stamp {
		return time.Time{}, false
	}
	var last time.Time
	var found bool
	c.raw.Control(func(fd uintptr) {
		var b [1]byte
		for {
			_, oobn, _, _, err := unix.Recvmsg(int(fd), b[:], c.oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
			if err != nil {
				return // EAGAIN: the queue is empty
			}
			if t, ok := softwareStamp(c.oob[:oobn]); ok {
				last, found = t, true
			}
		}
	})
	return last, found
}

// softwareStamp is the software timestamp in a message's control data
// (struct scm_timestamping's first timespec).
func softwareStamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SO_TIMESTAMPING || len(m.Data) < 16 {
			continue
		}
		sec, nsec := int64(binary.NativeEndian.Uint64(m.Data)), int64(binary.NativeEndian.Uint64(m.Data[8:]))
		if sec == 0 && nsec == 0 {
			return time.Time{}, false
		}
		return time.Unix(sec, nsec), true
	}
	return time.Time{}, false
}
