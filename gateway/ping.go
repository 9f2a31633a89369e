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
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// Relaying a guest's pings: the gateway answers an echo request to any
// address with what the host got for the same request, sent from the host.
// Linux offers an unprivileged way, the ping socket (SOCK_DGRAM with
// IPPROTO_ICMP or IPPROTO_ICMPV6, allowed to the groups in
// net.ipv4.ping_group_range, which governs both families), and a
// privileged one, the raw ICMP or ICMPv6 socket (CAP_NET_RAW).
// newHostPinger takes the first that works for a family, and says which
// for the log.

// echoAnswer is what came back for an echo request: the reply's data, or
// an error's type and code (RFC 792's, or RFC 4443's for IPv6), to be
// said to the guest in turn.
type echoAnswer struct {
	data      []byte // the echo reply's data; nil for an error
	errType   uint8  // destination unreachable or time exceeded, of the family's ICMP
	errCode   uint8
	isError   bool
	errSender netip.Addr // who sent the error; the destination when unknown
}

// pingFamily is what differs between relaying pings over IPv4 (RFC 792)
// and IPv6 (RFC 4443 section 4): the sockets, the message types, and how
// an error quotes the request.
type pingFamily struct {
	name              string // for errors and the log
	af, proto         int
	recvErrLevel      int // IP_RECVERR's level and option, or IPV6_RECVERR's
	recvErrOpt        int
	rawNet            string // net.ListenIP's network
	unspecified       net.IP
	request, reply    uint8
	destUnreach       uint8
	timeExceeded      uint8
	typeCode          func(ip.ErrorKind) (typ, code uint8)
	parse             func(b []byte) (typ, code uint8, ident, seq uint16, payload []byte, ok bool)
	quotedEchoRequest func(quote []byte) (dst netip.Addr, ident, seq uint16, ok bool)
}

var (
	pingIPv4 = &pingFamily{
		name: "ICMP", af: syscall.AF_INET, proto: syscall.IPPROTO_ICMP,
		recvErrLevel: syscall.IPPROTO_IP, recvErrOpt: syscall.IP_RECVERR,
		rawNet: "ip4:icmp", unspecified: net.IPv4zero,
		request: wire.ICMPEchoRequest, reply: wire.ICMPEchoReply,
		destUnreach: wire.ICMPDestUnreach, timeExceeded: wire.ICMPTimeExceeded,
		typeCode: ipv4.ICMPTypeCode,
		parse: func(b []byte) (uint8, uint8, uint16, uint16, []byte, bool) {
			m, ok := wire.ParseICMP(b)
			if !ok {
				return 0, 0, 0, 0, nil, false
			}
			return m.Type(), m.Code(), m.Ident(), m.Seq(), m.Payload(), true
		},
		// RFC 792: the request's IP header and its first 8 bytes, which
		// hold the ident and sequence number.
		quotedEchoRequest: func(quote []byte) (netip.Addr, uint16, uint16, bool) {
			inner, e := wire.ParseIPv4(quote)
			if e != wire.IPv4OK || inner.Protocol() != wire.ProtoICMP || len(inner.Payload()) < wire.ICMPHeaderLen {
				return netip.Addr{}, 0, 0, false
			}
			q := wire.ICMP(inner.Payload())
			if q.Type() != wire.ICMPEchoRequest {
				return netip.Addr{}, 0, 0, false
			}
			return inner.Dst(), q.Ident(), q.Seq(), true
		},
	}
	pingIPv6 = &pingFamily{
		name: "ICMPv6", af: syscall.AF_INET6, proto: syscall.IPPROTO_ICMPV6,
		recvErrLevel: syscall.IPPROTO_IPV6, recvErrOpt: syscall.IPV6_RECVERR,
		rawNet: "ip6:ipv6-icmp", unspecified: net.IPv6unspecified,
		request: wire.ICMPv6EchoRequest, reply: wire.ICMPv6EchoReply,
		destUnreach: wire.ICMPv6DestUnreach, timeExceeded: wire.ICMPv6TimeExceeded,
		typeCode: ipv6.ICMPTypeCode,
		// The kernel has checked the checksum, over a pseudo-header this
		// socket does not see (RFC 3542 section 3.1).
		parse: func(b []byte) (uint8, uint8, uint16, uint16, []byte, bool) {
			if len(b) < wire.ICMPv6HeaderLen {
				return 0, 0, 0, 0, nil, false
			}
			m := wire.ICMPv6(b)
			return m.Type(), m.Code(), m.Ident(), m.Seq(), m.Payload(), true
		},
		// RFC 4443 section 2.4 (c): as much of the request as fits, its
		// IPv6 header first. The request has no extension headers: the
		// host's socket sent it.
		quotedEchoRequest: func(quote []byte) (netip.Addr, uint16, uint16, bool) {
			if len(quote) < wire.IPv6HeaderLen+wire.ICMPv6HeaderLen {
				return netip.Addr{}, 0, 0, false
			}
			inner := wire.IPv6(quote)
			q := wire.ICMPv6(quote[wire.IPv6HeaderLen:])
			if inner.NextHeader() != wire.ProtoICMPv6 || q.Type() != wire.ICMPv6EchoRequest {
				return netip.Addr{}, 0, 0, false
			}
			return inner.Dst(), q.Ident(), q.Seq(), true
		},
	}
)

