package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/stats"
)

// The client: RFC 2131 section 4.4's state machine (figure 5), one
// goroutine per client that owns every field of it, fed by a reader
// goroutine with the decoded replies, by one timer, by the address probe
// and by conflicts. This file holds its types, API and loop; its
// transitions are in clientstate.go, the messages it sends in
// clientmsg.go, the lease it reads from an ACK in clientlease.go, what it
// does to the host in clienthost.go, and StartOn, its seat on a GoNet
// stack, in stack.go.

// ClientState is a state of RFC 2131 section 4.4's figure 5.
type ClientState uint8

// The client's states.
const (
	// Init: no lease; about to broadcast a DHCPDISCOVER.
	Init ClientState = iota
	// Selecting: DISCOVER sent, waiting for an OFFER.
	Selecting
	// Requesting: REQUEST sent for an offer, waiting for an ACK or NAK.
	Requesting
	// Rebooting: INIT-REBOOT's REQUEST for a remembered address sent.
	Rebooting
	// Checking: an ACK came for a new address, which the probe is
	// checking before use (section 4.4.1: "the client SHOULD perform a
	// check on the suggested address", RFC 5227).
	Checking
	// Bound: the lease is applied; waiting for T1.
	Bound
	// Renewing: past T1; REQUEST unicast to the server.
	Renewing
	// Rebinding: past T2; REQUEST broadcast to any server.
	Rebinding
	// Stopped: Close or Release ended the client.
	Stopped
)

var stateNames = [...]string{"INIT", "SELECTING", "REQUESTING", "REBOOTING", "CHECKING", "BOUND", "RENEWING", "REBINDING", "STOPPED"}

func (s ClientState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("ClientState(%d)", uint8(s))
}

// Host is what a client needs of the stack it configures, on one NIC.
type Host interface {
	// HardwareAddr is the NIC's MAC: the client's chaddr.
	HardwareAddr() net.HardwareAddr
	// AddAddress assigns the leased address, with its on-link route.
	AddAddress(a netip.Prefix) error
	// RemoveAddress takes it away, with the routes that went through it.
	RemoveAddress(a netip.Addr) error
	// AddRoute routes dst through gw on the NIC (gw invalid: on-link).
	AddRoute(dst netip.Prefix, gw netip.Addr) error
	// RemoveRoute removes that route.
	RemoveRoute(dst netip.Prefix, gw netip.Addr)
	// SetMTU sets the NIC's IPv4 MTU, at most the link's; zero restores
	// the link's. It returns the MTU in force.
	SetMTU(mtu int) int
	// SetDNS gives the stack's resolver the lease's name servers and
	// search domains (options 6, 15 and 119); none when the lease ends.
	SetDNS(servers []netip.Addr, search []string)
}

// ClientConn is the client's socket: UDP on 0.0.0.0:68 that sends through
// the NIC the client configures, from 0.0.0.0 while the NIC has no
// address (a *udp.Conn bound to the NIC, Stack.ListenUDPOn). The client
// closes it when it stops.
type ClientConn interface {
	PacketConn
	Close() error
}

// ClientConfig configures a Client. The zero value is usable.
type ClientConfig struct {
	// ClientID is the client identifier (option 61); the hardware type
	// and address when nil (RFC 2132 section 9.14).
	ClientID []byte
	// Hostname is sent in DISCOVER and REQUEST (option 12), when set.
	Hostname string
	// Remembered is a lease held before (LoadLease): the client asks for
	// its address again first (INIT-REBOOT, RFC 2131 section 3.2), and
	// starts over with a DISCOVER if a server says NAK. If none answers,
	// it uses the remembered lease until it expires, as section 3.2
	// allows (renewing it from T1 as usual), or starts over when it has
	// expired.
	Remembered *ClientLease
	// Probe checks that an address is free before the client uses it
	// (RFC 5227's probing, package arp): inUse true makes the client
	// decline the lease (DHCPDECLINE, section 4.4.1) and start over after
	// ten seconds (section 3.1 step 5). An error is logged and the address
	// used. Nil: no probe.
	Probe func(ctx context.Context, a netip.Addr) (inUse bool, err error)
	// NoDNS leaves the stack's resolver as it is: the lease's name
	// servers and search domains are kept in the lease, not applied (a
	// host whose DNS is configured by hand, as dhclient's supersede).
	NoDNS bool
	// NoProbe leaves out the probe StartOn gives a client by default
	// (the stack's RFC 5227 probing, 4 to 7 s before each new address):
	// for a link where no other host can hold the address.
	NoProbe bool
	// InitWait bounds the random wait before the first DISCOVER that
	// section 4.4.1 suggests (one to ten seconds) so that hosts powered
	// on together do not ask at once; zero, as dhclient's initial-delay,
	// sends at once.
	InitWait time.Duration
	// Notify is called, in the client's goroutine, with every change of
	// lease; it must not block.
	Notify func(Event)
	// Clock drives the timers; clock.Real{} when nil.
	Clock clock.Clock
	// Rand makes transaction IDs and retransmission jitter; seeded from
	// crypto/rand when nil.
	Rand rand.Source
	// Logger takes the client's events: a lease obtained, renewed, lost,
	// declined or released, a NAK; nil discards them.
	Logger *slog.Logger
	// Name names the client in its log records (the NIC's name).
	Name string
}

