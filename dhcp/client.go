package dhcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
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
// goroutine with the decoded replies, by one timer and by the address
// probe. The messages it sends are in clientmsg.go, the lease it reads
// from an ACK in clientlease.go.

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
// the NIC the client configures, from 0.0.0.0 while the NIC has no address
// (a *udp.Conn bound with BindToDevice). The client closes it when it
// stops.
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
	// starts over with a DISCOVER if the server says NAK or is silent.
	Remembered *ClientLease
	// Probe checks that an address is free before the client uses it
	// (RFC 5227's probing, package arp): inUse true makes the client
	// decline the lease (DHCPDECLINE, section 4.4.1) and start over after
	// ten seconds (section 3.1 step 5). An error is logged and the address
	// used. Nil: no probe.
	Probe func(ctx context.Context, a netip.Addr) (inUse bool, err error)
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

// The ports' addresses of RFC 2131 section 4.1.
var (
	broadcastServer = netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), ServerPort)
	errStopped      = errors.New("dhcp: client stopped")
)

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

// wake sets the state's one timer to at.
func (c *Client) wake(at time.Time) { c.fsm.timer.Reset(at.Sub(c.clk.Now())) }

// retransmitDelay is section 4.1's wait before retransmission number n
// (from zero): 4 seconds doubled each time up to 64, each randomised by
// a uniform -1 to +1 second.
func (c *Client) retransmitDelay(n int) time.Duration {
	d := 64 * time.Second
	if n < 4 {
		d = 4 * time.Second << n
	}
	return d - time.Second + time.Duration(c.rand.IntN(int(2*time.Second)+1))
}

// maxRequests is how often a REQUEST for an offer or a remembered address
// goes out before the client starts over (section 4.4.1 leaves it to the
// client: "enough times to give adequate probability of contacting the
// server without causing the client ... to wait overly long"): four, some
// 60 seconds with section 4.1's backoff, as for dhclient's DISCOVERs.
const maxRequests = 4

// minRenewWait is the shortest wait between REQUESTs in RENEWING and
// REBINDING (section 4.4.5).
const minRenewWait = 60 * time.Second

// newExchange starts a transaction: a fresh xid and its start.
func (c *Client) newExchange() {
	f := &c.fsm
	f.xid = dhcpv4.TransactionID(uint32ToBytes(c.rand.Uint32()))
	f.begun = c.clk.Now()
	f.tries = 0
}

func uint32ToBytes(v uint32) [4]byte {
	return [4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// send transmits m to dst as the exchange's message, to be retransmitted
// on timeouts.
func (c *Client) send(m *dhcpv4.DHCPv4, dst netip.AddrPort) {
	f := &c.fsm
	f.sent, f.sentTo = m, dst
	c.transmit()
}

// transmit sends the exchange's message again, with secs brought up to
// date (RFC 2131 section 2: "seconds elapsed since client began address
// acquisition or renewal process").
func (c *Client) transmit() {
	f := &c.fsm
	if f.tries > 0 {
		c.Stats.Retransmits.Inc()
	}
	f.tries++
	f.sent.NumSeconds = uint16(min(c.clk.Now().Sub(f.begun)/time.Second, 0xffff))
	c.write(f.sent, f.sentTo)
}

// write sends one message and counts it.
func (c *Client) write(m *dhcpv4.DHCPv4, dst netip.AddrPort) {
	if _, err := c.conn.WriteToUDPAddrPort(m.ToBytes(), dst); err != nil {
		c.Stats.OutErrors.Inc()
		return
	}
	switch m.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		c.Stats.OutDiscovers.Inc()
	case dhcpv4.MessageTypeRequest:
		c.Stats.OutRequests.Inc()
	case dhcpv4.MessageTypeDecline:
		c.Stats.OutDeclines.Inc()
	case dhcpv4.MessageTypeRelease:
		c.Stats.OutReleases.Inc()
	}
}

// discover enters SELECTING (section 4.4.1): a DHCPDISCOVER broadcast,
// asking for the address last held (table 5 allows it).
func (c *Client) discover() {
	f := &c.fsm
	c.newExchange()
	f.sent = nil
	c.setState(Selecting)
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeDiscover, xid: f.xid, requested: f.last}), broadcastServer)
	c.wake(c.clk.Now().Add(c.retransmitDelay(0)))
}

