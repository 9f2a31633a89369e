package dhcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// ClientLease is what a client holds after a DHCPACK (RFC 2131 section
// 4.4.1): its address and the configuration that came with it (RFC 2132),
// with the times that bound it. The DNS servers and search domains are
// kept for a resolver; the client itself applies the address, the
// default route and the MTU.
type ClientLease struct {
	// Addr is the address leased (yiaddr) with the subnet mask (option
	// 1), or its class's mask when the server sent none.
	Addr netip.Prefix
	// Server is the server's identifier (option 54): where renewals go.
	Server netip.Addr
	// Routers are the routers on the client's subnet (option 3), in the
	// server's order of preference; the first is the default gateway
	// unless Routes is given.
	Routers []netip.Addr
	// Routes are the classless static routes (option 121, RFC 3442),
	// which replace the default route through Routers when present
	// ("the DHCP client MUST ignore the Router option"); a route with an
	// invalid Gateway is on-link.
	Routes []Route
	// DNS are the name servers (option 6).
	DNS []netip.Addr
	// Domain is the domain name (option 15).
	Domain string
	// Search is the domain search list (option 119, RFC 3397), or Domain
	// alone when the server sent no list.
	Search []string
	// MTU is the interface MTU (option 26); zero when not given.
	MTU int
	// Start is when the client sent the request the lease answers:
	// lease times run from it (RFC 2131 section 4.4.1).
	Start time.Time
	// LeaseTime is the lease's duration (option 51); Infinite for a
	// lease that never ends. T1 and T2 are when the client starts to
	// renew and to rebind (options 58 and 59; half and seven eighths of
	// the lease when absent, RFC 2131 section 4.4.5).
	LeaseTime, T1, T2 time.Duration
}

// Infinite is the lease time of a lease that never expires (0xffffffff
// seconds, RFC 2131 section 3.3).
const Infinite = time.Duration(0xffffffff) * time.Second

// Expiry is when the lease ends; the zero time for an infinite lease.
func (l *ClientLease) Expiry() time.Time { return l.at(l.LeaseTime) }

// RenewAt is T1's time; RebindAt T2's; zero for an infinite lease.
func (l *ClientLease) RenewAt() time.Time { return l.at(l.T1) }

// RebindAt is when the client broadcasts for any server's renewal.
func (l *ClientLease) RebindAt() time.Time { return l.at(l.T2) }

func (l *ClientLease) at(d time.Duration) time.Time {
	if l.LeaseTime >= Infinite {
		return time.Time{}
	}
	return l.Start.Add(d)
}

// Expired reports whether the lease has ended at now.
func (l *ClientLease) Expired(now time.Time) bool {
	e := l.Expiry()
	return !e.IsZero() && !now.Before(e)
}

// Route is a classless static route (RFC 3442).
type Route struct {
	Dst     netip.Prefix
	Gateway netip.Addr // invalid: on-link (router 0.0.0.0)
}

// routes is what the lease installs: its static routes when it has some,
// else a default route through Gateway.
func (l *ClientLease) routes() []Route {
	if len(l.Routes) > 0 {
		return l.Routes
	}
	if gw, ok := l.Gateway(); ok {
		return []Route{{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Gateway: gw}}
	}
	return nil
}

// Gateway is the default gateway: the first router on the leased subnet.
func (l *ClientLease) Gateway() (netip.Addr, bool) {
	for _, r := range l.Routers {
		if l.Addr.Contains(r) && r != l.Addr.Addr() {
			return r, true
		}
	}
	return netip.Addr{}, false
}

// errNoLease says why an ACK carries no usable lease.
var errNoLease = errors.New("no lease")

