package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/icmp"
	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/udp"
)

// The gateway's flows: the stack's forwarding hooks (stack.SetForwarding)
// offer every TCP SYN, UDP datagram and echo request of the guest that the
// gateway's own services do not take, and the gateway decides each by what
// the host gets for it. A SYN is answered only once the host's connect has
// succeeded (then relayed), been refused (then refused), or found no route
// (then unreachable); a connect that times out answers nothing, as a lost
// SYN would. Every flow is bounded: flows at once (MaxFlows, beyond which
// the guest is refused) and host connects in progress (MaxConnecting,
// beyond which the oldest gives way or the SYN goes unanswered:
// connecting.go), each excess counted, so a guest that floods SYNs to
// random addresses can exhaust neither the host's descriptors nor the
// gateway's memory.

// Config configures a gateway.
type Config struct {
	// Network is the guest's network; the zero value is slirp4netns's.
	Network Network
	// Network6 is the guest's IPv6 network (ipv6.go); the zero value is
	// slirp4netns's, fd00::/64. NoIPv6 leaves the guest IPv4-only, as
	// slirp4netns without --enable-ipv6: no advertisements, and the
	// guest's IPv6 flows are not taken.
	Network6 Network6
	NoIPv6   bool
	// NoHostLoopback refuses the guest's flows to the gateway's address,
	// which otherwise reach the host's loopback (127.0.0.1, or ::1 for
	// the gateway's IPv6 address).
	NoHostLoopback bool
	// Deny refuses the guest's flows to these networks, of either family
	// (TCP: a reset; UDP and ping: ICMP's or ICMPv6's administratively
	// prohibited).
	Deny []netip.Prefix
	// MaxFlows bounds the TCP and UDP flows relayed at once; 4096 when 0.
	MaxFlows int
	// MaxConnecting bounds the host connects in progress; 256 when 0.
	MaxConnecting int
	// ConnectTimeout bounds a host connect; 30 s when 0.
	ConnectTimeout time.Duration
	// UDPTimeout ends a UDP flow idle this long (no datagram either
	// way) that the side it was sent to never answered (the host, or
	// the guest for an inbound forward's); UDPStreamTimeout one it has
	// answered (as conntrack's udp_timeout and udp_timeout_stream); 30 s
	// and 120 s when 0.
	UDPTimeout, UDPStreamTimeout time.Duration
	// PingTimeout bounds the wait for a relayed echo's answer; 10 s when 0.
	PingTimeout time.Duration
}

func (c *Config) setDefaults() error {
	if !c.Network.Subnet.IsValid() {
		n, err := NewNetwork(DefaultSubnet)
		if err != nil {
			return err
		}
		c.Network = n
	}
	if !c.NoIPv6 && !c.Network6.Prefix.IsValid() {
		n, err := NewNetwork6(DefaultPrefix6)
		if err != nil {
			return err
		}
		c.Network6 = n
	}
	if c.MaxFlows == 0 {
		c.MaxFlows = 4096
	}
	if c.MaxConnecting == 0 {
		c.MaxConnecting = 256
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 30 * time.Second
	}
	if c.UDPTimeout == 0 {
		c.UDPTimeout = 30 * time.Second
	}
	if c.UDPStreamTimeout == 0 {
		c.UDPStreamTimeout = 120 * time.Second
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = 10 * time.Second
	}
	return nil
}

