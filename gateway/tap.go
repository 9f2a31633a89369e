package gateway

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/rtnl"
	"github.com/gonetstack/gonet/link/tap"
)

// Meeting the guest: as slirp4netns does, the gateway creates the guest's
// TAP device inside the guest's network namespace and keeps the file
// descriptor, serving it from its own namespace, where its host sockets
// reach the host's network. The guest's side of the TAP can be configured
// from here too.

// NetnsPath returns the namespace file a -netns value names: a process ID
// stands for that process's namespace (/proc/PID/ns/net); anything else is
// a path, such as /run/netns/NAME.
func NetnsPath(spec string) (string, error) {
	path := spec
	if pid, err := strconv.Atoi(spec); err == nil {
		if pid <= 0 {
			return "", fmt.Errorf("gateway: netns %q: not a process ID", spec)
		}
		path = fmt.Sprintf("/proc/%d/ns/net", pid)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("gateway: netns %q: %w", spec, err)
	}
	return path, nil
}

// OpenTAP creates the TAP device name in the network namespace at nsPath
// (this thread's own when empty) and returns its endpoint, for this
// process to serve from its own namespace.
func OpenTAP(nsPath, name string, opts tap.Options) (*tap.Endpoint, error) {
	if nsPath == "" {
		return tap.Open(name, opts)
	}
	var ep *tap.Endpoint
	err := netns.DoPath(nsPath, func() (err error) {
		ep, err = tap.Open(name, opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: TAP %s in %s: %w", name, nsPath, err)
	}
	return ep, nil
}

// ConfigureGuest sets up the guest's side of the TAP device name in the
// namespace at nsPath as slirp4netns --configure does: up, with the MTU,
// the guest's address in its subnet, and a default route via the gateway.
func ConfigureGuest(nsPath, name string, n Network, mtu int) error {
	configure := func() error {
		if err := rtnl.LinkUp(name, mtu); err != nil {
			return err
		}
		if err := rtnl.AddAddr(name, netip.PrefixFrom(n.Guest, n.Subnet.Bits())); err != nil {
			return err
		}
		return rtnl.AddDefaultRoute(name, n.Gateway)
	}
	var err error
	if nsPath == "" {
		err = configure()
	} else {
		err = netns.DoPath(nsPath, configure)
	}
	if err != nil {
		return fmt.Errorf("gateway: configure the guest's %s: %w", name, err)
	}
	return nil
}
