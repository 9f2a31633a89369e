package gateway

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/udp"
)

// Relaying a UDP flow: the guest's endpoint (a udp.Connected the forwarder
// opened for the flow's 4-tuple) and a connected host socket, a goroutine
// per direction, datagram for datagram. A flow has no end of its own, so
// it ends when idle, as conntrack's entries do: after UDPTimeout while the
// host has never answered, after UDPStreamTimeout once it has. A host
// socket error (the host's ICMP port unreachable, say) ends it too.
//
// As in the TCP relay, an idle flow holds no buffer. Guest to host, the
// endpoint's ReadDatagrams hands the host socket the datagrams where they
// lie in the stack's buffers, a run of equal sizes in one segmented send
// (udpgso.go). Host to guest, the goroutine waits for the
// host socket to become readable through the runtime's poller
// (syscall.RawConn) and borrows relay buffers only for the read, which
// takes what queued meanwhile in one system call, runs of datagrams whole
// (udpgro.go), and the Writes to the guest that follow
// (RelayStats.BuffersHeld).

// udpFlow is one relayed UDP flow.
type udpFlow struct {
	g     *Gateway
	guest *udp.Connected
	host  *net.UDPConn
	idle  udpIdle
	rec   *flowRecord
	end   sync.Once
}

// udpIdle is a UDP flow's idle clock, as conntrack's entry for it: the
// flow ends after UDPTimeout without a datagram either way while only the
// side that opened it has spoken, after UDPStreamTimeout once the other
// has answered. Either direction's datagrams keep it alive.
type udpIdle struct {
	cfg      *Config
	last     atomic.Int64 // unix nanoseconds of the last datagram either way
	answered atomic.Bool  // the side that did not open the flow has sent something
}

// start starts the clock at the flow's first datagram.
func (c *udpIdle) start(cfg *Config) {
	c.cfg = cfg
	c.touch()
}

// touch records a datagram from the side that opened the flow.
func (c *udpIdle) touch() { c.last.Store(time.Now().UnixNano()) }

// answer records a datagram from the other side.
func (c *udpIdle) answer() {
	c.touch()
	c.answered.Store(true)
}

// deadline is when the flow idles out unless a datagram comes first.
func (c *udpIdle) deadline() time.Time {
	timeout := c.cfg.UDPTimeout
	if c.answered.Load() {
		timeout = c.cfg.UDPStreamTimeout
	}
	return time.Unix(0, c.last.Load()).Add(timeout)
}

// over reports whether the flow has idled out by now.
func (c *udpIdle) over() bool { return !time.Now().Before(c.deadline()) }

// udpRelayReadBuffer is a relayed flow's receive queue in bytes, on both
// ends: what one side sends while the relay's goroutine waits for a CPU
// queues there. With the sockets' default (212992 bytes, some 140
// datagrams of 1472) the bench's gw-udp at 1 Gbit/s lost 5-8% of the
// guest's datagrams in GoNet's queue, and internet→guest 6-15% of the
// server's in the host socket's (UDP RcvbufErrors of the host's
// namespace); with 1 MiB, none in either. GoNet's memory budget bounds
// what its queues hold. The host socket's is the kernel's memory, and
// Linux caps the request at net.core.rmem_max (212992 unless an
// administrator raised it, which leaves the default).
const udpRelayReadBuffer = 1 << 20

// relayUDP relays the flow until it ends.
// src and peer are the flow's ends in the guest's view, dst the host's.
func (g *Gateway) relayUDP(guest *udp.Connected, src, peer, dst netip.AddrPort) {
	host, err := net.DialUDP(udpNetwork(dst.Addr()), nil, net.UDPAddrFromAddrPort(dst))
	if err != nil {
		g.Stats.UDPHostErrors.Inc()
		guest.Close()
		return
	}
	g.Stats.UDPFlows.Inc()
	g.Stats.UDPActive.Add(1)
	defer g.Stats.UDPActive.Add(-1)
	rec, untrack := g.track(FlowInfo{Proto: UDP, Guest: src, Peer: peer}, host)
	defer untrack()
	f := &udpFlow{g: g, guest: guest, host: host, rec: rec}
	f.idle.start(&g.cfg)
	guest.SetReadBuffer(udpRelayReadBuffer)
	host.SetReadBuffer(udpRelayReadBuffer)
	stop := context.AfterFunc(g.ctx, f.close)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.toHost()
	}()
	f.toGuest()
	<-done
}

// expired reports whether the flow has idled out, at a direction's read
// deadline, and if so ends it; false when the other direction was active
// meanwhile.
func (f *udpFlow) expired() bool {
	if !f.idle.over() {
		return false
	}
	f.end.Do(func() {
		f.g.Stats.UDPIdleExpired.Inc()
		f.guest.Close()
		f.host.Close()
	})
	return true
}

