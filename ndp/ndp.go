// Package ndp is GoNet's IPv6 Neighbor Discovery (RFC 4861) on one
// Ethernet NIC, with what a host builds on it: stateless address
// autoconfiguration and duplicate address detection (RFC 4862), stable
// opaque interface identifiers (RFC 7217), and MLDv2 (RFC 3810): the
// multicast groups it and the host's sockets listen to, each with its
// source filter, reported so that routers and snooping switches deliver
// them.
//
// A Protocol is to IPv6 what package arp is to IPv4. Output is the IPv6
// layer's link output: with a usable neighbour cache entry a datagram goes
// straight to the NIC; otherwise it waits, in a bounded queue, on the
// goroutine that resolves its next hop (section 7.2). Handle takes the ND
// and MLD messages the IPv6 layer's dealer receives, in that dealer's
// goroutine. The rest lives on goroutines and timers of its own, all on the
// stack's clock: one goroutine per address under duplicate address
// detection, one soliciting routers at start, clock timers for the
// neighbour cache's DELAY and PROBE states, for lifetimes and for MLD.
// What those decide to send, and to tell the IPv6 layer, is carried out in
// order by one more goroutine, the announcer (announce.go), so that no
// lock of ndp's is held while it is done.
//
// What ndp learns (addresses and their states, on-link prefixes, default
// routers, the link MTU, the hop limit, and the DNS servers and search
// domains routers advertise) it tells the IPv6 layer through the Host
// interface, which is all it knows of that layer.
package ndp

