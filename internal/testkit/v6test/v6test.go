// Package v6test joins two hosts' IPv6 layers, and optionally their IPv4
// layers, by an in-memory link that hands each datagram a side sends to
// the other side's dealer, with TCP and UDP over both: the transports run
// over IPv6 before package stack wires it in. The link needs no neighbour
// discovery (every datagram goes to the one peer), can drop datagrams to
// test loss recovery, and shows a test every datagram it carries, for
// decoding with gopacket.
package v6test

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/udp"
)

// The hosts' addresses: A and B's global and link-local IPv6 addresses on
// 2001:db8:1::/64, and their IPv4 addresses on 10.0.0.0/24 when the pair
// runs IPv4 too. Both links are named IfName, the zone of the link-local
// addresses.
var (
	AddrA   = netip.MustParseAddr("2001:db8:1::1")
	AddrB   = netip.MustParseAddr("2001:db8:1::2")
	LLA     = netip.MustParseAddr("fe80::1")
	LLB     = netip.MustParseAddr("fe80::2")
	Addr4A  = netip.MustParseAddr("10.0.0.1")
	Addr4B  = netip.MustParseAddr("10.0.0.2")
	Prefix6 = netip.MustParsePrefix("2001:db8:1::/64")
)

// IfName is the name of each host's interface.
const IfName = "eth0"

// Options configure a pair. The zero value is usable.
type Options struct {
	// MTU is the link's (1500 when zero).
	MTU int
	// IPv4 gives each host IPv4 beside IPv6, on a link of its own, so
	// that the transports run over both families.
	IPv4 bool
	// Clock drives every timer; clock.Real{} when nil.
	Clock clock.Clock
	// Seed, when not zero, seeds each host's random source (A's with
	// Seed, B's with Seed+1) for tests that need the same secrets, ports
	// and sequence numbers on every run; crypto/rand seeds them otherwise.
	Seed        uint64
	TCP         tcp.Config
	UDP         udp.Config
	IPv6        ipv6.Config
	MemoryLimit int64 // 64 MiB when zero
	// Caps are the offloads the IPv6 link claims: with TxChecksum and
	// TSO, transports leave checksums partial and TCP sends
	// super-segments, which the link hands the other side whole with
	// their offload metadata, as a TAP device hands the kernel's to
	// GoNet (tcp/gso.go).
	Caps link.Capabilities
	// Drop, when set, is asked about every IPv6 datagram A sends to B,
	// numbered from 1, and drops those it returns true for.
	Drop func(n int, datagram []byte) bool
	// Tap, when set, sees every IPv6 datagram either side sends (from A
	// when fromA), with its offload metadata, before Drop; the bytes are
	// valid during the call.
	Tap func(fromA bool, datagram []byte, o buffer.Offload)
	// ErrorSender, when set, gives each host's IPv6 layer the sender of
	// its ICMPv6 errors, standing in for package icmpv6.
	ErrorSender func(h *Host) ipv6.ErrorSender
	// Confirm, when set, is told each reachability confirmation an
	// upper layer gives a host's link (ipv6.ReachabilityConfirmer; from
	// A when fromA), as neighbour discovery would be.
	Confirm func(fromA bool, nextHop netip.Addr)
}

// Host is one side of a pair.
type Host struct {
	Env   *env.Env
	IPv6  *ipv6.Protocol
	If6   *ipv6.Interface
	IPv4  *ipv4.Protocol // nil unless Options.IPv4
	TCP   *tcp.Protocol
	UDP   *udp.Protocol
	Addr  netip.Addr // the global IPv6 address
	LL    netip.Addr // the link-local address, with its zone
	Addr4 netip.Addr // the IPv4 address, when Options.IPv4
}

// Pair returns two hosts, A and B, joined by the link, and closes them
// when the test ends, checking that no buffer, budget or goroutine is
// left behind.
func Pair(t testing.TB, o Options) (a, b *Host) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	if o.MTU == 0 {
		o.MTU = 1500
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = 64 << 20
	}
	a = newHost(o, 0, AddrA, LLA, Addr4A)
	b = newHost(o, 1, AddrB, LLB, Addr4B)
	l6ab := &link6{o: &o, fromA: true}
	l6ba := &link6{o: &o}
	var err error
	for _, x := range []struct {
		h   *Host
		out *link6
	}{{a, l6ab}, {b, l6ba}} {
		if x.h.If6, err = x.h.IPv6.AddInterface(IfName, o.MTU, o.Caps, x.out); err != nil {
			t.Fatal(err)
		}
		must(t, x.h.IPv6.AddAddress(x.h.If6, netip.PrefixFrom(x.h.Addr, 64), ipv6.Preferred))
		must(t, x.h.IPv6.AddAddress(x.h.If6, netip.PrefixFrom(x.h.LL.WithZone(""), 64), ipv6.Preferred))
	}
	l6ab.to, l6ba.to = b, a
	var l4s []*link4
	if o.IPv4 {
		l4ab, l4ba := &link4{}, &link4{}
		l4s = []*link4{l4ab, l4ba}
		for _, x := range []struct {
			h   *Host
			out *link4
		}{{a, l4ab}, {b, l4ba}} {
			i, err := x.h.IPv4.AddOffloadInterface(IfName, o.MTU, link.Capabilities{}, x.out)
			if err != nil {
				t.Fatal(err)
			}
			x.out.self = i
			must(t, x.h.IPv4.AddAddress(i, netip.PrefixFrom(x.h.Addr4, 24)))
		}
		l4ab.to, l4ba.to = b, a
	}
	for _, h := range []*Host{a, b} {
		if o.ErrorSender != nil {
			h.IPv6.SetErrorSender(o.ErrorSender(h))
		}
		h.IPv6.Start()
		if h.IPv4 != nil {
			h.IPv4.Start()
		}
	}
	t.Cleanup(func() {
		l6ab.closed.Store(true)
		l6ba.closed.Store(true)
		for _, l := range l4s {
			l.closed.Store(true)
		}
		a.shutdown()
		b.shutdown()
		a.checkReturned(t)
		b.checkReturned(t)
		goleak.VerifyNone(t, ignore)
	})
	return a, b
}