// Stats counts the gateway's decisions and flows.
type Stats struct {
	Relay RelayStats // TCP flows relayed

	TCPConnects       stats.Counter // host connects started
	TCPRefused        stats.Counter // the host refused: the guest gets a reset
	TCPUnreachable    stats.Counter // no route on the host: the guest gets ICMP
	TCPConnectTimeout stats.Counter // the host's connect timed out: the guest's SYN is dropped
	TCPAcceptFails    stats.Counter // the guest's handshake did not complete

	UDPFlows  stats.Counter // UDP flows opened
	UDPActive stats.Gauge   // UDP flows relayed now
	UDPToHost stats.Counter // datagrams guest to host
	// UDPToHostSegmented counts those of UDPToHost sent in runs of
	// equal sizes, a run a send with UDP segmentation offload.
	UDPToHostSegmented stats.Counter
	UDPToGuest         stats.Counter // datagrams host to guest
	// UDPToGuestCoalesced counts those of UDPToGuest that came from the
	// host socket in runs (UDP_GRO: udpgro.go), a run a read.
	UDPToGuestCoalesced stats.Counter
	// UDPToGuestCut counts runs longer than a read's 64 KiB, whose
	// segments past it were lost (a NIC's GRO beyond gro_max_size's
	// default).
	UDPToGuestCut  stats.Counter
	UDPIdleExpired stats.Counter // flows ended by their idle timeout
	UDPHostErrors  stats.Counter // flows ended by a host socket error

	Pings           stats.Counter // echo requests relayed
	PingReplies     stats.Counter // answered by a reply
	PingErrors      stats.Counter // answered by an ICMP error
	PingTimeouts    stats.Counter // not answered in PingTimeout
	PingUnsupported stats.Counter // dropped: the host allows no ping socket and no raw socket (of the request's family)

	InboundTCP     stats.Counter // connections accepted by a forward and carried to the guest
	InboundUDP     stats.Counter // UDP flows of a forward carried to the guest
	InboundRefused stats.Counter // the guest refused or did not answer a forwarded connection
	InboundErrors  stats.Counter // a forward's socket failed (accept, no endpoint, a datagram not sent)

	Denied         stats.Counter // flows refused by Deny or NoHostLoopback
	FlowLimit      stats.Counter // refused: MaxFlows flows already
	ConnectLimit   stats.Counter // SYN unanswered: MaxConnecting connects in progress, all younger than evictAge
	ConnectEvicted stats.Counter // host connects ended to make room for a newer one (connecting.go)
	ClosedRefused  stats.Counter // refused: the gateway is closing
}

// Gateway relays a guest's flows through host sockets.
type Gateway struct {
	s       *stack.Stack
	nic     string
	cfg     Config
	Stats   Stats
	pinger  hostPinger // nil when the host allows no ping (pingErr says why)
	pinger6 hostPinger // the same over IPv6; nil also with NoIPv6

	pingErr, ping6Err error
	log               gatewayLog    // log.go
	flows             chan struct{} // a token per flow relayed (capacity MaxFlows)
	connecting        connectSlots  // host connects in progress (connecting.go)
	ctx               context.Context
	cancel            context.CancelFunc
	wg                sync.WaitGroup // every flow's and decision's goroutine

	fwdMu sync.Mutex
	fwds  []*inbound // inbound forwards (inbound.go)

	tableMu sync.Mutex
	table   map[*flowRecord]struct{} // the flows relayed now (table.go)
}

