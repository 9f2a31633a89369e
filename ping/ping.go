// Package ping is the echo client both ICMP families run: ICMP's echo
// (RFC 792) and ICMPv6's (RFC 4443 section 4) differ only in their
// encoding and their error messages, which the family keeps; the
// outstanding requests, their goroutines and the matching of replies are
// here, once (issue 12, item 7).
//
// Each outstanding ping is a goroutine of its own that owns it: it takes a
// free sequence number, has the family send the request, and waits for
// the family's dealer to wake it with the reply or an error quoting the
// request, or for its context or the client to end.
package ping

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/stats"
)

// SendFunc sends an echo request to dst with the client's identifier, the
// sequence number seq and size bytes of data filled by Fill(data, seq). It
// runs in the ping's goroutine.
type SendFunc func(dst netip.Addr, seq uint16, size int) error

// Counters are the family's counters the client keeps.
type Counters struct {
	Outstanding *stats.Gauge   // pings waiting for their answer
	Unknown     *stats.Counter // replies matching no outstanding ping
	Corrupt     *stats.Counter // replies whose data differs from the request's
}

// ErrExhausted is returned when 65536 pings are outstanding at once.
var ErrExhausted = errors.New("ping: every echo sequence number is in use")

// Client is one stack's echo client for one family.
type Client struct {
	name  string // the family's package, which errors name
	ident uint16
	clock clock.Clock
	send  SendFunc
	c     Counters

	mu      sync.Mutex
	pings   map[uint16]*pending
	nextSeq uint16
	done    chan struct{} // closed by Close
	wg      sync.WaitGroup
}

// pending is one outstanding echo request. Its goroutine (run) owns it;
// the dealer only sends on answer.
type pending struct {
	dst    netip.Addr
	size   int
	seq    uint16
	answer chan answer
}

type answer struct {
	at  time.Time
	err error
}

// New returns a client named name (in its errors) whose requests carry
// ident, sent by send and timed on c.
func New(name string, ident uint16, c clock.Clock, send SendFunc, counters Counters) *Client {
	return &Client{
		name: name, ident: ident, clock: c, send: send, c: counters,
		pings: map[uint16]*pending{},
		done:  make(chan struct{}),
	}
}

// Ident returns the identifier of the client's requests.
func (c *Client) Ident() uint16 { return c.ident }

// Ping sends an echo request with size bytes of data to dst and waits for
// the matching reply, an error about the request (Fail), or ctx to end; it
// returns the round-trip time. The family checks size against its largest
// datagram first.
func (c *Client) Ping(ctx context.Context, dst netip.Addr, size int) (time.Duration, error) {
	res := make(chan answer, 1)
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return 0, fmt.Errorf("%s: ping %v: %w", c.name, dst, net.ErrClosed)
	default:
	}
	c.wg.Add(1)
	c.mu.Unlock()
	sent := c.clock.Now()
	go func() {
		defer c.wg.Done()
		res <- c.run(ctx, dst, size)
	}()
	r := <-res
	if r.err != nil {
		return 0, r.err
	}
	return r.at.Sub(sent), nil
}

// run sends the request and waits for its answer. The ping leaves the
// table, and the outstanding gauge, before the answer reaches Ping, so a
// caller that reads the counters after Ping returns sees it gone.
func (c *Client) run(ctx context.Context, dst netip.Addr, size int) answer {
	pg := &pending{dst: dst, size: size, answer: make(chan answer, 1)}
	if !c.register(pg) {
		return answer{err: ErrExhausted}
	}
	c.c.Outstanding.Add(1)
	defer func() {
		c.mu.Lock()
		delete(c.pings, pg.seq)
		c.mu.Unlock()
		c.c.Outstanding.Add(-1)
	}()
	if err := c.send(dst, pg.seq, size); err != nil {
		return answer{err: fmt.Errorf("%s: ping %v: %w", c.name, dst, err)}
	}
	select {
	case r := <-pg.answer:
		if r.err != nil {
			r.err = fmt.Errorf("%s: ping %v: %w", c.name, dst, r.err)
		}
		return r
	case <-ctx.Done():
		return answer{err: fmt.Errorf("%s: ping %v seq %d: %w", c.name, dst, pg.seq, ctx.Err())}
	case <-c.done:
		return answer{err: fmt.Errorf("%s: ping %v: %w", c.name, dst, net.ErrClosed)}
	}
}

// register gives pg a free sequence number.
func (c *Client) register(pg *pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range 1 << 16 {
		seq := c.nextSeq
		c.nextSeq++
		if c.pings[seq] == nil {
			pg.seq = seq
			c.pings[seq] = pg
			return true
		}
	}
	return false
}

// lookup returns the outstanding ping of ident and seq, or nil.
func (c *Client) lookup(ident, seq uint16) *pending {
	if ident != c.ident {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pings[seq]
}

// Reply wakes the ping an echo reply from from answers, with data the
// reply's echo data. It runs in the family's dealer: it neither blocks nor
// keeps data.
func (c *Client) Reply(ident, seq uint16, from netip.Addr, data []byte) {
	pg := c.lookup(ident, seq)
	if pg == nil || !sameHost(pg.dst, from) {
		c.c.Unknown.Inc()
		return
	}
	if len(data) != pg.size || !patternOK(data, pg.seq) {
		c.c.Corrupt.Inc()
		return
	}
	select {
	case pg.answer <- answer{at: c.clock.Now()}:
	default: // a duplicate reply
	}
}

// sameHost reports whether a reply from from answers a ping to dst. A
// reply from a scoped address carries the zone of the interface it came
// in on; a ping to the same address without a zone (a host with one
// interface) takes it as well.
func sameHost(dst, from netip.Addr) bool {
	return from == dst || (dst.Zone() == "" && from.WithZone("") == dst)
}

// Fail ends the ping of ident and seq with err: an error message quoting
// its request. It runs in the family's dealer and reports whether a ping
// was waiting.
func (c *Client) Fail(ident, seq uint16, err error) bool {
	pg := c.lookup(ident, seq)
	if pg == nil {
		return false
	}
	select {
	case pg.answer <- answer{err: err}:
	default:
	}
	return true
}

// Close fails outstanding pings with net.ErrClosed, as every later one,
// and waits for their goroutines.
func (c *Client) Close() {
	c.mu.Lock()
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Fill fills echo data with bytes derived from the sequence number, so
// that a reply carrying other data is recognised.
func Fill(b []byte, seq uint16) {
	for i := range b {
		b[i] = byte(i) + byte(seq)
	}
}

func patternOK(b []byte, seq uint16) bool {
	for i, c := range b {
		if c != byte(i)+byte(seq) {
			return false
		}
	}
	return true
}
