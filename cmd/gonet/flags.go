package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// The flag.Value types below parse the values gonet's flags share. Their
// errors are short: flag prefixes them with the flag and the value.

// addrsFlag is GoNet's addresses, each with its prefix length, IPv4 or
// IPv6 (10.0.0.2/24, fd00::2/64): -addr repeats. The host bits are kept,
// since they are the address.
type addrsFlag []netip.Prefix

func (f *addrsFlag) String() string {
	if f == nil {
		return ""
	}
	return joinList(*f)
}

func (f *addrsFlag) Set(s string) error {
	p, err := parseHostPrefix(s)
	if err != nil {
		return err
	}
	for _, q := range *f {
		if q.Addr() == p.Addr() {
			return fmt.Errorf("%v is given twice", p.Addr())
		}
	}
	*f = append(*f, p)
	return nil
}

// addrFlag is -addr as up and ping take it: addresses (addrsFlag), or
// "dhcp" for an IPv4 address from a DHCP server.
type addrFlag struct {
	addrs    *addrsFlag
	dhcp, ll *bool
}

func (f addrFlag) String() string {
	if f.addrs == nil {
		return ""
	}
	s := f.addrs.String()
	if *f.ll {
		s = strings.Join([]string{"ipv4ll", s}, ",")
	}
	if *f.dhcp {
		s = strings.Join([]string{"dhcp", s}, ",")
	}
	return strings.TrimSuffix(s, ",")
}

// Set takes an address, or one of the keywords dhcp and ipv4ll.
func (f addrFlag) Set(s string) error {
	var kw *bool
	switch {
	case strings.EqualFold(s, "dhcp"):
		kw = f.dhcp
	case strings.EqualFold(s, "ipv4ll"):
		kw = f.ll
	default:
		return f.addrs.Set(s)
	}
	if *kw {
		return fmt.Errorf("%s is given twice", strings.ToLower(s))
	}
	*kw = true
	return nil
}

// parseHostPrefix parses a host address with its prefix length, of either
// family.
func parseHostPrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		switch _, aerr := netip.ParseAddr(s); {
		case aerr == nil:
			return netip.Prefix{}, errors.New("needs a prefix length, as in 10.0.0.2/24 or fd00::2/64")
		case strings.EqualFold(s, "slaac"):
			// SLAAC is not an address to give: it is on by
			// default, as on a Linux host (RFC 4862).
			return netip.Prefix{}, errors.New("SLAAC needs no -addr: GoNet forms its addresses from the prefixes routers advertise unless -slaac=false")
		}
		return netip.Prefix{}, errors.New("not an address with prefix length, as in 10.0.0.2/24 or fd00::2/64")
	}
	if err := checkHostAddr(p.Addr()); err != nil {
		return netip.Prefix{}, err
	}
	if p.Bits() == 0 {
		return netip.Prefix{}, errors.New("a /0 network leaves no room for a route to anything else")
	}
	return p, nil
}

// gatewaysFlag is the default gateways, at most one per family: -gw
// repeats. An IPv6 router is usually known by its link-local address
// (RFC 4861 section 4.2); a zone is accepted and dropped, since the
// gateway is on the one link GoNet has. A name is kept in names, to be
// looked up in the static table (-host, -hosts) once every flag is read:
// the gateway is how DNS servers off the link are reached, so its name
// is never asked of DNS.
type gatewaysFlag struct {
	addrs *[]netip.Addr
	names *[]string
}

func (f gatewaysFlag) String() string {
	if f.addrs == nil {
		return ""
	}
	return strings.Trim(joinList(*f.addrs)+","+strings.Join(*f.names, ","), ",")
}

func (f gatewaysFlag) Set(s string) error {
	a, err := parseHostAddr(s)
	if err != nil {
		if _, perr := netip.ParseAddr(s); perr == nil || !validHostName(s) {
			return fmt.Errorf("%v, nor a host name", err)
		}
		*f.names = append(*f.names, s)
		return nil
	}
	return addGateway(f.addrs, a)
}

// addGateway adds a to gws, refusing a second of its family.
func addGateway(gws *[]netip.Addr, a netip.Addr) error {
	a = a.WithZone("")
	for _, g := range *gws {
		if g.Is4() == a.Is4() {
			return fmt.Errorf("a second %s gateway (%v already): give one per family", family(a), g)
		}
	}
	*gws = append(*gws, a)
	return nil
}

// hostFlag is -host NAME=ADDR, a static entry for the stack's resolver,
// repeatable: a name given twice has both addresses, in order.
type hostFlag []stack.HostEntry

func (f *hostFlag) String() string {
	if f == nil {
		return ""
	}
	var s []string
	for _, e := range *f {
		for _, a := range e.Addrs {
			s = append(s, e.Name+"="+a.String())
		}
	}
	return strings.Join(s, ",")
}

func (f *hostFlag) Set(s string) error {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return errors.New("not NAME=ADDR, as in router=10.0.0.1")
	}
	if !validHostName(name) {
		return fmt.Errorf("%q is not a host name", name)
	}
	a, err := parseHostAddr(addr)
	if err != nil {
		return fmt.Errorf("%s: %v", addr, err)
	}
	*f = append(*f, stack.HostEntry{Name: strings.TrimSuffix(name, "."), Addrs: []netip.Addr{a}})
	return nil
}

