package dhcpv6

import (
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

// Transmission parameters of an Information-request (RFC 8415 section
// 7.6) and the Information Refresh Time's bounds (section 21.23).
const (
	InfMaxDelay   = time.Second       // INF_MAX_DELAY: the first request's random delay
	InfTimeout    = time.Second       // INF_TIMEOUT: the first retransmission timeout
	InfMaxRT      = time.Hour         // INF_MAX_RT: the longest
	IRTDefault    = 24 * time.Hour    // IRT_DEFAULT: a Reply without the option
	IRTMinimum    = 600 * time.Second // IRT_MINIMUM
	infMaxRTFloor = 60 * time.Second  // section 21.25's bounds on a server's INF_MAX_RT
	infMaxRTCeil  = 86400 * time.Second
)

// Config is what a Client needs.
type Config struct {
	// Conn is a UDP socket on port 546 of the interface; the client
	// owns it, and closes it at Close.
	Conn net.PacketConn
	// Servers is where requests go: [ff02::1:2%NIC]:547.
	Servers netip.AddrPort
	// MAC is the interface's, the client's DUID-LL.
	MAC wire.MAC
	// Env gives the clock, the random source and the logger.
	Env *env.Env
	// Learned is told the servers and search domains of each Reply
	// whose information differs from the last.
	Learned func(servers []netip.Addr, search []string)
}

// Stats are the client's counters.
type Stats struct {
	OutInformationRequests stats.Counter // retransmissions included
	InReplies              stats.Counter // replies taken
	InDiscarded            stats.Counter // another type or transaction, not for us, or a failure status
	SendErrors             stats.Counter // a request the socket refused (no link-local address yet, say)
}

// Client asks for configuration information until closed.
type Client struct {
	cfg  Config
	duid []byte
	log  *slog.Logger
	in   chan []byte
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	Stats Stats
}

// Start begins the exchange: the first Information-request after a
// random delay of up to INF_MAX_DELAY (RFC 8415 section 18.2.6).
func Start(cfg Config) *Client {
	c := &Client{
		cfg:  cfg,
		duid: duidLL(cfg.MAC),
		log:  logs.OrDiscard(cfg.Env.Log).With(slog.String("proto", "dhcpv6")),
		in:   make(chan []byte, 8),
		done: make(chan struct{}),
	}
	c.wg.Add(2)
	go c.read()
	go c.run()
	return c
}

// Close stops the client and closes its socket.
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
		default: // run is behind: a server's retransmitted Reply is not lost for long
		}
	}
}

// run is the exchange, over and over: a request retransmitted until a
// Reply comes (section 15), then a wait for its refresh time.
func (c *Client) run() {
	defer c.wg.Done()
	clk, rnd := c.cfg.Env.Clock, c.cfg.Env.Rand
	maxRT := InfMaxRT
	var last reply
	wait := time.Duration(rnd.IntN(int(InfMaxDelay) + 1))
	for {
		if !c.sleep(wait) {
			return
		}
		// One exchange: a transaction ID for all its transmissions.
		xid := rnd.Uint32() & 0xffffff
		began := clk.Now()
		rt := InfTimeout + random(rnd, InfTimeout)
		var r reply
		for got := false; !got; {
			elapsed := min(clk.Now().Sub(began)/(10*time.Millisecond), 0xffff)
			c.send(informationRequest(xid, c.duid, uint16(elapsed)))
			r, got = c.await(xid, rt)
			if c.closed() {
				return
			}
			// "RT = 2*RTprev + RAND*RTprev", and past MRT "RT = MRT +
			// RAND*MRT".
			if rt = 2*rt + random(rnd, rt); rt > maxRT {
				rt = maxRT + random(rnd, maxRT)
			}
		}
		c.Stats.InReplies.Inc()
		if r.infMaxRT != 0 {
			maxRT = min(max(time.Duration(r.infMaxRT)*time.Second, infMaxRTFloor), infMaxRTCeil)
		}
		if !slices.Equal(r.servers, last.servers) || !slices.Equal(r.search, last.search) {
			c.log.Info("DHCPv6 information", "servers", r.servers, "search", r.search)
			c.cfg.Learned(r.servers, r.search)
		}
		last = r
		// Section 18.2.6: ask again once the information's refresh
		// time is over; all ones is never.
		wait = IRTDefault
		switch {
		case r.refresh == 0xffffffff:
			<-c.done
			return
		case r.refresh != 0:
			wait = max(time.Duration(r.refresh)*time.Second, IRTMinimum)
		}
	}
}

// random is RAND*d of RFC 8415 section 15: RAND is drawn from -0.1 to
// +0.1, so that clients started together spread their retransmissions.
func random(rnd *env.Rand, d time.Duration) time.Duration {
	return time.Duration(rnd.IntN(int(d/5)+1)) - d/10
}

func (c *Client) send(b []byte) {
	c.Stats.OutInformationRequests.Inc()
	if _, err := c.cfg.Conn.WriteTo(b, net.UDPAddrFromAddrPort(c.cfg.Servers)); err != nil {
		c.Stats.SendErrors.Inc()
		c.log.Debug("DHCPv6 request not sent", "err", err)
	}
}

// await waits up to rt for a Reply to xid.
func (c *Client) await(xid uint32, rt time.Duration) (reply, bool) {
	t := c.cfg.Env.Clock.NewTimer(rt)
	defer t.Stop()
	for {
		select {
		case b := <-c.in:
			if r, ok := parseReply(b, xid, c.duid); ok {
				return r, true
			}
			c.Stats.InDiscarded.Inc()
		case <-t.C():
			return reply{}, false
		case <-c.done:
			return reply{}, false
		}
	}
}

// sleep waits d on the clock, reporting false once the client closes.
// Datagrams arriving meanwhile answer nothing of ours.
func (c *Client) sleep(d time.Duration) bool {
	t := c.cfg.Env.Clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			return true
		case <-c.in:
			c.Stats.InDiscarded.Inc()
		case <-c.done:
			return false
		}
	}
}

func (c *Client) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}
