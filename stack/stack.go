// Package stack wires GoNet's layers into a working host: NICs (each a link
// endpoint with its Ethernet dealer and ARP), IPv4 with its addresses and
// routes, ICMP, UDP and TCP, sharing one clock, one random source, one
// buffer pool and one memory budget (package env).
package stack

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/dealer"
	"github.com/gonetstack/gonet/dhcpv6"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/icmp"
	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/igmp"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/ratelimit"
	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/udp"
	"github.com/gonetstack/gonet/wire"
)

// Config is a stack's configuration. The zero value is usable: real clock,
// random seed from the operating system, 512 MiB budget, RFC timers.
type Config struct {
	// Clock drives every timer; clock.Real{} when nil.
	Clock clock.Clock
	// Rand is the random source: UDP's and TCP's ephemeral ports (RFC
	// 6056), the first IP identification, the ping identifier, TCP's
	// secret key for initial sequence numbers (RFC 6528) and SYN cookies,
	// and each TCP connection's timestamp offset; seeded from crypto/rand
	// when nil.
	Rand rand.Source
	// MemoryLimit bounds the bytes the stack holds for others; 512 MiB
	// when zero.
	MemoryLimit int64
	// Logger takes the stack's events (a link failing, an address
	// conflict, a limit reached, never a packet), each repeated one
	// rate-limited; nil discards them, since a library does not write to
	// stderr unasked.
	Logger *slog.Logger

	ARP arp.Config
	// NoIPv6 leaves the stack IPv4-only, as Linux's disable_ipv6: its
	// NICs form no link-local address, run no neighbour discovery and
	// drop IPv6 frames (NIC.<nic>.RxUnknownType), and sockets take IPv4
	// addresses only.
	NoIPv6 bool

	IPv4 ipv4.Config
	IGMP igmp.Config
	IPv6 ipv6.Config
	NDP  ndp.Config
	// NoDHCPv6 keeps a NIC from asking DHCPv6 servers for DNS servers
	// and search domains when its routers set the Other or Managed flag
	// (package dhcpv6, stateless: addresses come from SLAAC).
	NoDHCPv6 bool
	ICMP     icmp.Config
	ICMPv6   icmpv6.Config
	UDP      udp.Config
	TCP      tcp.Config
}

// errNoIPv6 is the error for IPv6 asked of a stack with Config.NoIPv6.
var errNoIPv6 = fmt.Errorf("IPv6 disabled (stack.Config.NoIPv6): %w", syscall.EAFNOSUPPORT)

// DefaultMemoryLimit is the memory budget of a stack configured without one:
// a bound, not an allocation. New TCP connections stop at half of it (each
// is charged tcp.ConnMemory, about 9.5 KiB), so 512 MiB admits some 27,000
// connections, as many as a 10,000-connection server needs with room for
// their data; a smaller process sets its own.
const DefaultMemoryLimit = 512 << 20

// Stack is a GoNet host.
type Stack struct {
	cfg   Config
	env   *env.Env
	ip    *ipv4.Protocol
	ip6   *ipv6.Protocol
	nets  ip.Networks // the network layers the transports run over
	icmp  *icmp.Protocol
	icmp6 *icmpv6.Protocol
	udp   *udp.Protocol
	tcp   *tcp.Protocol
	dns   resolverState // resolver.go

	mu     sync.Mutex
	nics   []*nic
	extra  map[string]any // counters of protocols running on the stack (AddStats)
	closed bool

	// mcastMu guards joins, the multicast groups joined on each NIC,
	// with their members' source filters (multicast.go).
	mcastMu sync.Mutex
	joins   map[groupKey]*sourcefilter.Members
}

// nic is a NIC with its ARP, IPv4 interface and IGMP, and its neighbour
// discovery and IPv6 interface.
type nic struct {
	eth    *ethernet.NIC
	arp    *arp.Protocol
	iface  *ipv4.Interface
	igmp   *igmp.Protocol
	nd     *ndp.Protocol
	iface6 *ipv6.Interface
	dhcp6  *dhcpv6.Client // started by the first advertisement with M or O; s.mu guards it
	ep     link.Endpoint
	link   linkWatch // linkstate.go
}

