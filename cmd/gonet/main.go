// Command gonet runs GoNet, the user-space TCP/IP stack, on a Linux TAP
// device: as the gateway that gives a guest (a network namespace, a VM) its
// network through host sockets (gonet gateway, gonet run -- CMD, with
// inbound forwards changed by gonet forward); as a daemon serving the small
// Internet services and a web server (gonet up), whose connections and
// counters gonet ss and gonet stats show;
// as a ping client (gonet ping); or as a self-contained demonstration
// against the kernel in a private network namespace (gonet demo).
//
// Usage:
//
//	gonet <command> [flags]
//
// Run "gonet help" for the commands and "gonet help COMMAND" for a
// command's flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if _, ok := os.LookupEnv(runChildEnv); ok {
		// gonet run's namespace, before anything else: see run.go.
		os.Exit(runChild())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, give the terminal its default behaviour back,
	// so that a second Ctrl-C kills a shutdown that hangs.
	go func() { <-ctx.Done(); stop() }()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
