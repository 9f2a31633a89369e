// Package mdns is a multicast DNS responder (RFC 6762) for a GoNet host:
// it claims its name, <name>.local, on the link and answers the link's
// queries for the name's A and AAAA records with the addresses its NIC has
// at the time of each, over IPv4 (224.0.0.251) and IPv6 (ff02::fb) alike;
// and it advertises the host's services for browsers to find (DNS-Based
// Service Discovery, RFC 6763: zone.go).
//
// Before it answers it probes (section 8.1): three queries for its names
// (the host's and each service instance's), 250 ms apart, holding the
// records it would give; a response for a name from another host means
// the name is taken, and it tries the next one (host-2, host-3, ...;
// "Instance (2)", ...), and a simultaneous probe from another host is
// decided by comparing the two hosts' records (section 8.2). Once the
// names are its own it announces them twice (section 8.3), defends them
// against later claims by probing again (section 9), and says goodbye as
// it closes (section 10.1).
//
// It answers to the group, as section 6 has it; to the querier alone when
// the question asks for a unicast response (section 5.4, the QU bit); and
// to a legacy resolver that asked from a port other than 5353 as a unicast
// DNS server would, with its query's ID and question (section 6.7). It
// leaves out what the querier already holds (known-answer suppression,
// section 7.1).
package mdns

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/udp"
)

// Port is mDNS's UDP port (section 3).
const Port = 5353

// The mDNS groups (section 3).
var (
	Group4 = netip.MustParseAddr("224.0.0.251")
	Group6 = netip.MustParseAddr("ff02::fb")
)

// The TTL of a host name's records (section 10: 120 s), and the bound on
// those of legacy unicast answers (section 6.7: "no greater than ten
// seconds").
const (
	hostTTL   = 120
	legacyTTL = 10
	// cacheFlush is the top bit of a record's class in a response: the
	// record replaces what caches hold (section 10.2); unicastResponse
	// is the same bit in a question's class, the QU bit (section 5.4).
	cacheFlush      = 1 << 15
	unicastResponse = 1 << 15
)

// The timing of claiming a name (sections 8.1 to 8.3).
const (
	probeWait        = 250 * time.Millisecond // the random wait before the first probe, at most
	probeInterval    = 250 * time.Millisecond // between probes, and after the last one
	probeCount       = 3
	announceInterval = time.Second
	announceCount    = 2
	tieLostWait      = time.Second // section 8.2: the loser probes again after one second
	// Section 8.1: a host that has seen 15 conflicts within 10 seconds
	// waits 5 seconds before each further probe, so that two broken
	// hosts cannot flood the link.
	conflictBurst  = 15
	conflictWindow = 10 * time.Second
	conflictWait   = 5 * time.Second
)

// Stats counts the responder's work.
type Stats struct {
	Queries       stats.Counter // queries received
	Answered      stats.Counter // queries answered
	Ignored       stats.Counter // not for our name or types, before the name is claimed, malformed
	Errors        stats.Counter // messages not sent
	Probes        stats.Counter // probe queries sent (section 8.1)
	Announcements stats.Counter // unsolicited responses sent: announcements and goodbyes
	Conflicts     stats.Counter // responses holding our name with other data (sections 8.1, 9)
	TiesLost      stats.Counter // simultaneous probes lost to another host (section 8.2)
	Renamed       stats.Counter // names given up as another host's
	KnownAnswers  stats.Counter // records left out because the querier held them (section 7.1)
	InQueueFull   stats.Counter // messages dropped behind a full queue to the responder
	LinkUps       stats.Counter // the NIC's link come up, the names probed for again (section 8.1)
}

// Responder claims and answers for one host name, and the services it
// advertises, on one NIC of a stack.
type Responder struct {
	Stats Stats

	s        *stack.Stack
	nic      string
	host     string    // the label asked for: "gonet-cd38c7"
	services []Service // as given; their instance labels, as asked for
	conns    []*groupConn
	in       chan datagram // from the readers to run
	linkUp   chan struct{} // a token when the NIC's link comes up
	quit     chan struct{} // closed by Close
	ran      chan struct{} // closed as run returns
	wg       sync.WaitGroup

	claimed   chan struct{} // closed once a name is first claimed
	closeOnce sync.Once

	mu        sync.Mutex
	name      string   // fully qualified: "gonet-cd38c7.local."; written by run alone
	instances []string // each service's instance label now; written by run alone
}

