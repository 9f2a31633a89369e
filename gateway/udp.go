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

	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/udp"
	"github.com/gonetstack/gonet/wire"
)

// Relaying a UDP flow: the guest's endpoint (a udp.Connected the forwarder
// opened for the flow's 4-tuple) and a connected host socket, a goroutine
// per direction, datagram for datagram. A flow has no end of its own, so
// it ends when idle, as conntrack's entries do: after UDPTimeout while the
// host has never answered, after UDPStreamTimeout once it has. A host
// socket error (the host's ICMP port unreachable, say) ends it too.

// udpFlow is one relayed UDP flow.
type udpFlow struct {
	g        *Gateway
	guest    *udp.Connected
	host     *net.UDPConn
	last     atomic.Int64 // unix nanoseconds of the last datagram either way
	answered atomic.Bool  // the host has sent something
	rec      *flowRecord
	end      sync.Once
}

// relayUDP relays the flow until it ends.
// src and peer are the flow's ends in the guest's view, dst the host's.
func (g *Gateway) relayUDP(guest *udp.Connected, src, peer, dst netip.AddrPort) {
	host, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
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
	f.touch()
	stop := context.AfterFunc(g.ctx, f.close)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.copy(guest, host, &g.Stats.UDPToHost, &rec.toHost, false)
	}()
	f.copy(host, guest, &g.Stats.UDPToGuest, &rec.toGuest, true)
	<-done
}

func (f *udpFlow) touch() { f.last.Store(time.Now().UnixNano()) }

// timeout is how long the flow may idle now.
func (f *udpFlow) timeout() time.Duration {
	if f.answered.Load() {
		return f.g.cfg.UDPStreamTimeout
	}
	return f.g.cfg.UDPTimeout
}

// close ends the flow: both sockets close, and both directions return.
func (f *udpFlow) close() {
	f.end.Do(func() {
		f.guest.Close()
		f.host.Close()
	})
}

// copy relays datagrams from src to dst until the flow ends. fromHost says
// that src is the host socket: its datagrams make the flow answered.
func (f *udpFlow) copy(src, dst net.Conn, count *stats.Counter, flowCount *atomic.Uint64, fromHost bool) {
	defer f.close()
	buf := make([]byte, 65535)
	for {
		idle := time.Duration(time.Now().UnixNano() - f.last.Load())
		src.SetReadDeadline(time.Now().Add(f.timeout() - idle))
		n, err := src.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if time.Duration(time.Now().UnixNano()-f.last.Load()) < f.timeout() {
					continue // the other direction was active meanwhile
				}
				f.end.Do(func() {
					f.g.Stats.UDPIdleExpired.Inc()
					f.guest.Close()
					f.host.Close()
				})
				return
			}
			if fromHost && !errors.Is(err, net.ErrClosed) {
				f.g.Stats.UDPHostErrors.Inc()
				f.tellGuest(err)
			}
			return
		}
		f.touch()
		if fromHost {
			f.answered.Store(true)
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			if !fromHost && !errors.Is(err, net.ErrClosed) {
				f.g.Stats.UDPHostErrors.Inc()
				f.tellGuest(err)
			}
			return
		}
		count.Inc()
		flowCount.Add(1)
	}
}

// tellGuest passes on an error of the host socket as the ICMP error that
// caused it: a connected UDP socket reports the host's ICMP port
// unreachable as ECONNREFUSED, and no route as ENETUNREACH or
// EHOSTUNREACH.
func (f *udpFlow) tellGuest(err error) {
	if errors.Is(err, syscall.ECONNREFUSED) {
		f.guest.Unreachable(wire.ICMPCodePortUnrch)
		return
	}
	if code, ok := unreachableCode(err); ok {
		f.guest.Unreachable(code)
	}
}
