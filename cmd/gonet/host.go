package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/internal/rtnl"
	"github.com/gonetstack/gonet/iperf3"
	"github.com/gonetstack/gonet/ipv4ll"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/link/pcap"
	"github.com/gonetstack/gonet/link/shm"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/tcp"
)

// Limits on -mtu. RFC 791: "Every internet module must be able to forward a
// datagram of 68 octets without further fragmentation"; the IPv4 total
// length field caps a datagram at 65535.
const (
	minMTU     = 68
	maxMTU     = 65535
	defaultMTU = 1500 // Ethernet's (RFC 894)
)

// ifNameMax is the longest Linux interface name: IFNAMSIZ (16) less the
// terminating NUL.
const ifNameMax = 15

// linkConfig is what up and ping share: a GoNet host on a TAP device, or
// for up on a UNIX socket a VM connects to.
type linkConfig struct {
	tap    string
	socket string // -socket: the UNIX socket instead of a TAP; up only
	// socketFlag is set when -socket is registered, for check's message.
	socketFlag bool
	// ring and ringListen are -ring and -ring-listen: a shared-memory
	// ring link to another GoNet process, dialled or listened for.
	ring, ringListen string
	// ringSize is -ring-size, the listener's descriptors per ring; 0:
	// shm.DefaultRingSize.
	ringSize int
	// addrs are -addr's, IPv4 and IPv6, in the order given: the first
	// is the ready line's.
	addrs []netip.Prefix
	// dhcp is -addr dhcp: the IPv4 address, router, DNS servers and MTU
	// from a DHCP server (RFC 2131).
	dhcp bool
	// dhcpLease is -dhcp-lease: the file that keeps the lease across
	// restarts, for INIT-REBOOT; empty: none.
	dhcpLease string
	// gws are -gw's, at most one per family; none: no default route
	// but what routers advertise.
	gws []netip.Addr
	mac net.HardwareAddr // nil: a random locally administered one
	mtu int
	// tapQueues and tapTxQueueLen are -tap-queues and -tap-txqueuelen,
	// tap.Options' Queues and TxQueueLen; 0: the package's defaults.
	tapQueues, tapTxQueueLen int
	// tapSpin is -tap-spin, tap.Options.Spin; 0: link.DefaultSpin.
	tapSpin time.Duration
	pcap    string // capture file; empty: no capture
	impair  string // fault.ParseSpec syntax; empty: a perfect link
	fault   fault.Config
	memory  int64 // stack's memory limit; 0: the stack's default
	ecn     tcp.ECNMode
	// noIPv6 leaves the stack IPv4-only (-no-ipv6).
	noIPv6 bool
	// ipv4ll is -addr ipv4ll: an IPv4 link-local address claimed on the
	// link (RFC 3927).
	ipv4ll bool
	// router is the gateway's: its stack is the router of its link, which
	// solicits no routers and forms no addresses from advertisements.
	router bool
	// slaac forms addresses from advertised prefixes (RFC 4862 section
	// 5.5.3); -slaac=false turns it off.
	slaac bool
	// dhcpv6 asks DHCPv6 servers for DNS when routers set the Other or
	// Managed flag (RFC 8415 stateless); -dhcpv6=false does not.
	dhcpv6 bool
	// tempAddr is -temp-addr: temporary addresses (RFC 8981) beside
	// SLAAC's, preferred as sources.
	tempAddr bool
	// optimisticDAD is -optimistic-dad: addresses used while their DAD
	// runs (RFC 4429).
	optimisticDAD bool
	// stableKey is the -stable-iid file holding the RFC 7217 secret
	// key; empty: interface identifiers from the MAC (EUI-64).
	stableKey string
	// acd probes -addr's IPv4 addresses before using them and defends
	// them once (RFC 5227; -acd).
	acd bool
	// dns and search are -dns's servers and -search's domains for the
	// stack's resolver; given, they win over a DHCP lease's.
	dns    []netip.AddrPort
	search []string
	// hostArgs are -host's static entries, and hostsFile -hosts's
	// file; static is the table they make, the file's entries first
	// (loadHosts).
	hostArgs  hostFlag
	hostsFile string
	static    []stack.HostEntry
	// gwNames are -gw's names, which checkAddrs looks up in the static
	// table and adds to gws.
	gwNames []string
	// hostname is up's -hostname, which the DHCP client sends (option
	// 12); empty: host.hostname's default.
	hostname string
}

