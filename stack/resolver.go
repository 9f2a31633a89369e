package stack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Names: the stack resolves them with the standard library's DNS client
// (net.Resolver with PreferGo), whose queries travel over GoNet to the
// servers GoNet was given (SetDNS: by the daemon's flags) or learned
// (SetLearnedDNS: from a DHCP lease or routers' advertisements), never to
// the host's. Go's resolver takes its options, its search list and its
// static entries (/etc/hosts) from the host; the stack's own lookups
// (LookupNetIP, DialContext with a name, LookupAddr) answer from GoNet's
// static table first (hosts.go), then apply GoNet's search list
// themselves, as RFC 1123 section 6.1.4.3 and resolv.conf's ndots:1 have
// it, ask Go's resolver for absolute names only, to which the host's
// search list does not apply, and drop what it answers from the host's
// /etc/hosts (lookupDNS).

// DNSConfig is where the stack sends its DNS queries and how it completes
// names.
type DNSConfig struct {
	// Servers are asked in turn: the first until it fails to answer,
	// then the next. Port 53 when a server's is 0.
	Servers []netip.AddrPort
	// Search are the domains a name with no dot is tried in first
	// (DHCP option 119, resolv.conf's search), before the name alone.
	Search []string
}

// DNSOrigin names what configured DNS on a NIC, for SetLearnedDNS.
type DNSOrigin struct {
	Protocol DNSProtocol
	NIC      string
}

// DNSProtocol is a protocol that configures DNS.
type DNSProtocol uint8

// The protocols, in the order their servers and domains are used.
const (
	// DNSFromDHCP is a DHCP lease's (RFC 2132 options 6 and 15, RFC
	// 3397's option 119).
	DNSFromDHCP DNSProtocol = iota + 1
	// DNSFromRouterAdvertisements is what routers advertise (RFC 8106's
	// RDNSS and DNSSL options).
	DNSFromRouterAdvertisements
	// DNSFromDHCPv6 is what a DHCPv6 server gives (RFC 3646's options,
	// by a stateless exchange, RFC 8415 section 6.1).
	DNSFromDHCPv6
)

func (p DNSProtocol) String() string {
	switch p {
	case DNSFromDHCP:
		return "dhcp"
	case DNSFromRouterAdvertisements:
		return "router advertisements"
	case DNSFromDHCPv6:
		return "dhcpv6"
	}
	return fmt.Sprintf("DNSProtocol(%d)", uint8(p))
}

// resolverState is the stack's DNS configuration, which server is
// current, and the static host table (hosts.go).
type resolverState struct {
	mu      sync.Mutex
	byHand  DNSConfig               // SetDNS's
	learned map[DNSOrigin]DNSConfig // SetLearnedDNS's
	cfg     DNSConfig               // what the resolver uses: byHand, or else learned's merged
	current int                     // index in cfg.Servers of the server queries go to
	hosts   hostTable
}

// SetDNS sets the servers and search list the stack's resolver uses, by
// hand: while either is set, they alone are used, and what protocols
// learned (SetLearnedDNS) waits. An empty cfg hands the resolver back to
// them.
func (s *Stack) SetDNS(cfg DNSConfig) error {
	servers, err := checkServers(cfg.Servers)
	if err != nil {
		return err
	}
	search := make([]string, 0, len(cfg.Search))
	for _, d := range cfg.Search {
		d = strings.Trim(d, ".")
		if d == "" || !validName(d) {
			return fmt.Errorf("stack: DNS search domain %q: not a domain name", d)
		}
		search = append(search, d)
	}
	s.dns.mu.Lock()
	s.dns.byHand = DNSConfig{Servers: servers, Search: search}
	s.applyDNSLocked("by hand")
	s.dns.mu.Unlock()
	return nil
}

