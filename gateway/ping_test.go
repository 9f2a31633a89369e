package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/wire"
)

// pingNS returns a test namespace with loopback, and a veth pair whose one
// end is on 198.51.100.1/24 and whose other end has no address, so nothing
// answers there (a silent host); a second pair on 203.0.113.1/24 where
// address resolution gives up after one 100 ms try (an unreachable host);
// and no default route;
// pingSockets says whether its ping_group_range lets root open ping
// sockets. Nothing sent there leaves the namespace.
func pingNS(t *testing.T, pingSockets bool) *netns.NS {
	t.Helper()
	ns := netnstest.New(t)
	netnstest.RequireTool(t, "sysctl")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups := "1 0"
	if pingSockets {
		groups = "0 0"
	}
	for _, cmd := range [][]string{
		{"sysctl", "-qw", "net.ipv4.ping_group_range=" + groups},
		{"ip", "link", "add", "silent0", "type", "veth", "peer", "name", "silent1"},
		{"ip", "addr", "add", "198.51.100.1/24", "dev", "silent0"},
		{"ip", "link", "set", "silent0", "up"},
		{"ip", "link", "set", "silent1", "up"},
		{"ip", "link", "add", "unreach0", "type", "veth", "peer", "name", "unreach1"},
		{"ip", "addr", "add", "203.0.113.1/24", "dev", "unreach0"},
		{"ip", "link", "set", "unreach0", "up"},
		{"ip", "link", "set", "unreach1", "up"},
		{"sysctl", "-qw", "net.ipv4.neigh.unreach0.mcast_solicit=1", "net.ipv4.neigh.unreach0.retrans_time_ms=100"},
	} {
		if out, err := ns.Run(ctx, cmd[0], cmd[1:]...); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	return ns
}

// pingerIn makes a pinger in ns, and closes it at the end of the test.
func pingerIn(t *testing.T, ns *netns.NS) hostPinger {
	t.Helper()
	var p hostPinger
	if err := ns.Do(func() (err error) { p, err = newHostPinger(pingIPv4); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	return p
}

// echoIn sends one echo through p from inside ns (a ping socket is made
// per request, in the namespace of the thread that asks).
func echoIn(ns *netns.NS, p hostPinger, timeout time.Duration, dst string, seq uint16, data []byte) (a echoAnswer, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	derr := ns.Do(func() error {
		a, err = p.echo(ctx, netip.MustParseAddr(dst), seq, data)
		return nil
	})
	if derr != nil {
		return a, derr
	}
	return a, err
}

func TestHostPinger(t *testing.T) {
	for _, tt := range []struct {
		pingSockets bool
		kind        string
	}{
		{true, "ping socket"},
		{false, "raw socket"},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			ns := pingNS(t, tt.pingSockets)
			p := pingerIn(t, ns)
			if p.kind() != tt.kind {
				t.Fatalf("pinger is a %s, want a %s", p.kind(), tt.kind)
			}
			t.Run("an answered echo returns the reply's data", func(t *testing.T) {
				data := []byte("gonet ping data")
				a, err := echoIn(ns, p, 5*time.Second, "127.0.0.1", 7, data)
				if err != nil || a.isError || !bytes.Equal(a.data, data) {
					t.Fatalf("echo = %+v, %v; want the reply with %q", a, err, data)
				}
			})
			t.Run("no route is net unreachable", func(t *testing.T) {
				a, err := echoIn(ns, p, 5*time.Second, "192.0.2.1", 1, nil)
				if err != nil || !a.isError || a.errType != wire.ICMPDestUnreach || a.errCode != wire.ICMPCodeNetUnrch {
					t.Fatalf("echo = %+v, %v; want destination unreachable, net", a, err)
				}
			})
			t.Run("a failed address resolution is host unreachable", func(t *testing.T) {
				a, err := echoIn(ns, p, 5*time.Second, "203.0.113.9", 1, nil)
				if err != nil || !a.isError || a.errType != wire.ICMPDestUnreach || a.errCode != wire.ICMPCodeHostUnrch {
					t.Fatalf("echo = %+v, %v; want destination unreachable, host", a, err)
				}
			})
			t.Run("a silent host is no answer before the deadline", func(t *testing.T) {
				a, err := echoIn(ns, p, 300*time.Millisecond, "198.51.100.9", 1, nil)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("echo = %+v, %v; want the deadline", a, err)
				}
			})
			t.Run("concurrent echoes each get their own reply", func(t *testing.T) {
				var wg sync.WaitGroup
				for i := range 20 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						data := []byte(fmt.Sprintf("echo %d", i))
						a, err := echoIn(ns, p, 5*time.Second, "127.0.0.1", uint16(i), data)
						if err != nil || !bytes.Equal(a.data, data) {
							t.Errorf("echo %d = %+v, %v", i, a, err)
						}
					}()
				}
				wg.Wait()
			})
		})
	}
}
