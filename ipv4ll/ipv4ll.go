// Package ipv4ll is GoNet's IPv4 link-local address autoconfiguration
// (RFC 3927, the "zeroconf" address): on a link where no DHCP server
// answers and nobody configured an address, a host takes one of
// 169.254/16 by itself, as macOS, Windows, avahi-autoipd and
// systemd-networkd's LinkLocalAddressing do, and reaches its neighbours
// there, by name with mDNS (package mdns).
//
// A Client is one goroutine per NIC. It draws candidates from a sequence
// seeded by the NIC's MAC (section 2.1), so that a host picks the same
// address each time on the same link, after the address it held last time
// when it remembers one (Config.Remembered, kept in a file by
// SaveAddress and LoadAddress); probes for each with the stack's
// address conflict detection (section 2.2, package arp: RFC 5227's
// probes, whose constants RFC 3927 shares, and its rate limit after ten
// conflicts); assigns the first nobody holds, announced and defended once
// (sections 2.4 and 2.5 (b)); and, when a second conflict takes it away,
// starts over with the next candidate. The stack probes for it again when
// the link comes up (arp.Protocol.Verify).
package ipv4ll

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
)

// Prefix is the IPv4 link-local prefix (RFC 3927 section 2.1), the on-link
// prefix a claimed address is assigned with.
var Prefix = ipv4.LinkLocalPrefix

// The range candidates are drawn from: 169.254/16 but its first and last
// 256 addresses, which section 2.1 reserves ("MUST NOT be selected").
const (
	firstHost = 0xa9fe0100 // 169.254.1.0
	rangeSize = 254 * 256  // to 169.254.254.255
)

// Candidates returns the sequence of addresses a host with MAC mac tries,
// in order: pseudo-random over the range of section 2.1, from a generator
// seeded by the MAC ("so that the same host will tend to choose the same
// address" after a restart).
func Candidates(mac net.HardwareAddr) func() netip.Addr {
	h := fnv.New64a()
	h.Write(mac)
	seed := h.Sum64()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() netip.Addr {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], firstHost+uint32(r.IntN(rangeSize)))
		return netip.AddrFrom4(b)
	}
}

// IsLinkLocal reports whether a is an IPv4 link-local address.
func IsLinkLocal(a netip.Addr) bool { return Prefix.Contains(a) }

// IsCandidate reports whether a is in the range section 2.1 lets a host
// choose from: 169.254.1.0 to 169.254.254.255.
func IsCandidate(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])-firstHost < rangeSize
}

// Config is how a client chooses its addresses.
type Config struct {
	// Remembered is the address the NIC held last time, if any: the
	// first candidate probed for, before the MAC's sequence. Section
	// 2.1: "hosts with a previously recorded address SHOULD use that
	// address as their first candidate when probing", so that hosts
	// restarted together come back on the addresses they had. One
	// outside the range of section 2.1 is passed over.
	Remembered netip.Addr
	// OnClaim, when not nil, is called with each address the client
	// assigns, from the client's goroutine, before Wait and Address
	// give it: for the caller to record it (SaveAddress) for the next
	// start.
	OnClaim func(netip.Addr)
}

// LoadAddress reads the address SaveAddress wrote, for Config.Remembered.
func LoadAddress(path string) (netip.Addr, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ipv4ll: load address: %w", err)
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ipv4ll: load address %s: %w", path, err)
	}
	if !IsCandidate(a) {
		return netip.Addr{}, fmt.Errorf("ipv4ll: load address %s: %v is not one of 169.254.1.0-169.254.254.255", path, a)
	}
	return a, nil
}

// SaveAddress writes a to path, replacing it whole (through a temporary
// file and a rename), so that a crash leaves the old address or the new.
func SaveAddress(path string, a netip.Addr) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(a.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("ipv4ll: save address: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("ipv4ll: save address: %w", err)
	}
	return nil
}

// Stack is what a client needs of the GoNet stack whose NIC it
// configures: a *stack.Stack.
type Stack interface {
	HardwareAddr(nicName string) (net.HardwareAddr, error)
	Probe(ctx context.Context, nicName string, addr netip.Addr) (inUse bool, err error)
	AddAddressWith(ctx context.Context, nicName string, addr netip.Prefix, o stack.AddressOptions) error
	RemoveAddress(nicName string, addr netip.Addr) error
	AddStats(prefix string, st any)
	Logger() *slog.Logger
}

// Stats counts a client's work.
type Stats struct {
	Probes    stats.Counter // candidates probed for
	InUse     stats.Counter // candidates another host answered for
	Claimed   stats.Counter // addresses assigned
	Lost      stats.Counter // addresses given up to another host (section 2.5)
	Addresses stats.Gauge   // 1 while the client holds an address
}

// Client claims and keeps a link-local address on one NIC.
type Client struct {
	Stats Stats

	s      Stack
	nic    string
	cfg    Config
	next   func() netip.Addr
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	addr netip.Addr    // held now; invalid while probing
	held chan struct{} // closed while addr is held, a new one made when it is lost
}