// register adds the TAP and host flags to fs, writing into c.
func (c *linkConfig) register(fs *flag.FlagSet) {
	c.mtu = defaultMTU
	fs.StringVar(&c.tap, "tap", "", "TAP device `NAME` (created when absent; at most 15 bytes)")
	fs.Var(addrFlag{(*addrsFlag)(&c.addrs), &c.dhcp, &c.ipv4ll}, "addr", "GoNet's address and prefix `ADDR/NN`, IPv4 or IPv6, as in 10.0.0.2/24 or fd00::2/64, or dhcp to ask a DHCP server for the IPv4 address, router, DNS servers and MTU, or ipv4ll to claim an IPv4 link-local address of 169.254/16 (RFC 3927, zeroconf; beside dhcp, for when no server answers) (repeatable; IPv6 ones are used once duplicate address detection ends; with IPv6 on, optional: the link-local address and SLAAC need none)")
	fs.StringVar(&c.dhcpLease, "dhcp-lease", "", "with -addr dhcp, keep the lease in `FILE` and ask for its address again at the next start (RFC 2131 INIT-REBOOT)")
	fs.Var(gatewaysFlag{&c.gws, &c.gwNames}, "gw", "route everything off-link through the gateway `ADDR|NAME`: an address on an -addr's network, or for IPv6 a router's link-local address, or a name -host or -hosts gives, never asked of DNS (repeatable, one per family; default: no IPv4 gateway, and the IPv6 routers that advertise)")
	c.registerIPv6(fs)
	fs.Var((*macFlag)(&c.mac), "mac", "GoNet's Ethernet address `MAC`, as in 02:00:5e:10:00:01 (default: a random locally administered one)")
	fs.IntVar(&c.mtu, "mtu", defaultMTU, "the link's MTU `N`, 68..65535")
	fs.IntVar(&c.tapQueues, "tap-queues", 0, "open the TAP device with `N` queues each way, each read and written by goroutines of its own, the kernel steering each flow to one (IFF_MULTI_QUEUE; 1..256, default 0: tap.DefaultQueues)")
	fs.DurationVar(&c.tapSpin, "tap-spin", 0, "how long a TAP queue's reader polls the empty device before it sleeps until the next frame, while frames keep coming within it (default 0: link.DefaultSpin, 50µs; negative: never poll)")
	fs.IntVar(&c.tapTxQueueLen, "tap-txqueuelen", 0, "the frames the kernel holds per TAP queue for GoNet to read before it drops (txqueuelen; default 0: tap.DefaultTxQueueLen, 16384; the kernel's own is 1000)")
	fs.Var((*dnsFlag)(&c.dns), "dns", "resolve names with the DNS server at `ADDR` (or ADDR:PORT), over GoNet; an address, not a name, since it is what names are resolved with (repeatable, asked in turn; default: a DHCP lease's and those routers advertise (RFC 8106), else none)")
	fs.Var((*searchFlag)(&c.search), "search", "complete a name with no dot in `DOMAIN` first (repeatable; default: a DHCP lease's and those routers advertise)")
	fs.Var(&c.hostArgs, "host", "resolve the name to the address as `NAME=ADDR` says, from a static table asked before DNS, as /etc/hosts is (repeatable; a name given twice has both addresses)")
	fs.StringVar(&c.hostsFile, "hosts", "", "add the static entries of `FILE`, in /etc/hosts's format, before -host's (default: none; the machine's /etc/hosts names its neighbours, not GoNet's)")
	fs.BoolVar(&c.acd, "acd", false, "probe -addr's IPv4 addresses before using them and fail if another station holds one (RFC 5227 address conflict detection, 4 to 7 s), then defend them once")
	c.registerCapture(fs)
	fs.Var((*bytesFlag)(&c.memory), "memory", "bound the memory the stack holds for others to `BYTES`, as in 16M (default 512M); the process's GOMEMLIMIT is this plus 64M, with GOGC off, unless the environment sets them")
	fs.Var((*ecnFlag)(&c.ecn), "ecn", "use ECN on TCP as `MODE` says: passive (answer a peer that asks, as Linux's tcp_ecn=2), on (ask too), off")
}

// registerIPv6 adds the flags of the host's IPv6 to fs.
func (c *linkConfig) registerIPv6(fs *flag.FlagSet) {
	c.slaac, c.dhcpv6 = true, true
	fs.BoolVar(&c.noIPv6, "no-ipv6", false, "run IPv4 only, as Linux's disable_ipv6: no link-local address, no neighbour discovery, IPv6 frames dropped")
	fs.BoolVar(&c.slaac, "slaac", true, "form addresses from the prefixes routers advertise (RFC 4862); -slaac=false takes only the routes they advertise")
	fs.BoolVar(&c.dhcpv6, "dhcpv6", true, "ask the link's DHCPv6 servers for DNS servers and search domains when routers set the Other or Managed flag (RFC 8415, stateless: addresses come from SLAAC); -dhcpv6=false does not")
	fs.BoolVar(&c.tempAddr, "temp-addr", false, "form a temporary address (RFC 8981: a random identifier, renewed daily) beside each address SLAAC forms, and prefer it as the source of new connections, as Linux's use_tempaddr=2")
	fs.BoolVar(&c.optimisticDAD, "optimistic-dad", false, "use the link-local, SLAAC, temporary and DHCPv6 addresses while their duplicate address detection runs (RFC 4429, as Linux's optimistic_dad), avoided as sources where another fits until it passes; not the static -addr ones")
	fs.StringVar(&c.stableKey, "stable-iid", "", "form IPv6 interface identifiers as RFC 7217's stable opaque ones from the secret key in `FILE` (created, mode 0600, with a new key when absent) instead of from the MAC")
}

// registerCapture adds -pcap and -impair, what gonet does to a link's
// frames whatever the link, to fs.
func (c *linkConfig) registerCapture(fs *flag.FlagSet) {
	fs.StringVar(&c.pcap, "pcap", "", "write every frame GoNet sends and receives to pcap `FILE`")
	fs.StringVar(&c.impair, "impair", "", "impair the link as `SPEC` says, as in loss=0.05,dup=0.01,reorder=0.02,corrupt=0.001,delay=1ms,seed=7, or a bottleneck each way, as in rate=100M,queue=500K,delay=20ms (rate in bit/s, queue in bytes; default seed: random, printed)")
}

// registerSocket adds -socket, the stream link for a VM, to fs.
func (c *linkConfig) registerSocket(fs *flag.FlagSet) {
	c.socketFlag = true
	fs.StringVar(&c.socket, "socket", "", "instead of a TAP device, listen on the UNIX socket `PATH` for a VM's frames, each behind its 32-bit length as QEMU's -netdev stream and passt send them (the NIC is then "+socketNIC+")")
}

