// Package integration tests GoNet against the Linux kernel's own TCP/IP:
// each test makes a network namespace, a TAP device in it with the kernel
// side addressed, runs a GoNet stack on the TAP, and drives the kernel's own
// tools (ping, socat, ip, tcpdump) and sockets in the namespace. Traffic
// never leaves the namespace.
package integration

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// Every test has a namespace of its own, so all use the same subnet.
var (
	kernelAddr = netip.MustParsePrefix("10.99.0.1/24")
	gonetAddr  = netip.MustParsePrefix("10.99.0.2/24")
)

// host is a GoNet stack on a TAP device whose kernel side is in ns.
type host struct {
	ns    *netns.NS
	dev   string
	tap   *tap.Endpoint
	stack *stack.Stack
}

// options changes how newHost sets a host up.
type options struct {
	mtu   int
	wrap  func(t *testing.T, ep link.Endpoint) link.Endpoint // fault, pcap
	stack stack.Config                                       // the zero value: defaults
	// noOffload opens the TAP without its offloads (tap.Options.Offload),
	// as it is also opened under a wrapper: fault and pcap see the frames
	// a wire would carry, not 64 KiB super-segments.
	noOffload bool
}

// newHost sets up a namespace, a TAP in it, and a stack on it. Cleanup
// closes the stack, checks that it returned every buffer, and removes the
// namespace, also when the test fails.
func newHost(t *testing.T, o options) *host {
	t.Helper()
	if o.mtu == 0 {
		o.mtu = 1500
	}
	ns := netnstest.New(t)
	h := &host{ns: ns, dev: netns.DeviceName()}
	err := ns.Do(func() error {
		var err error
		h.tap, err = tap.Open(h.dev, tap.Options{MTU: o.mtu, Offload: !o.noOffload && o.wrap == nil})
		return err
	})
	if err != nil {
		t.Fatalf("open TAP in %s: %v", ns, err)
	}
	if err := ns.ConfigureLink(h.dev, kernelAddr, o.mtu); err != nil {
		h.tap.Close()
		t.Fatal(err)
	}
	var ep link.Endpoint = h.tap
	if o.wrap != nil {
		ep = o.wrap(t, ep)
	}
	h.stack = stack.New(o.stack)
	t.Cleanup(func() { stacktest.Closed(t, h.stack) })
	if err := h.stack.AddNIC(h.dev, ep); err != nil {
		t.Fatal(err)
	}
	if err := h.stack.AddAddress(h.dev, gonetAddr); err != nil {
		t.Fatal(err)
	}
	return h
}

// run runs a command in the namespace and fails the test if it fails.
func (h *host) run(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := h.ns.Run(ctx, name, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return string(out)
}

// serveUDP runs fn on every datagram to GoNet's port, answering with what fn
// returns (nil: no answer), until the test ends.
func (h *host) serveUDP(t *testing.T, port uint16, fn func([]byte) []byte) {
	t.Helper()
	c, err := h.stack.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), port))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if out := fn(buf[:n]); out != nil {
				c.WriteToUDPAddrPort(out, from)
			}
		}
	}()
}

func gonetUDPAddr(port int) string {
	return net.JoinHostPort(gonetAddr.Addr().String(), strconv.Itoa(port))
}
