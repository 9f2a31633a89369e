package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/wire"
)

// Relaying a guest's pings: the gateway answers an echo request to any
// address with what the host got for the same request, sent from the host.
// Linux offers an unprivileged way, the ping socket (SOCK_DGRAM with
// IPPROTO_ICMP, allowed to the groups in net.ipv4.ping_group_range), and a
// privileged one, the raw ICMP socket (CAP_NET_RAW). newHostPinger takes
// the first that works, and says which for the log.

// echoAnswer is what came back for an echo request: the reply's data, or
// an ICMP error's type and code (RFC 792), to be said to the guest in turn.
type echoAnswer struct {
	data      []byte // the echo reply's data; nil for an error
	errType   uint8  // wire.ICMPDestUnreach or wire.ICMPTimeExceeded
	errCode   uint8
	isError   bool
	errSender netip.Addr // who sent the error; the destination when unknown
}

// hostPinger sends echo requests from the host.
type hostPinger interface {
	// echo sends one echo request with seq and data to dst and waits for
	// its answer until ctx ends (a timeout is no answer: the guest's ping
	// sees its own timeout, as if the host had not answered).
	echo(ctx context.Context, dst netip.Addr, seq uint16, data []byte) (echoAnswer, error)
	// kind names the mechanism, for the log.
	kind() string
	close() error
}

// errNoPinger says that neither a ping socket nor a raw socket is allowed.
var errNoPinger = errors.New("gateway: ping: neither a ping socket (net.ipv4.ping_group_range) nor a raw ICMP socket (CAP_NET_RAW) is allowed")

// newHostPinger returns a ping-socket pinger if this process's group may
// open one, else a raw-socket pinger if it has CAP_NET_RAW.
func newHostPinger() (hostPinger, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.IPPROTO_ICMP)
	if err == nil {
		syscall.Close(fd)
		return pingSocketPinger{}, nil
	}
	raw, rerr := newRawPinger()
	if rerr != nil {
		return nil, fmt.Errorf("%w: ping socket: %v; raw socket: %v", errNoPinger, err, rerr)
	}
	return raw, nil
}

// echoRequest returns an ICMP echo request with ident, seq and data.
func echoRequest(ident, seq uint16, data []byte) []byte {
	b := make([]byte, wire.ICMPHeaderLen+len(data))
	copy(b[wire.ICMPHeaderLen:], data)
	wire.EncodeICMP(b, &wire.ICMPFields{Type: wire.ICMPEchoRequest, Rest: wire.EchoRest(ident, seq)})
	return b
}

// unreachableKind maps what a host socket's send, receive or connect
// failed with to the destination unreachable the kernel got or would have
// sent (RFC 792, RFC 1812 5.2.7.1), so that the guest is told what a
// program on the host would have been.
func unreachableKind(err error) (ip.ErrorKind, bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return 0, false
	}
	switch errno {
	case syscall.ENETUNREACH:
		return ip.NetUnreachable, true
	case syscall.EHOSTUNREACH, syscall.EHOSTDOWN:
		return ip.HostUnreachable, true
	case syscall.EACCES, syscall.EPERM:
		return ip.AdminProhibited, true
	}
	return 0, false
}

// unreachableFor is unreachableKind as an echo's answer: ICMP's type and
// code for it.
func unreachableFor(err error) (echoAnswer, bool) {
	kind, ok := unreachableKind(err)
	if !ok {
		return echoAnswer{isError: true, errType: wire.ICMPDestUnreach}, false
	}
	typ, code := ipv4.ICMPTypeCode(kind)
	return echoAnswer{isError: true, errType: typ, errCode: code}, true
}

// pingSocketPinger opens a ping socket per echo request: the kernel gives
// each its own ident and hands it only its own replies, so requests need
// no demultiplexing here, and errors come on the socket (IP_RECVERR).
type pingSocketPinger struct{}

func (pingSocketPinger) kind() string { return "ping socket" }
func (pingSocketPinger) close() error { return nil }