// registerRing adds -ring and -ring-listen, the shared-memory ring link
// to another GoNet process, to fs.
func (c *linkConfig) registerRing(fs *flag.FlagSet) {
	fs.StringVar(&c.ring, "ring", "", "instead of a TAP device, attach to another GoNet process over a shared-memory ring, dialling the UNIX socket `PATH` it listens on with -ring-listen (the NIC is then "+ringNIC+")")
	fs.StringVar(&c.ringListen, "ring-listen", "", "instead of a TAP device, listen on the UNIX socket `PATH` for one GoNet process to attach with -ring, and wait for it before coming up (the NIC is then "+ringNIC+")")
	fs.IntVar(&c.ringSize, "ring-size", 0, "with -ring-listen, give each of the ring's two directions `N` frame descriptors, a power of two in "+
		strconv.Itoa(shm.MinRingSize)+".."+strconv.Itoa(shm.MaxRingSize)+" (default "+strconv.Itoa(shm.DefaultRingSize)+"; the listener's choice holds for both ends)")
}

// nicName is the name the NIC will have: the TAP device's, socketNIC or
// ringNIC.
func (c *linkConfig) nicName() string {
	switch {
	case c.socket != "":
		return socketNIC
	case c.isRing():
		return ringNIC
	}
	return c.tap
}

// isRing reports whether the link is a shared-memory ring.
func (c *linkConfig) isRing() bool { return c.ring != "" || c.ringListen != "" }

// checkRingSize checks -ring-size: the listener sizes the rings (the
// dialler takes what it is given), within what link/shm maps.
func (c *linkConfig) checkRingSize() error {
	switch n := c.ringSize; {
	case n == 0:
	case c.ringListen == "":
		return usagef("-ring-size sizes the rings of -ring-listen, whose choice holds for both ends: give it there")
	case n < shm.MinRingSize || n > shm.MaxRingSize || bits.OnesCount(uint(n)) != 1:
		return usagef("-ring-size %d is not a power of two in %d..%d", n, shm.MinRingSize, shm.MaxRingSize)
	}
	return nil
}

// ringNIC names the NIC of a -ring or -ring-listen link.
const ringNIC = "ring0"

// socketNIC names the NIC of a -socket link: in the ready line, and in the
// default control socket's name.
const socketNIC = "vm0"

// check validates what the flags alone cannot, and parses -impair.
func (c *linkConfig) check() error {
	if c.isRing() {
		var others []string
		for _, f := range []struct{ name, v string }{{"-tap", c.tap}, {"-socket", c.socket}, {"-ring", c.ring}, {"-ring-listen", c.ringListen}} {
			if f.v != "" {
				others = append(others, f.name)
			}
		}
		if len(others) > 1 {
			return usagef("%s are %d links: give one", strings.Join(others, " and "), len(others))
		}
		if c.mtu > shm.MaxMTU {
			return usagef("-mtu %d is over %d, the most a ring link carries", c.mtu, shm.MaxMTU)
		}
	}
	if err := c.checkRingSize(); err != nil {
		return err
	}
	switch {
	case c.isRing():
	case c.tap != "" && c.socket != "":
		return usagef("-tap and -socket are two links: give one")
	case c.socket != "":
		if c.mtu > stream.MaxMTU {
			return usagef("-mtu %d is over %d, the most a -socket link carries", c.mtu, stream.MaxMTU)
		}
	case c.tap == "" && c.socketFlag:
		return usagef("-tap or -socket is required: the TAP device GoNet uses, or the UNIX socket a VM connects to")
	case c.tap == "":
		return usagef("-tap is required: the TAP device GoNet uses")
	default:
		if err := checkTapName(c.tap); err != nil {
			return err
		}
	}
	if c.mtu < minMTU || c.mtu > maxMTU {
		return usagef("-mtu %d is outside %d..%d", c.mtu, minMTU, maxMTU)
	}
	if c.tapQueues < 0 || c.tapQueues > tap.MaxQueues {
		return usagef("-tap-queues %d is outside 0..%d", c.tapQueues, tap.MaxQueues)
	}
	if c.tapTxQueueLen < 0 {
		return usagef("-tap-txqueuelen %d is negative", c.tapTxQueueLen)
	}
	if err := c.checkAddrs(); err != nil {
		return err
	}
	return c.checkImpair()
}

// checkAddrs checks -addr and -gw against each other and -no-ipv6.
func (c *linkConfig) checkAddrs() error {
	if c.dhcp {
		for _, p := range c.addrs {
			if p.Addr().Is4() {
				return usagef("-addr %v with -addr dhcp: the DHCP server gives the IPv4 address; give one or the other", p)
			}
		}
	} else if c.dhcpLease != "" {
		return usagef("-dhcp-lease keeps a DHCP lease, and there is none without -addr dhcp")
	}
	if c.noIPv6 {
		if len(c.addrs) == 0 && !c.dhcp && !c.ipv4ll {
			return usagef("-addr is required with -no-ipv6: GoNet's address and prefix, as in 10.0.0.2/24, or dhcp, or ipv4ll")
		}
		for _, p := range c.addrs {
			if p.Addr().Is6() {
				return usagef("-addr %v is IPv6, and -no-ipv6 turns IPv6 off", p)
			}
		}
		if c.stableKey != "" {
			return usagef("-stable-iid forms IPv6 addresses, and -no-ipv6 turns IPv6 off")
		}
		if c.tempAddr {
			return usagef("-temp-addr forms IPv6 addresses, and -no-ipv6 turns IPv6 off")
		}
		if c.optimisticDAD {
			return usagef("-optimistic-dad is IPv6's, and -no-ipv6 turns IPv6 off")
		}
	}
	if err := c.loadHosts(); err != nil {
		return err
	}
	if err := c.gatewaysByName(); err != nil {
		return err
	}
	for _, gw := range c.gws {
		if err := c.checkGateway(gw); err != nil {
			return err
		}
	}
	return nil
}