// SetLearnedDNS sets the servers and search list a protocol learned on a
// NIC; an empty cfg forgets them. Unless SetDNS set some by hand, the
// resolver uses every protocol's on every NIC: a DHCP lease's, then what
// routers advertised, then DHCPv6's (RFC 8106 section 5.3.1: a host
// "SHOULD keep some DNS options from all sources"), each NIC's in the order of their names, so
// that the same network gives the same list whichever answered first;
// the same server or domain once. A search domain the resolver cannot
// use is left out, and logged; the rest is kept.
func (s *Stack) SetLearnedDNS(from DNSOrigin, cfg DNSConfig) error {
	servers, err := checkServers(cfg.Servers)
	if err != nil {
		return err
	}
	search := make([]string, 0, len(cfg.Search))
	for _, d := range cfg.Search {
		if d = strings.Trim(d, "."); d != "" && validName(d) {
			search = append(search, strings.ToLower(d))
		} else {
			s.env.Log.Warn("DNS search domain left out: not a domain name", "from", from.Protocol.String(), "nic", from.NIC, "domain", d)
		}
	}
	s.dns.mu.Lock()
	defer s.dns.mu.Unlock()
	if len(servers) == 0 && len(search) == 0 {
		delete(s.dns.learned, from)
	} else {
		if s.dns.learned == nil {
			s.dns.learned = map[DNSOrigin]DNSConfig{}
		}
		s.dns.learned[from] = DNSConfig{Servers: servers, Search: search}
	}
	s.applyDNSLocked(from.Protocol.String() + " on " + from.NIC)
	return nil
}

// DNSSource is one source of the resolver's configuration, as DNSSources
// lists it.
type DNSSource struct {
	// ByHand is SetDNS's configuration; From is the origin of the
	// others.
	ByHand bool
	From   DNSOrigin
	DNSConfig
	// Used says whether the resolver uses it: learned ones wait while
	// some are set by hand.
	Used bool
}

// DNSSources returns where the resolver's configuration comes from: what
// was set by hand, if anything, then what each protocol learned on each
// NIC, in the order their servers and domains are used.
func (s *Stack) DNSSources() []DNSSource {
	s.dns.mu.Lock()
	defer s.dns.mu.Unlock()
	var out []DNSSource
	byHand := len(s.dns.byHand.Servers) > 0 || len(s.dns.byHand.Search) > 0
	if byHand {
		out = append(out, DNSSource{ByHand: true, DNSConfig: cloneDNS(s.dns.byHand), Used: true})
	}
	for _, o := range s.learnedOrderLocked() {
		out = append(out, DNSSource{From: o, DNSConfig: cloneDNS(s.dns.learned[o]), Used: !byHand})
	}
	return out
}

func cloneDNS(c DNSConfig) DNSConfig {
	return DNSConfig{Servers: slices.Clone(c.Servers), Search: slices.Clone(c.Search)}
}

// learnedOrderLocked returns the origins of what was learned in the order
// it is used: by protocol (DNSProtocol's order), then by NIC name.
func (s *Stack) learnedOrderLocked() []DNSOrigin {
	return slices.SortedFunc(maps.Keys(s.dns.learned), func(a, b DNSOrigin) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), strings.Compare(a.NIC, b.NIC))
	})
}