// groupConn is the socket of one group, and where messages to the group
// go from it.
type groupConn struct {
	c  *udp.Conn
	to netip.AddrPort
}

// datagram is a message a reader hands to run.
type datagram struct {
	b    []byte
	from netip.AddrPort
	via  *groupConn
}

// Start joins the mDNS groups on the named NIC of s (each family the stack
// runs) and claims host.local, or the first of host-2.local, host-3.local,
// ... that no other host holds, answering for it until Close, and
// advertises services (DNS-SD, RFC 6763), each under its instance name or
// the first of "Instance (2)", "Instance (3)", ... that no other host
// holds. host is a single label, as "gonet-cd38c7". Start returns at once;
// WaitClaimed waits for the names.
func Start(s *stack.Stack, nic, host string, services ...Service) (*Responder, error) {
	if host == "" || strings.ContainsAny(host, ". ") || len(host) > 63 {
		return nil, fmt.Errorf("mdns: host name %q: want one label of at most 63 bytes", host)
	}
	r := &Responder{
		s: s, nic: nic, host: host, name: dns.Fqdn(host + ".local"),
		in:     make(chan datagram, 64),
		linkUp: make(chan struct{}, 1),
		quit:   make(chan struct{}), ran: make(chan struct{}), claimed: make(chan struct{}),
	}
	for _, sv := range services {
		if err := sv.check(); err != nil {
			return nil, err
		}
		if sv.Instance == "" {
			sv.Instance = host
		}
		r.services = append(r.services, sv)
		r.instances = append(r.instances, sv.Instance)
	}
	groups := []netip.Addr{Group4}
	if s.IPv6() != nil {
		if _, err := s.Addresses6(nic); err == nil {
			groups = append(groups, Group6)
		}
	}
	for _, g := range groups {
		c, err := r.listen(g)
		if err != nil {
			for _, gc := range r.conns {
				gc.c.Close()
			}
			return nil, fmt.Errorf("mdns: %s on %s: %w", g, nic, err)
		}
		to := netip.AddrPortFrom(g, Port)
		if g.Is6() {
			to = netip.AddrPortFrom(g.WithZone(nic), Port)
		}
		r.conns = append(r.conns, &groupConn{c: c, to: to})
	}
	for _, gc := range r.conns {
		r.wg.Go(func() { r.read(gc) })
	}
	// Section 8.1: a responder that "receives an indication of a network
	// interface "Link Change" event ... MUST perform the two startup
	// steps": what it probed and announced while the link was down went
	// nowhere, and another host may hold the name on the link it is on
	// now.
	_ = s.WatchLink(nic, func(up bool) {
		if up {
			select {
			case r.linkUp <- struct{}{}:
			default: // one pending is enough
			}
		}
	})
	go r.run()
	s.AddStats("MDNS."+nic, &r.Stats)
	return r, nil
}

// listen opens the socket of one group: port 5353 shared with the stack's
// other responders, the group joined on the NIC, messages sent with TTL
// (hop limit) 255, which receivers check to know them from the link
// (section 11), and not looped back to the stack's own listeners.
func (r *Responder) listen(group netip.Addr) (*udp.Conn, error) {
	wild := netip.IPv4Unspecified()
	if group.Is6() {
		wild = netip.IPv6Unspecified()
	}
	c, err := r.s.ListenMulticastUDP(netip.AddrPortFrom(wild, Port))
	if err != nil {
		return nil, err
	}
	if err := c.JoinGroup(r.nic, group); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.SetMulticastInterface(r.nic); err != nil {
		c.Close()
		return nil, err
	}
	if group.Is4() {
		err = c.SetMulticastTTL(255)
	} else {
		err = c.SetMulticastHopLimit(255)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetMulticastLoopback(false)
	return c, nil
}

// Name is the name the responder claims, or has claimed, fully
// qualified: the one asked for, or the one it moved to after another host
// was found to hold it.
func (r *Responder) Name() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.name
}