import (
	"cmp"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Protocol constants of RFC 4861 section 10 (host constants and node
// constants), RFC 7217 section 7 and RFC 3810 section 9.
const (
	MaxRtrSolicitationDelay = time.Second
	RtrSolicitationInterval = 4 * time.Second
	MaxRtrSolicitations     = 3
	MaxMulticastSolicit     = 3
	MaxUnicastSolicit       = 3
	ReachableTime           = 30 * time.Second // BaseReachableTime's default
	RetransTimer            = time.Second
	DelayFirstProbeTime     = 5 * time.Second
	MinRandomFactor         = 0.5
	MaxRandomFactor         = 1.5

	// IDGenRetries is how many times RFC 7217 section 6 forms a new
	// stable address after a duplicate, each with the next DAD_Counter.
	IDGenRetries = 3

	// MLDRobustness is the Robustness Variable (RFC 3810 section 9.1)
	// until a querier gives its own: a state change report is sent this
	// many times.
	MLDRobustness = 2
	// MLDUnsolicitedReportInterval bounds the random wait before a
	// state change report is sent again (RFC 3810 section 9.11).
	MLDUnsolicitedReportInterval = time.Second

	// reachableRefresh is how often ReachableTime is drawn again from
	// BaseReachableTime: "at least every few hours" (RFC 4861 section
	// 6.3.4).
	reachableRefresh = 2 * time.Hour
	// twoHours is RFC 4862 section 5.5.3 e's bound on lowering a valid
	// lifetime by an unauthenticated advertisement.
	twoHours = 2 * time.Hour
)

// Config tunes the protocol. Zero fields take the defaults.
type Config struct {
	// BaseReachableTime and RetransTimer are the initial values of the
	// variables of RFC 4861 section 6.3.2 (30 s and 1 s), until a Router
	// Advertisement sets them.
	BaseReachableTime, RetransTimer time.Duration
	// DupAddrDetectTransmits is how many Neighbor Solicitations DAD sends
	// for an address (RFC 4862 section 5.1; 1). NoDAD turns DAD off, and
	// addresses are preferred at once.
	DupAddrDetectTransmits int
	NoDAD                  bool
	// OptimisticDAD uses an address while its DAD runs (RFC 4429, as
	// Linux's optimistic_dad): for the addresses whose identifier is
	// most likely unique (section 3.1: link-local and SLAAC ones from
	// the MAC or RFC 7217, temporary ones, DHCPv6 leases), not static
	// ones. Until DAD passes, the address is avoided as a source where
	// another fits, its advertisements do not override a neighbour's
	// cache, and no solicitation from it carries our link-layer
	// address (section 2.2), so that if it is another node's, that
	// node's neighbours keep reaching it. A host's: Advertise refuses
	// it, as Linux turns it off on a forwarding interface.
	OptimisticDAD bool
	// NoSLAAC stops addresses being formed from advertised prefixes; the
	// prefixes are still on-link when the advertisement says so.
	NoSLAAC bool
	// NoRouterSolicitation stops the solicitations sent at start.
	NoRouterSolicitation bool
	// SecretKey, when set, makes interface identifiers the stable opaque
	// ones of RFC 7217 instead of the EUI-64 of the MAC: for the
	// link-local address and for SLAAC. It is at least
	// ipv6.MinSecretKeyLen bytes, kept by the caller across restarts.
	// NetworkID is RFC 7217's optional Network_ID.
	SecretKey, NetworkID []byte
	// QueueLen bounds the packets waiting on one resolution (16);
	// MaxEntries the neighbour cache (512); MaxPending the resolutions
	// under way (256).
	QueueLen, MaxEntries, MaxPending int
	// MaxAddresses bounds the addresses SLAAC forms (16, as Linux's
	// max_addresses), MaxRouters the default router list (16) and
	// MaxPrefixes the prefix list and, apart, the routes of Route
	// Information options (64 each): a node on the link could
	// otherwise grow them with advertisements without end (RFC 4861
	// section 11.1, RFC 6583 section 4).
	MaxAddresses, MaxRouters, MaxPrefixes int
	// MaxDNSServers bounds the DNS Server List that advertisements'
	// RDNSS options fill (3, as many as a resolv.conf names) and
	// MaxDNSSearch the DNS Search List of their DNSSL options (6, as
	// glibc's); RFC 8106 section 5.3.1 asks for "a sufficient number
	// (e.g., three)".
	MaxDNSServers, MaxDNSSearch int
	// TempAddresses forms a temporary address (RFC 8981) beside each
	// address SLAAC forms, renewed a day at a time, and has source
	// selection prefer them (Linux's use_tempaddr=2).
	TempAddresses bool
	// MLDVersion 1 makes the interface speak MLDv1 always (RFC 2710),
	// as Linux's force_mld_version; 0 or 2 is MLDv2, falling back to
	// MLDv1 while an MLDv1 querier is present (RFC 3810 section 8.2.1).
	MLDVersion int
}

func (c *Config) setDefaults() {
	c.BaseReachableTime = cmp.Or(c.BaseReachableTime, ReachableTime)
	c.RetransTimer = cmp.Or(c.RetransTimer, RetransTimer)
	c.DupAddrDetectTransmits = cmp.Or(c.DupAddrDetectTransmits, 1)
	c.QueueLen = cmp.Or(c.QueueLen, 16)
	c.MaxEntries = cmp.Or(c.MaxEntries, 512)
	c.MaxPending = cmp.Or(c.MaxPending, 256)
	c.MaxAddresses = cmp.Or(c.MaxAddresses, 16)
	c.MaxRouters = cmp.Or(c.MaxRouters, 16)
	c.MaxPrefixes = cmp.Or(c.MaxPrefixes, 64)
	c.MaxDNSServers = cmp.Or(c.MaxDNSServers, 3)
	c.MaxDNSSearch = cmp.Or(c.MaxDNSSearch, 6)
}

// AddrState is the state of one of our addresses (RFC 4862 section 2).
type AddrState uint8

// The states. A Tentative address is not yet ours: the IPv6 layer accepts
// no datagram for it nor sends from it. A Deprecated one still receives,
// and is used as a source only by connections already using it. A
// Duplicate one failed DAD and is never used (RFC 4862 section 5.4.5). An
// Optimistic one is under DAD and used meanwhile, as a deprecated one is
// (RFC 4429 section 2.1; Config.OptimisticDAD).
const (
	Tentative AddrState = iota + 1
	Preferred
	Deprecated
	Duplicate
	Optimistic
)

var addrStateText = [...]string{"", "tentative", "preferred", "deprecated", "duplicate", "optimistic"}

// Usable reports whether an address in the state may be a source and a
// destination.
func (s AddrState) Usable() bool { return s == Preferred || s == Deprecated || s == Optimistic }

// underDAD reports whether duplicate address detection is running on an
// address in the state.
func (s AddrState) underDAD() bool { return s == Tentative || s == Optimistic }

// String names the state.
func (s AddrState) String() string {
	if int(s) < len(addrStateText) && s != 0 {
		return addrStateText[s]
	}
	return "AddrState(?)"
}

// Infinite is the lifetime Host is told for what does not expire (an
// advertised lifetime of all ones, RFC 4861 section 4.6.2; a static
// address).
const Infinite time.Duration = 1<<63 - 1

// Host is what ndp needs of the IPv6 layer on this NIC: it is told what
// neighbour discovery learns, and answers the one question of routing ND
// cannot answer itself. ndp keeps every timer: a lifetime passed to Host
// is for display, and ndp calls again with zero when it ends.
//
// ndp calls Host from one goroutine of its own, the announcer (Redirect's
// NextHop excepted, which the IPv6 dealer's call to Handle asks), never
// with a lock of ndp's held, one call at a time and in the order of the
// events behind them; a Host may call back into ndp (Output, Confirm).
type Host interface {
	// AddAddress assigns addr (with its prefix length) in state;
	// temporary marks a temporary address (RFC 8981).
	AddAddress(addr netip.Prefix, state AddrState, temporary bool)
	// SetAddressState moves an address to state.
	SetAddressState(addr netip.Addr, state AddrState)
	// RemoveAddress unassigns an address.
	RemoveAddress(addr netip.Addr)
	// SetOnLink records that prefix is on-link for lifetime; zero
	// removes it (RFC 4861 section 6.3.4).
	SetOnLink(prefix netip.Prefix, lifetime time.Duration)
	// SetDefaultRouter records router in the default router list with
	// pref for lifetime; zero removes it (RFC 4861 section 6.3.4, RFC
	// 4191 section 3).
	SetDefaultRouter(router netip.Addr, pref route.Preference, lifetime time.Duration)
	// SetConfigFlags passes on an advertisement's Managed and Other
	// flags (RFC 4861 section 4.2) when one first sets either: DHCPv6
	// is then there to ask (RFC 8415 section 6).
	SetConfigFlags(managed, other bool)
	// SetRoute records that prefix is reached through router with pref
	// for lifetime; zero removes the route of that preference (RFC 4191
	// section 3.1's Route Information options).
	SetRoute(prefix netip.Prefix, router netip.Addr, pref route.Preference, lifetime time.Duration)
	// SetLinkMTU sets the link MTU from an advertisement's MTU option.
	SetLinkMTU(mtu int)
	// SetHopLimit sets the default hop limit (CurHopLimit).
	SetHopLimit(hopLimit uint8)
	// NextHop returns the first hop the IPv6 layer currently uses
	// towards dst, out of this NIC (false: another NIC's, or none), so
	// that a Redirect is accepted only from it (RFC 4861 section 8.1);
	// its zone, if any, is not compared.
	NextHop(dst netip.Addr) (netip.Addr, bool)
	// Redirect records in the destination cache that dst is reached
	// through target (RFC 4861 section 8.3); target == dst means dst is
	// on-link.
	Redirect(dst, target netip.Addr)
	// SetDNS gives the DNS servers and search domains routers
	// advertise (RFC 8106), whenever they change; empty lists when the
	// last has expired.
	SetDNS(dns DNS)
	// Unreachable takes a datagram that was waiting on a resolution that
	// failed, to answer with ICMPv6 destination unreachable, code 3
	// (RFC 4861 section 7.2.2). It owns pkt: it must release it.
	Unreachable(nextHop netip.Addr, pkt *buffer.Packet)
}

// Stats are ndp's counters. The In/Out message counters are named after
// Linux's /proc/net/snmp6 (Icmp6InNeighborSolicits...).
type Stats struct {
	InRouterSolicits          stats.Counter
	InRouterAdvertisements    stats.Counter
	InNeighborSolicits        stats.Counter
	InNeighborAdvertisements  stats.Counter
	InRedirects               stats.Counter
	InGroupMembQueries        stats.Counter
	InMLDSourceQueries        stats.Counter // of InGroupMembQueries, those listing sources (RFC 3810 section 5.1.10)
	InMLDReports              stats.Counter // other hosts' reports, ignored (RFC 3810 section 6.2)
	OutRouterSolicits         stats.Counter
	OutNeighborSolicits       stats.Counter
	OutNeighborAdvertisements stats.Counter
	OutMLDv2Reports           stats.Counter
	OutGroupMembResponses     stats.Counter // MLDv1 Reports (RFC 2710), in MLDv1 mode
	OutGroupMembReductions    stats.Counter // MLDv1 Dones
	OutRouterAdvertisements   stats.Counter // sent as an advertising interface (advertise.go)
	// Other routers' advertisements, left unprocessed by an advertising
	// interface (RFC 4861 section 6.2.7).
	InOtherRouterAds stats.Counter

	// Drops of received messages, one counter per reason.
	InFragmented     stats.Counter // came in fragments (RFC 6980 section 5)
	InBadHopLimit    stats.Counter // hop limit not 255 (1 for MLD)
	InBadCode        stats.Counter
	InBadChecksum    stats.Counter
	InMalformed      stats.Counter // too short, or an option of length zero or past the end
	InBadSource      stats.Counter // a source address the message may not have
	InBadTarget      stats.Counter // a multicast target
	InBadDest        stats.Counter // a destination the message may not have
	InNotOurs        stats.Counter // a solicitation for an address not ours
	InUnknown        stats.Counter // a type ndp does not handle
	RedirectsRefused stats.Counter // not from the first hop, or a bad target
	InConflicts      stats.Counter // an advertisement of an address we hold past DAD

	// The neighbour cache and resolution.
	CacheHits          stats.Counter
	CacheMisses        stats.Counter
	CacheFull          stats.Counter // entry not made: cache at MaxEntries, nothing to evict
	CacheEvictions     stats.Counter // stale entries evicted to make room
	Resolved           stats.Counter
	ResolveFailed      stats.Counter
	ProbesFailed       stats.Counter // entries deleted after MAX_UNICAST_SOLICIT probes
	QueueDrops         stats.Counter // waiting packets dropped: queue full, budget, too many resolutions, close
	UnresolvedDrops    stats.Counter // waiting packets dropped because resolution failed
	PendingResolutions stats.Gauge
	// OptimisticDetours counts datagrams from an optimistic address sent
	// through a default router instead of resolving their next hop
	// (RFC 4429 section 2.3; resolve.go's detourLocked).
	OptimisticDetours stats.Counter

	// Addresses.
	DADStarted      stats.Counter
	DADSucceeded    stats.Counter
	DADFailed       stats.Counter // duplicates found (RFC 4862 section 5.4.5)
	DADRetries      stats.Counter // RFC 7217 section 6 new addresses after a duplicate
	DADLoopedBack   stats.Counter // our own probes come back, by their nonce (RFC 7527), not taken for duplicates
	SLAACAddrs      stats.Counter // addresses formed from prefixes
	TempAddrs       stats.Counter // temporary addresses formed (RFC 8981), a retry after a duplicate among them
	AddrsExpired    stats.Counter // removed at the end of their valid lifetime
	PrefixesIgnored stats.Counter // prefix options RFC 4862 section 5.5.3 or RFC 4861 section 6.3.4 ignores
	ListsFull       stats.Counter // an address, router, prefix or route not added: its list at its bound
	// LinkUps counts the link coming up (LinkUp), each time followed
	// by DAD of every address and, on a host, router solicitations.
	LinkUps stats.Counter
	// Route Information options ignored (RFC 4191): malformed, the
	// reserved preference, ::/0, or a link-local or multicast prefix.
	RouteInfoIgnored stats.Counter

	// MLD's Host Compatibility Mode (RFC 3810 section 8.2.1), 2 or 1,
	// and our MLDv1 answers not sent because another listener reported
	// the group first (RFC 2710 section 4).
	MLDMode              stats.Gauge
	MLDReportsSuppressed stats.Counter

	// DNS from advertisements (RFC 8106).
	DNSOptionsIgnored stats.Counter // RDNSS or DNSSL options discarded by section 5.3.1's checks
	DNSReplaced       stats.Counter // servers or domains dropped from a full list for newer ones
}

// Protocol is neighbour discovery on one NIC.
type Protocol struct {
	nic  *ethernet.NIC
	host Host
	cfg  Config
	env  *env.Env

	done    chan struct{}
	wg      sync.WaitGroup // every goroutine ndp starts
	closing sync.Once
	raSeen  chan struct{} // closed at the first valid Router Advertisement
	raOnce  sync.Once
	llDone  chan struct{} // closed when the first link-local address leaves DAD
	llOnce  sync.Once
	// raAgain and llAgain are raSeen and llDone for the solicitations
	// sent when the link comes up (link.go); p.mu guards them.
	raAgain, llAgain chan struct{}

	// mu guards everything below but out, which has its own lock. Work
	// that must not run under mu (calls into Host, sends) is queued with
	// later, and handed by unlock to the announcer.
	mu         sync.Mutex
	closed     bool
	pending    []func()
	out        announcer
	cache      map[netip.Addr]*neighbor
	resolving  int
	params     params
	addrs      map[netip.Addr]*address
	routers    map[netip.Addr]*router
	onLink     map[netip.Prefix]*onLinkPrefix
	routeInfos map[routeKey]*routeInfo
	dnsServers dnsList[netip.Addr] // dns.go
	dnsSearch  dnsList[string]
	mld        mld
	adv        *advertiser // set once the interface advertises (advertise.go)

	isRouter atomic.Bool // the interface advertises: NAs carry the Router flag

	configFlags [2]bool // the Managed and Other flags last passed to Host

	log ndpLog // log.go

	Stats Stats
}

// New returns neighbour discovery for nic. It sends through nic from
// Start on; the IPv6 layer hands it ND messages with Handle and sends
// through Output.
func New(nic *ethernet.NIC, cfg Config, e *env.Env) *Protocol {
	cfg.setDefaults()
	p := &Protocol{
		nic:        nic,
		cfg:        cfg,
		env:        e,
		done:       make(chan struct{}),
		raSeen:     make(chan struct{}),
		llDone:     make(chan struct{}),
		cache:      map[netip.Addr]*neighbor{},
		addrs:      map[netip.Addr]*address{},
		routers:    map[netip.Addr]*router{},
		onLink:     map[netip.Prefix]*onLinkPrefix{},
		routeInfos: map[routeKey]*routeInfo{},
	}
	p.mld.groups = map[netip.Addr]*group{}
	// Config.MLDVersion 1 shows at once: the mode is not changed later.
	p.mld.v1 = cfg.MLDVersion == 1
	p.Stats.MLDMode.Add(map[bool]int64{false: 2, true: 1}[p.mld.v1])
	p.out.wake = make(chan struct{}, 1)
	p.params.init(cfg, e)
	p.log = newNDPLog(p)
	return p
}

// Start gives ndp the IPv6 layer it reports to and begins: the link-local
// address is formed and put through DAD (RFC 4862 section 5.3), and routers
// are solicited (RFC 4861 section 6.3.7). It is called once, before the
// IPv6 layer can hand ndp anything (before the NIC starts): what it sends
// meanwhile waits on the NIC's transmit queue.
func (p *Protocol) Start(host Host) error {
	p.host = host
	p.wg.Add(1)
	go p.announce()
	p.mu.Lock()
	p.filterLocked()
	err := p.addLinkLocalLocked(0)
	p.unlock()
	if err != nil {
		return err
	}
	if !p.cfg.NoRouterSolicitation {
		p.wg.Add(1)
		go p.solicitRouters(p.llDone, p.raSeen)
	}
	return nil
}

// Close stops every goroutine and timer of ndp, dropping what waits on
// resolution. Host is not told of the addresses going away: the IPv6
// layer closes with ndp.
func (p *Protocol) Close() {
	p.closing.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.pending = nil
		for _, n := range p.cache {
			n.stopTimer()
		}
		for _, a := range p.addrs {
			a.stopTimer()
		}
		for _, r := range p.routers {
			r.timer.Stop()
		}
		for _, o := range p.onLink {
			o.timer.Stop()
		}
		for _, r := range p.routeInfos {
			r.timer.Stop()
		}
		p.dnsServers.stop()
		p.dnsSearch.stop()
		p.mld.stop()
		p.mu.Unlock()
		close(p.done)
		p.wg.Wait()
	})
}

