package stack

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
)

// Destination address selection (RFC 6724 section 6) and Happy Eyeballs
// (RFC 8305): the addresses a name resolves to, in the order to try them
// as GoNet's own routes and sources judge them, and a TCP dial that races
// them. Go's resolver sorts its answers by the same rules, but asks the
// host kernel for the sources, so its order says how the machine would
// reach them, not how GoNet would: a GoNet with IPv6 by SLAAC on a host
// without it would try IPv4 first, and the reverse.

// destination is an address with what RFC 6724 compares it by: the source
// GoNet would send to it from (invalid when GoNet has no route: rule 1)
// and whether that source is deprecated (rule 3).
type destination struct {
	addr, src  netip.Addr
	deprecated bool
}

// sortDestinations orders addrs by RFC 6724 section 6's rules, stably
// (rule 10: otherwise, leave the order unchanged).
func (s *Stack) sortDestinations(addrs []netip.Addr) {
	if len(addrs) < 2 {
		return
	}
	ds := make([]destination, len(addrs))
	for i, a := range addrs {
		ds[i] = s.destination(a)
	}
	slices.SortStableFunc(ds, compareDestinations)
	for i, d := range ds {
		addrs[i] = d.addr
	}
}

func (s *Stack) destination(a netip.Addr) destination {
	d := destination{addr: a}
	var (
		ri  ip.Route
		err error
	)
	switch {
	case a.Is4():
		ri, err = s.ip.Route(a)
	case s.ip6 != nil:
		ri, err = s.ip6.Route(a)
	default:
		return d
	}
	if err != nil || !ri.Src.IsValid() || ri.Src.IsUnspecified() {
		return d
	}
	d.src = ri.Src
	if a.Is6() {
		st, ok := s.ip6.AddressState(ri.Src)
		d.deprecated = ok && (st == ipv6.Deprecated || st == ipv6.Optimistic) // RFC 4429 section 2.1
	}
	return d
}

// compareDestinations is negative when a is to be tried before b.
func compareDestinations(a, b destination) int {
	// Rule 1: avoid unusable destinations.
	if c := prefer(a.src.IsValid(), b.src.IsValid()); c != 0 || !a.src.IsValid() {
		return c
	}
	scope := ipv6.SelectionScope
	// Rule 2: prefer matching scope.
	if c := prefer(scope(a.addr) == scope(a.src), scope(b.addr) == scope(b.src)); c != 0 {
		return c
	}
	// Rule 3: avoid deprecated addresses.
	if c := prefer(!a.deprecated, !b.deprecated); c != 0 {
		return c
	}
	// Rule 4 (home addresses) and rule 7 (native transport) have nothing
	// to choose between: GoNet has neither Mobile IPv6 nor tunnels.
	// Rule 5: prefer matching label.
	if c := prefer(ipv6.Label(a.src) == ipv6.Label(a.addr), ipv6.Label(b.src) == ipv6.Label(b.addr)); c != 0 {
		return c
	}
	// Rule 6: prefer higher precedence.
	if c := cmp.Compare(ipv6.Precedence(b.addr), ipv6.Precedence(a.addr)); c != 0 {
		return c
	}
	// Rule 8: prefer smaller scope.
	if c := cmp.Compare(scope(a.addr), scope(b.addr)); c != 0 {
		return c
	}
	// Rule 9: use longest matching prefix, between IPv6 destinations
	// only: among IPv4 ones it would undo DNS round robin, which sends
	// hosts to servers in the order the name server rotates (as Go's
	// resolver and glibc's later versions limit it).
	// CommonPrefixLen is counted no further than the 64 bits of a
	// unicast prefix (RFC 4291 section 2.5.1): the rule asks for the
	// source's prefix length, which the route does not give.
	if a.addr.Is6() && b.addr.Is6() {
		return cmp.Compare(ipv6.CommonPrefixLen(b.src, b.addr, 64), ipv6.CommonPrefixLen(a.src, a.addr, 64))
	}
	return 0
}

// prefer is -1 when only x holds, 1 when only y does, 0 otherwise.
func prefer(x, y bool) int {
	switch {
	case x && !y:
		return -1
	case y && !x:
		return 1
	}
	return 0
}

// interleave reorders sorted addresses for Happy Eyeballs (RFC 8305
// section 4): the first of the preferred family (the first address's),
// then the first of the other, and so on, so that a broken family costs
// one Connection Attempt Delay, not one per address.
func interleave(addrs []netip.Addr) []netip.Addr {
	var first, other []netip.Addr
	for _, a := range addrs {
		if a.Is4() == addrs[0].Is4() {
			first = append(first, a)
		} else {
			other = append(other, a)
		}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for i := 0; i < max(len(first), len(other)); i++ {
		if i < len(first) {
			out = append(out, first[i])
		}
		if i < len(other) {
			out = append(out, other[i])
		}
	}
	return out
}

// ConnectionAttemptDelay is how long a TCP dial to a name waits for one
// address's connection before it starts the next beside it: RFC 8305
// section 8's recommended value.
const ConnectionAttemptDelay = 250 * time.Millisecond

// dialRace connects to the first of addrs that answers (RFC 8305 section
// 5): an attempt starts every ConnectionAttemptDelay, or at once when the
// one before fails, each going on until it succeeds or fails; the first
// connection made is returned and the rest cancelled, a connection made
// regardless closed. With none made, it returns the first address's
// error.
func (s *Stack) dialRace(ctx context.Context, network string, addrs []netip.AddrPort) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		i   int
		c   net.Conn
		err error
	}
	results := make(chan result, len(addrs))
	errs := make([]error, len(addrs))
	started, done := 0, 0
	start := func() {
		i := started
		started++
		go func() {
			c, err := s.DialContext(ctx, network, addrs[i].String())
			results <- result{i, c, err}
		}()
	}
	start()
	t := s.env.Clock.NewTimer(ConnectionAttemptDelay)
	defer t.Stop()
	for done < started {
		var next <-chan time.Time
		if started < len(addrs) && ctx.Err() == nil {
			next = t.C()
		}
		select {
		case r := <-results:
			done++
			if r.err == nil {
				cancel()
				go func(left int) {
					for range left {
						if r := <-results; r.c != nil {
							r.c.Close()
						}
					}
				}(started - done)
				return r.c, nil
			}
			errs[r.i] = r.err
			if started < len(addrs) && ctx.Err() == nil {
				start()
				// A tick that came meanwhile is for the attempt
				// just started: the next waits its own delay.
				if !t.Stop() {
					select {
					case <-t.C():
					default:
					}
				}
				t.Reset(ConnectionAttemptDelay)
			}
		case <-next:
			start()
			t.Reset(ConnectionAttemptDelay)
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return nil, ctx.Err()
}