// Services returns the services the responder advertises, each under the
// instance name it claims now.
func (r *Responder) Services() []Service {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.services)
	for i := range out {
		out[i].Instance = r.instances[i]
	}
	return out
}

// WaitClaimed waits until the responder first holds a name, probed for and
// found free, and returns it. It fails when ctx ends first or the responder
// closes.
func (r *Responder) WaitClaimed(ctx context.Context) (string, error) {
	select {
	case <-r.claimed:
		return r.Name(), nil
	case <-r.quit:
		return "", fmt.Errorf("mdns: %w", net.ErrClosed)
	case <-ctx.Done():
		return "", fmt.Errorf("mdns: claiming %s: %w", r.Name(), ctx.Err())
	}
}

// Close says goodbye for a claimed name (section 10.1), stops answering
// and leaves the groups.
func (r *Responder) Close() error {
	r.closeOnce.Do(func() {
		close(r.quit)
		<-r.ran
		for _, gc := range r.conns {
			gc.c.Close()
		}
		r.wg.Wait()
	})
	return nil
}

// read hands each message that comes to gc's socket to run, until the
// socket closes.
func (r *Responder) read(gc *groupConn) {
	buf := make([]byte, 9000) // section 17: a message up to the link's MTU
	for {
		n, from, err := gc.c.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // an ICMP error or a deadline: the socket lives on
		}
		select {
		case r.in <- datagram{b: slices.Clone(buf[:n]), from: from, via: gc}:
		default:
			r.Stats.InQueueFull.Inc()
		}
	}
}

// phase is where the responder is in claiming its name.
type phase int

const (
	probing    phase = iota // section 8.1: the name not yet ours
	announcing              // section 8.3: ours, being announced
	claimed                 // ours, announced
)

// event is what a received message means for the claim.
type event int

const (
	nothing  event = iota
	conflict       // another host holds a name (sections 8.1, 9)
	lostTie        // another host probes for one with later data (section 8.2)
)

// addrWatch is how often the responder looks at the NIC's addresses for a
// change to announce (section 8.4): the stack has no signal for it.
const addrWatch = time.Second

// claim is the state of claiming the names, which run alone touches.
type claim struct {
	ph        phase
	sent      int          // probes or announcements sent in this phase
	hostTry   int          // the host name's number: 1 for the label asked for, then 2, 3, ...
	instTry   []int        // each service instance's, likewise
	conflicts []time.Time  // the last conflictWindow's
	announced []netip.Addr // the addresses last announced
	timer     clock.Timer  // the next probe or announcement
}

// run is the responder's one goroutine of decisions: it owns the claim,
// sends every probe, announcement and answer, and takes every message the
// readers hand it.
func (r *Responder) run() {
	defer close(r.ran)
	clk := r.s.Clock()
	c := &claim{ph: probing, hostTry: 1, instTry: make([]int, len(r.services)), timer: clk.NewTimer(rand.N(probeWait))}
	for i := range c.instTry {
		c.instTry[i] = 1
	}
	defer c.timer.Stop()
	watch := clk.NewTimer(addrWatch)
	defer watch.Stop()
	for {
		select {
		case <-r.quit:
			if c.ph != probing {
				r.announce(r.zone(c.announced), true) // goodbye (section 10.1)
			}
			return
		case d := <-r.in:
			switch ev, names := r.receive(d, c.ph); ev {
			case conflict:
				r.conflict(c, names)
			case lostTie:
				r.Stats.TiesLost.Inc()
				c.ph, c.sent = probing, 0
				c.timer.Reset(tieLostWait)
			}
		case <-r.linkUp:
			r.Stats.LinkUps.Inc()
			c.ph, c.sent = probing, 0
			c.timer.Reset(rand.N(probeWait))
		case <-c.timer.C():
			r.step(c)
		case <-watch.C():
			watch.Reset(addrWatch)
			// Section 8.4: changed records are announced again, and
			// those gone said goodbye to (section 10.1).
			if c.ph == probing {
				continue
			}
			now := r.addrs()
			if slices.Equal(now, c.announced) {
				continue
			}
			r.takeAddrs(c, now)
			c.ph, c.sent = announcing, 0
			c.timer.Reset(0)
		}
	}
}

