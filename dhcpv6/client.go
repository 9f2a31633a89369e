package dhcpv6

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Transmission parameters (RFC 8415 section 7.6): the first delay, the
// first and longest retransmission timeouts and the most transmissions of
// each exchange, and the Information Refresh Time's bounds (section
// 21.23).
const (
	InfMaxDelay = time.Second // INF_MAX_DELAY, and SOL_MAX_DELAY
	InfTimeout  = time.Second // INF_TIMEOUT
	InfMaxRT    = time.Hour   // INF_MAX_RT
	SolTimeout  = time.Second
	SolMaxRT    = time.Hour
	ReqTimeout  = time.Second
	ReqMaxRT    = 30 * time.Second
	ReqMaxRC    = 10
	DecTimeout  = time.Second
	DecMaxRC    = 4
	RenTimeout  = 10 * time.Second
	RenMaxRT    = 600 * time.Second
	RebTimeout  = 10 * time.Second
	RebMaxRT    = 600 * time.Second
	CnfMaxDelay = time.Second // CNF_MAX_DELAY
	CnfTimeout  = time.Second
	CnfMaxRT    = 4 * time.Second
	CnfMaxRD    = 10 * time.Second
	IRTDefault  = 24 * time.Hour    // IRT_DEFAULT: a Reply without the option
	IRTMinimum  = 600 * time.Second // IRT_MINIMUM
	// maxRTFloor and maxRTCeil bound a server's SOL_MAX_RT and
	// INF_MAX_RT (sections 21.24 and 21.25).
	maxRTFloor = 60 * time.Second
	maxRTCeil  = 86400 * time.Second
)

// Config is what a Client needs.
type Config struct {
	// Conn is a UDP socket on port 546 of the interface; the client
	// owns it, and closes it at Close.
	Conn net.PacketConn
	// Servers is where requests go: [ff02::1:2%NIC]:547.
	Servers netip.AddrPort
	// MAC is the interface's, the client's DUID-LL and its IAID.
	MAC wire.MAC
	// Env gives the clock, the random source and the logger.
	Env *env.Env
	// Learned is told the servers and search domains of each Reply
	// whose information differs from the last.
	Learned func(servers []netip.Addr, search []string)
	// Lease is told each address leased, with its lifetimes, when it is
	// leased and each time the lease is extended; a zero valid lifetime
	// takes it away. Only a Managed client leases.
	Lease func(addr netip.Addr, valid, preferred time.Duration)
}

// Stats are the client's counters.
type Stats struct {
	OutInformationRequests stats.Counter // retransmissions included, as for each kind
	OutSolicits            stats.Counter
	OutRequests            stats.Counter
	OutRenews              stats.Counter
	OutRebinds             stats.Counter
	OutConfirms            stats.Counter
	OutDeclines            stats.Counter
	OutReleases            stats.Counter
	InAdvertises           stats.Counter // taken
	InReplies              stats.Counter // taken
	InDiscarded            stats.Counter // another type or transaction, not for us, or refused by its status
	SendErrors             stats.Counter // a message the socket refused (no link-local address yet, say)
	InQueueFull            stats.Counter // datagrams dropped while 8 waited for the exchange to read them
	Leases                 stats.Counter // addresses leased, an extension not counted
	LeasesLost             stats.Counter // leases that ran out or were declined
	Leased                 stats.Gauge   // addresses held now
	// LinkUps counts the link coming up (LinkUp): a lease confirmed,
	// or the information asked for again.
	LinkUps stats.Counter
	// NotOnLink counts Confirms a server answered NotOnLink: the lease
	// was of another link, and given up.
	NotOnLink stats.Counter
}

// Client asks the link's DHCPv6 servers for configuration information
// (stateless) or, once Managed, for addresses too (stateful), until
// closed.
type Client struct {
	cfg      Config
	duid     []byte
	iaid     uint32
	log      *slog.Logger
	in       chan []byte
	manage   chan struct{}
	declined chan netip.Addr
	linkUp   chan struct{}
	release  chan chan struct{}
	known    reply         // the DNS information last reported; run's alone
	held     *holding      // the lease held (stateful.go); run's alone
	released chan struct{} // closed once a Release asked of run is sent; run's alone
	done     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once

	Stats Stats
}

