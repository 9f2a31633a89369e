package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gonetstack/gonet/udp"
)

// Inbound port forwards (-forward tcp:8080:80): the host listens, and each
// connection accepted there, or each UDP flow by its client's address, is
// carried into the guest over GoNet's own TCP or UDP, from the gateway's
// address, as slirp4netns's hostfwd does. Inbound flows count against
// MaxFlows like the guest's own.

// inbound is a running forward: its host socket and how to stop it.
type inbound struct {
	f    Forward
	stop func() // closes the host socket and waits for the accept or read loop
}

// AddForward starts forwarding f: it listens on f.Host now, so that a port
// in use is an error here, and carries what arrives to the guest's
// f.GuestPort.
func (g *Gateway) AddForward(f Forward) error {
	g.fwdMu.Lock()
	defer g.fwdMu.Unlock()
	if g.ctx.Err() != nil {
		return fmt.Errorf("gateway: forward %v: %w", f, net.ErrClosed)
	}
	if slices.ContainsFunc(g.fwds, func(in *inbound) bool { return in.f.Proto == f.Proto && in.f.Host == f.Host }) {
		return fmt.Errorf("gateway: forward %v: %v already forwarded", f, f.Host)
	}
	guest, from, err := g.inboundEnds(f)
	if err != nil {
		return fmt.Errorf("gateway: forward %v: %w", f, err)
	}
	// The host socket takes the family of its address alone: [::]
	// leaves 0.0.0.0 to a forward of its own, as with Linux's
	// bindv6only.
	family := "4"
	if f.Host.Addr().Is6() {
		family = "6"
	}
	in := &inbound{f: f}
	switch f.Proto {
	case TCP:
		l, err := net.ListenTCP("tcp"+family, net.TCPAddrFromAddrPort(f.Host))
		if err != nil {
			return fmt.Errorf("gateway: forward %v: %w", f, err)
		}
		in.stop = g.loop(func() { g.acceptInbound(l, from, guest) }, func() { l.Close() })
	case UDP:
		c, err := net.ListenUDP("udp"+family, net.UDPAddrFromAddrPort(f.Host))
		if err != nil {
			return fmt.Errorf("gateway: forward %v: %w", f, err)
		}
		c.SetReadBuffer(udpRelayReadBuffer) // its clients' bursts, as a flow's
		in.stop = g.loop(func() { g.serveInboundUDP(c, from, guest) }, func() { c.Close() })
	default:
		return fmt.Errorf("gateway: forward %v: no protocol %q", f, f.Proto)
	}
	g.fwds = append(g.fwds, in)
	return nil
}

// inboundEnds returns where f's flows go in the guest, and the gateway's
// address they come from: the guest's IPv4 address unless f names one in
// the guest's subnet or IPv6 prefix, and the gateway's address in the
// same family.
func (g *Gateway) inboundEnds(f Forward) (guest, from netip.AddrPort, err error) {
	n, n6 := g.cfg.Network, g.cfg.Network6
	a := f.Guest
	switch {
	case !a.IsValid():
		a = n.Guest
	case a.Is4() && !n.guestMayHold(a):
		return guest, from, fmt.Errorf("guest address %v: not a guest's in %v", a, n.Subnet)
	case a.Is6() && g.cfg.NoIPv6:
		return guest, from, fmt.Errorf("guest address %v: the gateway's IPv6 is off", a)
	case a.Is6() && !n6.guestMayHold(a):
		return guest, from, fmt.Errorf("guest address %v: not a guest's in %v", a, n6.Prefix)
	}
	gw := n.Gateway
	if a.Is6() {
		gw = n6.Gateway
	}
	return netip.AddrPortFrom(a, f.GuestPort), netip.AddrPortFrom(gw, 0), nil
}

// RemoveForward stops the forward on f.Proto and f.Host; flows it already
// carries go on until they end.
func (g *Gateway) RemoveForward(f Forward) error {
	g.fwdMu.Lock()
	i := slices.IndexFunc(g.fwds, func(in *inbound) bool { return in.f.Proto == f.Proto && in.f.Host == f.Host })
	if i < 0 {
		g.fwdMu.Unlock()
		return fmt.Errorf("gateway: forward %s:%v: not forwarded", f.Proto, f.Host)
	}
	in := g.fwds[i]
	g.fwds = slices.Delete(g.fwds, i, i+1)
	g.fwdMu.Unlock()
	in.stop()
	return nil
}

// Forwards returns the forwards running, in the order they were added.
func (g *Gateway) Forwards() []Forward {
	g.fwdMu.Lock()
	defer g.fwdMu.Unlock()
	out := make([]Forward, len(g.fwds))
	for i, in := range g.fwds {
		out[i] = in.f
	}
	return out
}

// loop runs serve in a goroutine of the gateway's until closeSocket makes
// it return, on the returned stop or when the gateway closes.
func (g *Gateway) loop(serve, closeSocket func()) (stop func()) {
	done := make(chan struct{})
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer close(done)
		serve()
	}()
	unregister := context.AfterFunc(g.ctx, closeSocket)
	return func() {
		unregister()
		closeSocket()
		<-done
	}
}

