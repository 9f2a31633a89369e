package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes, as the kernel's tools use them.
const (
	exitOK    = 0 // success
	exitFail  = 1 // the command ran and failed (ping: no reply)
	exitUsage = 2 // bad command line
)

// command is one of gonet's commands.
type command struct {
	name    string
	summary string // one line, for "gonet help"
	usage   string // the synopsis, for "gonet help NAME"
	about   string // a paragraph, for "gonet help NAME"
	// flags returns a fresh flag set with the command's flags, bound to
	// throwaway variables: help uses it to list them.
	flags func() *flag.FlagSet
	run   func(ctx context.Context, c *command, out *output, args []string) int
}

// output is where a command writes: results on stdout, diagnostics on
// stderr.
type output struct {
	stdout, stderr io.Writer
}

// commandList is gonet's commands in the order help lists them. It is set
// in init because help, one of them, lists them all.
var commandList []*command

func init() {
	commandList = []*command{upCommand, gatewayCommand, bridgeCommand, runCommand, forwardCommand, ssCommand, statsCommand, addrCommand, neighCommand, routeCommand, maddrCommand, dnsCommand, pingCommand, iperf3Command, demoCommand, helpCommand, versionCommand}
}

// commands returns gonet's commands in the order help lists them.
func commands() []*command { return commandList }

func lookupCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run is gonet's main, apart from the process: it runs the command args
// name and returns the exit code. ctx is cancelled on SIGINT or SIGTERM.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	out := &output{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		// No command is a usage error, as for the go command: the list
		// goes to stderr and the exit code says something was missing.
		writeCommandList(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		writeCommandList(stdout)
		return exitOK
	}
	c := lookupCommand(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "gonet: unknown command %q; run 'gonet help' for the list\n", args[0])
		return exitUsage
	}
	return c.run(ctx, c, out, args[1:])
}

// newFlagSet returns a flag set for command name that reports errors to its
// caller instead of printing them: gonet prints each usage error as one line.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("gonet "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseInterspersed parses args with fs, allowing flags after positional
// arguments as the kernel's ping does ("gonet ping 10.0.0.1 -c 3"). It
// returns the positional arguments. After "--" every argument is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops at the first non-flag and leaves it, or at "--",
		// which it consumes.
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// usagef returns an error about the command line, which reportParseError
// prints as one line with exit code 2.
func usagef(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// reportParseError turns the error of a command's parse function into the
// exit code: help for -h (exit 0), one line on stderr for anything else
// (exit 2).
func reportParseError(out *output, c *command, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		writeCommandHelp(out.stdout, c)
		return exitOK
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	fmt.Fprintf(out.stderr, "gonet %s: %s (run 'gonet help %s' for usage)\n", c.name, msg, c.name)
	return exitUsage
}
