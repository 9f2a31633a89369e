package netns

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// Run runs a command inside the namespace (`ip netns exec NAME name args...`)
// and returns its combined output. The error names the namespace and the
// command line and carries the output. ctx bounds the command; Run adds no
// timeout of its own.
func (ns *NS) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := ns.Command(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, ns.cmdError(cmd, err, out)
	}
	return out, nil
}

// Command returns a command that runs inside the namespace, for the caller to
// start and wait for: a long-running server or a ping flood. `ip netns exec`
// replaces itself with the command, so cancelling ctx kills the command
// itself. Close kills whatever is still running in the namespace.
func (ns *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// IP runs `ip -n NAME args...`: the ip command, acting on the namespace. It
// is cheaper than Run("ip", ...) and bounded by a timeout of its own besides
// ctx.
func (ns *NS) IP(ctx context.Context, args ...string) ([]byte, error) {
	return ns.ip(ctx, append([]string{"-n", ns.Name}, args...)...)
}

// ip runs the ip command with a timeout; the error names the namespace.
func (ns *NS) ip(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, ns.cmdError(cmd, err, out)
	}
	return out, nil
}

func (ns *NS) cmdError(cmd *exec.Cmd, err error, out []byte) error {
	line := strings.Join(cmd.Args, " ")
	if out = bytes.TrimSpace(out); len(out) > 0 {
		return fmt.Errorf("netns %s: %s: %w: %s", ns.Name, line, err, out)
	}
	return fmt.Errorf("netns %s: %s: %w", ns.Name, line, err)
}

// ConfigureLink sets up device dev inside the namespace: MTU mtu (left as it
// is when mtu <= 0), address addr (the prefix keeps the host's own bits, as
// in 10.1.2.1/24), and the link up.
func (ns *NS) ConfigureLink(dev string, addr netip.Prefix, mtu int) error {
	if !addr.IsValid() {
		return fmt.Errorf("netns %s: configure %s: invalid address %v", ns.Name, dev, addr)
	}
	ctx := context.Background()
	if mtu > 0 {
		if _, err := ns.IP(ctx, "link", "set", "dev", dev, "mtu", strconv.Itoa(mtu)); err != nil {
			return err
		}
	}
	if _, err := ns.IP(ctx, "addr", "add", addr.String(), "dev", dev); err != nil {
		return err
	}
	_, err := ns.IP(ctx, "link", "set", "dev", dev, "up")
	return err
}

// AddVeth creates a veth pair with one end, dev, in this namespace and the
// other, peerDev, in peer's, without passing through the caller's namespace.
// Neither end is configured; see ConfigureLink.
func (ns *NS) AddVeth(dev string, peer *NS, peerDev string) error {
	_, err := ns.IP(context.Background(), "link", "add", dev, "type", "veth",
		"peer", "name", peerDev, "netns", peer.Name)
	return err
}