// New returns a running stack with no NICs.
func New(cfg Config) *Stack {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.MemoryLimit == 0 {
		cfg.MemoryLimit = DefaultMemoryLimit
	}
	e := &env.Env{
		Clock:  cfg.Clock,
		Rand:   env.NewRand(cfg.Rand),
		Pool:   buffer.NewPool(),
		Budget: budget.New(cfg.MemoryLimit),
		Log:    logs.OrDiscard(cfg.Logger),
	}
	s := &Stack{cfg: cfg, env: e}
	s.ip = ipv4.New(cfg.IPv4, e)
	s.ip6 = ipv6.New(cfg.IPv6, e)
	if cfg.ICMP.Limiter == nil && cfg.ICMPv6.Limiter == nil {
		// One bucket for both families' errors, as Linux's
		// icmp_msgs_per_sec bounds them together.
		l := ratelimit.New(cmp.Or(cfg.ICMP.ErrorRate, 1000), cmp.Or(cfg.ICMP.ErrorBurst, 50), e.Clock)
		cfg.ICMP.Limiter, cfg.ICMPv6.Limiter = l, l
	}
	s.icmp = icmp.New(s.ip, cfg.ICMP, e)
	s.icmp6 = icmpv6.New(s.ip6, cfg.ICMPv6, e)
	s.nets = ip.Networks{V4: s.ip}
	if !cfg.NoIPv6 {
		s.nets.V6 = s.ip6
	}
	s.udp = udp.New(s.nets, cfg.UDP, e)
	s.udp.SetMembership(membership{s})
	s.tcp = tcp.New(s.nets, cfg.TCP, e)
	s.ip.Start()
	s.ip6.Start()
	return s
}

// AddNIC attaches a link endpoint under name and starts its goroutines.
func (s *Stack) AddNIC(name string, ep link.Endpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("stack: add NIC %s: stack closed", name)
	}
	eth, err := ethernet.NewNIC(name, ep, s.env.Pool)
	if err != nil {
		return fmt.Errorf("stack: add NIC: %w", err)
	}
	// ARP is the interface's output; the interface, once made, tells ARP
	// its addresses.
	n := &nic{eth: eth, arp: arp.New(eth, s.cfg.ARP, s.env)}
	n.iface, err = s.ip.AddOffloadInterface(name, eth.MTU(), ep.Capabilities(), n.arp)
	if err != nil {
		return fmt.Errorf("stack: add NIC: %w", err)
	}
	eth.Bind(wire.EtherTypeIPv4, n.iface)
	// IGMP reports the interface's groups and takes the IGMP messages
	// it receives; the NIC's filter takes frames to its groups' MACs
	// (and, once ndp sets its own, to IPv6's).
	n.igmp = igmp.New(name, n.iface, s.cfg.IGMP, s.env)
	n.iface.SetGroupManagement(n.igmp)
	eth.SetMulticastFilter("ipv4", n.igmp.GroupMACs())
	if !s.cfg.NoIPv6 {
		// Neighbour discovery is the IPv6 interface's output, and takes
		// the ND and MLD messages the interface receives; it tells the
		// IPv6 layer the addresses it forms and the routers it learns
		// (linkHost).
		n.nd = ndp.New(eth, s.cfg.NDP, s.env)
		n.iface6, err = s.ip6.AddInterface(name, eth.MTU(), ep.Capabilities(), n.nd)
		if err != nil {
			return fmt.Errorf("stack: add NIC: %w", err)
		}
		n.iface6.SetNeighborDiscovery(n.nd)
		eth.Bind(wire.EtherTypeIPv6, n.iface6)
	}
	eth.SetLogger(s.env.Log, s.env.Clock)
	n.arp.Start(n.iface, arpHost{s})
	if n.nd != nil {
		if err := n.nd.Start(linkHost{s: s, iface: n.iface6}); err != nil {
			return fmt.Errorf("stack: add NIC: IPv6 link-local address: %w", err)
		}
	}
	eth.Start()
	s.watchLink(n, ep)
	s.nics = append(s.nics, n)
	s.env.Log.Info("NIC up", "nic", name, "mac", eth.HardwareAddr().String(), "mtu", eth.MTU())
	return nil
}

