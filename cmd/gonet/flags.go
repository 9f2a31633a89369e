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

	"github.com/gonetstack/gonet/tcp"
)

// The flag.Value types below parse the values gonet's flags share. Their
// errors are short: flag prefixes them with the flag and the value.

// ipv4PrefixFlag is an IPv4 host address with its prefix length, as in
// 10.0.0.2/24: the host bits are kept, since they are the address.
type ipv4PrefixFlag netip.Prefix

func (f *ipv4PrefixFlag) String() string {
	if p := netip.Prefix(*f); p.IsValid() {
		return p.String()
	}
	return ""
}

func (f *ipv4PrefixFlag) Set(s string) error {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		if _, aerr := netip.ParseAddr(s); aerr == nil {
			return errors.New("needs a prefix length, as in 10.0.0.2/24")
		}
		return errors.New("not an IPv4 address with prefix length, as in 10.0.0.2/24")
	}
	if !p.Addr().Is4() {
		return errors.New("not IPv4: GoNet speaks IPv4 only")
	}
	if err := checkHostAddr(p.Addr()); err != nil {
		return err
	}
	if p.Bits() == 0 {
		return errors.New("a /0 network leaves no room for a route to anything else")
	}
	*f = ipv4PrefixFlag(p)
	return nil
}

// ipv4AddrFlag is a unicast IPv4 address, as in 10.0.0.1.
type ipv4AddrFlag netip.Addr

func (f *ipv4AddrFlag) String() string {
	if a := netip.Addr(*f); a.IsValid() {
		return a.String()
	}
	return ""
}

func (f *ipv4AddrFlag) Set(s string) error {
	a, err := parseIPv4(s)
	if err != nil {
		return err
	}
	*f = ipv4AddrFlag(a)
	return nil
}

// parseIPv4 parses a literal unicast IPv4 address. GoNet has no resolver, so
// names are refused.
func parseIPv4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, errors.New("not an IPv4 address, as in 10.0.0.1 (GoNet has no name resolver)")
	}
	if !a.Is4() {
		return netip.Addr{}, errors.New("not IPv4: GoNet speaks IPv4 only")
	}
	return a, checkHostAddr(a)
}

// checkHostAddr refuses addresses no single host can have (RFC 1122 section
// 3.2.1.3, RFC 1112 for multicast).
func checkHostAddr(a netip.Addr) error {
	switch {
	case a.IsUnspecified():
		return errors.New("0.0.0.0 is not a host address")
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return errors.New("255.255.255.255 is the limited broadcast address, not a host address")
	case a.IsMulticast():
		return errors.New("a multicast address is not a host address")
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