// initReboot enters REBOOTING (section 4.4.2): a DHCPREQUEST broadcast for
// the remembered address, without a server identifier.
func (c *Client) initReboot() {
	f := &c.fsm
	c.newExchange()
	f.reqStart = c.clk.Now()
	c.setState(Rebooting)
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeRequest, xid: f.xid, requested: f.last}), broadcastServer)
	c.wake(c.clk.Now().Add(c.retransmitDelay(0)))
}

// timeout acts on the state's timer: a retransmission, or the next state.
func (c *Client) timeout() {
	f := &c.fsm
	now := c.clk.Now()
	switch f.state {
	case Init:
		c.discover()
	case Selecting:
		// Section 4.1: DISCOVERs go on with the backoff until an OFFER.
		c.transmit()
		c.wake(now.Add(c.retransmitDelay(f.tries - 1)))
	case Requesting, Rebooting:
		if f.tries >= maxRequests {
			c.Stats.RequestTimeouts.Inc()
			c.log.Debug("DHCP REQUEST unanswered: starting over", "state", f.state.String(), "tries", f.tries)
			c.discover()
			return
		}
		c.transmit()
		c.wake(now.Add(c.retransmitDelay(f.tries - 1)))
	case Bound:
		c.renew()
	case Renewing:
		if !now.Before(f.applied.RebindAt()) {
			c.rebind()
			return
		}
		c.transmit()
		c.wakeBefore(f.applied.RebindAt())
	case Rebinding:
		if f.applied.Expired(now) {
			c.expire()
			return
		}
		c.transmit()
		c.wakeBefore(f.applied.Expiry())
	}
}

// wakeBefore sets the timer for the next REQUEST in RENEWING or REBINDING
// (section 4.4.5): half the time left until end, at least a minute, and
// end itself at the latest.
func (c *Client) wakeBefore(end time.Time) {
	now := c.clk.Now()
	left := end.Sub(now)
	c.wake(now.Add(min(max(left/2, minRenewWait), left)))
}

// renew enters RENEWING at T1 (section 4.4.5): a DHCPREQUEST unicast to
// the server that granted the lease, with ciaddr and no server
// identifier (table 5).
func (c *Client) renew() {
	f := &c.fsm
	c.newExchange()
	f.reqStart = c.clk.Now()
	c.setState(Renewing)
	l := f.applied
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeRequest, xid: f.xid, ciaddr: l.Addr.Addr()}),
		netip.AddrPortFrom(l.Server, ServerPort))
	c.wakeBefore(l.RebindAt())
}

// rebind enters REBINDING at T2 (section 4.4.5): the same REQUEST
// broadcast, for any server to extend the lease.
func (c *Client) rebind() {
	f := &c.fsm
	c.newExchange()
	f.reqStart = c.clk.Now()
	c.setState(Rebinding)
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeRequest, xid: f.xid, ciaddr: f.applied.Addr.Addr()}), broadcastServer)
	c.wakeBefore(f.applied.Expiry())
}

// expire ends a lease nobody renewed (section 4.4.5: "the client MUST
// immediately discontinue use of the previously allocated network
// address"), and starts over.
func (c *Client) expire() {
	l := *c.fsm.applied
	c.Stats.Expired.Inc()
	c.Stats.Lost.Inc()
	c.unconfigure()
	c.log.Warn("DHCP lease lost: expired", "addr", l.Addr.String(), "server", l.Server.String(), "lease", l.LeaseTime.String())
	c.notify(LeaseLost, l)
	c.discover()
}

