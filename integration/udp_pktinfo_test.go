package integration

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/services"
)

// GoNet with two addresses on the subnet, its UDP echo service on the
// wildcard address: the kernel's socat, whose socket is connected, takes
// an answer only from the address it asked, so each answer must come
// from the address its request went to (RFC 1122 section 4.1.3.5), the
// second included, which is not the route's source.
func TestUDPServiceAnswersTheKernelFromEachAddress(t *testing.T) {
	netnstest.RequireTool(t, "socat")
	h := newHost(t, options{})
	second := netip.MustParsePrefix("10.99.0.3/24")
	if err := h.stack.AddAddress(h.dev, second); err != nil {
		t.Fatal(err)
	}
	conn, err := h.stack.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 7))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- services.ServeEchoUDP(ctx, conn) }()
	defer func() { cancel(); <-done }()
	for _, dst := range []netip.Addr{gonetAddr.Addr(), second.Addr()} {
		to := net.JoinHostPort(dst.String(), "7")
		out := h.run(t, 10*time.Second, "sh", "-c", "echo asked "+dst.String()+" | socat -t 1 -T 3 STDIO UDP:"+to)
		if want := "asked " + dst.String(); strings.TrimSpace(out) != want {
			t.Errorf("echo from %v: %q, want %q", to, out, want)
		}
	}
}
