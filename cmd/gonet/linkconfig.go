package main

import (
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
	"strconv"
	"strings"
	"time"

	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/link/shm"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
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
	// ipv4llConfig is what goes with it: -ipv4ll-file (ipv4ll.go).
	ipv4llConfig
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
	c.registerIPv4LL(fs)
	fs.Var(gatewaysFlag{&c.gws, &c.gwNames}, "gw", "route everything off-link through the gateway `ADDR|NAME`: an address on an -addr's network, or for IPv6 a router's link-local address, or a name -host or -hosts gives, never asked of DNS (repeatable, one per family; default: no IPv4 gateway, and the IPv6 routers that advertise)")
	c.registerIPv6(fs)
	fs.Var((*macFlag)(&c.mac), "mac", "GoNet's Ethernet address `MAC`, as in 02:00:5e:10:00:01 (default: a random locally administered one)")
	fs.IntVar(&c.mtu, "mtu", defaultMTU, "the link's MTU `N`, 68..65535")
	fs.IntVar(&c.tapQueues, "tap-queues", 0, "open the TAP device with `N` queues each way, each read and written by goroutines of its own, the kernel steering each flow to one (IFF_MULTI_QUEUE; 1..256, default 0: tap.DefaultQueues)")
	c.registerSpin(fs)
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

// registerSpin adds -tap-spin to fs, writing into c.
func (c *linkConfig) registerSpin(fs *flag.FlagSet) {
	fs.DurationVar(&c.tapSpin, "tap-spin", 0, "how long a TAP queue's reader polls the empty device before it sleeps until the next frame, while frames keep coming within it (default 0: link.DefaultSpin, 50µs; negative: never poll)")
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
	if err := c.checkIPv4LL(c.ipv4ll); err != nil {
		return err
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