// checkServers checks that every server is a unicast address, and gives
// port 53 to those without one.
func checkServers(in []netip.AddrPort) ([]netip.AddrPort, error) {
	servers := make([]netip.AddrPort, 0, len(in))
	for _, a := range in {
		if !a.Addr().IsValid() || a.Addr().IsUnspecified() || a.Addr().IsMulticast() {
			return nil, fmt.Errorf("stack: DNS server %v: not a unicast address", a)
		}
		if a.Port() == 0 {
			a = netip.AddrPortFrom(a.Addr(), 53)
		}
		servers = append(servers, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
	}
	return servers, nil
}

// applyDNSLocked works out the configuration the resolver uses, after a
// change by why; the first server is current again when it changed.
func (s *Stack) applyDNSLocked(why string) {
	cfg := s.dns.byHand
	if len(cfg.Servers) == 0 && len(cfg.Search) == 0 {
		cfg = DNSConfig{}
		for _, o := range s.learnedOrderLocked() {
			l := s.dns.learned[o]
			for _, a := range l.Servers {
				if !slices.Contains(cfg.Servers, a) {
					cfg.Servers = append(cfg.Servers, a)
				}
			}
			for _, d := range l.Search {
				if !slices.Contains(cfg.Search, d) {
					cfg.Search = append(cfg.Search, d)
				}
			}
		}
	}
	if slices.Equal(cfg.Servers, s.dns.cfg.Servers) && slices.Equal(cfg.Search, s.dns.cfg.Search) {
		return
	}
	s.dns.cfg = cfg
	s.dns.current = 0
	s.env.Log.Info("DNS set", "by", why, "servers", fmt.Sprint(cfg.Servers), "search", strings.Join(cfg.Search, " "))
}

// DNS returns the stack's DNS configuration.
func (s *Stack) DNS() DNSConfig {
	s.dns.mu.Lock()
	defer s.dns.mu.Unlock()
	return cloneDNS(s.dns.cfg)
}

// errNoDNS is the lookup error of a stack without DNS servers.
var errNoDNS = errors.New("no DNS servers configured (stack.SetDNS, gonet -dns, a DHCP lease, or routers' advertisements)")

// Resolver returns a resolver whose queries go over the stack to its DNS
// servers: over UDP, and over TCP when an answer comes truncated, as Go's
// resolver does. Every Lookup method of net.Resolver works with it. It
// does not know the stack's static table (SetHosts), which the stack's
// own LookupNetIP, LookupAddr and DialContext consult first.
func (s *Stack) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, StrictErrors: true, Dial: s.dialDNS}
}

// dialDNS is the resolver's Dial. Go's resolver passes the address of a
// server from the host's resolv.conf, which the stack replaces by its
// current server; a connection closed without an answer makes the next
// server current, so the resolver's next attempt goes there.
func (s *Stack) dialDNS(ctx context.Context, network, _ string) (net.Conn, error) {
	if dialed, ok := ctx.Value(dialedKey{}).(*atomic.Bool); ok {
		dialed.Store(true)
	}
	s.dns.mu.Lock()
	if len(s.dns.cfg.Servers) == 0 {
		s.dns.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: network, Err: errNoDNS}
	}
	i := s.dns.current
	server := s.dns.cfg.Servers[i]
	s.dns.mu.Unlock()
	var (
		c   net.Conn
		err error
	)
	switch network {
	case "udp", "udp4", "udp6":
		c, err = s.DialUDP(server)
	case "tcp", "tcp4", "tcp6":
		c, err = s.DialTCP(ctx, server)
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
	if err != nil {
		s.dnsFailed(i)
		return nil, withNet(err, network)
	}
	dc := &dnsConn{Conn: c, failed: func() { s.dnsFailed(i) }}
	if pc, ok := c.(net.PacketConn); ok {
		// Go's resolver tells datagrams from streams by this interface.
		return &dnsPacketConn{dnsConn: dc, pc: pc}, nil
	}
	return dc, nil
}

// dialedKey marks the context of one of the stack's own lookups with a
// flag dialDNS sets: an answer Go's resolver gives without dialling came
// from the machine's /etc/hosts, which it reads before DNS when
// nsswitch.conf says "files dns", and net.Resolver cannot be told not
// to. That file names the machine's neighbours, not those of the network
// GoNet is on.
type dialedKey struct{}

// lookupDNS is r.LookupNetIP over DNS alone: an answer from the
// machine's /etc/hosts is no such host.
func lookupDNS(ctx context.Context, r *net.Resolver, family, name string) ([]netip.Addr, error) {
	dialed := new(atomic.Bool)
	addrs, err := r.LookupNetIP(context.WithValue(ctx, dialedKey{}, dialed), family, name)
	if err == nil && !dialed.Load() {
		return nil, &net.DNSError{Err: "no such host (the machine's /etc/hosts has it, which GoNet does not read)", Name: name, IsNotFound: true}
	}
	return addrs, err
}