// EventKind is what happened to a client's lease.
type EventKind uint8

// The events.
const (
	// LeaseBound: a lease was obtained and applied.
	LeaseBound EventKind = iota + 1
	// LeaseRenewed: the lease was extended, by its server (RENEWING) or
	// another (REBINDING).
	LeaseRenewed
	// LeaseLost: the lease expired or a server refused it (NAK); its
	// address is gone from the NIC.
	LeaseLost
	// AddressDeclined: the probe found the offered address in use.
	AddressDeclined
	// LeaseReleased: the client gave the lease back (Release).
	LeaseReleased
)

var eventNames = [...]string{"", "bound", "renewed", "lost", "declined", "released"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && k != 0 {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is a change of a client's lease.
type Event struct {
	Kind  EventKind
	Lease ClientLease
}

// ClientStats are the client's counters: messages out and in by type,
// every reply dropped by why, and the lease's events.
type ClientStats struct {
	OutDiscovers stats.Counter
	OutRequests  stats.Counter
	OutDeclines  stats.Counter
	OutReleases  stats.Counter
	OutErrors    stats.Counter // the socket refused a message
	Retransmits  stats.Counter // section 4.1's retransmissions (included above)

	InOffers stats.Counter
	InAcks   stats.Counter
	InNaks   stats.Counter

	InMalformed   stats.Counter // not a DHCP message, or a field out of range
	InNotReply    stats.Counter // op is not BOOTREPLY
	InBadXID      stats.Counter // not our transaction (section 4.4.1), or none open
	InOtherClient stats.Counter // chaddr or client identifier not ours
	InUnexpected  stats.Counter // a type the state does not take
	InBadOffer    stats.Counter // an OFFER without a usable yiaddr or server identifier
	InBadAck      stats.Counter // an ACK without a usable lease (clientlease.go)
	InOtherServer stats.Counter // an ACK or NAK from a server the client did not ask

	Bound           stats.Counter // leases obtained
	Renewed         stats.Counter // leases extended, in RENEWING or REBINDING
	Expired         stats.Counter // leases that ran out
	Lost            stats.Counter // leases given up: expired or refused by NAK
	RequestTimeouts stats.Counter // REQUESTs that got no answer: back to INIT
	Conflicts       stats.Counter // offered addresses the probe found in use
	ProbeErrors     stats.Counter // probes that failed to tell
	ConfigErrors    stats.Counter // the host refused the address, route or MTU
	// LinkUps counts the NIC's link coming up (LinkUp): a lease
	// verified by INIT-REBOOT, or discovery started over.
	LinkUps stats.Counter
}

// Client is a DHCP client on one NIC. Its methods are safe for concurrent
// use.
type Client struct {
	cfg  ClientConfig
	conn ClientConn
	host Host
	hw   net.HardwareAddr
	id   []byte
	clk  clock.Clock
	rand *env.Rand
	log  *slog.Logger

	in     chan *dhcpv4.DHCPv4 // decoded replies from read
	probed chan probeResult
	lost   chan netip.Addr // addresses address conflict detection gave up (Conflict)
	linkUp chan struct{}   // a token when the NIC's link comes up (LinkUp)
	stop   chan bool       // Release (true) or Close (false)
	done   chan struct{}

	mu     sync.Mutex
	state  ClientState
	leased *ClientLease // the applied lease, for Lease

	fsm fsm // run's own

	Stats ClientStats
}

// fsm is the state run alone reads and writes.
type fsm struct {
	ctx   context.Context
	state ClientState
	timer clock.Timer

	// The exchange in progress: its transaction, when it began (secs),
	// the message retransmitted and where to.
	xid      dhcpv4.TransactionID
	begun    time.Time
	sent     *dhcpv4.DHCPv4
	sentTo   netip.AddrPort
	tries    int
	reqStart time.Time // when the REQUEST went out first: the lease's start

	offered netip.Addr // SELECTING's choice, and its server
	server  netip.Addr
	last    netip.Addr // the address last held, asked for again (table 5)
	naks    int        // NAKs since the last lease: spaces out restarts

	applied *ClientLease // the lease applied to the host
	routes  []Route      // the routes installed
	probing *ClientLease // the lease being checked
	gone    bool         // the applied address left the NIC without us (conflict)
}

type probeResult struct {
	lease *ClientLease
	inUse bool
	err   error
}

// broadcastServer is where a client broadcasts (RFC 2131 section 4.1).
var broadcastServer = netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), ServerPort)

// errStopped is Close's and Release's error once the client has stopped.
var errStopped = errors.New("dhcp: client stopped")

