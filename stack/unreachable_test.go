package stack_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
)

// TestNextHopThatNeverAnswersIsHostUnreachable pins RFC 1122 section
// 2.3.2.2 and RFC 4861 section 7.2.2, one path for both families: a
// datagram whose on-link next hop never answers ARP or neighbour
// solicitation is answered with host unreachable, looped back to the
// sender: a connection attempt fails with EHOSTUNREACH once resolution
// gives up, as Linux's connect ("no route to host"), and so do a ping and
// the next read of a connected UDP socket.
func TestNextHopThatNeverAnswersIsHostUnreachable(t *testing.T) {
	nobody4 := netip.MustParseAddr("10.9.0.99")
	nobody6 := netip.MustParseAddr("fe80::99%n0")
	tests := []struct {
		name   string
		dst    netip.Addr
		send   string // tcp: connect; udp: write and read on a connected socket; ping
		family string
	}{
		{"IPv4 TCP connect", nobody4, "tcp", "ICMP"},
		{"IPv4 UDP read", nobody4, "udp", "ICMP"},
		{"IPv4 ping", nobody4, "ping", "ICMP"},
		{"IPv6 TCP connect", nobody6, "tcp", "ICMPv6"},
		{"IPv6 UDP read", nobody6, "udp", "ICMPv6"},
		{"IPv6 ping", nobody6, "ping", "ICMPv6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0, 0x64, 1}, net.HardwareAddr{0x02, 0, 0, 0, 0x64, 2})
			defer b.Close()
			// Three requests 20 ms apart: the give-up time is 60 ms.
			s := stack.New(stack.Config{
				ARP: arp.Config{RetryInterval: 20 * time.Millisecond},
				NDP: ndp.Config{NoDAD: true, NoRouterSolicitation: true, RetransTimer: 20 * time.Millisecond},
			})
			defer s.Close()
			if err := s.AddNIC("n0", a); err != nil {
				t.Fatal(err)
			}
			if err := s.AddAddress("n0", netip.MustParsePrefix("10.9.0.1/24")); err != nil {
				t.Fatal(err)
			}
			waitLinkLocal(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			var err error
			switch tt.send {
			case "tcp", "udp":
				var c net.Conn
				c, err = s.DialContext(ctx, tt.send, netip.AddrPortFrom(tt.dst, 80).String())
				if c != nil {
					if tt.send == "udp" {
						c.SetDeadline(time.Now().Add(5 * time.Second))
						if _, err = c.Write([]byte("query")); err == nil {
							_, err = c.Read(make([]byte, 16))
						}
					}
					c.Close()
				}
			case "ping":
				_, err = s.Ping(ctx, tt.dst, 56)
			}
			if !errors.Is(err, syscall.EHOSTUNREACH) {
				t.Fatalf("%v: %v, want EHOSTUNREACH", tt.dst, err)
			}
			if tt.send != "ping" && !strings.Contains(err.Error(), "no route to host") {
				t.Errorf("error %q does not say \"no route to host\" as Linux's connect does", err)
			}
			// The resolution's give-up time, not TCP's SYN retries
			// (over a minute) nor the context's.
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the error took %v", d)
			}
			c := s.Counters()
			if c[tt.family+".OutDestUnreachs"] != 1 || c[tt.family+".InDestUnreachs"] != 1 {
				t.Errorf("%s OutDestUnreachs %d, InDestUnreachs %d; want the error sent and received once", tt.family,
					c[tt.family+".OutDestUnreachs"], c[tt.family+".InDestUnreachs"])
			}
			failed := c["ARP.n0.ResolveFailed"] + c["NDP.n0.ResolveFailed"]
			if failed != 1 {
				t.Errorf("ResolveFailed %d, want 1", failed)
			}
		})
	}
}

// waitLinkLocal waits for the NIC's link-local address to be usable: ndp
// tells the IPv6 layer from its own goroutine.
func waitLinkLocal(t *testing.T, s *stack.Stack) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if a := s.IPv6().Addresses(); len(a) == 1 && a[0].State == ipv6.Preferred {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no preferred link-local address after 5 s")
		}
	}
}
