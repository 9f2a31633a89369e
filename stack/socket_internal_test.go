package stack

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/ipv6"
)

// How the socket API reads Go's network and address strings, for a stack
// with IPv4 alone and for one with both families (the IPv6 layer only
// present: resolve asks no more of it).
func TestResolveAsGoNet(t *testing.T) {
	tests := []struct {
		name             string
		op, network, adr string
		dual             bool // the stack runs IPv6 too
		want             string
		v6only           bool
		err              error  // wrapped
		errText          string // in the error's text
	}{
		{name: "tcp on all addresses, IPv4 only", op: "listen", network: "tcp", adr: ":80", want: "0.0.0.0:80"},
		{name: "tcp on all addresses, dual stack", op: "listen", network: "tcp", adr: ":80", dual: true, want: "[::]:80"},
		{name: "tcp on ::, dual stack", op: "listen", network: "tcp", adr: "[::]:80", dual: true, want: "[::]:80"},
		{name: "tcp4 on all addresses", op: "listen", network: "tcp4", adr: ":80", dual: true, want: "0.0.0.0:80"},
		{name: "tcp6 on all addresses: IPv6 only", op: "listen", network: "tcp6", adr: ":80", dual: true, want: "[::]:80", v6only: true},
		{name: "udp6 on ::: IPv6 only", op: "listen", network: "udp6", adr: "[::]:53", dual: true, want: "[::]:53", v6only: true},
		{name: "tcp6 on a specific address", op: "listen", network: "tcp6", adr: "[2001:db8::1]:80", dual: true, want: "[2001:db8::1]:80"},
		{name: "0.0.0.0 is IPv4's wildcard", op: "listen", network: "tcp", adr: "0.0.0.0:80", dual: true, want: "0.0.0.0:80"},
		{name: "a link-local address keeps its zone", op: "dial", network: "tcp", adr: "[fe80::1%eth0]:80", dual: true, want: "[fe80::1%eth0]:80"},
		{name: "an IPv4-mapped address is IPv4", op: "dial", network: "tcp", adr: "[::ffff:10.0.0.2]:80", want: "10.0.0.2:80"},
		{name: "tcp6 to an IPv4 address", op: "dial", network: "tcp6", adr: "10.0.0.2:80", dual: true, errText: "no suitable address"},
		{name: "tcp4 to an IPv6 address", op: "dial", network: "tcp4", adr: "[2001:db8::1]:80", dual: true, errText: "no suitable address"},
		{name: "IPv6 on a stack without it", op: "dial", network: "tcp", adr: "[2001:db8::1]:80", err: syscall.EAFNOSUPPORT},
		{name: "tcp on :: without IPv6", op: "listen", network: "tcp", adr: "[::]:80", err: syscall.EAFNOSUPPORT},
		{name: "tcp6 on all addresses without IPv6", op: "listen", network: "tcp6", adr: ":80", err: syscall.EAFNOSUPPORT},
		{name: "a name", op: "dial", network: "tcp", adr: "example.com:80", errText: "numeric addresses only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env.Env{Clock: clock.Real{}, Rand: env.NewRand(nil), Pool: buffer.NewPool(), Budget: budget.New(1 << 20)}
			s := &Stack{}
			s.nets.V4 = ipv4.New(ipv4.Config{}, e)
			if tt.dual {
				s.nets.V6 = ipv6.New(ipv6.Config{}, e)
			}
			sa, err := s.resolve(tt.op, tt.network, tt.adr, tt.op == "listen")
			switch {
			case tt.err != nil || tt.errText != "":
				if err == nil || (tt.err != nil && !errors.Is(err, tt.err)) {
					t.Fatalf("error %v, want %v %q", err, tt.err, tt.errText)
				}
				var oe *net.OpError
				if !errors.As(err, &oe) || oe.Net != tt.network || oe.Op != tt.op {
					t.Errorf("error %v is not Go's *net.OpError for %s %s", err, tt.op, tt.network)
				}
				if tt.errText != "" && !strings.Contains(err.Error(), tt.errText) {
					t.Errorf("error %q does not say %q", err, tt.errText)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if sa.ap != netip.MustParseAddrPort(tt.want) || sa.v6only != tt.v6only {
					t.Errorf("%v v6only %v, want %s v6only %v", sa.ap, sa.v6only, tt.want, tt.v6only)
				}
			}
		})
	}
}

// On a stack with IPv4 alone, Listen and ListenPacket keep IPv4's
// behaviour, and refuse IPv6 as Go's net refuses a family the host lacks.
func TestListenOnAnIPv4Stack(t *testing.T) {
	s := New(Config{NoIPv6: true})
	defer s.Close()
	l, err := s.Listen("tcp", ":80")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Addr().String(); got != "0.0.0.0:80" {
		t.Errorf("listening on %s", got)
	}
	l.Close()
	for _, x := range []struct{ network, addr string }{{"tcp6", ":80"}, {"udp6", ":53"}, {"udp", "[::]:53"}} {
		var err error
		if x.network == "tcp6" {
			_, err = s.Listen(x.network, x.addr)
		} else {
			_, err = s.ListenPacket(x.network, x.addr)
		}
		if !errors.Is(err, syscall.EAFNOSUPPORT) {
			t.Errorf("%s %s: %v, want EAFNOSUPPORT", x.network, x.addr, err)
		}
	}
	if _, err := s.Listen("sctp", ":80"); err == nil || !strings.Contains(err.Error(), "unknown network") {
		t.Errorf("sctp: %v", err)
	}
}

func TestInterleaveAlternatesFamilies(t *testing.T) {
	var in []netip.Addr
	for _, a := range []string{"2001:db8::1", "2001:db8::2", "2001:db8::3", "10.0.0.1", "10.0.0.2"} {
		in = append(in, netip.MustParseAddr(a))
	}
	got := interleave(in)
	want := []netip.Addr{in[0], in[3], in[1], in[4], in[2]}
	if !slices.Equal(got, want) {
		t.Errorf("interleave = %v, want %v", got, want)
	}
}
