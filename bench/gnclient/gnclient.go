// Package gnclient runs a load generator of package load over a GoNet
// stack in its own process, attached to a shared-memory ring (link/shm) or
// a TAP device: the client end of the multikernel family, where both ends
// are GoNet processes and no kernel socket is on the path. The stack is
// GoNet's default, IPv4 only, on the offloads the daemon uses.
package gnclient

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/gonetstack/gonet/bench/load"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/shm"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// nic names the stack's one NIC.
const nic = "eth0"

// Main runs the workload args name (rr: 1-byte request-response) from a
// GoNet stack on the link the flags give, and prints its result as JSON on
// stdout, as load.Main does.
func Main(args []string) error {
	fs := flag.NewFlagSet("gnclient", flag.ContinueOnError)
	ring := fs.String("ring", "", "attach to the ring a GoNet process listens for on the UNIX socket `PATH`")
	tapName := fs.String("tap", "", "open the TAP device `NAME` instead of a ring")
	addr := fs.String("addr", "", "the stack's address and prefix, as 10.79.0.1/24")
	mac := fs.String("mac", "", "the stack's MAC (default: a random locally administered one)")
	mtu := fs.Int("mtu", 1500, "the link's MTU")
	server := fs.String("server", "", "the server's `ADDR:PORT`, answering each byte with one (an RFC 862 echo service)")
	n := fs.Int("n", 1, "connections")
	dur := fs.Duration("dur", 2*time.Second, "how long to run")
	wait := fs.Duration("wait", 10*time.Second, "how long to try the first connection again: the peer's services may start after the link")
	if len(args) == 0 || args[0] != "rr" {
		return errors.New("gnclient: name a workload: rr")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	prefix, err := netip.ParsePrefix(*addr)
	if err != nil {
		return fmt.Errorf("gnclient: -addr: %w", err)
	}
	var hw net.HardwareAddr
	if *mac != "" {
		if hw, err = net.ParseMAC(*mac); err != nil {
			return fmt.Errorf("gnclient: -mac: %w", err)
		}
	}
	var ep link.Endpoint
	switch {
	case (*ring == "") == (*tapName == ""):
		return errors.New("gnclient: give one link: -ring PATH or -tap NAME")
	case *ring != "":
		ep, err = shm.Dial(*ring, shm.Options{MTU: *mtu, MAC: hw, Offload: true})
	default:
		ep, err = tap.Open(*tapName, tap.Options{MTU: *mtu, MAC: hw, Offload: true})
	}
	if err != nil {
		return fmt.Errorf("gnclient: %w", err)
	}
	// The collector as the daemon sets it, so that this end is a GoNet
	// process like the other.
	stack.TuneGC(0)
	s := stack.New(stack.Config{NoIPv6: true})
	defer s.Close()
	if err := s.AddNIC(nic, ep); err != nil {
		ep.Close()
		return fmt.Errorf("gnclient: %w", err)
	}
	if err := s.AddAddress(nic, prefix); err != nil {
		return fmt.Errorf("gnclient: %w", err)
	}
	first := true
	dial := func(network, address string) (net.Conn, error) {
		deadline := time.Now().Add(*wait)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := s.DialContext(ctx, network, address)
			cancel()
			// Only the first connection waits for the server: later
			// ones find it there.
			if err == nil || !first || time.Now().After(deadline) {
				first = false
				return c, err
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	r, err := load.RROver(dial, *server, *n, *dur)
	if err != nil {
		return fmt.Errorf("gnclient rr: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}