func (s *Stack) nic(name string) (*nic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nics {
		if n.eth.Name() == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("stack: no NIC named %q", name)
}

// AddAddress assigns addr (with its prefix) to the named NIC. An IPv4
// address is added at once, as Linux adds a static one, with its on-link
// route, and announced with a gratuitous ARP; AddAddressWith probes for it
// first and defends it (RFC 5227). An IPv6 one goes through duplicate address detection first (RFC
// 4862 section 5.4): it is tentative, neither a source nor a destination,
// until DAD ends, and is never used if another node holds it (logged, and
// counted in NDP.<nic>.DADFailed). AddAddress returns once the address is
// assigned: tentative, or preferred at once under NDP.NoDAD.
func (s *Stack) AddAddress(nicName string, addr netip.Prefix) error {
	n, err := s.nic(nicName)
	if err != nil {
		return err
	}
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		if n.nd == nil {
			return fmt.Errorf("stack: add %v to %s: %w", addr, nicName, errNoIPv6)
		}
		if err := n.nd.AddStatic(addr); err != nil {
			return fmt.Errorf("stack: %w", err)
		}
		// ndp hands the address to the IPv6 layer on its announcer's
		// goroutine; without this wait an address added without DAD
		// would not yet be a source or destination on return.
		if err := n.nd.Sync(context.Background()); err != nil {
			return fmt.Errorf("stack: add %v to %s: %w", addr, nicName, err)
		}
		return nil
	}
	if err := s.ip.AddAddress(n.iface, addr); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	n.arp.Announce(addr.Addr())
	s.env.Log.Info("address added", "nic", nicName, "addr", addr.String())
	return nil
}

// AddRoute adds a route to dst through gw (invalid gw: on-link) on nic.
func (s *Stack) AddRoute(dst netip.Prefix, gw netip.Addr, nicName string) error {
	n, err := s.nic(nicName)
	if err != nil {
		return err
	}
	if dst.Addr().Is6() {
		if n.iface6 == nil {
			return fmt.Errorf("stack: route %v on %s: %w", dst, nicName, errNoIPv6)
		}
		err = s.ip6.AddRoute(ipv6.Route{Dst: dst, Gateway: gw, Iface: n.iface6})
	} else {
		err = s.ip.AddRoute(ipv4.Route{Dst: dst, Gateway: gw, Iface: n.iface})
	}
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	return nil
}

// SetDefaultGateway routes 0.0.0.0/0 (::/0 for an IPv6 gw) through gw on
// nic.
func (s *Stack) SetDefaultGateway(gw netip.Addr, nicName string) error {
	if gw.Is6() {
		return s.AddRoute(netip.PrefixFrom(netip.IPv6Unspecified(), 0), gw, nicName)
	}
	return s.AddRoute(netip.PrefixFrom(netip.IPv4Unspecified(), 0), gw, nicName)
}

// SetForwarding turns forwarding mode on or off for the named NIC, for
// both families: while on, the NIC takes TCP, UDP, ICMP and ICMPv6 for any
// unicast destination a router would forward, not only the stack's
// addresses, and the stack may send from any source address out of it
// (ipv4/forward.go, ipv6/forward.go). What it takes for a foreign address
// goes to the forwarder hooks (SetTCPForwarder, SetUDPForwarder,
// SetEchoForwarder, SetEcho6Forwarder), which terminate each flow in the
// stack: a gateway for the guest behind the NIC. Without hooks, TCP is
// reset, UDP answered with port unreachable and pings dropped.
func (s *Stack) SetForwarding(nicName string, on bool) error {
	n, err := s.nic(nicName)
	if err != nil {
		return err
	}
	n.iface.SetForwarding(on)
	if n.iface6 != nil {
		n.iface6.SetForwarding(on)
	}
	return nil
}

// SetTCPForwarder sets the hook that decides TCP SYNs no connection or
// listener takes, for the stack's addresses or, on a forwarding NIC, any
// other (tcp.ForwardRequest: Accept, Refuse, Unreachable or Drop). It runs
// in a goroutine per SYN, at most TCP.ForwardMaxPending at once. Nil
// removes it.
func (s *Stack) SetTCPForwarder(hook func(*tcp.ForwardRequest)) { s.tcp.SetForwarder(hook) }

