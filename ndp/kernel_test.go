package ndp_test

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// The kernel tests run ndp against Linux's neighbour discovery over a TAP
// in a namespace of their own. The stack does not wire IPv6 yet, so the
// test wires a NIC and ndp by hand, with a stand-in for the IPv6 dealer
// that hands ICMPv6 messages with no extension header to Handle; the
// clock is the wall clock.

// icmpv6Only is the IPv6 layer's stand-in.
type icmpv6Only struct{ p *ndp.Protocol }

func (d icmpv6Only) Deliver(b *buffer.Batch) {
	for _, pk := range b.Pkts {
		h, err := wire.ParseIPv6(pk.Bytes())
		if err != wire.IPv6OK || h.NextHeader() != wire.ProtoICMPv6 {
			pk.Release()
			continue
		}
		pk.SetLen(len(h))
		d.p.Handle(pk, ip.Header{Src: h.Src(), Dst: h.Dst(), TTL: h.HopLimit(), Off: wire.IPv6HeaderLen}, false)
	}
	b.Put()
}

type kernelHost struct {
	ns   *netns.NS
	dev  string
	p    *ndp.Protocol
	host *fakeHost
	pool *buffer.Pool
}

func newKernelHost(t *testing.T) *kernelHost {
	t.Helper()
	ns := netnstest.New(t)
	k := &kernelHost{ns: ns, dev: netns.DeviceName(), host: newFakeHost(), pool: buffer.NewPool()}
	var ep *tap.Endpoint
	if err := ns.Do(func() (err error) {
		ep, err = tap.Open(k.dev, tap.Options{MTU: 1500})
		return err
	}); err != nil {
		t.Fatalf("open TAP in %s: %v", ns, err)
	}
	if err := ns.ConfigureLink(k.dev, netip.MustParsePrefix("10.99.0.1/24"), 1500); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	nic, err := ethernet.NewNIC(k.dev, ep, k.pool)
	if err != nil {
		t.Fatal(err)
	}
	e := &env.Env{Clock: clock.Real{}, Rand: env.NewRand(nil), Pool: k.pool, Budget: budget.New(1 << 20)}
	k.p = ndp.New(nic, ndp.Config{NoRouterSolicitation: true}, e)
	nic.Bind(wire.EtherTypeIPv6, icmpv6Only{k.p})
	if err := k.p.Start(k.host); err != nil {
		t.Fatal(err)
	}
	nic.Start()
	t.Cleanup(func() {
		nic.StopReceive()
		k.p.Close()
		nic.Close()
	})
	return k
}

func (k *kernelHost) ip(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.ns.IP(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// linkLocal waits for the preferred link-local address of ours.
func (k *kernelHost) linkLocal(t *testing.T) netip.Addr {
	t.Helper()
	var ll netip.Addr
	eventually(t, "our link-local address to pass DAD", func() bool {
		for _, a := range k.p.Addresses() {
			if a.Prefix.Addr().IsLinkLocalUnicast() && a.State == ndp.Preferred {
				ll = a.Prefix.Addr()
				return true
			}
		}
		return false
	})
	return ll
}

var inet6 = regexp.MustCompile(`inet6 (fe80::[0-9a-f:]+)/64`)

// kernelLinkLocal waits for the kernel's link-local address on the TAP to
// pass its DAD.
func (k *kernelHost) kernelLinkLocal(t *testing.T) netip.Addr {
	t.Helper()
	var ll netip.Addr
	eventually(t, "the kernel's link-local address", func() bool {
		out := k.ip(t, "-6", "addr", "show", "dev", k.dev, "scope", "link")
		m := inet6.FindStringSubmatch(out)
		if m == nil || strings.Contains(out, "tentative") {
			return false
		}
		ll = netip.MustParseAddr(m[1])
		return true
	})
	return ll
}

func TestKernelResolvesUsAndWeResolveTheKernel(t *testing.T) {
	k := newKernelHost(t)
	ours := k.linkLocal(t)
	theirs := k.kernelLinkLocal(t)

	// The kernel resolves our address: its ping gets no echo reply (no
	// IPv6 layer here), but its solicitation is answered.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k.ns.Run(ctx, "ping", "-6", "-c", "1", "-W", "1", ours.String()+"%"+k.dev)
	neigh := k.ip(t, "-6", "neigh", "show", "dev", k.dev, ours.String())
	mac := k.p.MAC()
	if !strings.Contains(neigh, "lladdr "+mac.String()) || !regexp.MustCompile(`REACHABLE|STALE|DELAY|PROBE`).MatchString(neigh) {
		t.Errorf("kernel's entry for us: %q, want lladdr %v", neigh, mac)
	}

	// We resolve the kernel's.
	pkt := k.pool.Get(wire.IPv6HeaderLen)
	wire.EncodeIPv6(pkt.Bytes(), &wire.IPv6Fields{NextHeader: wire.ProtoNoNext, HopLimit: 64, Src: ours, Dst: theirs})
	k.p.Output(theirs, pkt)
	eventually(t, "the kernel's address to resolve", func() bool {
		n, ok := k.p.Neighbor(theirs)
		return ok && n.State == ndp.Reachable
	})
}

func TestDADFindsAnAddressTheKernelHolds(t *testing.T) {
	k := newKernelHost(t)
	k.linkLocal(t)
	k.kernelLinkLocal(t)
	addr := netip.MustParsePrefix("2001:db8::1/64")
	k.ip(t, "-6", "addr", "add", addr.String(), "dev", k.dev, "nodad")
	if err := k.p.AddStatic(addr); err != nil {
		t.Fatal(err)
	}
	eventually(t, "DAD to find the duplicate", func() bool {
		s, _ := k.host.addr(addr.Addr())
		return s == ndp.Duplicate
	})
}