// Start starts a client on the named NIC of s, which claims an address
// until Close. Its counters join the stack's under IPv4LL.<nic>.
func Start(s Stack, nicName string) (*Client, error) {
	return StartWith(s, nicName, Config{})
}

// StartWith is Start with cfg: the address of last time tried first.
func StartWith(s Stack, nicName string, cfg Config) (*Client, error) {
	mac, err := s.HardwareAddr(nicName)
	if err != nil {
		return nil, fmt.Errorf("ipv4ll: %s: %w", nicName, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		s:      s,
		nic:    nicName,
		cfg:    cfg,
		next:   Candidates(mac),
		log:    s.Logger().With(slog.String("nic", nicName)),
		cancel: cancel,
		done:   make(chan struct{}),
		held:   make(chan struct{}),
	}
	s.AddStats("IPv4LL."+nicName, &c.Stats)
	go c.run(ctx)
	return c, nil
}

// Address returns the address the client holds, if any.
func (c *Client) Address() (netip.Addr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr, c.addr.IsValid()
}

// Wait returns the address the client holds, once it holds one, or
// ctx's error.
func (c *Client) Wait(ctx context.Context) (netip.Addr, error) {
	for {
		c.mu.Lock()
		a, held := c.addr, c.held
		c.mu.Unlock()
		if a.IsValid() {
			return a, nil
		}
		select {
		case <-held:
		case <-ctx.Done():
			return netip.Addr{}, fmt.Errorf("ipv4ll: %s: waiting for an address: %w", c.nic, ctx.Err())
		case <-c.done:
			return netip.Addr{}, fmt.Errorf("ipv4ll: %s: client stopped", c.nic)
		}
	}
}

// Close stops the client and takes its address off the NIC.
func (c *Client) Close() error {
	c.cancel()
	<-c.done
	return nil
}

// run claims addresses until ctx ends.
func (c *Client) run(ctx context.Context) {
	defer close(c.done)
	first := c.cfg.Remembered
	if first.IsValid() && !IsCandidate(first) {
		c.log.Warn("IPv4 link-local: remembered address outside 169.254.1.0-169.254.254.255: passed over", "addr", first.String())
		first = netip.Addr{}
	}
	for ctx.Err() == nil {
		// Section 2.1: the address of last time first, then the
		// MAC's sequence.
		a := first
		if a.IsValid() {
			first = netip.Addr{}
		} else {
			a = c.next()
		}
		c.Stats.Probes.Inc()
		inUse, err := c.s.Probe(ctx, c.nic, a)
		switch {
		case errors.Is(err, arp.ErrProbing):
			continue // somebody of ours probes for it: another candidate
		case err != nil:
			if ctx.Err() == nil {
				c.log.Warn("IPv4 link-local: stopped", "err", err)
			}
			return
		case inUse:
			c.Stats.InUse.Inc()
			continue
		}
		if !c.hold(ctx, a) {
			return
		}
	}
}

// hold assigns a, probed for already, and keeps it until another host
// takes it (then it reports true, for the next candidate) or ctx ends
// (false, the address removed).
func (c *Client) hold(ctx context.Context, a netip.Addr) bool {
	lost := make(chan struct{}, 1)
	err := c.s.AddAddressWith(ctx, c.nic, netip.PrefixFrom(a, Prefix.Bits()), stack.AddressOptions{
		ACD: true, Probed: true,
		// Section 2.5 (b): defend it once, and give it up to a second
		// conflict within DEFEND_INTERVAL.
		Defend: arp.DefendOnce,
		OnConflict: func(cf arp.Conflict) {
			if cf.GaveUp {
				select {
				case lost <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("IPv4 link-local: address not assigned", "addr", a.String(), "err", err)
		}
		return ctx.Err() == nil
	}
	c.Stats.Claimed.Inc()
	c.Stats.Addresses.Add(1)
	// Recorded before Wait hands it out, so that a caller that saves it
	// has it saved by then.
	if c.cfg.OnClaim != nil {
		c.cfg.OnClaim(a)
	}
	c.mu.Lock()
	c.addr = a
	close(c.held)
	c.mu.Unlock()
	c.log.Info("IPv4 link-local address claimed", "addr", netip.PrefixFrom(a, Prefix.Bits()).String())
	select {
	case <-lost:
		// The stack removed it; section 2.5: "MUST immediately stop
		// using this address" and configure a new one.
		c.Stats.Lost.Inc()
		c.log.Warn("IPv4 link-local address lost to another host: choosing another", "addr", a.String())
		c.release()
		return true
	case <-ctx.Done():
		c.release()
		c.s.RemoveAddress(c.nic, a)
		return false
	}
}

// release forgets the address held.
func (c *Client) release() {
	c.Stats.Addresses.Add(-1)
	c.mu.Lock()
	c.addr = netip.Addr{}
	c.held = make(chan struct{})
	c.mu.Unlock()
}