// SetUDPForwarder sets the hook offered UDP datagrams no endpoint takes
// (udp.ForwardRequest: Open an endpoint for the flow, Unreachable or
// Drop; neither: port unreachable). It runs in the dealer's goroutine of
// the datagram's family and must not block. Nil removes it.
func (s *Stack) SetUDPForwarder(hook func(*udp.ForwardRequest)) { s.udp.SetForwarder(hook) }

// SetEchoForwarder sets the hook offered ICMP echo requests to foreign
// addresses, which only forwarding NICs take (icmp.EchoRequest: Reply or
// Error, at any time). It runs in the IPv4 dealer's goroutine and must not
// block. Nil removes it.
func (s *Stack) SetEchoForwarder(hook func(*icmp.EchoRequest)) { s.icmp.SetEchoForwarder(hook) }

// SetEcho6Forwarder sets the hook offered ICMPv6 echo requests to foreign
// addresses, which only forwarding NICs take (icmpv6.EchoRequest: Reply
// or Error, at any time). It runs in the IPv6 dealer's goroutine and must
// not block. Nil removes it.
func (s *Stack) SetEcho6Forwarder(hook func(*icmpv6.EchoRequest)) { s.icmp6.SetEchoForwarder(hook) }

// ListenUDP binds a UDP endpoint to laddr (port 0: an ephemeral port).
func (s *Stack) ListenUDP(laddr netip.AddrPort) (*udp.Conn, error) { return s.udp.Listen(laddr) }

// ListenUDPOn binds a UDP endpoint to laddr on the named NIC alone
// (udp.Protocol.ListenOn, SO_BINDTODEVICE before bind): it sends through
// that NIC and takes what comes in on it, sharing the port with endpoints
// bound to other NICs. IPv4 only.
func (s *Stack) ListenUDPOn(nicName string, laddr netip.AddrPort) (*udp.Conn, error) {
	return s.udp.ListenOn(nicName, laddr)
}

// Ping sends one ICMP echo request with size bytes of payload to dst and
// waits for the reply, returning the round-trip time.
func (s *Stack) Ping(ctx context.Context, dst netip.Addr, size int) (time.Duration, error) {
	if dst.Is6() && !dst.Is4In6() {
		return s.icmp6.Ping(ctx, dst, size)
	}
	return s.icmp.Ping(ctx, dst, size)
}

// Neighbor is an ARP cache entry of a NIC.
type Neighbor = arp.Entry

// Neighbors returns the named NIC's ARP cache.
func (s *Stack) Neighbors(nicName string) ([]Neighbor, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return nil, err
	}
	return n.arp.Entries(), nil
}

// HardwareAddr returns the named NIC's link-layer address.
func (s *Stack) HardwareAddr(nicName string) (net.HardwareAddr, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return nil, err
	}
	return n.eth.HardwareAddr(), nil
}

// RemoveAddress takes an IPv4 address off the named NIC with the routes
// that lived on it: its subnet's on-link route and the routes through
// gateways only that subnet reached, as Linux does; address conflict
// detection stops defending it. Sockets bound to it
// stay open, and what they send fails for want of a source.
func (s *Stack) RemoveAddress(nicName string, addr netip.Addr) error {
	n, err := s.nic(nicName)
	if err != nil {
		return err
	}
	if !addr.Is4() {
		return fmt.Errorf("stack: remove %v from %s: not an IPv4 address (IPv6 addresses are neighbour discovery's)", addr, nicName)
	}
	if !n.iface.HasAddress(addr) {
		return fmt.Errorf("stack: remove %v: not an address of %s", addr, nicName)
	}
	if err := s.ip.RemoveAddress(addr); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	n.arp.StopDefending(addr)
	s.env.Log.Info("address removed", "nic", nicName, "addr", addr.String())
	return nil
}

// RemoveRoute removes the route to dst through gw (invalid gw: on-link)
// on the named NIC; it reports whether there was one.
func (s *Stack) RemoveRoute(dst netip.Prefix, gw netip.Addr, nicName string) bool {
	n, err := s.nic(nicName)
	if err != nil {
		return false
	}
	if dst.Addr().Is6() {
		return n.iface6 != nil && s.ip6.RemoveRoute(ipv6.Route{Dst: dst, Gateway: gw, Iface: n.iface6})
	}
	return s.ip.RemoveRoute(ipv4.Route{Dst: dst, Gateway: gw, Iface: n.iface})
}