// Start begins the exchanges: the first message after a random delay of
// up to INF_MAX_DELAY (RFC 8415 sections 18.2.1 and 18.2.6).
func Start(cfg Config) *Client {
	c := &Client{
		cfg:  cfg,
		duid: duidLL(cfg.MAC),
		// The IAID is the MAC's last four bytes: the same across
		// restarts for this interface, as section 12 asks.
		iaid:     uint32(cfg.MAC[2])<<24 | uint32(cfg.MAC[3])<<16 | uint32(cfg.MAC[4])<<8 | uint32(cfg.MAC[5]),
		log:      logs.OrDiscard(cfg.Env.Log).With(slog.String("proto", "dhcpv6")),
		in:       make(chan []byte, 8),
		manage:   make(chan struct{}, 1),
		declined: make(chan netip.Addr, 8),
		linkUp:   make(chan struct{}, 1),
		release:  make(chan chan struct{}),
		done:     make(chan struct{}),
	}
	c.wg.Add(2)
	go c.read()
	go c.run()
	return c
}

// Manage has the client lease addresses, as the Managed flag of the
// link's advertisements asks (RFC 4861 section 4.2): a stateless client
// stops its exchange and solicits.
func (c *Client) Manage() {
	select {
	case c.manage <- struct{}{}:
	default:
	}
}

// Declined tells the client that duplicate address detection found a
// leased address in use: the client declines it (section 18.2.8) and
// solicits again.
func (c *Client) Declined(addr netip.Addr) {
	select {
	case c.declined <- addr:
	default:
	}
}

// LinkUp tells the client that its link came up: it may be on another
// link now (RFC 8415 section 18.2.3: "Whenever a client may have moved to
// a new link ... the client MUST initiate a Confirm/Reply message
// exchange"), so a lease held is confirmed, and the information of a
// stateless client asked for again (section 18.2.6). It does not block.
func (c *Client) LinkUp() {
	select {
	case c.linkUp <- struct{}{}:
	default: // one pending is enough
	}
}

// Release gives the leased addresses back to their server with one
// Release message (RFC 8415 section 18.2.7, not retransmitted: the host is
// going away) and takes them away, for a host shutting down whose links
// still carry the message. It returns once the message is sent, at once
// when nothing is leased, or when ctx ends first.
func (c *Client) Release(ctx context.Context) {
	ack := make(chan struct{})
	select {
	case c.release <- ack:
	case <-ctx.Done():
		return
	case <-c.done:
		return
	}
	select {
	case <-ack:
	case <-ctx.Done():
	}
}

// Close stops the client and closes its socket. Leases not given back by
// Release run out at the server.
func (c *Client) Close() {
	c.once.Do(func() {
		close(c.done)
		c.cfg.Conn.Close()
		c.wg.Wait()
	})
}

// read hands the datagrams the socket receives to run.
func (c *Client) read() {
	defer c.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, _, err := c.cfg.Conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		select {
		case c.in <- slices.Clone(buf[:n]):
		case <-c.done:
			return
		default: // run is behind: a server's retransmission is not lost for long
			c.Stats.InQueueFull.Inc()
		}
	}
}