// StartClient starts a client that configures host over conn, in its own
// goroutine, until ctx ends (the configuration stays), Close or Release.
func StartClient(ctx context.Context, conn ClientConn, host Host, cfg ClientConfig) *Client {
	c := newClient(ctx, conn, host, cfg)
	c.start(ctx)
	return c
}

// start runs the client's goroutines.
func (c *Client) start(ctx context.Context) {
	go c.read()
	go c.run(ctx)
}

// newClient makes a client in INIT, its goroutines not started.
func newClient(ctx context.Context, conn ClientConn, host Host, cfg ClientConfig) *Client {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	c := &Client{
		cfg:    cfg,
		conn:   conn,
		host:   host,
		hw:     append(net.HardwareAddr(nil), host.HardwareAddr()...),
		clk:    cfg.Clock,
		rand:   env.NewRand(cfg.Rand),
		log:    logs.OrDiscard(cfg.Logger),
		in:     make(chan *dhcpv4.DHCPv4, 16),
		probed: make(chan probeResult, 1),
		lost:   make(chan netip.Addr, 1),
		linkUp: make(chan struct{}, 1),
		stop:   make(chan bool),
		done:   make(chan struct{}),
	}
	c.id = cfg.ClientID
	if c.id == nil {
		c.id = defaultClientID(c.hw)
	}
	if cfg.Name != "" {
		c.log = c.log.With("nic", cfg.Name)
	}
	c.fsm.ctx = ctx
	c.fsm.timer = c.clk.NewTimer(time.Hour)
	c.fsm.timer.Stop()
	return c
}

// State returns the client's state.
func (c *Client) State() ClientState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Lease returns the lease applied to the NIC, and false while there is
// none.
func (c *Client) Lease() (ClientLease, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leased == nil {
		return ClientLease{}, false
	}
	return *c.leased, true
}

// Close stops the client and leaves the NIC as it is: a lease applied
// stays until the process ends, as when dhclient exits without -r.
func (c *Client) Close() error { return c.halt(false) }

// Release gives the lease back to its server (DHCPRELEASE, RFC 2131
// section 4.4.6), removes its address and routes from the NIC, and stops
// the client: what a host does on a clean shutdown.
func (c *Client) Release() error { return c.halt(true) }

func (c *Client) halt(release bool) error {
	select {
	case c.stop <- release:
		<-c.done
		return nil
	case <-c.done:
		return errStopped
	}
}

// Conflict tells the client that another host claimed a, an address it
// leased, and that it was given up (RFC 5227 section 2.4, the stack's
// defence): the NIC no longer holds it. The client declines it and starts
// over. It does not block.
func (c *Client) Conflict(a netip.Addr) {
	select {
	case c.lost <- a:
	case <-c.done:
	default:
		// One already waits: the client is starting over.
	}
}

// LinkUp tells the client that its NIC's link came up: it may be on
// another network now (RFC 2131 section 3.2: a client "that has moved to a
// new subnet", RFC 4436's reason), so a lease is verified with an
// INIT-REBOOT, and a client still looking for one starts discovering again
// at once, rather than at its backoff's next step. It does not block.
func (c *Client) LinkUp() {
	select {
	case c.linkUp <- struct{}{}:
	case <-c.done:
	default:
		// One already waits.
	}
}

// Done is closed once the client has stopped.
func (c *Client) Done() <-chan struct{} { return c.done }

// read decodes what arrives on the socket and hands it to run, until the
// socket is closed.
func (c *Client) read() {
	// An Ethernet frame's worth would do (maxMessageSize); a longer
	// datagram is cut short and refused as malformed.
	buf := make([]byte, 2048)
	for {
		n, _, err := c.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		m, err := dhcpv4.FromBytes(buf[:n])
		if err != nil || !wellFormed(m) {
			c.Stats.InMalformed.Inc()
			continue
		}
		select {
		case c.in <- m:
		case <-c.done:
			return
		}
	}
}

// run is the state machine's goroutine.
func (c *Client) run(ctx context.Context) {
	f := &c.fsm
	defer func() {
		f.timer.Stop()
		c.conn.Close()
		c.setState(Stopped)
		close(c.done)
	}()
	if r := c.cfg.Remembered; r != nil && r.Addr.Addr().Is4() {
		f.last = r.Addr.Addr()
		c.initReboot()
	} else if c.cfg.InitWait > 0 {
		c.setState(Init)
		c.wake(c.clk.Now().Add(time.Duration(c.rand.IntN(int(c.cfg.InitWait)))))
	} else {
		c.discover()
	}
	for {
		select {
		case m := <-c.in:
			c.receive(m)
		case <-f.timer.C():
			c.timeout()
		case r := <-c.probed:
			c.probeDone(r)
		case a := <-c.lost:
			c.conflict(a)
		case <-c.linkUp:
			c.relink()
		case release := <-c.stop:
			if release {
				c.release()
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

func (c *Client) setState(s ClientState) {
	c.fsm.state = s
	c.mu.Lock()
	c.state = s
	c.mu.Unlock()
}