// receive takes a decoded reply: it must be a BOOTREPLY of the
// transaction open, for this client (section 4.4.1: "the client ... uses
// the 'xid' field to match replies"), of a type the state takes.
func (c *Client) receive(m *dhcpv4.DHCPv4) {
	f := &c.fsm
	switch {
	case m.OpCode != dhcpv4.OpcodeBootReply:
		c.Stats.InNotReply.Inc()
		return
	case f.sent == nil || m.TransactionID != f.xid:
		c.Stats.InBadXID.Inc()
		return
	case !bytes.Equal(m.ClientHWAddr, c.hw):
		c.Stats.InOtherClient.Inc()
		return
	}
	// RFC 6842: a server that returns the identifier returns ours.
	if id := m.Options.Get(dhcpv4.OptionClientIdentifier); id != nil && !bytes.Equal(id, c.id) {
		c.Stats.InOtherClient.Inc()
		return
	}
	switch m.MessageType() {
	case dhcpv4.MessageTypeOffer:
		c.Stats.InOffers.Inc()
		if f.state != Selecting {
			c.Stats.InUnexpected.Inc()
			return
		}
		c.selectOffer(m)
	case dhcpv4.MessageTypeAck:
		c.Stats.InAcks.Inc()
		if !c.awaitsReply() {
			c.Stats.InUnexpected.Inc()
			return
		}
		c.ack(m)
	case dhcpv4.MessageTypeNak:
		c.Stats.InNaks.Inc()
		if !c.awaitsReply() {
			c.Stats.InUnexpected.Inc()
			return
		}
		c.nak(m)
	default:
		c.Stats.InUnexpected.Inc()
	}
}

// awaitsReply reports whether the state has a REQUEST out.
func (c *Client) awaitsReply() bool {
	switch c.fsm.state {
	case Requesting, Rebooting, Renewing, Rebinding:
		return true
	}
	return false
}

// fromAskedServer reports whether a reply in REQUESTING or RENEWING comes
// from the server the REQUEST was for; in REBOOTING and REBINDING any
// server may answer.
func (c *Client) fromAskedServer(m *dhcpv4.DHCPv4) bool {
	f := &c.fsm
	switch f.state {
	case Requesting:
		return addr(m.ServerIdentifier()) == f.server
	case Renewing:
		return addr(m.ServerIdentifier()) == f.applied.Server
	}
	return true
}

// selectOffer takes the first acceptable OFFER (section 4.4.1 lets the
// client choose; waiting for more only delays it) and requests it: a
// DHCPREQUEST broadcast with the same xid, naming the server and the
// address (table 5), so that other servers withdraw theirs.
func (c *Client) selectOffer(m *dhcpv4.DHCPv4) {
	f := &c.fsm
	a, sid := addr(m.YourIPAddr), addr(m.ServerIdentifier())
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || !sid.IsValid() || sid.IsUnspecified() {
		c.Stats.InBadOffer.Inc()
		return
	}
	f.offered, f.server = a, sid
	f.tries = 0
	f.reqStart = c.clk.Now()
	c.setState(Requesting)
	c.send(c.message(msgFields{typ: dhcpv4.MessageTypeRequest, xid: f.xid, requested: a, server: sid}), broadcastServer)
	c.wake(c.clk.Now().Add(c.retransmitDelay(0)))
}

// ack takes a DHCPACK to the REQUEST out: the lease is checked, probed
// when its address is new, and applied.
func (c *Client) ack(m *dhcpv4.DHCPv4) {
	f := &c.fsm
	if !c.fromAskedServer(m) {
		c.Stats.InOtherServer.Inc()
		return
	}
	l, err := leaseFromAck(m, f.reqStart)
	if err != nil {
		c.Stats.InBadAck.Inc()
		c.log.Debug("DHCP ACK refused", "err", err)
		return
	}
	if (f.state == Renewing || f.state == Rebinding) && l.Addr.Addr() != f.applied.Addr.Addr() {
		// A renewal is of ciaddr (section 4.3.2); an ACK for another
		// address answers someone else, or is a server's mistake.
		c.Stats.InBadAck.Inc()
		return
	}
	f.sent = nil
	f.timer.Stop()
	if c.cfg.Probe != nil && (f.applied == nil || f.applied.Addr.Addr() != l.Addr.Addr()) {
		c.setState(Checking)
		f.probing = &l
		go func() {
			inUse, err := c.cfg.Probe(f.ctx, l.Addr.Addr())
			select {
			case c.probed <- probeResult{lease: &l, inUse: inUse, err: err}:
			case <-c.done:
			}
		}()
		return
	}
	c.bind(l)
}

// probeDone takes the probe's verdict on the address an ACK gave.
func (c *Client) probeDone(r probeResult) {
	f := &c.fsm
	if f.state != Checking || r.lease != f.probing {
		return
	}
	f.probing = nil
	if r.err != nil {
		c.Stats.ProbeErrors.Inc()
		c.log.Warn("DHCP address probe failed: using the address", "addr", r.lease.Addr.Addr().String(), "err", r.err)
	}
	if r.inUse {
		c.decline(*r.lease)
		return
	}
	c.bind(*r.lease)
}

