package rtnl_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/rtnl"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// Configuring a link as the gateway configures a guest's TAP, in a test
// namespace, checked with the ip command as an independent reader.
func TestConfigureLinkAsTheGuestsTAP(t *testing.T) {
	ns := netnstest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		out, err := ns.IP(ctx, args...)
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	run("link", "add", "guest0", "type", "veth", "peer", "name", "peer0")
	run("link", "set", "peer0", "up")
	err := ns.Do(func() error {
		if err := rtnl.LinkUp("guest0", 1400); err != nil {
			return err
		}
		if err := rtnl.AddAddr("guest0", netip.MustParsePrefix("10.0.2.100/24")); err != nil {
			return err
		}
		return rtnl.AddDefaultRoute("guest0", netip.MustParseAddr("10.0.2.2"))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"link", "show", "guest0"}, []string{"mtu 1400", ",UP"}},
		{[]string{"-4", "addr", "show", "guest0"}, []string{"inet 10.0.2.100/24 brd 10.0.2.255"}},
		{[]string{"route", "show", "default"}, []string{"default via 10.0.2.2 dev guest0"}},
	} {
		out := run(c.args...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("ip %v: %q lacks %q", c.args, out, w)
			}
		}
	}
	// The kernel's refusal comes back as its errno, with what was asked.
	err = ns.Do(func() error { return rtnl.AddAddr("guest0", netip.MustParsePrefix("10.0.2.100/24")) })
	if !errors.Is(err, syscall.EEXIST) || !strings.Contains(err.Error(), "10.0.2.100/24 on guest0") {
		t.Fatalf("adding the address twice: %v, want EEXIST naming the address and link", err)
	}
	if err := rtnl.LinkUp("no-such-link", 0); err == nil {
		t.Fatal("LinkUp of a missing link succeeded")
	}
}