// leaseFromAck reads the lease a DHCPACK grants, sent at start (RFC 2131
// section 4.3.1, table 3: yiaddr, the lease time and the server
// identifier are what an ACK to a REQUEST must carry), and the
// configuration options it holds (RFC 2132). Options that do not decode
// are left out, as a server's mistake in one should not cost the lease.
func leaseFromAck(m *dhcpv4.DHCPv4, start time.Time) (ClientLease, error) {
	a := addr(m.YourIPAddr)
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return ClientLease{}, fmt.Errorf("yiaddr %v is not a unicast address: %w", m.YourIPAddr, errNoLease)
	}
	l := ClientLease{Server: addr(m.ServerIdentifier()), Start: start}
	if !l.Server.IsValid() {
		return ClientLease{}, fmt.Errorf("no server identifier (option 54): %w", errNoLease)
	}
	v := m.Options.Get(dhcpv4.OptionIPAddressLeaseTime)
	if len(v) != 4 {
		return ClientLease{}, fmt.Errorf("no lease time (option 51): %w", errNoLease)
	}
	l.LeaseTime = seconds(v)
	if l.LeaseTime == 0 {
		return ClientLease{}, fmt.Errorf("lease time of 0 s: %w", errNoLease)
	}
	// RFC 2131 section 4.4.5's defaults stand in for T1 and T2 that are
	// absent or out of order (T1 < T2 < lease time).
	// Seven eighths as lease less an eighth: a lease of 2^32 seconds
	// in nanoseconds times seven overflows.
	l.T1, l.T2 = l.LeaseTime/2, l.LeaseTime-l.LeaseTime/8
	t1, t2 := m.Options.Get(dhcpv4.OptionRenewTimeValue), m.Options.Get(dhcpv4.OptionRebindingTimeValue)
	if len(t2) == 4 && seconds(t2) < l.LeaseTime {
		l.T2 = seconds(t2)
	}
	if len(t1) == 4 && seconds(t1) < l.T2 {
		l.T1 = seconds(t1)
	}
	if l.T1 >= l.T2 {
		l.T1, l.T2 = l.LeaseTime/2, l.LeaseTime-l.LeaseTime/8
	}
	bits := -1
	if mask := m.Options.Get(dhcpv4.OptionSubnetMask); len(mask) == 4 {
		if ones, size := net.IPMask(mask).Size(); size == 32 && ones > 0 {
			bits = ones
		}
	}
	if bits < 0 {
		bits = classMask(a)
	}
	l.Addr = netip.PrefixFrom(a, bits)
	l.Routers = addrList(m.Options.Get(dhcpv4.OptionRouter))
	l.Routes = classlessRoutes(m.Options.Get(dhcpv4.OptionClasslessStaticRoute))
	l.DNS = addrList(m.Options.Get(dhcpv4.OptionDomainNameServer))
	l.Domain = strings.TrimSuffix(m.DomainName(), ".")
	if labels := m.DomainSearch(); labels != nil {
		for _, s := range labels.Labels {
			if s = strings.TrimSuffix(s, "."); s != "" {
				l.Search = append(l.Search, s)
			}
		}
	}
	if len(l.Search) == 0 && l.Domain != "" {
		l.Search = []string{l.Domain}
	}
	if v := m.Options.Get(dhcpv4.OptionInterfaceMTU); len(v) == 2 {
		// RFC 2132 section 5.1: at least 68.
		if mtu := int(v[0])<<8 | int(v[1]); mtu >= 68 {
			l.MTU = mtu
		}
	}
	return l, nil
}

// seconds decodes a 32-bit count of seconds (RFC 2132 sections 9.2, 9.11,
// 9.12).
func seconds(v []byte) time.Duration {
	return time.Duration(uint32(v[0])<<24|uint32(v[1])<<16|uint32(v[2])<<8|uint32(v[3])) * time.Second
}

// addrList decodes a list of IPv4 addresses (RFC 2132 sections 3.5 and
// 3.8), skipping those no host could use; a length that is not a multiple
// of four is malformed and yields none.
func addrList(v []byte) []netip.Addr {
	if len(v)%4 != 0 {
		return nil
	}
	var out []netip.Addr
	for i := 0; i < len(v); i += 4 {
		a := netip.AddrFrom4([4]byte(v[i : i+4]))
		if !a.IsUnspecified() && !a.IsMulticast() && a != netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			out = append(out, a)
		}
	}
	return out
}

// maxRoutes bounds the static routes a lease installs: option 121's 255
// bytes (long options are concatenated, RFC 3396) hold at most 51.
const maxRoutes = 64

// classlessRoutes decodes option 121 (RFC 3442 section 3): each route is
// its prefix length, the significant octets of its destination (length
// over 8, rounded up), and its router. A malformed option is ignored
// whole, as section 3 requires; a destination with host bits set is
// masked; a router of 0.0.0.0 means on-link.
func classlessRoutes(v []byte) []Route {
	var out []Route
	for len(v) > 0 {
		bits := int(v[0])
		n := (bits + 7) / 8
		if bits > 32 || len(v) < 1+n+4 || len(out) == maxRoutes {
			return nil
		}
		var dst [4]byte
		copy(dst[:], v[1:1+n])
		gw := netip.AddrFrom4([4]byte(v[1+n : 1+n+4]))
		r := Route{Dst: netip.PrefixFrom(netip.AddrFrom4(dst), bits).Masked()}
		if !gw.IsUnspecified() {
			r.Gateway = gw
		}
		out = append(out, r)
		v = v[1+n+4:]
	}
	return out
}

// classMask is the mask of a's class (RFC 791), which RFC 1122 section
// 3.3.1.1 leaves a host with when it is told none.
func classMask(a netip.Addr) int {
	switch b := a.As4(); {
	case b[0] < 128:
		return 8
	case b[0] < 192:
		return 16
	}
	return 24
}

// LoadLease reads a lease that SaveLease wrote, for a client to ask for
// again after a restart (INIT-REBOOT, RFC 2131 section 3.2).
func LoadLease(path string) (ClientLease, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ClientLease{}, fmt.Errorf("dhcp: load lease: %w", err)
	}
	var l ClientLease
	if err := json.Unmarshal(b, &l); err != nil {
		return ClientLease{}, fmt.Errorf("dhcp: load lease %s: %w", path, err)
	}
	if !l.Addr.IsValid() || !l.Addr.Addr().Is4() {
		return ClientLease{}, fmt.Errorf("dhcp: load lease %s: no IPv4 address", path)
	}
	return l, nil
}

// SaveLease writes l to path, replacing it whole (through a temporary
// file and a rename), so that a crash leaves the old lease or the new.
func SaveLease(path string, l ClientLease) error {
	b, err := json.MarshalIndent(l, "", "\t")
	if err != nil {
		return fmt.Errorf("dhcp: save lease: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("dhcp: save lease: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("dhcp: save lease: %w", err)
	}
	return nil
}