// loadHosts makes the static table: -hosts's entries, then -host's.
func (c *linkConfig) loadHosts() error {
	c.static = nil
	if c.hostsFile != "" {
		f, err := os.Open(c.hostsFile)
		if err != nil {
			return usagef("-hosts: %v", err)
		}
		defer f.Close()
		entries, err := stack.ParseHosts(f)
		if err != nil {
			return usagef("-hosts %s: %s", c.hostsFile, strings.TrimPrefix(err.Error(), "stack: hosts "))
		}
		c.static = entries
	}
	c.static = append(c.static, c.hostArgs...)
	return nil
}

// staticAddrs returns name's addresses in the static table, as the
// stack's lookups will: whatever the case, with or without a final dot.
func (c *linkConfig) staticAddrs(name string) []netip.Addr {
	name = strings.TrimSuffix(name, ".")
	var addrs []netip.Addr
	for _, e := range c.static {
		if strings.EqualFold(e.Name, name) {
			addrs = append(addrs, e.Addrs...)
		}
	}
	return addrs
}

// gatewaysByName adds the addresses of -gw's names to the gateways: those
// of each family the host routes itself (IPv4 unless -addr dhcp, whose
// server gives the router; IPv6 unless -no-ipv6).
func (c *linkConfig) gatewaysByName() error {
	for _, name := range c.gwNames {
		addrs := c.staticAddrs(name)
		if len(addrs) == 0 {
			return usagef("-gw %s is a name no -host or -hosts gives: a gateway's name is looked up there alone, since DNS servers off the link are reached through it", name)
		}
		n := 0
		for _, a := range addrs {
			if a.Is4() && c.dhcp || a.Is6() && c.noIPv6 {
				continue
			}
			if err := addGateway(&c.gws, a); err != nil {
				return usagef("-gw %s: %v", name, err)
			}
			n++
		}
		if n == 0 {
			return usagef("-gw %s is %s, of no family GoNet routes itself here (with -addr dhcp the server gives the IPv4 router; -no-ipv6 turns IPv6 off)", name, joinList(addrs))
		}
	}
	return nil
}

// checkGateway checks that the stack reaches gw on-link: through the
// route AddAddress made for an -addr's network, or for IPv6 by a
// link-local address, which is on-link by definition (RFC 4861 section
// 4.2: routers advertise from theirs).
func (c *linkConfig) checkGateway(gw netip.Addr) error {
	if gw.Is6() && c.noIPv6 {
		return usagef("-gw %v is IPv6, and -no-ipv6 turns IPv6 off", gw)
	}
	if gw.Is4() && c.dhcp {
		return usagef("-gw %v with -addr dhcp: the DHCP server gives the IPv4 router", gw)
	}
	onLink := gw.Is6() && gw.IsLinkLocalUnicast()
	var nets []string
	for _, p := range c.addrs {
		if p.Addr().Is4() != gw.Is4() {
			continue
		}
		if p.Addr() == gw {
			return usagef("-gw %v is GoNet's own address", gw)
		}
		onLink = onLink || p.Contains(gw)
		nets = append(nets, p.Masked().String())
	}
	switch {
	case onLink:
		return nil
	case len(nets) == 0:
		return usagef("-gw %v is not on the network of an %s -addr: there is none", gw, family(gw))
	}
	return usagef("-gw %v is not on -addr's network %s", gw, strings.Join(nets, " or "))
}

// ndpConfig is the neighbour discovery the flags ask for.
func (c *linkConfig) ndpConfig() (ndp.Config, error) {
	cfg := ndp.Config{NoSLAAC: !c.slaac || c.router, NoRouterSolicitation: c.router, TempAddresses: c.tempAddr && c.slaac, OptimisticDAD: c.optimisticDAD && !c.router}
	if c.stableKey != "" {
		key, err := loadSecretKey(c.stableKey)
		if err != nil {
			return ndp.Config{}, err
		}
		cfg.SecretKey = key
	}
	return cfg, nil
}

// loadSecretKey reads the RFC 7217 secret key kept in path, first making
// one there (mode 0600: it is a secret) when the file does not exist. The
// key is made once and kept, so that the addresses stay the same across
// restarts (RFC 7217 section 5).
func loadSecretKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = ipv6.NewSecretKey(env.NewRand(nil))
		f, cerr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if cerr != nil {
			return nil, fmt.Errorf("-stable-iid: creating the secret key: %w", cerr)
		}
		_, werr := f.Write(key)
		if cerr = errors.Join(werr, f.Close()); cerr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("-stable-iid: writing the secret key: %w", cerr)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("-stable-iid: reading the secret key: %w", err)
	}
	if len(key) < ipv6.MinSecretKeyLen {
		return nil, fmt.Errorf("-stable-iid: %s holds %d bytes; a secret key has at least %d (RFC 7217 section 5)", path, len(key), ipv6.MinSecretKeyLen)
	}
	return key, nil
}

// checkImpair parses -impair, choosing the seed when the spec does not.
func (c *linkConfig) checkImpair() error {
	if c.impair != "" {
		cfg, err := fault.ParseSpec(c.impair)
		if err != nil {
			return usagef("-impair %q: %s", c.impair, strings.TrimPrefix(err.Error(), "fault: "))
		}
		if !specHasSeed(c.impair) {
			// A random run, replayable: the seed is printed with
			// the rest of the impairment when the link comes up.
			cfg.Seed = rand.Uint64()
		}
		c.fault = cfg
	}
	return nil
}

// checkTapName refuses a -tap the kernel could not take as an interface
// name.
func checkTapName(name string) error {
	switch {
	case len(name) > ifNameMax:
		return usagef("-tap %q is %d bytes; a Linux interface name holds at most %d", name, len(name), ifNameMax)
	case strings.ContainsAny(name, "/: \t\n\x00") || name == "." || name == "..":
		return usagef("-tap %q is not a valid interface name", name)
	}
	return nil
}