func (pingSocketPinger) echo(ctx context.Context, dst netip.Addr, seq uint16, data []byte) (echoAnswer, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, syscall.IPPROTO_ICMP)
	if err != nil {
		return echoAnswer{}, fmt.Errorf("gateway: ping socket: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_IP, syscall.IP_RECVERR, 1); err != nil {
		syscall.Close(fd)
		return echoAnswer{}, fmt.Errorf("gateway: ping socket: IP_RECVERR: %w", err)
	}
	f := os.NewFile(uintptr(fd), "ping")
	c, err := net.FilePacketConn(f)
	f.Close() // FilePacketConn holds a duplicate
	if err != nil {
		return echoAnswer{}, fmt.Errorf("gateway: ping socket: %w", err)
	}
	defer c.Close()
	to := &net.UDPAddr{IP: dst.AsSlice()}
	// The kernel sets the ident (the socket's "port") and the checksum.
	if _, err := c.WriteTo(echoRequest(0, seq, data), to); err != nil {
		if a, ok := unreachableFor(err); ok {
			a.errSender = dst
			return a, nil
		}
		return echoAnswer{}, fmt.Errorf("gateway: ping %v: %w", dst, err)
	}
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, wire.ICMPHeaderLen+len(data)+64)
	for {
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return echoAnswer{}, ctx.Err()
			}
			if a, ok := unreachableFor(err); ok {
				a.errSender = dst
				return a, nil
			}
			return echoAnswer{}, fmt.Errorf("gateway: ping %v: %w", dst, err)
		}
		m, ok := wire.ParseICMP(buf[:n])
		if ok && m.Type() == wire.ICMPEchoReply && m.Seq() == seq {
			return echoAnswer{data: append([]byte(nil), m.Payload()...)}, nil
		}
	}
}

// rawPinger shares one raw ICMP socket among all requests. The socket sees
// every ICMP message to the host, so a reader goroutine deals replies and
// errors to the requests waiting for them, by the ident this pinger gave
// each request and the sequence number.
type rawPinger struct {
	conn *net.IPConn

	mu      sync.Mutex
	next    uint16 // the ident of the next request
	waiting map[echoKey]chan echoAnswer
	done    chan struct{}
}

type echoKey struct {
	dst        netip.Addr
	ident, seq uint16
}

func newRawPinger() (*rawPinger, error) {
	c, err := net.ListenIP("ip4:icmp", &net.IPAddr{IP: net.IPv4zero})
	if err != nil {
		return nil, err
	}
	p := &rawPinger{conn: c, waiting: map[echoKey]chan echoAnswer{}, done: make(chan struct{}), next: uint16(os.Getpid())}
	go p.read()
	return p, nil
}

func (p *rawPinger) kind() string { return "raw socket" }

func (p *rawPinger) close() error {
	err := p.conn.Close()
	<-p.done
	return err
}

func (p *rawPinger) echo(ctx context.Context, dst netip.Addr, seq uint16, data []byte) (echoAnswer, error) {
	ch := make(chan echoAnswer, 1)
	p.mu.Lock()
	var key echoKey
	for {
		p.next++
		key = echoKey{dst, p.next, seq}
		if p.waiting[key] == nil {
			break
		}
	}
	p.waiting[key] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiting, key)
		p.mu.Unlock()
	}()
	if _, err := p.conn.WriteToIP(echoRequest(key.ident, seq, data), &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		if a, ok := unreachableFor(err); ok {
			a.errSender = dst
			return a, nil
		}
		return echoAnswer{}, fmt.Errorf("gateway: ping %v: %w", dst, err)
	}
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		return echoAnswer{}, ctx.Err()
	case <-p.done:
		return echoAnswer{}, net.ErrClosed
	}
}

// read deals what the raw socket receives until it is closed: echo replies
// by their source, ident and sequence number; destination unreachable and
// time exceeded by the request they quote (RFC 792: its IP header and
// first 8 bytes, which hold the ident and sequence number).
func (p *rawPinger) read() {
	defer close(p.done)
	buf := make([]byte, 65536)
	for {
		n, from, err := p.conn.ReadFromIP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		src, ok := netip.AddrFromSlice(from.IP)
		if !ok {
			continue
		}
		m, ok := wire.ParseICMP(buf[:n])
		if !ok {
			continue
		}
		var key echoKey
		var a echoAnswer
		switch m.Type() {
		case wire.ICMPEchoReply:
			key = echoKey{src.Unmap(), m.Ident(), m.Seq()}
			a = echoAnswer{data: append([]byte(nil), m.Payload()...)}
		case wire.ICMPDestUnreach, wire.ICMPTimeExceeded:
			inner, e := wire.ParseIPv4(m.Payload())
			if e != wire.IPv4OK || inner.Protocol() != wire.ProtoICMP || len(inner.Payload()) < wire.ICMPHeaderLen {
				continue
			}
			q := wire.ICMP(inner.Payload())
			if q.Type() != wire.ICMPEchoRequest {
				continue
			}
			key = echoKey{inner.Dst(), q.Ident(), q.Seq()}
			a = echoAnswer{isError: true, errType: m.Type(), errCode: m.Code(), errSender: src.Unmap()}
		default:
			continue
		}
		p.mu.Lock()
		ch := p.waiting[key]
		p.mu.Unlock()
		if ch != nil {
			select {
			case ch <- a:
			default: // answered already (a duplicate)
			}
		}
	}
}