// dnsFlag is the DNS servers -dns gives, repeatable: an address, or an
// address and port ("10.0.0.1", "[fd00::1]:5353"); port 53 by default.
type dnsFlag []netip.AddrPort

func (f *dnsFlag) String() string {
	if f == nil {
		return ""
	}
	return joinList(*f)
}

func (f *dnsFlag) Set(s string) error {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return fmt.Errorf("%q is neither an address nor an address and port, as in 10.0.0.1 or [fd00::1]:53", s)
		}
		ap = netip.AddrPortFrom(a, 53)
	}
	if err := checkHostAddr(ap.Addr()); err != nil {
		return err
	}
	*f = append(*f, ap)
	return nil
}

// searchFlag is the search domains -search gives, repeatable.
type searchFlag []string

func (f *searchFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(*f, ",")
}

func (f *searchFlag) Set(s string) error {
	*f = append(*f, s)
	return nil
}

// joinList is a repeatable flag's values as flag.Value.String gives them:
// comma-separated.
func joinList[T fmt.Stringer](list []T) string {
	s := make([]string, len(list))
	for i, v := range list {
		s[i] = v.String()
	}
	return strings.Join(s, ",")
}

// family names an address's family as messages do.
func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// parseHostAddr parses a literal unicast address of either family, with a
// zone for a link-local IPv6 one (fe80::1%tap0).
func parseHostAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, errors.New("not an IP address, as in 10.0.0.1 or fd00::1")
	}
	if a.Zone() != "" && !a.IsLinkLocalUnicast() {
		return netip.Addr{}, errors.New("a zone is for link-local addresses (fe80::/10) only")
	}
	return a, checkHostAddr(a)
}

// checkHostAddr refuses addresses no single host can have (RFC 1122 section
// 3.2.1.3, RFC 1112 for multicast; RFC 4291 section 2.5 for IPv6).
func checkHostAddr(a netip.Addr) error {
	switch {
	case a.Is4In6():
		return fmt.Errorf("%v is IPv4-mapped: give the IPv4 address %v itself", a, a.Unmap())
	case a.IsUnspecified():
		return fmt.Errorf("%v is not a host address", a)
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return errors.New("255.255.255.255 is the limited broadcast address, not a host address")
	case a.IsMulticast():
		return errors.New("a multicast address is not a host address")
	case a.Is6() && a.IsLoopback():
		return errors.New("::1 is the loopback address, which GoNet has no interface for")
	}
	return nil
}

// macFlag is an Ethernet unicast address, as in 02:00:5e:10:00:01.
type macFlag net.HardwareAddr

func (f *macFlag) String() string { return net.HardwareAddr(*f).String() }

func (f *macFlag) Set(s string) error {
	mac, err := net.ParseMAC(s)
	if err != nil {
		return errors.New("not a MAC address, as in 02:00:5e:10:00:01")
	}
	switch {
	case len(mac) != 6:
		return fmt.Errorf("%d bytes long; an Ethernet address has 6", len(mac))
	case mac[0]&1 != 0:
		// IEEE 802: the low bit of the first octet marks a group address.
		return errors.New("a multicast (group) address cannot be a station's own")
	case allZero(mac):
		return errors.New("the all-zero address is not a station's")
	}
	*f = macFlag(mac)
	return nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// bytesFlag is a byte count, as in 1048576, 64M or 64MiB (K, M and G are
// powers of 1024 either way: this is memory).
type bytesFlag int64

func (f *bytesFlag) String() string { return strconv.FormatInt(int64(*f), 10) }

func (f *bytesFlag) Set(s string) error {
	num := strings.TrimSpace(s)
	mult := int64(1)
	upper := strings.ToUpper(num)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(upper, u.suffix) {
			num, mult = num[:len(num)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil {
		return errors.New("not a byte count, as in 67108864 or 64M")
	}
	if n <= 0 {
		return errors.New("must be positive")
	}
	if n > (1<<62)/mult {
		return errors.New("too large")
	}
	*f = bytesFlag(n * mult)
	return nil
}

// ecnFlag is a tcp.ECNMode by the name Linux's tcp_ecn values go by:
// passive (2, the default), on (1), off (0).
type ecnFlag tcp.ECNMode

var ecnModes = []struct {
	name string
	mode tcp.ECNMode
}{{"passive", tcp.ECNPassive}, {"on", tcp.ECNOn}, {"off", tcp.ECNOff}}

func (f *ecnFlag) String() string {
	for _, m := range ecnModes {
		if m.mode == tcp.ECNMode(*f) {
			return m.name
		}
	}
	return ""
}

func (f *ecnFlag) Set(s string) error {
	for _, m := range ecnModes {
		if strings.EqualFold(s, m.name) {
			*f = ecnFlag(m.mode)
			return nil
		}
	}
	return errors.New("not an ECN mode: passive, on or off")
}

// secondsFlag is a duration given as the kernel's ping takes it, a number
// of seconds ("0.2"), or as Go writes it ("200ms").
type secondsFlag time.Duration

func (f *secondsFlag) String() string { return time.Duration(*f).String() }

func (f *secondsFlag) Set(s string) error {
	var d time.Duration
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(secs) || secs > float64(1<<62)/float64(time.Second) {
			return errors.New("too long")
		}
		d = time.Duration(secs * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return errors.New("not a duration, as in 0.5 (seconds) or 500ms")
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*f = secondsFlag(d)
	return nil
}