// specHasSeed reports whether an -impair spec sets the seed itself.
func specHasSeed(spec string) bool {
	for field := range strings.SplitSeq(spec, ",") {
		if key, _, _ := strings.Cut(field, "="); strings.TrimSpace(key) == "seed" {
			return true
		}
	}
	return false
}

// describeImpairment returns the line up and ping print on stderr when
// -impair is in force, so that the run can be replayed; empty when not.
func (c *linkConfig) describeImpairment(cmd string) string {
	if c.impair == "" {
		return ""
	}
	return fmt.Sprintf("gonet %s: impairing the link with -impair %s (give the same to replay this run)", cmd, c.fault)
}

// logImpairment is describeImpairment for the daemons, as an event with
// the -impair to give to replay the run (the seed included).
func (c *linkConfig) logImpairment(log *slog.Logger) {
	if c.impair != "" {
		log.Info("impairing the link: give the same -impair to replay this run", "impair", c.fault.String())
	}
}

// host is a GoNet stack up on a TAP device or a stream socket.
type host struct {
	stack *stack.Stack
	nic   string           // the NIC's name in the stack: the TAP device's, or socketNIC
	mac   net.HardwareAddr // GoNet's address on the link
	name  string           // -hostname; empty: hostname's default
	// addrs are the addresses the ready line shows: -addr's, or
	// without any the link-local address.
	addrs []netip.Prefix
	// capture is the -pcap endpoint; nil without -pcap.
	capture *pcap.Endpoint
	// kernel reads the kernel's counters of the TAP device; nil on a
	// VM's socket, which the kernel does not count.
	kernel *kernelCounters
	// ring is the shared-memory link, whose counters are under
	// "Ring.<nic>."; nil on other links.
	ring *shm.Endpoint
	// dhcp is -addr dhcp's client, nil without; lease is the lease it
	// held when the host came up.
	dhcp  *dhcp.Client
	lease dhcp.ClientLease
	// ll is -addr ipv4ll's client, nil without; llAddr is the address
	// it held when the host came up.
	ll     *ipv4ll.Client
	llAddr netip.Addr
	// iperf3 are the counters of the -serve iperf3 server, under
	// "Iperf3."; nil without it.
	iperf3 *iperf3.ServerStats
}

// Metrics returns the stack's counters and gauges with the kernel's
// counters of the TAP device (TAP.<nic>.).
func (h *host) Metrics() stats.Snapshot {
	m := h.stack.Metrics()
	h.kernel.addTo(m, h.nic)
	if h.ring != nil {
		m.Add("Ring."+h.nic, h.ring.Stats())
	}
	if h.iperf3 != nil {
		m.Add("Iperf3", h.iperf3)
	}
	return m
}

// openLink opens the link the flags name and returns it with its NIC's
// name. A -ring-listen link waits for its peer, or for ctx's end.
func openLink(ctx context.Context, c *linkConfig, log *slog.Logger) (link.Endpoint, string, error) {
	if c.isRing() {
		// Offloads unless -impair, as on a TAP: the peer takes
		// partial checksums and 64 KiB super-segments whole when it
		// offers them too.
		o := shm.Options{MTU: c.mtu, MAC: c.mac, Offload: c.impair == "", RingSize: c.ringSize}
		if c.ring != "" {
			ep, err := shm.Dial(c.ring, o)
			if err != nil {
				return nil, "", fmt.Errorf("attaching to the ring: %w", err)
			}
			return ep, ringNIC, nil
		}
		ep, err := acceptRing(ctx, c.ringListen, o, log)
		if err != nil {
			return nil, "", err
		}
		return ep, ringNIC, nil
	}
	if c.socket != "" {
		ep, err := stream.Listen(c.socket, stream.Options{MTU: c.mtu, MAC: c.mac})
		if err != nil {
			return nil, "", fmt.Errorf("listening for a VM: %w", err)
		}
		return ep, socketNIC, nil
	}
	// With no -mac, tap picks a random locally administered address, so
	// that GoNet's station never collides with a manufacturer's address
	// or with the kernel's side of the TAP.
	// Offloads (checksums and 64 KiB TCP super-segments across the TAP)
	// unless -impair: its losses and corruption are meant for the frames
	// a wire carries.
	dev, err := tap.Open(c.tap, tap.Options{MTU: c.mtu, MAC: c.mac, Offload: c.impair == "", Queues: c.tapQueues, TxQueueLen: c.tapTxQueueLen, Spin: c.tapSpin})
	if err != nil {
		return nil, "", fmt.Errorf("opening TAP device %s: %w", c.tap, err)
	}
	// The kernel names the device when -tap is a pattern ("gn%d").
	return dev, dev.Name(), nil
}

// bringUp opens the link, wraps it as the flags ask, and starts a stack on
// it with its address and default route. On error it leaves nothing open.
func bringUp(ctx context.Context, c *linkConfig, log *slog.Logger) (*host, error) {
	ep, nic, err := openLink(ctx, c, log)
	if err != nil {
		return nil, err
	}
	h, err := bringUpOn(c, ep, nic, log)
	if r, isRing := ep.(*shm.Endpoint); isRing && err == nil {
		h.ring = r
	}
	if d, isTAP := ep.(*tap.Endpoint); isTAP && err == nil {
		// Its own counters: each write the kernel refused, by cause.
		h.stack.AddStats("Link."+nic, d.Stats())
	}
	if err != nil || c.socket != "" || c.isRing() {
		return h, err
	}
	// The TAP device is in this namespace: read its counters from here.
	conn, err := rtnl.Dial()
	if err != nil {
		h.Close()
		return nil, err
	}
	h.kernel = &kernelCounters{conn: conn, dev: nic}
	return h, nil
}