// run is the stateless exchange over and over (a request retransmitted
// until a Reply comes, section 15, then a wait for its refresh time) until
// Manage makes it the stateful one.
func (c *Client) run() {
	defer c.wg.Done()
	maxRT := InfMaxRT
	wait := time.Duration(c.cfg.Env.Rand.IntN(int(InfMaxDelay) + 1))
	for {
		switch why, _ := c.sleep(wait, true); why {
		case stopped:
			return
		case managed:
			c.stateful()
			return
		case relinked:
			// Section 18.2.6: the information of the link it may
			// have moved to, after the first message's delay.
			c.Stats.LinkUps.Inc()
			wait = time.Duration(c.cfg.Env.Rand.IntN(int(InfMaxDelay) + 1))
			continue
		}
		r, why := c.exchange(&exch{typ: msgInformationRequest, sent: &c.Stats.OutInformationRequests, irt: InfTimeout, mrt: maxRT,
			heedManage: true, accept: func(r *reply) verdict { return takeIf(r.typ == msgReply && r.status == statusSuccess) }})
		switch why {
		case stopped:
			return
		case managed:
			c.stateful()
			return
		}
		if r.infMaxRT != 0 {
			maxRT = boundMaxRT(r.infMaxRT)
		}
		c.learn(&r)
		// Section 18.2.6: ask again once the information's refresh
		// time is over; all ones is never.
		wait = IRTDefault
		switch {
		case r.refresh == 0xffffffff:
			wait = 1<<63 - 1
		case r.refresh != 0:
			wait = max(time.Duration(r.refresh)*time.Second, IRTMinimum)
		}
	}
}

// learn reports a Reply's DNS information when it differs from what was
// reported last.
func (c *Client) learn(r *reply) {
	if slices.Equal(r.servers, c.known.servers) && slices.Equal(r.search, c.known.search) {
		return
	}
	c.log.Info("DHCPv6 information", "servers", r.servers, "search", r.search)
	c.cfg.Learned(r.servers, r.search)
	c.known.servers, c.known.search = r.servers, r.search
}

func boundMaxRT(secs uint32) time.Duration {
	return min(max(time.Duration(secs)*time.Second, maxRTFloor), maxRTCeil)
}

// outcome is how a wait or an exchange ended.
type outcome int

const (
	answered  outcome = iota // a message taken, or the wait over
	expired                  // retransmissions or time ran out
	stopped                  // the client closed
	managed                  // Manage was called (waits that heed it only)
	declined                 // Declined was called (waits that heed it only)
	releasing                // Release was called while a lease is held: c.released is its answer
	relinked                 // LinkUp was called (sleeps only)
)

// releaseAsked takes a Release request: with a lease held the wait ends
// for hold to give it back; with none, it is answered at once.
func (c *Client) releaseAsked(ack chan struct{}) bool {
	if c.held == nil {
		close(ack)
		return false
	}
	c.released = ack
	return true
}

// exch is one exchange (RFC 8415 section 15): the message to send, of
// typ, for serverID and about ia when set, counted in sent; the first and
// longest retransmission timeouts, the most transmissions and the longest
// time (none when zero); whether Manage ends it; what answer it takes;
// and, when set, what it takes when a timeout passes (an Advertise
// gathered meanwhile) instead of retransmitting.
type exch struct {
	typ      uint8
	serverID []byte
	ia       *lease
	sent     *stats.Counter
	irt, mrt time.Duration
	mrc      int
	mrd      time.Duration
	// firstAbove draws the first timeout's RAND above zero, as a
	// Solicit's is (section 18.2.1).
	firstAbove bool
	heedManage bool
	accept     func(*reply) verdict
	timeout    func() *reply
}

// verdict is what an exchange makes of an answer.
type verdict int

const (
	refuse verdict = iota // not an answer to take: discarded
	take                  // the answer: the exchange is over
	keep                  // an Advertise gathered for the first timeout's choice
)

// takeIf is a verdict from a condition.
func takeIf(ok bool) verdict {
	if ok {
		return take
	}
	return refuse
}

