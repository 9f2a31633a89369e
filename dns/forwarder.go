// Package dns is the gateway's DNS forwarder: it answers the guest's
// queries on the gateway's DNS address (10.0.2.3 by slirp4netns's
// defaults) over UDP and TCP (RFC 1035 section 4.2, RFC 7766), and relays
// each to the host's resolvers over the host's own sockets.
//
// The guest side is any net.PacketConn and net.Listener: GoNet's *udp.Conn
// and *tcp.Listener on the gateway's stack, or the kernel's in tests. The
// host side is package net. Each UDP query and each TCP connection is a
// goroutine of its own, and both are bounded: queries beyond
// Config.MaxInFlight are answered REFUSED, connections beyond
// Config.MaxTCPConns are closed, and both are counted.
//
// Messages are parsed and checked with github.com/miekg/dns and relayed as
// the bytes that came in, with the transaction ID swapped for a random one
// upstream and restored for the guest.
package dns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/stats"
)

// Port is DNS's port (RFC 1035 4.2).
const Port = 53

// Config configures a Forwarder. Upstreams, or a ResolvConf naming some,
// is required; zero fields of the rest take the defaults.
type Config struct {
	// Upstreams are the resolvers queries go to, tried in order from the
	// one that answered last.
	Upstreams []netip.AddrPort
	// ResolvConf is a file in resolv.conf format (resolv.conf(5)) whose
	// nameserver lines give the upstreams when Upstreams is empty: the
	// daemon's default is /etc/resolv.conf.
	ResolvConf string
	// Timeout bounds one attempt with one upstream (2s): past it the
	// next upstream is tried, and past the last the guest gets SERVFAIL.
	Timeout time.Duration
	// MaxInFlight bounds the queries being forwarded at once, over UDP
	// and TCP together (256); more are answered REFUSED.
	MaxInFlight int
	// MaxTCPConns bounds the guest's TCP connections open at once (64);
	// more are closed as soon as accepted.
	MaxTCPConns int
	// MaxPipelined bounds the queries of one TCP connection in flight at
	// once (16, RFC 7766 6.2.1.1); past it the connection is not read
	// until one is answered.
	MaxPipelined int
	// TCPIdle closes a guest's TCP connection with nothing in flight that
	// has been idle this long (10s, RFC 7766 6.2.3).
	TCPIdle time.Duration
	// Dialer makes the host sockets to the upstreams.
	Dialer net.Dialer
	// Logger takes the forwarder's warnings, an upstream failing or
	// queries refused, each rate-limited on Clock (log.go); nil discards
	// them.
	Logger *slog.Logger
	// Clock paces the warnings; clock.Real{} when nil.
	Clock clock.Clock
}

// Stats are the forwarder's counters.
type Stats struct {
	Queries        stats.Counter // well-formed queries received, UDP and TCP
	Answers        stats.Counter // upstream answers relayed to the guest
	ServFails      stats.Counter // SERVFAIL sent: no upstream answered
	Timeouts       stats.Counter // attempts an upstream did not answer in time
	UpstreamErrors stats.Counter // attempts that failed otherwise: refused, reset, a bad answer
	Malformed      stats.Counter // guest messages that are not queries the forwarder relays
	Refused        stats.Counter // queries refused over MaxInFlight
	Truncated      stats.Counter // UDP answers cut to the client's size, with TC set
	TCPRefused     stats.Counter // TCP connections closed over MaxTCPConns
	InFlight       stats.Gauge   // queries being forwarded
	TCPConns       stats.Gauge   // guest TCP connections open
}

// Forwarder relays a guest's DNS queries to upstream resolvers. It is safe
// for concurrent use; one Forwarder may serve several sockets.
type Forwarder struct {
	cfg       Config
	inFlight  chan struct{} // a token per query being forwarded
	tcpConns  chan struct{} // a token per guest TCP connection
	preferred atomic.Int32  // index of the upstream that answered last
	log       forwarderLog  // log.go

	// Stats counts what the forwarder did; read it with stats.Walk.
	Stats Stats
}