// close ends the flow: both sockets close, and both directions return.
func (f *udpFlow) close() {
	f.end.Do(func() {
		f.guest.Close()
		f.host.Close()
	})
}

// toHost relays the guest's datagrams to the host until the flow ends, in
// batches of what queued up meanwhile (udpgso.go).
func (f *udpFlow) toHost() {
	defer f.close()
	rc, err := f.host.SyscallConn()
	if err != nil {
		return
	}
	b := newHostBatch(rc)
	var (
		sent, segmented int
		werr            error
	)
	send := func(payloads [][]byte) { sent, segmented, werr = b.sendAll(payloads) }
	f.guest.SetReadDeadline(f.idle.deadline()) // again when it passes, as toGuest's
	for {
		if err := f.guest.ReadDatagrams(udp.MaxBatch, send); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !f.expired() {
				f.guest.SetReadDeadline(f.idle.deadline())
				continue
			}
			return
		}
		f.idle.touch()
		f.g.Stats.UDPToHost.Add(uint64(sent))
		f.g.Stats.UDPToHostSegmented.Add(uint64(segmented))
		f.rec.carriedToHost(uint64(sent))
		if werr != nil {
			if !errors.Is(werr, net.ErrClosed) {
				f.g.Stats.UDPHostErrors.Inc()
				f.tellGuest(werr)
			}
			return
		}
	}
}

// toGuest relays the host's datagrams to the guest until the flow ends,
// each read taking what queued on the host socket meanwhile (udpgro.go).
func (f *udpFlow) toGuest() {
	defer f.close()
	rc, err := f.host.SyscallConn()
	if err != nil {
		return
	}
	enableGRO(rc)
	var (
		hr    = newHostReads(&f.g.Stats.Relay.BuffersHeld)
		slots []hostSlot
		rerr  error
	)
	read := func(fd uintptr) bool {
		slots, rerr = hr.read(int(fd))
		return rerr != syscall.EAGAIN // else the poller waits, holding no buffer
	}
	// The deadline is set again only when it passes: expired tells an
	// idle flow from one that was busy meanwhile, and a deadline set for
	// every read cost the relay a timer's update a datagram.
	f.host.SetReadDeadline(f.idle.deadline())
	for {
		if err := rc.Read(read); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !f.expired() {
				f.host.SetReadDeadline(f.idle.deadline())
				continue
			}
			return // idled out, or closed
		}
		if rerr != nil {
			if !errors.Is(rerr, net.ErrClosed) {
				f.g.Stats.UDPHostErrors.Inc()
				f.tellGuest(rerr)
			}
			return
		}
		f.idle.answer()
		sent, werr := f.writeGuest(slots)
		hr.release(slots)
		f.g.Stats.UDPToGuest.Add(uint64(sent))
		f.rec.carriedToGuest(uint64(sent))
		if werr != nil {
			return
		}
	}
}

// writeGuest writes what one read brought to the guest, slot by slot: a
// datagram, or a run's datagrams of size bytes each but the last (size >
// 0), one after another. It returns how many it wrote.
func (f *udpFlow) writeGuest(slots []hostSlot) (int, error) {
	sent := 0
	for _, s := range slots {
		if s.cut {
			f.g.Stats.UDPToGuestCut.Inc()
		}
		if s.size == 0 { // one datagram, perhaps an empty one
			if _, err := f.guest.Write(s.b); err != nil {
				return sent, err
			}
			sent++
			continue
		}
		for off := 0; off < len(s.b); off += s.size {
			if _, err := f.guest.Write(s.b[off:min(off+s.size, len(s.b))]); err != nil {
				return sent, err
			}
			sent++
			f.g.Stats.UDPToGuestCoalesced.Inc()
		}
	}
	return sent, nil
}

// tellGuest passes on an error of the host socket as the ICMP error that
// caused it: a connected UDP socket reports the host's ICMP port
// unreachable as ECONNREFUSED, and no route as ENETUNREACH or
// EHOSTUNREACH.
func (f *udpFlow) tellGuest(err error) {
	if errors.Is(err, syscall.ECONNREFUSED) {
		f.guest.Unreachable(ip.PortUnreachable)
		return
	}
	if kind, ok := unreachableKind(err); ok {
		f.guest.Unreachable(kind)
	}
}

// udpNetwork is the host socket's network for a flow to dst.
func udpNetwork(dst netip.Addr) string {
	if dst.Is4() {
		return "udp4"
	}
	return "udp6"
}
