package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

var helpCommand = &command{
	name:    "help",
	summary: "list the commands, or show a command's flags: gonet help COMMAND",
	usage:   "gonet help [COMMAND]",
	about:   "With no argument, lists gonet's commands; with one, shows that command's flags.",
	flags:   func() *flag.FlagSet { return newFlagSet("help") },
	run:     runHelp,
}

func runHelp(_ context.Context, cmd *command, out *output, args []string) int {
	fs := newFlagSet("help")
	if err := fs.Parse(args); err != nil {
		return reportParseError(out, cmd, err)
	}
	switch fs.NArg() {
	case 0:
		writeCommandList(out.stdout)
		return exitOK
	case 1:
		c := lookupCommand(fs.Arg(0))
		if c == nil {
			fmt.Fprintf(out.stderr, "gonet help: unknown command %q; run 'gonet help' for the list\n", fs.Arg(0))
			return exitUsage
		}
		writeCommandHelp(out.stdout, c)
		return exitOK
	}
	return reportParseError(out, cmd, usagef("takes one command name, got %d arguments", fs.NArg()))
}

// writeCommandList prints gonet's usage and its commands, one line each.
func writeCommandList(w io.Writer) {
	fmt.Fprintln(w, "GoNet is a user-space TCP/IP stack that reaches the world through a Linux TAP device.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: gonet <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'gonet help COMMAND' for a command's flags.")
}

// writeCommandHelp prints a command's synopsis, description and flags.
func writeCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", c.usage, c.about)
	fs := c.flags()
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fmt.Fprint(w, b.String())
}
