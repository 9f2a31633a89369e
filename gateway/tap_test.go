package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

func TestNetnsPath(t *testing.T) {
	self := fmt.Sprintf("/proc/%d/ns/net", os.Getpid())
	tests := []struct {
		spec, want string
		ok         bool
	}{
		{fmt.Sprint(os.Getpid()), self, true},
		{self, self, true},
		{"0", "not a process ID", false},
		{"/nonexistent/netns", "no such file", false},
	}
	for _, tt := range tests {
		got, err := NetnsPath(tt.spec)
		switch {
		case tt.ok && (err != nil || got != tt.want):
			t.Errorf("NetnsPath(%q) = %q, %v; want %q", tt.spec, got, err, tt.want)
		case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("NetnsPath(%q) = %q, %v; want an error saying %q", tt.spec, got, err, tt.want)
		}
	}
}

// The gateway's TAP made in the guest's namespace and configured there, as
// slirp4netns --netns --configure: the guest reaches a stack on it at the
// gateway's address, through the route it was given.
func TestOpenTAPInTheGuestsNamespaceAndConfigureIt(t *testing.T) {
	guest := netnstest.New(t)
	netnstest.RequireTool(t, "ping")
	n, err := NewNetwork(DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	const mtu = 1500
	ep, err := OpenTAP(guest.Path(), "tap0", tap.Options{MTU: mtu})
	if err != nil {
		t.Fatal(err)
	}
	if err := ConfigureGuest(guest.Path(), "tap0", n, mtu); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	s := stack.New(stack.Config{})
	t.Cleanup(func() { stacktest.Closed(t, s) })
	if err := s.AddNIC("tap0", ep); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAddress("tap0", netip.PrefixFrom(n.Gateway, n.Subnet.Bits())); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := guest.IP(ctx, "route", "show", "default"); err != nil || !strings.Contains(string(out), "via 10.0.2.2 dev tap0") {
		t.Fatalf("the guest's default route: %s, %v", out, err)
	}
	if out, err := guest.Run(ctx, "ping", "-c", "1", "-W", "2", n.Gateway.String()); err != nil {
		t.Fatalf("the guest pings the gateway: %v: %s", err, out)
	}
}