func newHost(o Options, n uint64, addr, ll, addr4 netip.Addr) *Host {
	var src rand.Source
	if o.Seed != 0 {
		src = rand.NewPCG(o.Seed+n, 0)
	}
	e := &env.Env{
		Clock:  o.Clock,
		Rand:   env.NewRand(src),
		Pool:   buffer.NewPool(),
		Budget: budget.New(o.MemoryLimit),
		Log:    logs.OrDiscard(nil),
	}
	h := &Host{Env: e, Addr: addr, LL: ll.WithZone(IfName), IPv6: ipv6.New(o.IPv6, e)}
	nets := ip.Networks{V6: h.IPv6}
	if o.IPv4 {
		h.IPv4 = ipv4.New(ipv4.Config{}, e)
		h.Addr4 = addr4
		nets.V4 = h.IPv4
	}
	h.UDP = udp.New(nets, o.UDP, e)
	h.TCP = tcp.New(nets, o.TCP, e)
	return h
}

// close shuts the host down and checks that it kept nothing.
func (h *Host) shutdown() {
	h.TCP.Close()
	h.IPv6.Close()
	if h.IPv4 != nil {
		h.IPv4.Close()
	}
}

// checkReturned fails the test unless every buffer is back in h's pool and
// its memory budget is free, once both hosts are shut down: a datagram the
// other host's goroutine was still carrying across the link when h closed
// returns its buffer a moment later, so the check waits for it: up to 10
// s, a bound on a failure only, which a loaded machine must not reach.
func (h *Host) checkReturned(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n, u := h.Env.Pool.Outstanding(), h.Env.Budget.Used()
		if n == 0 && u == 0 {
			return
		}
		if time.Now().After(deadline) {
			if n != 0 {
				t.Errorf("host %v: %d buffers not returned to the pool", h.Addr, n)
			}
			if u != 0 {
				t.Errorf("host %v: %d bytes of the memory budget still reserved", h.Addr, u)
			}
			return
		}
	}
}

// link6 is one direction of the IPv6 link: an ipv6.LinkOutput that copies
// each datagram into the receiver's buffers and hands it to its
// interface, as a NIC would.
type link6 struct {
	o      *Options
	fromA  bool
	to     *Host
	n      atomic.Int64
	closed atomic.Bool
	mu     sync.Mutex // serialises Tap and Drop
}

func (l *link6) Output(_ netip.Addr, pk *buffer.Packet) {
	defer pk.Release()
	if l.closed.Load() {
		return
	}
	b := pk.Bytes()
	if l.o.Tap != nil || (l.fromA && l.o.Drop != nil) {
		l.mu.Lock()
		if l.o.Tap != nil {
			l.o.Tap(l.fromA, b, pk.Offload)
		}
		drop := l.fromA && l.o.Drop != nil && l.o.Drop(int(l.n.Add(1)), b)
		l.mu.Unlock()
		if drop {
			return
		}
	}
	deliver(l.to.Env.Pool, b, pk.Offload, l.to.If6.Deliver)
}

// Confirm takes an upper layer's reachability confirmation, as neighbour
// discovery does (ipv6.ReachabilityConfirmer).
func (l *link6) Confirm(nextHop netip.Addr) {
	if l.o.Confirm != nil {
		l.o.Confirm(l.fromA, nextHop)
	}
}

// link4 is one direction of the IPv4 link.
type link4 struct {
	self   *ipv4.Interface
	to     *Host
	closed atomic.Bool
}

func (l *link4) Output(_ netip.Addr, pk *buffer.Packet) { l.OutputBroadcast(pk) }

func (l *link4) OutputBroadcast(pk *buffer.Packet) {
	defer pk.Release()
	if l.closed.Load() {
		return
	}
	deliver(l.to.Env.Pool, pk.Bytes(), buffer.Offload{}, l.to.IPv4.Deliver)
}

// deliver copies a datagram into a packet of pool, with its offload
// metadata, and hands it to the receiving dealer in a batch of its own.
func deliver(pool *buffer.Pool, b []byte, o buffer.Offload, to func(*buffer.Batch)) {
	pk := pool.Get(len(b))
	copy(pk.Bytes(), b)
	pk.Offload = o
	batch := buffer.GetBatch()
	batch.Pkts = append(batch.Pkts, pk)
	to(batch)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
