// Package igmp is the host side of the Internet Group Management Protocol
// on one IPv4 interface: version 3 (RFC 3376), with the version 2 (RFC
// 2236) and version 1 (RFC 1112) compatibility modes a version 3 host
// falls back to when an older querier is present (RFC 3376 section 7). It
// keeps the groups the interface listens to, reports them to multicast
// routers (and to the switches that snoop IGMP) when they are joined,
// left or their sources change, and answers the routers' queries, so that
// a network that filters multicast delivers what the host's sockets asked
// for.
//
// Each group has the interface's reception state of RFC 3376 section 3.2:
// a filter mode and a source list (sourcefilter.Filter), EXCLUDE {} for a
// plain join (IP_ADD_MEMBERSHIP, Join), INCLUDE or EXCLUDE a list for
// source-specific multicast (IP_ADD_SOURCE_MEMBERSHIP and its kin, whose
// sockets' filters the caller merges with sourcefilter.Members and hands
// to SetFilter). A change of state is reported with the records of section
// 5.1's table (TO_EX and TO_IN for a change of mode, ALLOW and BLOCK for a
// change of sources), sent at once and retransmitted, later changes merged
// into the reports still owed; a group left keeps what it owes until it is
// sent. General, group-specific and group-and-source-specific queries are
// answered with current-state records (section 5.2), as many reports as
// they fill (section 4.2.16). package sourcefilter does the set arithmetic,
// which MLDv2 shares; this package keeps the timers and the wire form. In
// the version 1 and 2 modes there are no sources to tell: a group is
// reported when it goes from no reception to any, and (in version 2) left
// when it goes back; a change of sources in between sends nothing (section
// 7.2.1).
//
// A Protocol serves one interface. HandleIP takes the IGMP messages the
// IPv4 layer's dealer receives on that interface, in that goroutine; the
// rest runs on clock timers (the stack's clock, so tests drive it), under
// one mutex, as package ndp keeps MLD's state. What that state decides to
// send is sent once the mutex is released (send.go), in the order decided.
package igmp

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Default values of RFC 3376 section 8 (and RFC 2236 section 8 for
// version 2's Unsolicited Report Interval).
const (
	// Robustness is the Robustness Variable (section 8.1): a state
	// change report is sent this many times.
	Robustness = 2
	// QueryInterval (section 8.2) and QueryResponseInterval (section
	// 8.3) are the querier's, which the Older Version Querier Present
	// Timeout is made of.
	QueryInterval         = 125 * time.Second
	QueryResponseInterval = 10 * time.Second
	// UnsolicitedReportInterval is version 3's (section 8.11): the
	// longest wait before a state change report is sent again.
	UnsolicitedReportInterval = time.Second
	// UnsolicitedReportIntervalV2 is version 1's and 2's (RFC 2236
	// section 8.10).
	UnsolicitedReportIntervalV2 = 10 * time.Second
	// MaxGroups bounds the groups joined on one interface, as Linux's
	// net.ipv4.igmp_max_memberships (20).
	MaxGroups = 20
)

// Well-known groups (RFC 3376 section 4.1.12 and 4.2.14, RFC 2236 section
// 9).
var (
	// AllSystems is 224.0.0.1, every host's group: joined implicitly on
	// every interface and never reported (RFC 3376 section 5: "no IGMP
	// messages are ever sent regarding the all-systems multicast
	// address").
	AllSystems = netip.AddrFrom4([4]byte{224, 0, 0, 1})
	// AllRouters is 224.0.0.2, where version 2 Leave Group messages go.
	AllRouters = netip.AddrFrom4([4]byte{224, 0, 0, 2})
	// AllIGMPv3Routers is 224.0.0.22, where version 3 reports go.
	AllIGMPv3Routers = netip.AddrFrom4([4]byte{224, 0, 0, 22})
)

// Config tunes the protocol. Zero fields take the defaults.
type Config struct {
	// Robustness is the Robustness Variable until a querier says
	// otherwise (2).
	Robustness int
	// UnsolicitedReportInterval is version 3's (1 s);
	// UnsolicitedReportIntervalV2 is versions 1's and 2's (10 s).
	UnsolicitedReportInterval, UnsolicitedReportIntervalV2 time.Duration
	// Version caps the version spoken, as Linux's force_igmp_version:
	// 2 makes the host behave as an IGMPv2 one (RFC 2236); 0 or 3 is
	// version 3 with its fallbacks.
	Version int
	// MaxGroups bounds the groups joined (20).
	MaxGroups int
}

func (c *Config) setDefaults() {
	c.Robustness = cmp.Or(c.Robustness, Robustness)
	c.UnsolicitedReportInterval = cmp.Or(c.UnsolicitedReportInterval, UnsolicitedReportInterval)
	c.UnsolicitedReportIntervalV2 = cmp.Or(c.UnsolicitedReportIntervalV2, UnsolicitedReportIntervalV2)
	c.Version = cmp.Or(c.Version, 3)
	c.MaxGroups = cmp.Or(c.MaxGroups, MaxGroups)
}

// Stats are the interface's IGMP counters, after Linux's /proc/net/igmp
// and the drops this host makes on the way in.
type Stats struct {
	InMessages    stats.Counter
	InTruncated   stats.Counter // shorter than 8 bytes
	InCsumErrors  stats.Counter
	InBadLength   stats.Counter // a query of 9-11 bytes, or sources or records past the end (RFC 3376 section 7.1)
	InBadQueries  stats.Counter // a general query not to 224.0.0.1 (section 9.1) or with sources (4.1.8), or a group-specific one for no group or to another address
	InUnknownType stats.Counter // a type a host does not take (RFC 3376 section 4: "silently ignored")
	InQueriesV1   stats.Counter
	InQueriesV2   stats.Counter
	InQueriesV3   stats.Counter
	// InQueriesGroupSource counts the version 3 queries among
	// InQueriesV3 that are group-and-source-specific (section 4.1.11):
	// those that ask about some of a group's sources.
	InQueriesGroupSource stats.Counter
	// InReports counts other hosts' reports: they suppress ours in
	// version 1 and 2 modes (RFC 2236 section 3), and are ignored in
	// version 3 mode (RFC 3376 section 5.2). Leaves are routers'
	// business.
	InReports stats.Counter
	InLeaves  stats.Counter

	OutReportsV1 stats.Counter
	OutReportsV2 stats.Counter
	OutReportsV3 stats.Counter
	OutLeaves    stats.Counter
	// ReportsSuppressed counts our version 1 or 2 reports not sent
	// because another host reported the group first.
	ReportsSuppressed stats.Counter
	// Groups is how many groups the interface has joined (in a state
	// other than INCLUDE {}), all-systems aside; Mode is the host
	// compatibility mode (1, 2 or 3).
	Groups stats.Gauge
	Mode   stats.Gauge
}

// Output is how IGMP sends: the IPv4 interface it serves.
type Output interface {
	// SendIGMP sends an IGMP message, pkt, to dst out of the interface
	// with TTL 1 and the Router Alert option (RFC 3376 section 4, RFC
	// 2236 section 2), from the interface's address, or from 0.0.0.0
	// while it has none (RFC 3376 section 4.2.13). It takes ownership
	// of pkt.
	SendIGMP(dst netip.Addr, pkt *buffer.Packet)
	// MTU is the interface's, which a version 3 report fits.
	MTU() int
}

// Protocol is IGMP on one interface.
type Protocol struct {
	cfg  Config
	env  *env.Env
	name string // the interface's, for logs and errors
	log  *slog.Logger

	mu sync.Mutex
	// out and queue are the interface and the messages decided but not
	// yet sent; unlock sends them (send.go).
	out    Output
	queue  []outMsg
	sendMu sync.Mutex // held while sending, so that messages go in order

	// groups are the groups joined, and those left that still owe
	// reports of their leaving (host.go); joined counts the first.
	groups map[netip.Addr]*group
	joined int
	// Host compatibility mode (RFC 3376 section 7.2.1): the Older
	// Version Querier Present timers, as the times they end.
	v1Until, v2Until time.Time
	// robustness is the Robustness Variable in force: the querier's QRV
	// when it sent one (section 4.1.6), else the configured one.
	robustness int
	// general is the pending answer to a General Query in version 3
	// mode (section 5.2, the "interface timer").
	general pending
	mode    int // as Stats.Mode shows it: the mode modeLocked last found
	closed  bool

	Stats Stats
}

// New returns IGMP for the interface named name, sending through out.
func New(name string, out Output, cfg Config, e *env.Env) *Protocol {
	cfg.setDefaults()
	p := &Protocol{
		cfg:        cfg,
		env:        e,
		name:       name,
		log:        logs.OrDiscard(e.Log).With(slog.String("nic", name)),
		out:        out,
		groups:     map[netip.Addr]*group{},
		robustness: cfg.Robustness,
	}
	p.modeLocked() // sets Stats.Mode
	return p
}

// ErrNotMulticast is returned for a join of an address that is not an
// IPv4 multicast group.
var ErrNotMulticast = errors.New("not an IPv4 multicast group")

// ErrBadFilter is returned for a filter with a mode that is neither
// INCLUDE nor EXCLUDE, or a source that is not an IPv4 unicast address
// (RFC 3376 section 4.2.11: "the IP unicast addresses of the sources").
var ErrBadFilter = errors.New("not an IPv4 source filter")

// SetFilter sets the interface's reception state for group to f (RFC
// 3376 section 3.2), the merge of its sockets' filters, and reports the
// change (section 5.1). sourcefilter.None leaves the group; from None,
// any other state joins it. Setting the state the group has already, or
// any state of all-systems, which every interface listens to, does
// nothing. It fails with ErrNotMulticast for a group that is not an IPv4
// multicast one, ErrBadFilter for a filter that is not an IPv4 one,
// ENODEV once the interface is closed, and ENOBUFS for a group not joined
// while Config.MaxGroups are, as the kernel's setsockopt does.
func (p *Protocol) SetFilter(group netip.Addr, f sourcefilter.Filter) error {
	if !group.Is4() || !group.IsMulticast() {
		return fmt.Errorf("igmp: set %v to %v on %s: %w", group, f, p.name, ErrNotMulticast)
	}
	f, err := checkFilter(f)
	if err != nil {
		return fmt.Errorf("igmp: set %v on %s: %w", group, p.name, err)
	}
	if group == AllSystems {
		return nil
	}
	p.mu.Lock()
	defer p.unlock()
	if p.closed {
		return fmt.Errorf("igmp: set %v to %v on %s: %w", group, f, p.name, syscall.ENODEV)
	}
	g := p.groups[group]
	old := sourcefilter.None
	if g != nil {
		old = g.state
	}
	if old.Equal(f) {
		return nil
	}
	if !old.Joined() && p.joined >= p.cfg.MaxGroups {
		return fmt.Errorf("igmp: join %v on %s: %d groups joined already: %w", group, p.name, p.joined, syscall.ENOBUFS)
	}
	if g == nil {
		g = newGroup(group)
		p.groups[group] = g
	}
	g.state = f
	switch {
	case !old.Joined():
		p.joined++
		p.Stats.Groups.Add(1)
		p.log.Debug("multicast group joined", slog.String("group", group.String()), slog.String("filter", f.String()))
	case !f.Joined():
		p.joined--
		p.Stats.Groups.Add(-1)
		p.log.Debug("multicast group left", slog.String("group", group.String()))
	default:
		p.log.Debug("multicast group filter changed", slog.String("group", group.String()), slog.String("filter", f.String()))
	}
	p.changedLocked(g, old)
	return nil
}

// checkFilter returns f in the form sourcefilter keeps filters in (its
// sources sorted, distinct, IPv4-mapped ones unmapped), on a list of its
// own that the caller's changes do not reach; or an ErrBadFilter.
func checkFilter(f sourcefilter.Filter) (sourcefilter.Filter, error) {
	if f.Mode != sourcefilter.Include && f.Mode != sourcefilter.Exclude {
		return f, fmt.Errorf("mode %d: %w", f.Mode, ErrBadFilter)
	}
	srcs := make([]netip.Addr, len(f.Sources))
	for i, s := range f.Sources {
		s = s.Unmap()
		if !s.Is4() || s.IsUnspecified() || s.IsMulticast() || s == broadcast {
			return f, fmt.Errorf("source %v: %w", f.Sources[i], ErrBadFilter)
		}
		srcs[i] = s
	}
	return sourcefilter.New(f.Mode, srcs...), nil
}

// broadcast is the limited broadcast address (RFC 919 section 7), which
// no datagram comes from.
var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// Join joins the group addr on the interface, from every source:
// SetFilter(addr, sourcefilter.Any), EXCLUDE {}. Joining a group in that
// state already does nothing (counting the sockets that share a group is
// the caller's business); a group in another state changes to it.
func (p *Protocol) Join(addr netip.Addr) error { return p.SetFilter(addr, sourcefilter.Any) }

// Leave leaves the group addr: SetFilter(addr, sourcefilter.None). A
// group not joined, or an interface closed, is no error.
func (p *Protocol) Leave(addr netip.Addr) { _ = p.SetFilter(addr, sourcefilter.None) }

// Filter returns the interface's reception state for group: None for a
// group not joined, Any (EXCLUDE {}) for all-systems.
func (p *Protocol) Filter(group netip.Addr) sourcefilter.Filter {
	if group == AllSystems {
		return sourcefilter.Any
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.groups[group]
	if g == nil {
		return sourcefilter.None
	}
	return sourcefilter.Filter{Mode: g.state.Mode, Sources: slices.Clone(g.state.Sources)}
}

// Groups returns the groups the interface listens to, all-systems first,
// then those joined in order.
func (p *Protocol) Groups() []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []netip.Addr{AllSystems}
	for a, g := range p.groups {
		if g.state.Joined() {
			out = append(out, a)
		}
	}
	slices.SortFunc(out[1:], netip.Addr.Compare)
	return out
}

// GroupMACs returns the Ethernet addresses of Groups, for a NIC that
// filters multicast frames by destination (RFC 1112 section 6.4); groups
// that share an address (32 groups share each) give it once.
func (p *Protocol) GroupMACs() []wire.MAC {
	var out []wire.MAC
	for _, g := range p.Groups() {
		if m := MulticastMAC(g); !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// MulticastMAC is the Ethernet address of an IPv4 group: "the low-order 23
// bits of the IP address into the low-order 23 bits of the Ethernet
// multicast address 01-00-5E-00-00-00" (RFC 1112 section 6.4).
func MulticastMAC(group netip.Addr) wire.MAC {
	a := group.As4()
	return wire.MAC{0x01, 0x00, 0x5e, a[1] & 0x7f, a[2], a[3]}
}

// Mode returns the host compatibility mode: 3, or 2 or 1 while an older
// querier is present (RFC 3376 section 7.2.1).
func (p *Protocol) Mode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.modeLocked()
}

// Close stops every timer. Nothing is sent on the way out: the interface
// is going down, and routers time memberships out (RFC 3376 section 8.4).
func (p *Protocol) Close() {
	p.mu.Lock()
	defer p.unlock()
	p.closed = true
	for _, g := range p.groups {
		g.stop()
	}
	p.general.stop()
	for _, m := range p.queue {
		m.pkt.Release()
	}
	p.queue = nil
}