// exchange sends e's message and retransmits it until e.accept takes an
// answer: the first timeout IRT plus RAND, each next twice the last plus
// RAND, past MRT MRT plus RAND, with one transaction ID throughout.
func (c *Client) exchange(e *exch) (reply, outcome) {
	clk, rnd := c.cfg.Env.Clock, c.cfg.Env.Rand
	req := &request{typ: e.typ, xid: rnd.Uint32() & 0xffffff, serverID: e.serverID, ia: e.ia}
	began := clk.Now()
	rt := e.irt + random(rnd, e.irt)
	if e.firstAbove {
		rt = e.irt + time.Duration(1+rnd.IntN(int(e.irt/10)))
	}
	for n := 1; ; n++ {
		req.elapsed = uint16(min(clk.Now().Sub(began)/(10*time.Millisecond), 0xffff))
		e.sent.Inc()
		c.send(req.encode(c.duid))
		wait := rt
		if e.mrd != 0 {
			wait = min(wait, e.mrd-clk.Now().Sub(began))
		}
		r, why := c.await(req.xid, wait, e.heedManage, e.accept)
		if why != expired {
			return r, why
		}
		if e.timeout != nil {
			if r := e.timeout(); r != nil {
				return *r, answered
			}
		}
		if e.mrc != 0 && n >= e.mrc || e.mrd != 0 && clk.Now().Sub(began) >= e.mrd {
			return reply{}, expired
		}
		// "RT = 2*RTprev + RAND*RTprev", and past MRT "RT = MRT +
		// RAND*MRT".
		if rt = 2*rt + random(rnd, rt); e.mrt != 0 && rt > e.mrt {
			rt = e.mrt + random(rnd, e.mrt)
		}
	}
}

// random is RAND*d of RFC 8415 section 15: RAND is drawn from -0.1 to
// +0.1, so that clients started together spread their retransmissions.
func random(rnd *env.Rand, d time.Duration) time.Duration {
	return time.Duration(rnd.IntN(int(d/5)+1)) - d/10
}

func (c *Client) send(b []byte) {
	if _, err := c.cfg.Conn.WriteTo(b, net.UDPAddrFromAddrPort(c.cfg.Servers)); err != nil {
		c.Stats.SendErrors.Inc()
		c.log.Debug("DHCPv6 message not sent", "err", err)
	}
}

// manageIf is the channel Manage signals on for a wait that heeds it,
// nil (never ready) for one that does not.
func (c *Client) manageIf(heed bool) chan struct{} {
	if heed {
		return c.manage
	}
	return nil
}

// await waits up to d for an answer to xid that accept takes.
func (c *Client) await(xid uint32, d time.Duration, heedManage bool, accept func(*reply) verdict) (reply, outcome) {
	t := c.cfg.Env.Clock.NewTimer(max(d, 0))
	defer t.Stop()
	manage := c.manageIf(heedManage)
	for {
		select {
		case b := <-c.in:
			r, ok := parseReply(b, xid, c.duid, c.iaid)
			v := refuse
			if ok {
				v = accept(&r)
			}
			switch {
			case v == refuse:
				c.Stats.InDiscarded.Inc()
				continue
			case r.typ == msgAdvertise:
				c.Stats.InAdvertises.Inc()
			default:
				c.Stats.InReplies.Inc()
			}
			if v == take {
				return r, answered
			}
		case <-t.C():
			return reply{}, expired
		case <-manage:
			return reply{}, managed
		case ack := <-c.release:
			if c.releaseAsked(ack) {
				return reply{}, releasing
			}
		case <-c.done:
			return reply{}, stopped
		}
	}
}

// sleep waits d on the clock; with heedManage Manage ends it, and
// without, a declined address does, which it returns; LinkUp ends either.
// Datagrams arriving meanwhile answer nothing of ours.
func (c *Client) sleep(d time.Duration, heedManage bool) (outcome, netip.Addr) {
	t := c.cfg.Env.Clock.NewTimer(d)
	defer t.Stop()
	manage := c.manageIf(heedManage)
	for {
		select {
		case <-t.C():
			return answered, netip.Addr{}
		case <-c.in:
			c.Stats.InDiscarded.Inc()
		case <-manage:
			return managed, netip.Addr{}
		case a := <-c.declined:
			if !heedManage {
				return declined, a
			}
		case <-c.linkUp:
			return relinked, netip.Addr{}
		case ack := <-c.release:
			if c.releaseAsked(ack) {
				return releasing, netip.Addr{}
			}
		case <-c.done:
			return stopped, netip.Addr{}
		}
	}
}