// echoRequest returns an echo request with ident, seq and data. An ICMPv6
// one goes without its checksum, which the kernel computes for ping and
// raw ICMPv6 sockets alike (RFC 3542 section 3.1).
func (f *pingFamily) echoRequest(ident, seq uint16, data []byte) []byte {
	if f.af == syscall.AF_INET {
		return echoRequest(ident, seq, data)
	}
	b := make([]byte, wire.ICMPv6HeaderLen+len(data))
	copy(b[wire.ICMPv6HeaderLen:], data)
	wire.EncodeICMPv6(b, &wire.ICMPv6Fields{Type: wire.ICMPv6EchoRequest, Rest: wire.EchoRest(ident, seq)})
	return b
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
var errNoPinger = errors.New("gateway: ping: neither a ping socket (net.ipv4.ping_group_range) nor a raw socket (CAP_NET_RAW) is allowed")

// newHostPinger returns a ping-socket pinger for family f if this
// process's group may open one, else a raw-socket pinger if it has
// CAP_NET_RAW.
func newHostPinger(f *pingFamily) (hostPinger, error) {
	fd, err := syscall.Socket(f.af, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, f.proto)
	if err == nil {
		syscall.Close(fd)
		return pingSocketPinger{f}, nil
	}
	raw, rerr := newRawPinger(f)
	if rerr != nil {
		return nil, fmt.Errorf("%w for %s: ping socket: %v; raw socket: %v", errNoPinger, f.name, err, rerr)
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

// unreachableFor is unreachableKind as an echo's answer: the family's
// type and code for it.
func (f *pingFamily) unreachableFor(err error) (echoAnswer, bool) {
	kind, ok := unreachableKind(err)
	if !ok {
		return echoAnswer{isError: true, errType: f.destUnreach}, false
	}
	typ, code := f.typeCode(kind)
	return echoAnswer{isError: true, errType: typ, errCode: code}, true
}

// pingSocketPinger opens a ping socket per echo request: the kernel gives
// each its own ident and hands it only its own replies, so requests need
// no demultiplexing here, and errors come on the socket (IP_RECVERR).
type pingSocketPinger struct{ f *pingFamily }

func (pingSocketPinger) kind() string { return "ping socket" }
func (pingSocketPinger) close() error { return nil }

func (p pingSocketPinger) echo(ctx context.Context, dst netip.Addr, seq uint16, data []byte) (echoAnswer, error) {
	fam := p.f
	fd, err := syscall.Socket(fam.af, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, fam.proto)
	if err != nil {
		return echoAnswer{}, fmt.Errorf("gateway: ping socket: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, fam.recvErrLevel, fam.recvErrOpt, 1); err != nil {
		syscall.Close(fd)
		return echoAnswer{}, fmt.Errorf("gateway: ping socket: RECVERR: %w", err)
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
	if _, err := c.WriteTo(fam.echoRequest(0, seq, data), to); err != nil {
		if a, ok := fam.unreachableFor(err); ok {
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
			if a, ok := fam.unreachableFor(err); ok {
				a.errSender = dst
				return a, nil
			}
			return echoAnswer{}, fmt.Errorf("gateway: ping %v: %w", dst, err)
		}
		typ, _, _, gotSeq, payload, ok := fam.parse(buf[:n])
		if ok && typ == fam.reply && gotSeq == seq {
			return echoAnswer{data: append([]byte(nil), payload...)}, nil
		}
	}
}

// rawPinger shares one raw ICMP socket among all requests. The socket sees
// every ICMP message to the host, so a reader goroutine deals replies and
// errors to the requests waiting for them, by the ident this pinger gave
// each request and the sequence number.
type rawPinger struct {
	f    *pingFamily
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

func newRawPinger(f *pingFamily) (*rawPinger, error) {
	c, err := net.ListenIP(f.rawNet, &net.IPAddr{IP: f.unspecified})
	if err != nil {
		return nil, err
	}
	p := &rawPinger{f: f, conn: c, waiting: map[echoKey]chan echoAnswer{}, done: make(chan struct{}), next: uint16(os.Getpid())}
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
	if _, err := p.conn.WriteToIP(p.f.echoRequest(key.ident, seq, data), &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		if a, ok := p.f.unreachableFor(err); ok {
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
// time exceeded by the request they quote (quotedEchoRequest). An ICMPv6
// raw socket sees every ICMPv6 message, neighbour discovery's among them:
// those match no request.
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
		typ, code, ident, seq, payload, ok := p.f.parse(buf[:n])
		if !ok {
			continue
		}
		var key echoKey
		var a echoAnswer
		switch typ {
		case p.f.reply:
			key = echoKey{src.Unmap(), ident, seq}
			a = echoAnswer{data: append([]byte(nil), payload...)}
		case p.f.destUnreach, p.f.timeExceeded:
			dst, qIdent, qSeq, ok := p.f.quotedEchoRequest(payload)
			if !ok {
				continue
			}
			key = echoKey{dst, qIdent, qSeq}
			a = echoAnswer{isError: true, errType: typ, errCode: code, errSender: src.Unmap()}
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
