package integration

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// The IPv6 side of the harness: newHost's namespace and stack, with the
// kernel's end holding a unique local address beside its link-local one,
// and GoNet's link-local address (and a static global one) through DAD.

// Every test has a namespace of its own, so all use the same prefix (RFC
// 4193 unique local addresses: never routed off the namespace anyway).
var (
	kernelAddr6 = netip.MustParsePrefix("fd00:99::1/64")
	gonetAddr6  = netip.MustParsePrefix("fd00:99::2/64")
)

// host6 is a host whose two ends run IPv6 too.
type host6 struct {
	*host
	kernelLL netip.Addr // the kernel's link-local address, zoned with the NIC's name
	gonetLL  netip.Addr // GoNet's, zoned with the device's name (the same name)
	nd       *ndp.Protocol
}

// newHost6 is newHost with IPv6 up at both ends: the kernel's link-local
// address past its DAD and kernelAddr6 added (nodad); GoNet's link-local
// address past its DAD and, with global set, gonetAddr6 added through
// stack.AddAddress and past its DAD too.
func newHost6(t *testing.T, o options, global bool) *host6 {
	t.Helper()
	h := &host6{host: newHost(t, o)}
	h.run(t, 5*time.Second, "ip", "-6", "addr", "add", kernelAddr6.String(), "dev", h.dev, "nodad")
	nd, err := h.stack.NeighborDiscovery(h.dev)
	if err != nil {
		t.Fatal(err)
	}
	h.nd = nd
	if global {
		if err := h.stack.AddAddress(h.dev, gonetAddr6); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel's link-local address, once its DAD is over: until then
	// the kernel neither answers for it nor sends from it.
	deadline := time.Now().Add(10 * time.Second)
	for !h.kernelLL.IsValid() {
		out := h.run(t, 5*time.Second, "ip", "-6", "-o", "addr", "show", "dev", h.dev, "scope", "link", "-tentative")
		if f := strings.Fields(out); len(f) >= 4 && f[2] == "inet6" {
			p, err := netip.ParsePrefix(f[3])
			if err != nil {
				t.Fatalf("kernel's link-local address %q: %v", f[3], err)
			}
			h.kernelLL = p.Addr().WithZone(h.dev)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel's link-local address on %s is still tentative:\n%s", h.dev, h.run(t, 5*time.Second, "ip", "-6", "addr", "show", "dev", h.dev))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// GoNet's link-local address: the EUI-64 of its MAC, or a stable
	// identifier when the test configured one.
	waitFor(t, "GoNet's link-local address", 10*time.Second, func() bool {
		for _, a := range h.nd.Addresses() {
			if a.Prefix.Addr().IsLinkLocalUnicast() {
				h.gonetLL = a.Prefix.Addr().WithZone(h.dev)
			}
		}
		return h.gonetLL.IsValid()
	})
	h.waitPreferred(t, h.gonetLL)
	if global {
		h.waitPreferred(t, gonetAddr6.Addr())
	}
	return h
}

// mac is GoNet's MAC.
func (h *host6) mac() wire.MAC { return wire.MAC(h.tap.MAC()) }

// waitPreferred waits until GoNet's address a is past its DAD.
func (h *host6) waitPreferred(t *testing.T, a netip.Addr) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, ok := h.stack.IPv6().AddressState(a)
		if ok && st == ipv6.Preferred {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GoNet's %v is not preferred (state %v, assigned %v); ndp has %+v", a, st, ok, h.nd.Addresses())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping6 has the kernel ping dst (zoned for a link-local address) count
// times with size bytes of data, and fails the test unless every request
// is answered with its data whole.
func (h *host6) ping6(t *testing.T, dst netip.Addr, size, count int) {
	t.Helper()
	out := h.run(t, 20*time.Second, "ping", "-6", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "2", "-s", fmt.Sprint(size), dst.String())
	if sent, recv := pingCounts(t, out); recv != sent {
		t.Fatalf("ping -6 -s %d %v: %d of %d answered:\n%s", size, dst, recv, sent, out)
	}
	if strings.Contains(out, "wrong data") || strings.Contains(out, "truncated") {
		t.Fatalf("ping -6 -s %d %v saw damaged replies:\n%s", size, dst, out)
	}
}

// gonetPing has GoNet ping dst with size bytes of data.
func (h *host6) gonetPing(t *testing.T, dst netip.Addr, size int) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rtt, err := h.stack.Ping(ctx, dst, size)
	if err != nil {
		t.Fatalf("GoNet pings %v with %d bytes: %v", dst, size, err)
	}
	return rtt
}

// counter returns one of GoNet's counters by its full name.
func (h *host6) counter(name string) int64 { return h.stack.Counters()[name] }

// ndpCounter returns one of the NIC's neighbour discovery counters.
func (h *host6) ndpCounter(name string) int64 { return h.counter("NDP." + h.dev + "." + name) }

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kernelMAC is the MAC of the kernel's end of the TAP.
func (h *host6) kernelMAC(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(h.run(t, 5*time.Second, "cat", "/sys/class/net/"+h.dev+"/address"))
}

// dialKernel6 opens a kernel connection over network ("tcp4", "tcp6")
// from inside the namespace, closed when the test ends.
func (h *host6) dialKernel6(t *testing.T, network, addr string) *net.TCPConn {
	t.Helper()
	var c net.Conn
	err := h.ns.Do(func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).Dial(network, addr)
		return err
	})
	if err != nil {
		t.Fatalf("kernel dials %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}
