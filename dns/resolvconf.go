package dns

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// ReadResolvConf returns the resolvers named by the nameserver lines of a
// file in resolv.conf format (resolv.conf(5)), each on port 53, in the
// file's order. Other lines, comments (# or ;) and addresses that do not
// parse are skipped, as the C library's resolver skips them; a file with
// no usable nameserver is an error.
func ReadResolvConf(path string) ([]netip.AddrPort, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dns: upstreams: %w", err)
	}
	defer f.Close()
	var ups []netip.AddrPort
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(fields[1])
		if err != nil {
			continue
		}
		ups = append(ups, netip.AddrPortFrom(a.Unmap(), Port))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dns: upstreams: read %s: %w", path, err)
	}
	if len(ups) == 0 {
		return nil, fmt.Errorf("dns: upstreams: %s has no nameserver line with an address", path)
	}
	return ups, nil
}

// ParseUpstream parses a resolver's address as the daemon's -dns-upstream
// flag takes it: "ADDR", "ADDR:PORT" or "[IPv6]:PORT", port 53 when none
// is given.
func ParseUpstream(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), Port), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("dns: upstream %q: want ADDR or ADDR:PORT", s)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("dns: upstream %q: %q is not an IP address", s, host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return netip.AddrPort{}, fmt.Errorf("dns: upstream %q: %q is not a port", s, port)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}