// params are the variables of RFC 4861 section 6.3.2 a host keeps per
// interface; p.mu guards them.
type params struct {
	base, reachable, retrans time.Duration
	drawn                    time.Time // when reachable was last drawn
	env                      *env.Env
	// linkMTU is LinkMTU as an advertisement's MTU option set it; 0:
	// the NIC's.
	linkMTU int
}

func (pr *params) init(cfg Config, e *env.Env) {
	pr.env = e
	pr.retrans = cfg.RetransTimer
	pr.setBase(cfg.BaseReachableTime)
}

// setBase sets BaseReachableTime and draws ReachableTime from it: "a
// uniformly distributed random value between MIN_RANDOM_FACTOR and
// MAX_RANDOM_FACTOR times BaseReachableTime" (RFC 4861 section 6.3.2).
func (pr *params) setBase(base time.Duration) {
	pr.base = base
	f := MinRandomFactor + (MaxRandomFactor-MinRandomFactor)*pr.env.Rand.Float64()
	pr.reachable = time.Duration(float64(base) * f)
	pr.drawn = pr.env.Clock.Now()
}

// reachableTime is ReachableTime, drawn again every few hours (section
// 6.3.4) so that hosts that started together drift apart.
func (pr *params) reachableTime(now time.Time) time.Duration {
	if now.Sub(pr.drawn) >= reachableRefresh {
		pr.setBase(pr.base)
	}
	return pr.reachable
}

// MAC returns the NIC's hardware address, the link-layer address ndp
// advertises.
func (p *Protocol) MAC() wire.MAC { return p.nic.MAC() }