// decline refuses an address found in use (section 4.4.1): a DHCPDECLINE
// broadcast naming it and its server, then INIT after ten seconds
// (section 3.1 step 5), so that the server marks it and offers another.
func (c *Client) decline(l ClientLease) {
	f := &c.fsm
	c.Stats.Conflicts.Inc()
	c.write(c.message(msgFields{typ: dhcpv4.MessageTypeDecline, xid: f.xid, requested: l.Addr.Addr(),
		server: l.Server, message: "address in use"}), broadcastServer)
	c.log.Warn("DHCP address declined: another host uses it", "addr", l.Addr.Addr().String(), "server", l.Server.String())
	c.notify(AddressDeclined, l)
	f.sent = nil
	f.last = netip.Addr{}
	c.setState(Init)
	c.wake(c.clk.Now().Add(declineWait))
}

// conflict acts on the loss of a bound address to another host (Conflict):
// the lease is over (RFC 5227 section 2.4 (a) and (b): the host "MUST
// immediately cease using this address"), the server is told with a
// DHCPDECLINE so that it offers another, and the client starts over ten
// seconds later, as after a probe found the address in use.
func (c *Client) conflict(a netip.Addr) {
	f := &c.fsm
	if f.applied == nil || f.applied.Addr.Addr() != a {
		return
	}
	l := *f.applied
	c.Stats.Lost.Inc()
	f.gone = true // the stack removed it
	c.unconfigure()
	c.log.Warn("DHCP lease lost: another host took the address", "addr", l.Addr.String(), "server", l.Server.String())
	c.notify(LeaseLost, l)
	c.newExchange()
	c.decline(l)
}

// declineWait is how long a client that declined an address waits before
// it starts over (RFC 2131 section 3.1 step 5: "a minimum of ten
// seconds").
const declineWait = 10 * time.Second

// nak takes a DHCPNAK: the lease asked for is refused, so any address in
// use is given up at once (sections 3.2 and 4.4.5) and the client starts
// over; a server that NAKs every REQUEST spaces the restarts out with
// section 4.1's backoff rather than a storm of DISCOVERs.
func (c *Client) nak(m *dhcpv4.DHCPv4) {
	f := &c.fsm
	if !c.fromAskedServer(m) {
		c.Stats.InOtherServer.Inc()
		return
	}
	c.log.Warn("DHCP NAK", "server", addr(m.ServerIdentifier()).String(), "state", f.state.String(), "message", m.Message())
	if f.applied != nil {
		l := *f.applied
		c.Stats.Lost.Inc()
		c.unconfigure()
		c.log.Warn("DHCP lease lost: refused", "addr", l.Addr.String(), "server", l.Server.String())
		c.notify(LeaseLost, l)
	}
	f.last = netip.Addr{}
	f.naks++
	f.sent = nil
	if f.naks == 1 {
		c.discover()
		return
	}
	c.setState(Init)
	c.wake(c.clk.Now().Add(c.retransmitDelay(f.naks - 2)))
}

// bind applies the lease and enters BOUND, waiting for T1 (section
// 4.4.1).
func (c *Client) bind(l ClientLease) {
	f := &c.fsm
	renewal := f.applied != nil
	if !c.configure(l) {
		// The host would not take the address: as good as in use.
		c.unconfigure()
		f.sent = nil
		c.setState(Init)
		c.wake(c.clk.Now().Add(declineWait))
		return
	}
	f.naks = 0
	f.last = l.Addr.Addr()
	f.sent = nil
	c.setState(Bound)
	attrs := []any{"addr", l.Addr.String(), "server", l.Server.String(), "lease", l.LeaseTime.String()}
	if gw, ok := l.Gateway(); ok {
		attrs = append(attrs, "router", gw.String())
	}
	if renewal {
		c.Stats.Renewed.Inc()
		c.log.Info("DHCP lease renewed", attrs...)
		c.notify(LeaseRenewed, l)
	} else {
		c.Stats.Bound.Inc()
		c.log.Info("DHCP lease obtained", append(attrs, "dns", fmt.Sprint(l.DNS), "mtu", l.MTU)...)
		c.notify(LeaseBound, l)
	}
	if t1 := l.RenewAt(); !t1.IsZero() {
		c.wake(t1)
	}
}