// bringUpOn wraps ep as the flags ask and starts a stack on it as NIC nic,
// with -addr when given and the default route. It takes ep: on error
// nothing is left open.
func bringUpOn(c *linkConfig, ep link.Endpoint, nic string, log *slog.Logger) (*host, error) {
	var capture *pcap.Endpoint

	// The order is stack ← pcap ← fault ← tap. The capture sits next to
	// the stack, so it holds exactly the frames the stack sent and
	// received: a frame -impair drops on the way in is not in it (the
	// stack never saw it), and one it drops on the way out is (the stack
	// sent it, and will retransmit it). Read that way a capture explains
	// the stack's behaviour and agrees with its counters; the wire's
	// view is what tcpdump on the TAP shows.
	if c.impair != "" {
		ep = fault.New(ep, c.fault)
	}
	if c.pcap != "" {
		p, err := pcap.Create(ep, c.pcap)
		if err != nil {
			ep.Close()
			return nil, fmt.Errorf("creating capture file %s: %w", c.pcap, err)
		}
		ep, capture = p, p
	}

	var nd ndp.Config
	if !c.noIPv6 {
		var err error
		if nd, err = c.ndpConfig(); err != nil {
			ep.Close()
			return nil, err
		}
	}
	gc := stack.TuneGC(c.memory)
	log.Info("collector set", "gogc", gcPercent(gc.Percent), "gogc_from_env", gc.PercentFromEnv,
		"gomemlimit", gc.Limit, "gomemlimit_from_env", gc.LimitFromEnv)
	s := stack.New(stack.Config{MemoryLimit: c.memory, TCP: tcp.Config{ECN: c.ecn}, Logger: log, NoIPv6: c.noIPv6, NDP: nd,
		NoDHCPv6: !c.dhcpv6 || c.router})
	h := &host{stack: s, nic: nic, mac: ep.MAC(), name: c.hostname, capture: capture}
	if err := s.AddNIC(h.nic, ep); err != nil {
		s.Close()
		ep.Close()
		return nil, fmt.Errorf("attaching %s to the stack: %w", h.nic, err)
	}
	// From here the stack owns the endpoint, and closes it (flushing the
	// capture) when it closes.
	if err := h.configure(c); err != nil {
		s.Close()
		return nil, err
	}
	return h, nil
}

// hostname is the host's name: -hostname, or gonet- and the last three
// bytes of its MAC, which tell hosts on one link apart as the MAC does.
func (h *host) hostname() string {
	if h.name != "" {
		return h.name
	}
	m := h.mac
	return fmt.Sprintf("gonet-%02x%02x%02x", m[len(m)-3], m[len(m)-2], m[len(m)-1])
}

// dadTimeout bounds the wait for duplicate address detection: RFC 4862
// section 5.4.2 delays the first solicitation by up to
// MAX_RTR_SOLICITATION_DELAY, then waits RetransTimer after each of
// DupAddrDetectTransmits (1 s, 1 s, 1 by default), with room to spare.
const dadTimeout = 10 * time.Second

// configure gives the host -addr's addresses and -gw's routes. It returns
// once the IPv6 addresses are usable, duplicate address detection over
// (or, with no -addr, the link-local address), so that the ready line
// means the host answers on every address it shows; a duplicate is an
// error, since the user asked for that address.
func (h *host) configure(c *linkConfig) error {
	var wait []netip.Addr
	for _, p := range c.addrs {
		if err := h.addAddress(p, c.acd); err != nil {
			return err
		}
		if p.Addr().Is6() {
			wait = append(wait, p.Addr())
		}
	}
	h.addrs = slices.Clone(c.addrs)
	// A router (the gateway) waits for its own addresses itself
	// (gateway.WaitIPv6), their DAD beside the link-local address's.
	if !c.noIPv6 && !c.router {
		ready, err := h.awaitDAD(wait, len(c.addrs) == 0, dadTimeout)
		if err != nil {
			return err
		}
		if len(c.addrs) == 0 && !c.dhcp {
			h.addrs = ready
		}
	}
	if len(c.static) > 0 {
		if err := h.stack.SetHosts(c.static); err != nil {
			return err
		}
	}
	if len(c.dns) > 0 || len(c.search) > 0 {
		if err := h.stack.SetDNS(stack.DNSConfig{Servers: c.dns, Search: c.search}); err != nil {
			return err
		}
	}
	if c.ipv4ll {
		// Started first, so that its probes run while DHCP waits for
		// a server.
		ll, err := ipv4ll.Start(h.stack, h.nic)
		if err != nil {
			return err
		}
		h.ll = ll
	}
	if c.dhcp {
		err := h.startDHCP(c, dhcpTimeout)
		switch {
		case errors.Is(err, errNoLease) && h.ll != nil:
			// What the link-local address is for (RFC 3927 section
			// 1.9): the host goes on with it, and the client keeps
			// asking.
			h.stack.Logger().Warn("no DHCP lease yet: going on with the IPv4 link-local address, the client asking still", "nic", h.nic, "err", err)
		case err != nil:
			return err
		}
	}
	if h.ll != nil {
		if err := h.awaitIPv4LL(ipv4llTimeout); err != nil {
			return err
		}
	}
	// The gateways last: an IPv6 one on an -addr's network is on-link
	// once that address is.
	for _, gw := range c.gws {
		if err := h.stack.SetDefaultGateway(gw, h.nic); err != nil {
			return fmt.Errorf("setting default gateway %v on %s: %w", gw, h.nic, err)
		}
	}
	return nil
}

// dhcpTimeout bounds the wait for a lease, as dhclient's timeout (60
// seconds) does: DISCOVERs at 0, 4, 12, 28 and 60 seconds or so (RFC 2131
// section 4.1); or with -dhcp-lease and no server answering, INIT-REBOOT's
// REQUESTs until 64 s at most, then the remembered lease, probed for (up
// to 7 s).
const dhcpTimeout = 75 * time.Second

