package ip_test

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/gonetstack/gonet/ip"
)

// fakeNetwork is an ip.Network that only says which one it is.
type fakeNetwork struct {
	ip.Network
	name string
}

func TestNetworksForPicksTheAddressFamily(t *testing.T) {
	v4 := &fakeNetwork{name: "v4"}
	both := ip.Networks{V4: v4, V6: &fakeNetwork{name: "v6"}}
	only4 := ip.Networks{V4: v4}
	tests := []struct {
		name string
		nets ip.Networks
		addr string
		want string // "" for ErrNoNetwork
	}{
		{"IPv4 to the IPv4 slot", both, "10.0.0.1", "v4"},
		{"IPv6 to the IPv6 slot", both, "2001:db8::1", "v6"},
		{"a mapped IPv4 address is IPv6's", both, "::ffff:10.0.0.1", "v6"},
		{"IPv6 with no IPv6 layer", only4, "2001:db8::1", ""},
		{"IPv4 with no layer at all", ip.Networks{}, "10.0.0.1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nw, err := tt.nets.For(netip.MustParseAddr(tt.addr))
			if tt.want == "" {
				if !errors.Is(err, ip.ErrNoNetwork) || !errors.Is(err, syscall.EAFNOSUPPORT) || nw != nil {
					t.Errorf("For = %v, %v; want nil, ErrNoNetwork (EAFNOSUPPORT)", nw, err)
				}
				return
			}
			if f, ok := nw.(*fakeNetwork); err != nil || !ok || f.name != tt.want {
				t.Errorf("For = %v, %v; want %s", nw, err, tt.want)
			}
		})
	}
	if _, err := (&ip.Networks{}).For(netip.Addr{}); !errors.Is(err, ip.ErrNoNetwork) {
		t.Errorf("For(the zero Addr) = %v, want ErrNoNetwork", err)
	}
}

func TestNetworksEachSkipsEmptySlots(t *testing.T) {
	var got []string
	nets := ip.Networks{V6: &fakeNetwork{name: "v6"}}
	nets.Each(func(n ip.Network) { got = append(got, n.(*fakeNetwork).name) })
	if len(got) != 1 || got[0] != "v6" {
		t.Errorf("Each visited %v, want [v6]", got)
	}
}

// The errno each kind gives an application, as Linux's icmp_err_convert
// and icmpv6_err_convert, and which RFC 1122 4.2.3.9 calls hard.
func TestErrorKindErrnoAndHardness(t *testing.T) {
	tests := []struct {
		kind  ip.ErrorKind
		errno syscall.Errno
		hard  bool
	}{
		{ip.NetUnreachable, syscall.ENETUNREACH, false},
		{ip.HostUnreachable, syscall.EHOSTUNREACH, false},
		{ip.ProtoUnreachable, syscall.ENOPROTOOPT, true},
		{ip.PortUnreachable, syscall.ECONNREFUSED, true},
		{ip.AdminProhibited, syscall.EHOSTUNREACH, false},
		{ip.PacketTooBig, syscall.EMSGSIZE, false},
		{ip.TimeExceeded, syscall.EHOSTUNREACH, false},
		{ip.ReassemblyTimeout, syscall.EHOSTUNREACH, false},
		{ip.ParameterProblem, syscall.EPROTO, false},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			if got := tt.kind.Errno(); got != tt.errno {
				t.Errorf("Errno = %v, want %v", got, tt.errno)
			}
			if got := tt.kind.Hard(); got != tt.hard {
				t.Errorf("Hard = %v, want %v", got, tt.hard)
			}
		})
	}
	if s := ip.ErrorKind(200).String(); s != "ErrorKind(200)" {
		t.Errorf("String of an unknown kind = %q", s)
	}
}