// New returns a forwarder for cfg, with its upstreams read from
// cfg.ResolvConf when cfg.Upstreams is empty.
func New(cfg Config) (*Forwarder, error) {
	if len(cfg.Upstreams) == 0 {
		if cfg.ResolvConf == "" {
			return nil, errors.New("dns: no upstream resolvers: set Upstreams or ResolvConf")
		}
		ups, err := ReadResolvConf(cfg.ResolvConf)
		if err != nil {
			return nil, err
		}
		cfg.Upstreams = ups
	}
	for _, up := range cfg.Upstreams {
		if !up.IsValid() || up.Port() == 0 {
			return nil, fmt.Errorf("dns: upstream %v is not an address and port", up)
		}
	}
	cfg.Upstreams = append([]netip.AddrPort(nil), cfg.Upstreams...)
	cfg.Timeout = cmp.Or(cfg.Timeout, 2*time.Second)
	cfg.MaxInFlight = cmp.Or(cfg.MaxInFlight, 256)
	cfg.MaxTCPConns = cmp.Or(cfg.MaxTCPConns, 64)
	cfg.MaxPipelined = cmp.Or(cfg.MaxPipelined, 16)
	cfg.TCPIdle = cmp.Or(cfg.TCPIdle, 10*time.Second)
	return &Forwarder{
		cfg:      cfg,
		inFlight: make(chan struct{}, cfg.MaxInFlight),
		tcpConns: make(chan struct{}, cfg.MaxTCPConns),
		log:      newForwarderLog(&cfg),
	}, nil
}

// Upstreams returns the resolvers the forwarder relays to, in order.
func (f *Forwarder) Upstreams() []netip.AddrPort {
	return append([]netip.AddrPort(nil), f.cfg.Upstreams...)
}

// Serve answers queries on pc and l until ctx ends, then closes both,
// waits for the queries in flight and returns nil; or returns the first
// error that stops either, having stopped the other.
func (f *Forwarder) Serve(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- f.ServeUDP(ctx, pc) }()
	go func() { errs <- f.ServeTCP(ctx, l) }()
	err := <-errs
	cancel()
	return cmp.Or(err, <-errs)
}

// ServeUDP answers queries arriving on pc until ctx ends (it then closes
// pc, waits for the queries in flight and returns nil) or reading pc
// fails. Each query is forwarded by a goroutine of its own.
func (f *Forwarder) ServeUDP(ctx context.Context, pc net.PacketConn) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	buf := make([]byte, maxMessage)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dns: serve UDP on %v: %w", pc.LocalAddr(), err)
		}
		q, err := parseQuery(buf[:n])
		if err != nil {
			f.Stats.Malformed.Inc()
			if reply := errorReply(buf[:n], mdns.RcodeFormatError); reply != nil {
				pc.WriteTo(reply, from)
			}
			continue
		}
		f.Stats.Queries.Inc()
		if !f.admit() {
			if reply := errorReply(buf[:n], mdns.RcodeRefused); reply != nil {
				pc.WriteTo(reply, from)
			}
			continue
		}
		q.raw = append([]byte(nil), q.raw...)
		wg.Go(func() {
			defer f.done()
			// A reply that cannot be sent is lost as any datagram
			// is; the guest's resolver asks again.
			pc.WriteTo(f.answerUDP(ctx, q), from)
		})
	}
}

// admit takes a token for one query in flight, or counts it refused.
func (f *Forwarder) admit() bool {
	select {
	case f.inFlight <- struct{}{}:
		f.Stats.InFlight.Add(1)
		return true
	default:
		f.refusedQuery()
		return false
	}
}

// done returns the token admit took.
func (f *Forwarder) done() {
	f.Stats.InFlight.Add(-1)
	<-f.inFlight
}

// answerUDP forwards q over UDP and fits the answer to the client: one
// larger than the client takes goes back truncated, with TC set, so the
// client asks again over TCP (RFC 1035 4.2.1, RFC 7766 section 5).
func (f *Forwarder) answerUDP(ctx context.Context, q *query) []byte {
	m, answer := f.forward(ctx, q, false)
	if m == nil || len(answer) <= q.udpSize {
		return answer
	}
	t, err := truncated(m)
	if err != nil || len(t) > q.udpSize {
		// A question too long to fit the client's size with a header
		// alone cannot be asked over UDP at all.
		return errorReply(q.raw, mdns.RcodeServerFailure)
	}
	f.Stats.Truncated.Inc()
	return t
}

// forward asks the upstreams in turn, from the one that answered last,
// and returns the first answer, parsed and as bytes; or, when none
// answers, a SERVFAIL reply (RFC 1035 4.1.1) and a nil message.
func (f *Forwarder) forward(ctx context.Context, q *query, tcp bool) (*mdns.Msg, []byte) {
	ups := f.cfg.Upstreams
	first := int(f.preferred.Load())
	for i := range ups {
		k := (first + i) % len(ups)
		m, answer, err := f.exchange(ctx, ups[k], q, tcp)
		if err == nil {
			f.preferred.Store(int32(k))
			f.Stats.Answers.Inc()
			return m, answer
		}
		if ctx.Err() != nil {
			// Stopping: the reply is not going anywhere.
			return nil, errorReply(q.raw, mdns.RcodeServerFailure)
		}
		f.upstreamFailed(ups[k], err, errors.Is(err, errTimeout))
	}
	f.Stats.ServFails.Inc()
	return nil, errorReply(q.raw, mdns.RcodeServerFailure)
}