// startDHCP starts -addr dhcp's client and waits up to timeout for its
// first lease. With -dhcp-lease it asks first for the address the file
// holds, and keeps every lease it gets there.
func (h *host) startDHCP(c *linkConfig, timeout time.Duration) error {
	log := h.stack.Logger()
	// -dns or -search configured the resolver by hand: the lease's
	// servers and domains are kept in it, not applied.
	cfg := dhcp.ClientConfig{NoDNS: len(c.dns) > 0 || len(c.search) > 0, Hostname: h.hostname()}
	if c.dhcpLease != "" {
		switch l, err := dhcp.LoadLease(c.dhcpLease); {
		case err == nil:
			cfg.Remembered = &l
		case !errors.Is(err, fs.ErrNotExist):
			log.Warn("DHCP lease file unreadable: asking for a new lease", "file", c.dhcpLease, "err", err)
		}
	}
	bound := make(chan dhcp.ClientLease, 1)
	cfg.Notify = func(e dhcp.Event) {
		if e.Kind != dhcp.LeaseBound && e.Kind != dhcp.LeaseRenewed {
			return
		}
		if c.dhcpLease != "" {
			if err := dhcp.SaveLease(c.dhcpLease, e.Lease); err != nil {
				log.Warn("DHCP lease not kept", "file", c.dhcpLease, "err", err)
			}
		}
		select {
		case bound <- e.Lease:
		default:
		}
	}
	// The client outlives the command's context: Close releases the
	// lease (RFC 2131 section 4.4.6) before the stack stops.
	client, err := dhcp.StartOn(context.Background(), h.stack, h.nic, cfg)
	if err != nil {
		return err
	}
	h.dhcp = client
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case h.lease = <-bound:
		return nil
	case <-t.C:
		return fmt.Errorf("%w on %s after %v: %d DISCOVERs sent, %d OFFERs and %d ACKs received", errNoLease, h.nic, timeout,
			client.Stats.OutDiscovers.Load(), client.Stats.InOffers.Load(), client.Stats.InAcks.Load())
	}
}

// errNoLease is startDHCP's error when no server gave a lease in time.
var errNoLease = errors.New("no DHCP lease")

// ipv4llTimeout bounds the wait for a link-local address: a probe takes 4
// to 7 s (RFC 3927 section 2.2), and past ten addresses found in use the
// probes slow to one a minute (section 2.2.1).
const ipv4llTimeout = 90 * time.Second

// awaitIPv4LL waits up to timeout for -addr ipv4ll's first address.
func (h *host) awaitIPv4LL(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	a, err := h.ll.Wait(ctx)
	if err != nil {
		return fmt.Errorf("no IPv4 link-local address on %s after %v: %d probed for, %d in use", h.nic, timeout,
			h.ll.Stats.Probes.Load(), h.ll.Stats.InUse.Load())
	}
	h.llAddr = a
	return nil
}