// step sends the claim's next probe or announcement, as its timer says.
func (r *Responder) step(c *claim) {
	switch c.ph {
	case probing:
		if c.sent < probeCount {
			// A host with no address yet (a lease to come) has
			// nothing to claim; nor has one whose probe reached no
			// group: it tries again.
			if r.probe(c.sent == 0) {
				c.sent++
			}
			c.timer.Reset(probeInterval)
			return
		}
		select {
		case <-r.claimed:
		default:
			close(r.claimed)
		}
		c.ph, c.sent = announcing, 0
		fallthrough
	case announcing:
		// A round's later announcements take the addresses afresh, and
		// say goodbye to one gone since the last: the watch, finding
		// nothing changed after them, would not. A round's first
		// follows a claim, the name perhaps another than the last
		// one announced.
		if now := r.addrs(); c.sent > 0 {
			r.takeAddrs(c, now)
		} else {
			c.announced = now
		}
		r.announce(r.zone(c.announced), false)
		c.sent++
		if c.sent < announceCount {
			c.timer.Reset(announceInterval)
		} else {
			c.ph = claimed
		}
	}
}

// takeAddrs makes now the addresses c announces, saying goodbye to those
// it announced that the host no longer holds (sections 8.4 and 10.1).
func (r *Responder) takeAddrs(c *claim, now []netip.Addr) {
	gone := slices.DeleteFunc(slices.Clone(c.announced), func(a netip.Addr) bool { return slices.Contains(now, a) })
	r.announce(zone{host: r.Name(), addrs: gone}, true) // nothing when none is gone
	c.announced = now
}

// conflict takes a response that shows another host holding names.
func (r *Responder) conflict(c *claim, names []string) {
	r.Stats.Conflicts.Inc()
	now := r.s.Clock().Now()
	c.conflicts = append(c.conflicts, now)
	c.conflicts = slices.DeleteFunc(c.conflicts, func(t time.Time) bool { return now.Sub(t) > conflictWindow })
	wait := rand.N(probeWait)
	if len(c.conflicts) >= conflictBurst {
		wait = conflictWait
	}
	if c.ph == probing {
		// Section 8.1: a name is taken; choose another.
		r.rename(c, names)
	}
	// Section 9: a claimed name in conflict is probed for again, which
	// finds whether it is still ours.
	c.ph, c.sent = probing, 0
	c.timer.Reset(wait)
}

// rename moves each of names to its next: the host to host-2, host-3,
// ...; a service instance to "Instance (2)", "Instance (3)", ... (RFC
// 6763 appendix D); each label shortened to keep it within 63 bytes.
func (r *Responder) rename(c *claim, names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if sameName(name, r.name) {
			c.hostTry++
			r.name = dns.Fqdn(numbered(r.host, "-"+strconv.Itoa(c.hostTry)) + ".local")
			r.Stats.Renamed.Inc()
			continue
		}
		for i, sv := range r.services {
			if sameName(name, instanceName(r.instances[i], sv.Type)) {
				c.instTry[i]++
				r.instances[i] = numbered(sv.Instance, " ("+strconv.Itoa(c.instTry[i])+")")
				r.Stats.Renamed.Inc()
			}
		}
	}
}

// numbered is label with suffix, label shortened so that the two hold
// within a label's 63 bytes.
func numbered(label, suffix string) string {
	if len(label)+len(suffix) > 63 {
		label = label[:63-len(suffix)]
	}
	return label + suffix
}

