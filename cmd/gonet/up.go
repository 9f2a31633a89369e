package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/gonetstack/gonet/services"
)

var upCommand = &command{
	name:    "up",
	summary: "bring up a GoNet host on a TAP device and serve until interrupted",
	usage:   "gonet up -tap NAME -addr A.B.C.D/NN [-gw A.B.C.D] [-mac MAC] [-mtu N] [-serve LIST] [-http-root DIR] [-pcap FILE] [-impair SPEC] [-memory BYTES]",
	about: `Opens the TAP device (creating it when absent), starts a GoNet stack on it
with the given address, and runs the services named by -serve on UDP. When
ready it prints one line, "gonet: up TAP ADDR/PREFIX MAC", on stdout. On
SIGINT or SIGTERM it shuts down, prints the stack's counters and exits 0.
The kernel's side of the TAP device is left for you to configure.`,
	flags: func() *flag.FlagSet { fs, _ := upFlags(); return fs },
	run:   runUp,
}

// upConfig is gonet up's command line, parsed.
type upConfig struct {
	link     linkConfig
	services []services.Service
	http     bool   // http was in -serve
	httpRoot string // directory http will serve; empty: not given
}

func upFlags() (*flag.FlagSet, *upConfig) {
	c := &upConfig{}
	fs := newFlagSet("up")
	c.link.register(fs)
	fs.Func("serve", "serve the comma-separated services in `LIST`: "+strings.Join(services.KnownNames(), ", ")+" (default: none)",
		func(s string) error {
			list, err := services.Lookup(s)
			if err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "services: "))
			}
			c.services = list
			return nil
		})
	fs.StringVar(&c.httpRoot, "http-root", "", "serve the files under `DIR` over http (once GoNet has TCP)")
	return fs, c
}

// parseUp parses gonet up's arguments.
func parseUp(args []string) (*upConfig, error) {
	fs, c := upFlags()
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q: up takes only flags", fs.Arg(0))
	}
	if err := c.link.check(); err != nil {
		return nil, err
	}
	for _, s := range c.services {
		if s.Name == "http" {
			c.http = true
		}
	}
	if c.httpRoot != "" {
		fi, err := os.Stat(c.httpRoot)
		if err != nil {
			return nil, usagef("-http-root: %v", err)
		}
		if !fi.IsDir() {
			return nil, usagef("-http-root %s is not a directory", c.httpRoot)
		}
	}
	return c, nil
}

func runUp(ctx context.Context, cmd *command, out *output, args []string) int {
	c, err := parseUp(args)
	if err != nil {
		return reportParseError(out, cmd, err)
	}
	if c.http {
		fmt.Fprintln(out.stderr, "gonet up: warning: http needs TCP, which GoNet does not have yet; it will start once TCP lands")
	}
	h, err := bringUp(&c.link)
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet up: %v\n", err)
		return exitFail
	}
	if line := c.link.describeImpairment("up"); line != "" {
		fmt.Fprintln(out.stderr, line)
	}

	svc, err := startUDPServices(ctx, h.stack, c.services)
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet up: %v\n", err)
		h.Close()
		return exitFail
	}

	fmt.Fprintf(out.stdout, "gonet: up %s %v %v\n", h.nic, c.link.addr, h.mac)

	code := exitOK
	select {
	case <-ctx.Done():
	case err := <-svc.Failed():
		// A service that stops on its own leaves a daemon that no
		// longer does what it said it would: shut down and say so.
		fmt.Fprintf(out.stderr, "gonet up: %v\n", err)
		code = exitFail
	}
	if err := svc.Stop(); err != nil {
		fmt.Fprintf(out.stderr, "gonet up: %v\n", err)
		code = exitFail
	}
	if err := h.Close(); err != nil {
		fmt.Fprintf(out.stderr, "gonet up: shutting down: %v\n", err)
		code = exitFail
	}
	if err := h.stack.WriteCounters(out.stdout); err != nil {
		fmt.Fprintf(out.stderr, "gonet up: writing counters: %v\n", err)
		code = exitFail
	}
	return code
}