// SetLinkMTU sets the named NIC's IPv4 MTU to one the network configured
// (a DHCP server's, RFC 2132 section 5.1), within 68 and the link's own
// MTU; zero restores the link's. It returns the MTU in force.
func (s *Stack) SetLinkMTU(nicName string, mtu int) (int, error) {
	n, err := s.nic(nicName)
	if err != nil {
		return 0, err
	}
	if mtu == 0 {
		mtu = n.eth.MTU()
	}
	return n.iface.SetLinkMTU(mtu), nil
}

// AddStats adds the counters of a protocol that runs on the stack (a
// struct of stats.Counter and stats.Gauge fields, as every layer's Stats)
// to Metrics under prefix, as a DHCP client's under DHCPClient.<nic>.
func (s *Stack) AddStats(prefix string, st any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.extra == nil {
		s.extra = map[string]any{}
	}
	s.extra[prefix] = st
}

// Routes returns the routing table.
func (s *Stack) Routes() []ipv4.Route { return s.ip.Routes() }

// Pool returns the stack's buffer pool (tests check its leak count).
func (s *Stack) Pool() *buffer.Pool { return s.env.Pool }

// Logger returns the stack's logger, for what runs on the stack (a
// gateway, services) to log with the same handler and level: a logger that
// discards everything when Config gave none.
func (s *Stack) Logger() *slog.Logger { return s.env.Log }

// Clock returns the stack's clock.
func (s *Stack) Clock() clock.Clock { return s.env.Clock }

// Budget returns the stack's memory budget.
func (s *Stack) Budget() *budget.Budget { return s.env.Budget }

// IPv4 returns the IPv4 layer, for protocols added on top.
func (s *Stack) IPv4() *ipv4.Protocol { return s.ip }

// Counters returns every counter of every layer by dotted name
// ("IPv4.ReasmOKs", "NIC.tap0.RxFrames"): Metrics without the kinds.
func (s *Stack) Counters() map[string]int64 { return s.Metrics().Values() }

// Metrics returns every counter and gauge of every layer by dotted name
// ("TCP.RetransSegs", "NIC.tap0.RxFrames", "Memory.Used"), each with its
// kind, for a program that embeds the stack and for exposition formats.
// A NIC's counters are under "NIC.<name>." and its ARP's under
// "ARP.<name>."; the memory budget's under "Memory." (bytes, but for
// Refused, the reservations refused) and the buffer pool's packets lent
// under "Buffers.Outstanding".
func (s *Stack) Metrics() stats.Snapshot {
	m := stats.Snapshot{}
	s.mu.Lock()
	for _, n := range s.nics {
		m.Add("NIC."+n.eth.Name(), &n.eth.Stats)
		m.Add("ARP."+n.eth.Name(), &n.arp.Stats)
		m.Add("IGMP."+n.eth.Name(), &n.igmp.Stats)
		if n.nd != nil {
			m.Add("NDP."+n.eth.Name(), &n.nd.Stats)
		}
		if n.dhcp6 != nil {
			m.Add("DHCPv6."+n.eth.Name(), &n.dhcp6.Stats)
		}
	}
	for prefix, st := range s.extra {
		m.Add(prefix, st)
	}
	s.mu.Unlock()
	m.Add("IPv4", &s.ip.Stats)
	m.Add("IPv6", &s.ip6.Stats)
	m.Add("ICMP", &s.icmp.Stats)
	m.Add("ICMPv6", &s.icmp6.Stats)
	m.Add("UDP", &s.udp.Stats)
	m.Add("TCP", &s.tcp.Stats)
	b := s.env.Budget
	bytes := func(v int64) stats.Sample { return stats.Sample{Kind: stats.KindGauge, Unit: "bytes", Value: v} }
	m["Memory.Limit"] = bytes(b.Limit())
	m["Memory.Used"] = bytes(b.Used())
	// The peak only rises, yet it is a level, not a count of events:
	// its rate means nothing, so it is a gauge.
	m["Memory.Peak"] = bytes(b.Peak())
	m["Memory.Refused"] = stats.Sample{Kind: stats.KindCounter, Value: int64(b.Refused())}
	m["Buffers.Outstanding"] = stats.Sample{Kind: stats.KindGauge, Value: s.env.Pool.Outstanding()}
	return m
}