// dnsFailed makes the server after the ith current, unless another
// failure already moved on.
func (s *Stack) dnsFailed(i int) {
	s.dns.mu.Lock()
	defer s.dns.mu.Unlock()
	if n := len(s.dns.cfg.Servers); n > 0 && s.dns.current == i {
		s.dns.current = (i + 1) % n
	}
}

// dnsConn is a connection to a DNS server that notes whether an answer
// came before it closed.
type dnsConn struct {
	net.Conn
	once     sync.Once
	answered bool
	failed   func()
}

func (c *dnsConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.answered = true
	}
	return n, err
}

func (c *dnsConn) Close() error {
	c.once.Do(func() {
		if !c.answered {
			c.failed()
		}
	})
	return c.Conn.Close()
}

// dnsPacketConn is a dnsConn over UDP: a net.PacketConn, so that Go's
// resolver sends its queries as datagrams, not as length-prefixed
// messages.
type dnsPacketConn struct {
	*dnsConn
	pc net.PacketConn
}

func (c *dnsPacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := c.pc.ReadFrom(b)
	if n > 0 {
		c.answered = true
	}
	return n, a, err
}

func (c *dnsPacketConn) WriteTo(b []byte, a net.Addr) (int, error) { return c.pc.WriteTo(b, a) }

// LookupNetIP resolves host as net.Resolver.LookupNetIP does, from the
// static table (SetHosts, AddHost) when it has host, else over DNS with
// the stack's search list: a name with no dot is tried in each search
// domain first, any other name as it is first; a name ending in a dot is
// absolute and tried alone. network is "ip", "ip4" or "ip6" (or a
// transport's, "tcp4" meaning IPv4 alone); an IPv4-mapped address comes
// back unmapped. The addresses come in the order to try them, by RFC 6724
// section 6 over GoNet's own routes (addrselect.go).
func (s *Stack) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	addrs, err := s.lookupNetIP(ctx, network, host)
	s.sortDestinations(addrs)
	return addrs, err
}

func (s *Stack) lookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	family := "ip"
	switch {
	case strings.HasSuffix(network, "4"):
		family = "ip4"
	case strings.HasSuffix(network, "6"):
		family = "ip6"
	}
	if addrs, ok := s.lookupStatic(host); ok {
		return staticAnswer(host, family, addrs)
	}
	r := s.Resolver()
	var firstErr error
	for _, name := range s.candidates(host) {
		addrs, err := lookupDNS(ctx, r, family, name)
		if err == nil && len(addrs) > 0 {
			for i, a := range addrs {
				addrs[i] = a.Unmap()
			}
			return addrs, nil
		}
		var de *net.DNSError
		if errors.As(err, &de) && !de.IsNotFound {
			// A server failure or a timeout: the next candidate
			// would meet the same, as Go's resolver stops too.
			return nil, err
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return nil, firstErr
}

// candidates are the absolute names host is tried as, in order.
func (s *Stack) candidates(host string) []string {
	if strings.HasSuffix(host, ".") {
		return []string{host}
	}
	s.dns.mu.Lock()
	search := slices.Clone(s.dns.cfg.Search)
	s.dns.mu.Unlock()
	var names []string
	for _, d := range search {
		names = append(names, host+"."+d+".")
	}
	if strings.Contains(host, ".") {
		return append([]string{host + "."}, names...)
	}
	return append(names, host+".")
}

// validName reports whether name is a domain name: labels of letters,
// digits, hyphens and underscores, 1 to 63 bytes each, 253 in all (RFC
// 1035 section 2.3.4; underscores for service labels, as Go allows).
func validName(name string) bool {
	if len(name) == 0 || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if len(label) == 0 || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}
