package dhcp

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// Config configures a Server. Zero fields take slirp4netns's defaults:
// network 10.0.2.0/24, the server and router at 10.0.2.2, DNS at 10.0.2.3,
// leases from 10.0.2.100.
type Config struct {
	// Network is the subnet the server leases from.
	Network netip.Prefix
	// Server is the server's own address on Network: its identifier
	// (option 54).
	Server netip.Addr
	// Router is the default gateway given to clients (option 3); Server
	// when invalid.
	Router netip.Addr
	// DNS are the name servers given to clients (option 6); 10.0.2.3
	// when nil, none when empty and not nil.
	DNS []netip.Addr
	// FirstLease is the pool's first address; PoolSize the number of
	// addresses from it (when zero, up to the last host of Network, at
	// most 1024). The pool bounds the lease table: a guest that makes up
	// a new client for every DISCOVER exhausts the pool, not memory.
	FirstLease netip.Addr
	PoolSize   int
	// LeaseTime is the lease given to clients (option 51; 1 hour). T1
	// and T2 (options 58 and 59) are its half and seven eighths, as RFC
	// 2131 section 4.4.5 suggests.
	LeaseTime time.Duration
	// OfferHold is how long an offered address stays reserved for the
	// client waiting to request it (1 minute).
	OfferHold time.Duration
	// DeclineHold is how long an address a client declined stays out of
	// the pool (10 minutes).
	DeclineHold time.Duration
	// MTU is the interface MTU given to clients (option 26); not sent when
	// zero.
	MTU int
	// Clock tells lease expiry; clock.Real{} when nil.
	Clock clock.Clock
	// Logger takes the server's events, one per lease granted, released
	// or declined (log.go); nil discards them.
	Logger *slog.Logger
}

// ConfigFor returns slirp4netns's layout on another network (its --cidr):
// the server and router at host 2, DNS at host 3, leases from host 100.
// The network needs room for host 100: a /25 or larger.
func ConfigFor(network netip.Prefix) Config {
	base := u32(network.Masked().Addr())
	return Config{
		Network:    network.Masked(),
		Server:     addrOf(base + 2),
		DNS:        []netip.Addr{addrOf(base + 3)},
		FirstLease: addrOf(base + 100),
	}
}

// maxDefaultPool bounds the pool a large Network gets by default.
const maxDefaultPool = 1024

var (
	defaultNetwork    = netip.MustParsePrefix("10.0.2.0/24")
	defaultServer     = netip.MustParseAddr("10.0.2.2")
	defaultDNS        = netip.MustParseAddr("10.0.2.3")
	defaultFirstLease = netip.MustParseAddr("10.0.2.100")
)

func (c *Config) setDefaults() {
	c.Network = cmp.Or(c.Network, defaultNetwork)
	c.Server = cmp.Or(c.Server, defaultServer)
	c.Router = cmp.Or(c.Router, c.Server)
	if c.DNS == nil {
		c.DNS = []netip.Addr{defaultDNS}
	}
	c.FirstLease = cmp.Or(c.FirstLease, defaultFirstLease)
	c.LeaseTime = cmp.Or(c.LeaseTime, time.Hour)
	c.OfferHold = cmp.Or(c.OfferHold, time.Minute)
	c.DeclineHold = cmp.Or(c.DeclineHold, 10*time.Minute)
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.PoolSize == 0 && c.Network.IsValid() && c.FirstLease.Is4() {
		// Up to the host before the directed broadcast.
		last := u32(c.Network.Masked().Addr()) | (1<<(32-c.Network.Bits()) - 1)
		if c.Network.Bits() < 31 {
			last--
		}
		if f := u32(c.FirstLease); f <= last {
			c.PoolSize = int(min(last-f+1, maxDefaultPool))
		}
	}
}

// validate checks that the addresses fit together.
func (c *Config) validate() error {
	n := c.Network
	if !n.IsValid() || !n.Addr().Is4() || n.Bits() > 30 {
		return fmt.Errorf("dhcp: network %v is not an IPv4 subnet with room for hosts", n)
	}
	for _, a := range []netip.Addr{c.Server, c.Router, c.FirstLease} {
		if !n.Contains(a) {
			return fmt.Errorf("dhcp: address %v is not on network %v", a, n)
		}
	}
	for _, a := range c.DNS {
		if !a.Is4() {
			return fmt.Errorf("dhcp: DNS server %v is not an IPv4 address", a)
		}
	}
	last := u32(c.FirstLease) + uint32(c.PoolSize) - 1
	if c.PoolSize <= 0 || last < u32(c.FirstLease) || !n.Contains(addrOf(last)) {
		return fmt.Errorf("dhcp: a pool of %d from %v does not fit network %v", c.PoolSize, c.FirstLease, n)
	}
	if c.MTU != 0 && (c.MTU < 68 || c.MTU > 65535) {
		return fmt.Errorf("dhcp: MTU %d outside 68-65535 (RFC 2132 section 5.1)", c.MTU)
	}
	if c.LeaseTime < time.Second || c.LeaseTime/time.Second > 0xfffffffe {
		return fmt.Errorf("dhcp: lease time %v outside 1 s to 2^32-2 s (RFC 2132 section 9.2)", c.LeaseTime)
	}
	return nil
}