// Sync returns once the stack has handled what was queued inside it before
// the call: every NIC's ARP dealer, then the IPv4 dealer with the transports
// it delivers to by function call (see ipv4.Protocol.Sync), then every TCP
// connection's goroutine, which has also sent what that called for (see
// tcp.Protocol.Sync). It gives tests and tools an explicit "the stack has
// handled what it was given" instead of inferring it from a side effect.
//
// Sync does not cover frames still inside a link endpoint, or read by a NIC
// and not yet dealt: a frame is the dealers' once the NIC has delivered it.
// Nor does it wait for goroutines that work on their own after a dealer
// hands over: ARP resolutions, reassembly, pings, socket readers. It
// returns ctx's error if ctx ends first, and an error wrapping
// dealer.ErrClosed once the stack is closed.
func (s *Stack) Sync(ctx context.Context) error {
	s.mu.Lock()
	closed, nics := s.closed, s.nics
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("stack: sync: %w", dealer.ErrClosed)
	}
	for _, n := range nics {
		if err := n.arp.Sync(ctx); err != nil {
			return fmt.Errorf("stack: sync ARP on %s: %w", n.eth.Name(), err)
		}
	}
	if err := s.ip.Sync(ctx); err != nil {
		return fmt.Errorf("stack: sync IPv4: %w", err)
	}
	if err := s.ip6.Sync(ctx); err != nil {
		return fmt.Errorf("stack: sync IPv6: %w", err)
	}
	for _, n := range nics {
		if n.nd == nil {
			continue
		}
		if err := n.nd.Sync(ctx); err != nil {
			return fmt.Errorf("stack: sync neighbour discovery on %s: %w", n.eth.Name(), err)
		}
	}
	if err := s.tcp.Sync(ctx); err != nil {
		return fmt.Errorf("stack: sync TCP: %w", err)
	}
	return nil
}

// lastWordsTimeout bounds Close's wait for the frames the stack sent as it
// began closing to leave its NICs: a link that takes nothing does not hold
// the shutdown.
const lastWordsTimeout = 200 * time.Millisecond

// Close stops every goroutine of the stack, closes its NICs, and releases
// every buffer it holds. Sockets left open are not closed: their owners
// still hold them, and their queues are released when they close.
//
// The order matters: first the link's last words (a router's final
// advertisement), flushed out; then the NICs' receive sides, so nothing more is
// dealt upwards; then the goroutines that hold packets and send (pings, the
// IPv4 dealer and its assemblers, ARP resolutions); then the NICs' transmit
// sides they send through.
func (s *Stack) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	nics := s.nics
	s.mu.Unlock()
	// The link's last words first, while it still carries them: a
	// router's final advertisement (RFC 4861 section 6.2.5) and the
	// DHCPv6 leases given back (RFC 8415 section 18.2.7), written out
	// before StopReceive closes the endpoints.
	ctx, cancel := context.WithTimeout(context.Background(), lastWordsTimeout)
	for _, n := range nics {
		if n.nd != nil {
			n.nd.StopAdvertising()
		}
		s.mu.Lock()
		c := n.dhcp6
		s.mu.Unlock()
		if c != nil {
			c.Release(ctx)
		}
	}
	for _, n := range nics {
		n.eth.Flush(ctx)
	}
	cancel()
	var first error
	for _, n := range nics {
		if err := n.eth.StopReceive(); err != nil && first == nil {
			first = fmt.Errorf("stack: close NIC %s: %w", n.eth.Name(), err)
		}
	}
	for _, n := range nics {
		s.mu.Lock()
		c := n.dhcp6
		s.mu.Unlock()
		if c != nil {
			c.Close()
		}
	}
	s.tcp.Close()
	s.icmp.Close()
	s.icmp6.Close()
	s.ip.Close()
	s.ip6.Close()
	for _, n := range nics {
		n.igmp.Close()
		n.arp.Close()
		if n.nd != nil {
			n.nd.Close()
		}
	}
	for _, n := range nics {
		n.eth.Close()
		s.env.Log.Info("NIC down", "nic", n.eth.Name())
	}
	return first
}