// configure applies l to the host, over what the previous lease applied:
// the address with its subnet (option 1), the classless static routes
// (option 121) or else the default route through the first router (option
// 3), the MTU (option 26), the name servers and search list (options 6,
// 15, 119) for the resolver. It reports false when the
// host refused the address.
func (c *Client) configure(l ClientLease) bool {
	f := &c.fsm
	if f.applied != nil && f.applied.Addr != l.Addr {
		c.unconfigure()
	}
	if f.applied == nil {
		if err := c.host.AddAddress(l.Addr); err != nil {
			c.Stats.ConfigErrors.Inc()
			c.log.Error("DHCP lease not applied", "addr", l.Addr.String(), "err", err)
			return false
		}
	}
	c.setRoutes(l.routes())
	if f.applied == nil || f.applied.MTU != l.MTU {
		c.host.SetMTU(l.MTU)
	}
	if f.applied == nil || !slices.Equal(f.applied.DNS, l.DNS) || !slices.Equal(f.applied.Search, l.Search) {
		c.host.SetDNS(l.DNS, l.Search)
	}
	f.applied = &l
	c.mu.Lock()
	c.leased = &l
	c.mu.Unlock()
	return true
}

// setRoutes makes the routes the client installed want: those it no longer
// wants are removed, the new ones added (a route whose gateway the NIC
// does not reach on-link is refused by the host, logged and counted).
func (c *Client) setRoutes(want []Route) {
	f := &c.fsm
	var kept []Route
	for _, r := range f.routes {
		if slices.Contains(want, r) {
			kept = append(kept, r)
		} else {
			c.host.RemoveRoute(r.Dst, r.Gateway)
		}
	}
	// On-link routes first: a router may be reachable only through one
	// of them (RFC 3442 section 4's example of a router off the subnet).
	want = slices.Clone(want)
	slices.SortStableFunc(want, func(a, b Route) int { return cmpBool(a.Gateway.IsValid(), b.Gateway.IsValid()) })
	for _, r := range want {
		if slices.Contains(kept, r) {
			continue
		}
		if err := c.host.AddRoute(r.Dst, r.Gateway); err != nil {
			c.Stats.ConfigErrors.Inc()
			c.log.Error("DHCP route not applied", "dst", r.Dst.String(), "router", r.Gateway.String(), "err", err)
			continue
		}
		kept = append(kept, r)
	}
	f.routes = kept
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// unconfigure takes the applied lease off the host: its routes, address,
// MTU and name servers.
func (c *Client) unconfigure() {
	f := &c.fsm
	c.setRoutes(nil)
	if f.applied != nil {
		if f.gone {
			f.gone = false
		} else if err := c.host.RemoveAddress(f.applied.Addr.Addr()); err != nil {
			c.Stats.ConfigErrors.Inc()
		}
		if f.applied.MTU != 0 {
			c.host.SetMTU(0)
		}
		if len(f.applied.DNS) > 0 || len(f.applied.Search) > 0 {
			c.host.SetDNS(nil, nil)
		}
	}
	f.applied = nil
	c.mu.Lock()
	c.leased = nil
	c.mu.Unlock()
}

// release gives the applied lease back (section 4.4.6): a DHCPRELEASE
// unicast to its server, with ciaddr, then the address is dropped.
func (c *Client) release() {
	f := &c.fsm
	if f.applied == nil {
		return
	}
	l := *f.applied
	c.newExchange()
	c.write(c.message(msgFields{typ: dhcpv4.MessageTypeRelease, xid: f.xid, ciaddr: l.Addr.Addr(), server: l.Server}),
		netip.AddrPortFrom(l.Server, ServerPort))
	c.unconfigure()
	c.log.Info("DHCP lease released", "addr", l.Addr.String(), "server", l.Server.String())
	c.notify(LeaseReleased, l)
}

func (c *Client) notify(k EventKind, l ClientLease) {
	if c.cfg.Notify != nil {
		c.cfg.Notify(Event{Kind: k, Lease: l})
	}
}