// zone is what the responder holds now, with the NIC's addresses addrs.
func (r *Responder) zone(addrs []netip.Addr) zone {
	r.mu.Lock()
	defer r.mu.Unlock()
	z := zone{host: r.name, addrs: addrs}
	for i, sv := range r.services {
		z.services = append(z.services, instance{Service: sv, name: instanceName(r.instances[i], sv.Type)})
	}
	return z
}

// addrs returns the NIC's addresses, unzoned, for the name's records.
func (r *Responder) addrs() []netip.Addr {
	prefixes, err := r.s.Addresses(r.nic)
	if err != nil {
		return nil // the NIC is gone
	}
	out := make([]netip.Addr, len(prefixes))
	for i, p := range prefixes {
		out[i] = p.Addr().WithZone("")
	}
	slices.SortFunc(out, netip.Addr.Compare) // for the watch's comparison
	return out
}

// receive takes one message in phase ph: a response may be a conflict
// over some of the names, a query another host's probe; a query is
// answered once the names are ours.
func (r *Responder) receive(d datagram, ph phase) (event, []string) {
	var m dns.Msg
	// Section 18.3: a message with a non-zero opcode is ignored.
	if err := m.Unpack(d.b); err != nil || m.Opcode != dns.OpcodeQuery {
		r.Stats.Ignored.Inc()
		return nothing, nil
	}
	z := r.zone(r.addrs())
	if m.Response {
		if names := conflicts(&m, z, ph == probing); len(names) > 0 {
			return conflict, names
		}
		return nothing, nil
	}
	r.Stats.Queries.Inc()
	if ph == probing {
		if losesTie(&m, z) {
			return lostTie, nil
		}
		r.Stats.Ignored.Inc() // section 8.1: no answers before the names are ours
		return nothing, nil
	}
	re, ok := answer(&m, d.from, z)
	r.Stats.KnownAnswers.Add(uint64(re.suppressed))
	if !ok {
		r.Stats.Ignored.Inc()
		return nothing, nil
	}
	to := d.via.to
	if re.unicast {
		to = d.from
	}
	if _, err := d.via.c.WriteToUDPAddrPort(re.msg, to); err != nil {
		r.Stats.Errors.Inc()
		return nothing, nil
	}
	r.Stats.Answered.Inc()
	return nothing, nil
}

// probe sends a probe for the names to every group (section 8.1): a
// question of type ANY for each, asking for a unicast response when first,
// with the unique records the host proposes in the Authority Section,
// where simultaneous probers find them to compare (section 8.2). It
// reports whether the probe went to any group; none goes while the NIC
// has no address.
func (r *Responder) probe(first bool) bool {
	addrs := r.addrs()
	if len(addrs) == 0 {
		return false
	}
	z := r.zone(addrs)
	m := &dns.Msg{Ns: z.unique()}
	for _, name := range z.owned() {
		q := dns.Question{Name: name, Qtype: dns.TypeANY, Qclass: dns.ClassINET}
		if first {
			q.Qclass |= unicastResponse
		}
		m.Question = append(m.Question, q)
	}
	if !r.sendAll(m) {
		return false
	}
	r.Stats.Probes.Inc()
	return true
}

// announce sends z's records to every group in an unsolicited response,
// the unique ones with the cache-flush bit (section 8.3), each with its
// own TTL, or with TTL 0 as a goodbye (section 10.1).
func (r *Responder) announce(z zone, goodbye bool) {
	if len(z.addrs) == 0 {
		return
	}
	rrs := z.records(true)
	if goodbye {
		for _, rr := range rrs {
			rr.Header().Ttl = 0
		}
	}
	m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}, Answer: rrs}
	if r.sendAll(m) {
		r.Stats.Announcements.Inc()
	}
}

// sendAll sends m to every group, and reports whether it went to any.
func (r *Responder) sendAll(m *dns.Msg) bool {
	b, err := m.Pack()
	if err != nil {
		r.Stats.Errors.Inc()
		return false
	}
	sent := false
	for _, gc := range r.conns {
		if _, err := gc.c.WriteToUDPAddrPort(b, gc.to); err != nil {
			r.Stats.Errors.Inc()
			continue
		}
		sent = true
	}
	return sent
}