// New makes a gateway for the guest on s's NIC nicName: it turns the NIC's
// forwarding on, gives it the gateway's and the DNS forwarder's addresses,
// and takes the stack's forwarding hooks. Unless cfg.NoIPv6 it also gives
// the NIC the IPv6 addresses and makes it the guest's IPv6 router
// (ipv6.go); their duplicate address detection takes a second, which
// WaitIPv6 waits for. The gateway's own services (the DNS forwarder, the
// DHCP server) are the caller's to start on s.
func New(s *stack.Stack, nicName string, cfg Config) (*Gateway, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	n := cfg.Network
	for _, a := range []netip.Addr{n.Gateway, n.DNS} {
		if err := s.AddAddress(nicName, netip.PrefixFrom(a, n.Subnet.Bits())); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	if !cfg.NoIPv6 {
		if err := startIPv6(s, nicName, cfg.Network6); err != nil {
			return nil, err
		}
	}
	if err := s.SetForwarding(nicName, true); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{
		s:          s,
		nic:        nicName,
		cfg:        cfg,
		flows:      make(chan struct{}, cfg.MaxFlows),
		connecting: connectSlots{max: cfg.MaxConnecting},
		table:      map[*flowRecord]struct{}{},
		log:        newGatewayLog(s),
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.pinger, g.pingErr = newHostPinger(pingIPv4)
	if !cfg.NoIPv6 {
		g.pinger6, g.ping6Err = newHostPinger(pingIPv6)
		s.SetEcho6Forwarder(g.forwardEcho6)
	}
	s.SetTCPForwarder(g.forwardTCP)
	s.SetUDPForwarder(g.forwardUDP)
	s.SetEchoForwarder(g.forwardEcho)
	return g, nil
}

// PingMode says how the gateway relays pings ("ping socket", "raw
// socket"), or why it cannot, for the daemon's log; with IPv6, for each
// family where they differ.
func (g *Gateway) PingMode() string {
	mode := func(p hostPinger, err error) string {
		if p == nil {
			return "none: " + err.Error()
		}
		return p.kind()
	}
	v4 := mode(g.pinger, g.pingErr)
	if g.cfg.NoIPv6 {
		return v4
	}
	if v6 := mode(g.pinger6, g.ping6Err); v6 != v4 {
		return "IPv4 " + v4 + ", IPv6 " + v6
	}
	return v4
}

// Close ends every relayed flow and waits for their goroutines. The stack's
// hooks stay set: a flow offered after Close is refused. Close the stack
// after the gateway.
func (g *Gateway) Close() error {
	g.cancel() // stops the forwards' loops and every flow
	g.fwdMu.Lock()
	g.fwds = nil
	g.fwdMu.Unlock()
	g.wg.Wait()
	var errs []error
	for _, p := range []hostPinger{g.pinger, g.pinger6} {
		if p != nil {
			errs = append(errs, p.close())
		}
	}
	return errors.Join(errs...)
}

// verdict is the gateway's answer for a destination, before any host
// socket is opened.
type verdict int

const (
	relay   verdict = iota // connect on the host to the address given
	deny                   // refused by policy
	closed                 // the gateway's own address, a port it does not serve
	nothing                // nothing is there to reach: unreachable
)

// hostDst maps the guest's destination to the host's: the gateway's address
// stands for the host's loopback (127.0.0.1, ::1); the guest's own network
// has nothing else behind the gateway.
func (g *Gateway) hostDst(dst netip.Addr) (netip.Addr, verdict) {
	gw, dns, subnet, loopback := g.cfg.Network.Gateway, g.cfg.Network.DNS, g.cfg.Network.Subnet, netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if dst.Is6() {
		n := g.cfg.Network6
		gw, dns, subnet, loopback = n.Gateway, n.DNS, n.Prefix, netip.IPv6Loopback()
	}
	switch {
	case dst == gw && g.cfg.NoHostLoopback:
		return netip.Addr{}, deny
	case dst == gw:
		return loopback, relay
	case dst == dns:
		return netip.Addr{}, closed // its services take their ports first
	case dst.Is6() && dst.Zone() != "":
		// The gateway's link-local address, the only link-scoped one
		// the stack takes: its own, serving nothing but ND.
		return netip.Addr{}, closed
	case subnet.Contains(dst):
		return netip.Addr{}, nothing // a guest with another netmask, or its neighbour in the /64
	}
	for _, p := range g.cfg.Deny {
		if p.Contains(dst) {
			return netip.Addr{}, deny
		}
	}
	return dst, relay
}

// take takes a token from sem without waiting, and reports whether it did.
func take(sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func give(sem chan struct{}) { <-sem }

// admit decides whether a new flow from src to dst may start, counting a
// refusal; on true the caller holds a flow token and a goroutine in wg.
func (g *Gateway) admit(proto Proto, src, dst netip.AddrPort) bool {
	if g.ctx.Err() != nil {
		g.Stats.ClosedRefused.Inc()
		return false
	}
	if !take(g.flows) {
		g.flowLimited(proto, src, dst)
		return false
	}
	g.wg.Add(1)
	return true
}

// forwardTCP decides a guest's SYN; it runs in a goroutine of its own.
func (g *Gateway) forwardTCP(r *tcp.ForwardRequest) {
	dst, v := g.hostDst(r.LocalAddr().Addr())
	switch v {
	case deny:
		g.denied("tcp", logs.Flow(r.RemoteAddr(), r.LocalAddr()))
		r.Refuse()
		return
	case closed:
		r.Refuse()
		return
	case nothing:
		r.Unreachable(ip.HostUnreachable)
		return
	}
	if !g.admit(TCP, r.RemoteAddr(), r.LocalAddr()) {
		r.Refuse()
		return
	}
	defer g.wg.Done()
	defer give(g.flows)
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.ConnectTimeout)
	defer cancel()
	p, evicted := g.connecting.begin(time.Now(), cancel)
	if evicted {
		g.connectEvicted(r.RemoteAddr(), r.LocalAddr())
	}
	if p == nil {
		g.connectLimited(r.RemoteAddr(), r.LocalAddr())
		r.Drop()
		return
	}
	g.Stats.TCPConnects.Inc()
	host, err := dialHost(ctx, netip.AddrPortFrom(dst, r.LocalAddr().Port()))
	if g.connecting.end(p) {
		// Evicted: the slot went to a newer SYN, and this one goes
		// unanswered, as a lost SYN, even had the connect just succeeded.
		if err == nil {
			host.Close()
		}
		r.Drop()
		return
	}
	if err != nil {
		g.answerConnectError(r, err)
		return
	}
	guest, err := r.Accept(g.ctx)
	if err != nil {
		g.Stats.TCPAcceptFails.Inc()
		host.SetLinger(0)
		host.Close()
		return
	}
	stop := context.AfterFunc(g.ctx, func() {
		guest.SetLinger(0)
		guest.Close()
		host.SetLinger(0)
		host.Close()
	})
	defer stop()
	rec, untrack := g.track(FlowInfo{Proto: TCP, Guest: r.RemoteAddr(), Peer: r.LocalAddr()}, host)
	defer untrack()
	relayTCP(guest, host, &g.Stats.Relay, rec)
}

// answerConnectError tells the guest what the host's connect met, as the
// kernel's connect would have told a local caller.
func (g *Gateway) answerConnectError(r *tcp.ForwardRequest, err error) {
	if errors.Is(err, syscall.ECONNREFUSED) {
		g.Stats.TCPRefused.Inc()
		r.Refuse()
		return
	}
	if kind, ok := unreachableKind(err); ok {
		g.Stats.TCPUnreachable.Inc()
		r.Unreachable(kind)
		return
	}
	// A timeout, or the gateway closing: the guest's SYN goes unanswered,
	// and its own connect times out as for a lost SYN.
	g.Stats.TCPConnectTimeout.Inc()
	r.Drop()
}

// forwardUDP decides a guest's datagram to a new flow. It runs in the
// dealer of the datagram's family and must not block: it opens the flow's endpoint and hands it to
// a goroutine that makes the host socket.
func (g *Gateway) forwardUDP(r *udp.ForwardRequest) {
	dst, v := g.hostDst(r.LocalAddr().Addr())
	switch v {
	case deny:
		g.denied("udp", logs.Flow(r.RemoteAddr(), r.LocalAddr()))
		r.Unreachable(ip.AdminProhibited)
		return
	case closed:
		r.Unreachable(ip.PortUnreachable)
		return
	case nothing:
		r.Unreachable(ip.HostUnreachable)
		return
	}
	if !g.admit(UDP, r.RemoteAddr(), r.LocalAddr()) {
		r.Drop()
		return
	}
	guest, err := r.Open()
	if err != nil {
		give(g.flows)
		g.wg.Done()
		return
	}
	go func() {
		defer g.wg.Done()
		defer give(g.flows)
		g.relayUDP(guest, r.RemoteAddr(), r.LocalAddr(), netip.AddrPortFrom(dst, r.LocalAddr().Port()))
	}()
}

// forwardEcho relays a guest's echo request through the host.
func (g *Gateway) forwardEcho(r *icmp.EchoRequest) {
	g.decideEcho(echoFlow{r.Src, r.Dst, r.Seq, r.Payload, r, pingIPv4}, g.pinger)
}

// forwardEcho6 relays a guest's ICMPv6 echo request through the host.
func (g *Gateway) forwardEcho6(r *icmpv6.EchoRequest) {
	g.decideEcho(echoFlow{r.Src, r.Dst, r.Seq, r.Payload, r, pingIPv6}, g.pinger6)
}

// echoFlow is a guest's echo request of either family, as the gateway
// relays it.
type echoFlow struct {
	src, dst netip.Addr
	seq      uint16
	payload  []byte
	req      interface {
		Reply() error
		Error(typ, code uint8)
	}
	fam *pingFamily
}

// answer tells the guest kind, in its family's words.
func (e echoFlow) answer(kind ip.ErrorKind) { e.req.Error(e.fam.typeCode(kind)) }

// decideEcho decides a guest's echo request and relays it through pinger.
// It runs in the dealer's goroutine and hands the relay to one of its own.
func (g *Gateway) decideEcho(e echoFlow, pinger hostPinger) {
	dst, v := g.hostDst(e.dst)
	switch {
	case v == deny:
		g.denied(strings.ToLower(e.fam.name), logs.Hosts(e.src, e.dst))
		e.answer(ip.AdminProhibited)
		return
	case v == nothing:
		e.answer(ip.HostUnreachable)
		return
	case v == closed:
		return // the stack answers echo to its own addresses itself
	case pinger == nil:
		g.Stats.PingUnsupported.Inc()
		return
	}
	if g.ctx.Err() != nil {
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.relayEcho(e, dst, pinger)
	}()
}

func (g *Gateway) relayEcho(e echoFlow, dst netip.Addr, pinger hostPinger) {
	g.Stats.Pings.Inc()
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.PingTimeout)
	defer cancel()
	a, err := pinger.echo(ctx, dst, e.seq, e.payload)
	switch {
	case err != nil:
		g.Stats.PingTimeouts.Inc()
	case a.isError:
		g.Stats.PingErrors.Inc()
		e.req.Error(a.errType, a.errCode)
	default:
		g.Stats.PingReplies.Inc()
		e.req.Reply()
	}
}