// awaitDAD waits until each of addrs has passed duplicate address
// detection and, with linkLocal, until a link-local address has, which it
// returns. It fails on a duplicate (RFC 4862 section 5.4.5: the address is
// not used) and after timeout. ndp announces no event for it, so it polls
// the NIC's addresses: a start-up wait of a second or two.
func (h *host) awaitDAD(addrs []netip.Addr, linkLocal bool, timeout time.Duration) ([]netip.Prefix, error) {
	deadline := time.Now().Add(timeout)
	for {
		list, err := h.stack.Addresses6(h.nic)
		if err != nil {
			return nil, err
		}
		pending := 0
		for _, want := range addrs {
			st, ok := addrState(list, want)
			switch {
			case st == ndp.Duplicate:
				return nil, fmt.Errorf("%v is already in use on %s's link: duplicate address detection found another node with it (RFC 4862 section 5.4)", want, h.nic)
			case !ok || st == ndp.Tentative:
				pending++
			}
		}
		var ll []netip.Prefix
		if linkLocal {
			for _, a := range list {
				if a.Prefix.Addr().IsLinkLocalUnicast() && a.State.Usable() {
					ll = append(ll, a.Prefix)
				}
			}
			if len(ll) == 0 {
				pending++
			}
		}
		if pending == 0 {
			return ll, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("IPv6 addresses on %s still tentative after %v: duplicate address detection did not end", h.nic, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addrState returns the state of addr in list.
func addrState(list []stack.Address6, addr netip.Addr) (ndp.AddrState, bool) {
	for _, a := range list {
		if a.Prefix.Addr() == addr {
			return a.State, true
		}
	}
	return 0, false
}

// releaseDHCP gives the lease back, as a clean shutdown does (RFC 2131
// section 4.4.6), and waits up to timeout for the DHCPRELEASE to leave the
// NIC: closing the stack closes the link at once and drops what is still
// queued. The RELEASE is unicast to the server: when ARP has not resolved
// the server yet, a request goes out first and the RELEASE after the
// answer, two frames.
func (h *host) releaseDHCP(timeout time.Duration) {
	l, ok := h.dhcp.Lease()
	frames := 1
	if ok {
		neigh, _ := h.stack.Neighbors(h.nic)
		if !slices.ContainsFunc(neigh, func(e stack.Neighbor) bool { return e.IP == l.Server && e.Expires.After(time.Now()) }) {
			frames = 2
		}
	}
	sent := func() int64 { return h.stack.Metrics()["NIC."+h.nic+".TxFrames"].Value }
	before := sent()
	h.dhcp.Release()
	if !ok {
		return
	}
	for deadline := time.Now().Add(timeout); sent() < before+int64(frames) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// Close stops the stack, which closes the link under it and the capture
// file if there is one. A capture cut short by a write error (a full disk)
// is reported here, since the frames themselves flowed on regardless.
func (h *host) Close() error {
	if h.dhcp != nil {
		h.releaseDHCP(time.Second)
	}
	if h.ll != nil {
		h.ll.Close()
	}
	err := errors.Join(h.stack.Close(), h.kernel.Close())
	if h.capture != nil {
		if cerr := h.capture.Err(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("capture file incomplete: %w", cerr))
		}
	}
	return err
}

// serviceGroup is a set of services running on a stack, each on its own
// goroutine, until Stop.
type serviceGroup struct {
	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	errs []error // of the services that stopped on their own
	// failed is closed when the first service stops on its own.
	failed   chan struct{}
	failOnce sync.Once
}

func newServiceGroup(ctx context.Context) *serviceGroup {
	ctx, cancel := context.WithCancel(ctx)
	return &serviceGroup{ctx: ctx, cancel: cancel, failed: make(chan struct{})}
}

// run runs serve on a goroutine of its own until Stop. serve must return
// when its context is done; an error it returns before that is a failure,
// which Failed announces and Stop returns.
func (g *serviceGroup) run(serve func(ctx context.Context) error) {
	g.wg.Go(func() {
		if err := serve(g.ctx); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
			g.failOnce.Do(func() { close(g.failed) })
		}
	})
}

// startUDP binds each service with a UDP form to its well-known port on
// every address of s, of both families, and runs it until Stop. Services without one (http)
// are skipped. On error the services already started go on running: the
// caller stops them.
func (g *serviceGroup) startUDP(s *stack.Stack, list []services.Service) error {
	for _, svc := range list {
		if svc.ServeUDP == nil {
			continue
		}
		// ":port" with "udp" is both families' wildcard when the
		// stack runs IPv6, IPv4's when not, as Go's net.
		laddr := ":" + strconv.Itoa(int(svc.Port))
		conn, err := s.ListenPacket("udp", laddr)
		if err != nil {
			return fmt.Errorf("%s: binding UDP %v: %w", svc.Name, laddr, err)
		}
		g.run(func(ctx context.Context) error {
			// The service closes conn when ctx is done; this close is
			// for when it stops on an error of its own.
			defer conn.Close()
			return svc.ServeUDP(ctx, conn)
		})
	}
	return nil
}

// startTCP listens on each service's well-known TCP port on every address
// of s, of both families, and runs the service there until Stop. Services without a TCP form
// are skipped. On error the services already started go on running: the
// caller stops them.
func (g *serviceGroup) startTCP(s *stack.Stack, list []services.Service) error {
	for _, svc := range list {
		if svc.ServeBoth != nil {
			if err := g.startBoth(s, svc); err != nil {
				return err
			}
			continue
		}
		if svc.ServeTCP == nil {
			continue
		}
		laddr := ":" + strconv.Itoa(int(svc.Port))
		ln, err := s.Listen("tcp", laddr)
		if err != nil {
			return fmt.Errorf("%s: listening on TCP %v: %w", svc.Name, laddr, err)
		}
		g.run(func(ctx context.Context) error {
			defer ln.Close()
			return svc.ServeTCP(ctx, ln)
		})
	}
	return nil
}

// startBoth listens on a service's well-known port for TCP and binds it
// for UDP, on every address of s, and runs the service on both until
// Stop (iperf3's, whose UDP streams are set up over TCP).
func (g *serviceGroup) startBoth(s *stack.Stack, svc services.Service) error {
	laddr := ":" + strconv.Itoa(int(svc.Port))
	ln, err := s.Listen("tcp", laddr)
	if err != nil {
		return fmt.Errorf("%s: listening on TCP %v: %w", svc.Name, laddr, err)
	}
	conn, err := s.ListenPacket("udp", laddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("%s: binding UDP %v: %w", svc.Name, laddr, err)
	}
	g.run(func(ctx context.Context) error {
		defer ln.Close()
		defer conn.Close()
		return svc.ServeBoth(ctx, ln, conn)
	})
	return nil
}

// startUDPServices runs each service of list that has a UDP form on s's
// UDP, as startUDP does. On error nothing is left running.
func startUDPServices(ctx context.Context, s *stack.Stack, list []services.Service) (*serviceGroup, error) {
	g := newServiceGroup(ctx)
	if err := g.startUDP(s, list); err != nil {
		return nil, errors.Join(err, g.Stop())
	}
	return g, nil
}

// Failed is closed when a service has stopped on its own; Stop returns its
// error.
func (g *serviceGroup) Failed() <-chan struct{} { return g.failed }

// Stop stops the services, waits for them, and returns the errors of those
// that had stopped on their own.
func (g *serviceGroup) Stop() error {
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}

// gcPercent writes a GOGC value as the environment variable would.
func gcPercent(p int) string {
	if p < 0 {
		return "off"
	}
	return strconv.Itoa(p)
}

// acceptRing listens on path for one GoNet process to attach with -ring,
// and returns the link to it. The socket file goes once the peer has
// come: a ring has two ends. A peer whose handshake fails (another MTU,
// say) is logged and the next awaited.
func acceptRing(ctx context.Context, path string, o shm.Options, log *slog.Logger) (*shm.Endpoint, error) {
	ln, err := shm.Listen(path, o)
	if err != nil {
		return nil, fmt.Errorf("listening for a ring peer: %w", err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	log.Info("waiting for a GoNet process to attach to the ring", "path", path)
	for {
		ep, err := ln.Accept()
		switch {
		case err == nil:
			return ep, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("waiting for a ring peer: %w", ctx.Err())
		case errors.Is(err, net.ErrClosed):
			return nil, err
		}
		log.Warn("a ring peer's handshake failed", "err", err)
	}
}
