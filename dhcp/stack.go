package dhcp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/udp"
)

// Stack is what a client needs of the GoNet stack whose NIC it
// configures: a *stack.Stack. (Package stack does not import this one, so
// that embedding the stack brings in no DHCP encoder.)
type Stack interface {
	ListenUDPOn(nicName string, laddr netip.AddrPort) (*udp.Conn, error)
	HardwareAddr(nicName string) (net.HardwareAddr, error)
	AddAddress(nicName string, addr netip.Prefix) error
	RemoveAddress(nicName string, addr netip.Addr) error
	AddRoute(dst netip.Prefix, gw netip.Addr, nicName string) error
	RemoveRoute(dst netip.Prefix, gw netip.Addr, nicName string) bool
	SetLinkMTU(nicName string, mtu int) (int, error)
	SetLearnedDNS(from stack.DNSOrigin, cfg stack.DNSConfig) error
	Probe(ctx context.Context, nicName string, addr netip.Addr) (inUse bool, err error)
	AddAddressWith(ctx context.Context, nicName string, addr netip.Prefix, o stack.AddressOptions) error
	AddStats(prefix string, st any)
	WatchLink(nicName string, f func(up bool)) error
	Clock() clock.Clock
	Logger() *slog.Logger
}

// StartOn starts a client on the named NIC of s: it asks for an address
// and applies the lease (address, routes, MTU, and the name servers and
// search list for s.Resolver) until ctx ends,
// Close or Release. Its socket is UDP on 0.0.0.0:68 bound to the NIC
// (Stack.ListenUDPOn), so that it broadcasts there from 0.0.0.0 before
// the NIC has an address and hears only its own NIC's server, a client on
// each NIC sharing the port. Its counters join the stack's under
// DHCPClient.<nic>. Unless cfg has a Probe or NoProbe, each new address
// is first probed for with the stack's address conflict detection (RFC
// 5227: 4 to 7 s) and declined if another host holds it, and once
// assigned it is announced and defended once; an address given up to
// another host is declined and the client starts over. cfg's Clock,
// Logger and Name default to the stack's and the NIC's.
func StartOn(ctx context.Context, s Stack, nicName string, cfg ClientConfig) (*Client, error) {
	hw, err := s.HardwareAddr(nicName)
	if err != nil {
		return nil, fmt.Errorf("dhcp: client on %s: %w", nicName, err)
	}
	c, err := s.ListenUDPOn(nicName, netip.AddrPortFrom(netip.IPv4Unspecified(), ClientPort))
	if err != nil {
		return nil, fmt.Errorf("dhcp: client on %s: %w", nicName, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = s.Clock()
	}
	if cfg.Logger == nil {
		cfg.Logger = s.Logger()
	}
	if cfg.Name == "" {
		cfg.Name = nicName
	}
	h := &stackHost{s: s, nic: nicName, hw: hw, ctx: ctx}
	if cfg.Probe == nil && !cfg.NoProbe {
		cfg.Probe = func(ctx context.Context, a netip.Addr) (bool, error) { return s.Probe(ctx, nicName, a) }
		h.acd = true
	}
	client := newClient(ctx, c, h, cfg)
	h.client = client
	s.AddStats("DHCPClient."+nicName, &client.Stats)
	// The link coming up may mean another network: the lease is
	// verified (Client.LinkUp).
	_ = s.WatchLink(nicName, func(up bool) {
		if up {
			client.LinkUp()
		}
	})
	client.start(ctx)
	return client, nil
}

// stackHost is a stack's NIC as its client configures it.
type stackHost struct {
	s      Stack
	nic    string
	hw     net.HardwareAddr
	ctx    context.Context
	acd    bool    // the client probes with the stack's ACD: leased addresses are defended too
	client *Client // told of an address the defence gave up
}

func (h *stackHost) HardwareAddr() net.HardwareAddr { return h.hw }

// AddAddress assigns a leased address. With the stack's address conflict
// detection, which probed it already, it is announced and defended once
// (RFC 5227 sections 2.3 and 2.4 (b), what suits an address that may be
// given up); given up, the client hears of it and declines it.
func (h *stackHost) AddAddress(a netip.Prefix) error {
	if !h.acd {
		return h.s.AddAddress(h.nic, a)
	}
	return h.s.AddAddressWith(h.ctx, h.nic, a, stack.AddressOptions{ACD: true, Probed: true, Defend: arp.DefendOnce,
		OnConflict: func(c arp.Conflict) {
			if c.GaveUp {
				h.client.Conflict(c.Addr)
			}
		}})
}

func (h *stackHost) RemoveAddress(a netip.Addr) error { return h.s.RemoveAddress(h.nic, a) }

func (h *stackHost) AddRoute(dst netip.Prefix, gw netip.Addr) error {
	return h.s.AddRoute(dst, gw, h.nic)
}

func (h *stackHost) RemoveRoute(dst netip.Prefix, gw netip.Addr) { h.s.RemoveRoute(dst, gw, h.nic) }

func (h *stackHost) SetDNS(servers []netip.Addr, search []string) {
	cfg := stack.DNSConfig{Search: search}
	for _, a := range servers {
		cfg.Servers = append(cfg.Servers, netip.AddrPortFrom(a, 53))
	}
	if err := h.s.SetLearnedDNS(stack.DNSOrigin{Protocol: stack.DNSFromDHCP, NIC: h.nic}, cfg); err != nil {
		h.s.Logger().Warn("the lease's DNS servers not taken", "nic", h.nic, "err", err)
	}
}

func (h *stackHost) SetMTU(mtu int) int {
	got, _ := h.s.SetLinkMTU(h.nic, mtu)
	return got
}