// acceptInbound carries each connection accepted on l to guest, from the
// gateway's address from.
func (g *Gateway) acceptInbound(l *net.TCPListener, from, guest netip.AddrPort) {
	for {
		// Accepted with keepalive on, package net's default for a
		// listener's connections, as relayTCP wants.
		host, err := l.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			g.Stats.InboundErrors.Inc()
			time.Sleep(10 * time.Millisecond) // out of descriptors: let some go
			continue
		}
		if !g.admit(TCP, addrPortOf(host.RemoteAddr()), guest) {
			host.SetLinger(0)
			host.Close()
			continue
		}
		go func() {
			defer g.wg.Done()
			defer give(g.flows)
			g.Stats.InboundTCP.Inc()
			ctx, cancel := context.WithTimeout(g.ctx, g.cfg.ConnectTimeout)
			c, err := g.s.TCP().Dial(ctx, from, guest)
			cancel()
			if err != nil {
				// The guest refused or did not answer: so is the host's peer.
				g.Stats.InboundRefused.Inc()
				host.SetLinger(0)
				host.Close()
				return
			}
			stop := context.AfterFunc(g.ctx, func() {
				c.SetLinger(0)
				c.Close()
				host.SetLinger(0)
				host.Close()
			})
			defer stop()
			rec, untrack := g.track(FlowInfo{Proto: TCP, Inbound: true, Guest: guest, Peer: c.LocalAddr().(*net.TCPAddr).AddrPort()}, host)
			defer untrack()
			relayTCP(c, host, &g.Stats.Relay, rec)
		}()
	}
}

// serveInboundUDP carries the datagrams arriving on c to guest, a flow per
// client address, each through a GoNet endpoint of its own on the
// gateway's address from, so that the guest's answers find their way back.
// A flow ends when idle both ways (udpIdle): a client that streams to a
// guest that never answers keeps its flow, and so the port the guest sees
// it come from, as long as it sends.
func (g *Gateway) serveInboundUDP(c *net.UDPConn, from, guest netip.AddrPort) {
	// mu guards flows, and makes finding a flow and touching its clock
	// one step against its answering goroutine's ending it when idle, so
	// that a datagram never goes to an endpoint just closed.
	var mu sync.Mutex
	flows := map[netip.AddrPort]*inboundUDP{}
	defer func() {
		mu.Lock()
		for _, f := range flows {
			f.e.Close()
		}
		mu.Unlock()
	}()
	buf := make([]byte, 65535)
	for {
		n, client, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		mu.Lock()
		f := flows[client]
		if f != nil {
			f.idle.touch()
		}
		mu.Unlock()
		if f == nil {
			if !g.admit(UDP, client, guest) {
				continue
			}
			e, err := g.s.ListenUDP(from)
			if err != nil {
				give(g.flows)
				g.wg.Done()
				g.Stats.InboundErrors.Inc()
				continue
			}
			g.Stats.InboundUDP.Inc()
			f = &inboundUDP{g: g, e: e, host: c, client: client, guest: guest}
			f.idle.start(&g.cfg)
			mu.Lock()
			flows[client] = f
			mu.Unlock()
			go func() {
				defer g.wg.Done()
				defer give(g.flows)
				defer e.Close()
				f.answer(func() bool {
					mu.Lock()
					defer mu.Unlock()
					if !f.idle.over() {
						return false
					}
					delete(flows, client)
					return true
				})
				mu.Lock()
				if flows[client] == f {
					delete(flows, client)
				}
				mu.Unlock()
			}()
		}
		if _, err := f.e.WriteToUDPAddrPort(buf[:n], guest); err != nil {
			g.Stats.InboundErrors.Inc()
		}
	}
}

// inboundUDP is one client's flow through an inbound UDP forward.
type inboundUDP struct {
	g      *Gateway
	e      *udp.Conn    // the flow's GoNet endpoint, towards the guest
	host   *net.UDPConn // the forward's host socket, towards the client
	client netip.AddrPort
	guest  netip.AddrPort
	idle   udpIdle
}

// answer carries the guest's answers on the flow's endpoint back to the
// client through the host socket, until the endpoint closes or, at the
// flow's idle deadline, ended (which holds the forward's lock) says the
// flow is over.
func (f *inboundUDP) answer(ended func() bool) {
	// The guest's answer goes to the host socket where it lies in the
	// stack's buffer: an idle flow holds no buffer of its own.
	answer := func(payload []byte, from netip.AddrPort) {
		if from != f.guest {
			return
		}
		f.idle.answer()
		if _, err := f.host.WriteToUDPAddrPort(payload, f.client); err != nil {
			f.g.Stats.InboundErrors.Inc()
		}
	}
	f.e.SetReadDeadline(f.idle.deadline())
	for {
		err := f.e.ReadDatagram(answer)
		switch {
		case err == nil:
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return // closed with the forward or the gateway
		case ended():
			f.g.Stats.UDPIdleExpired.Inc()
			return
		default: // a datagram came meanwhile
			f.e.SetReadDeadline(f.idle.deadline())
		}
	}
}
