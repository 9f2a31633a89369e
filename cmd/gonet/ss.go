package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stats"
)

var ssCommand = &command{
	name:    "ss",
	summary: "show the connection table of a running gonet up, as ss -tan does, and a gateway's relayed flows",
	usage:   "gonet ss [-tap NAME | -control PATH]",
	about: `Asks a running gonet up for its TCP connection table through its control
socket and prints it as the kernel's ss -tan does (State, Recv-Q, Send-Q,
Local Address:Port, Peer Address:Port), with the figures ss -ti adds as
columns: the smoothed round-trip time and the retransmission timeout in
milliseconds, the congestion window, the slow-start threshold and the
retransmissions. A gonet gateway's table is followed by its relayed flows,
each with both of its sides: the guest's end and the peer it addressed,
the host socket's local end and its peer, the bytes (TCP) or datagrams
(UDP) carried each way, and the flow's age and idle time; a flow an
inbound forward made shows its protocol as "tcp<" or "udp<". With
neither flag it asks the only daemon running. Exits 0 on success, 1 when
no daemon answers.`,
	flags: func() *flag.FlagSet { fs, _ := ssFlags(); return fs },
	run:   runSS,
}

var statsCommand = &command{
	name:    "stats",
	summary: "print the counters of a running gonet up",
	usage:   "gonet stats [-a | -json] [-tap NAME | -control PATH]",
	about: `Asks a running gonet up for its stack's counters through its control socket
and prints them one "Layer.Name value" a line, sorted, as gonet up prints
them when it stops: the non-zero ones, or all of them with -a. With -json
it prints them all, zeros too, as one JSON object of name and value
({"TCP.RetransSegs": 3, ...}), for jq and scripts; Prometheus reads them
from the daemon's /metrics instead (see -metrics). With neither -tap nor
-control it asks the only daemon running. Exits 0 on success, 1 when no
daemon answers.`,
	flags: func() *flag.FlagSet { fs, _ := statsFlags(); return fs },
	run:   runStats,
}

func ssFlags() (*flag.FlagSet, *controlFlags) {
	c := &controlFlags{}
	fs := newFlagSet("ss")
	c.register(fs)
	return fs, c
}

// statsConfig is gonet stats's command line, parsed.
type statsConfig struct {
	controlFlags
	all  bool
	json bool
}

func statsFlags() (*flag.FlagSet, *statsConfig) {
	c := &statsConfig{}
	fs := newFlagSet("stats")
	c.register(fs)
	fs.BoolVar(&c.all, "a", false, "print every counter, zeros too")
	fs.BoolVar(&c.json, "json", false, "print every counter as a JSON object of name and value")
	return fs, c
}

// parseControl parses the arguments of a command that talks to a daemon.
func parseControl(name string, fs *flag.FlagSet, c *controlFlags, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q: %s takes only flags", fs.Arg(0), name)
	}
	return c.check()
}

// askDaemon fetches the status of the daemon c names, reporting failure on
// stderr as command name.
func askDaemon(ctx context.Context, out *output, name string, c *controlFlags) (services.Status, bool) {
	path, err := c.socket()
	if err == nil {
		var st services.Status
		if st, err = fetchStatus(ctx, path); err == nil {
			return st, true
		}
	}
	fmt.Fprintf(out.stderr, "gonet %s: %v\n", name, err)
	return services.Status{}, false
}

func runSS(ctx context.Context, cmd *command, out *output, args []string) int {
	fs, c := ssFlags()
	if err := parseControl("ss", fs, c, args); err != nil {
		return reportParseError(out, cmd, err)
	}
	path, err := c.socket()
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet ss: %v\n", err)
		return exitFail
	}
	st, err := fetchStatus(ctx, path)
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet ss: %v\n", err)
		return exitFail
	}
	flows, isGateway, err := fetchFlows(ctx, path)
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet ss: %v\n", err)
		return exitFail
	}
	err = services.WriteConnTable(out.stdout, st.Connections)
	if err == nil && isGateway {
		fmt.Fprintln(out.stdout)
		err = writeFlowTable(out.stdout, flows, time.Now())
	}
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet ss: %v\n", err)
		return exitFail
	}
	return exitOK
}

func runStats(ctx context.Context, cmd *command, out *output, args []string) int {
	fs, c := statsFlags()
	if err := parseControl("stats", fs, &c.controlFlags, args); err != nil {
		return reportParseError(out, cmd, err)
	}
	st, ok := askDaemon(ctx, out, "stats", &c.controlFlags)
	if !ok {
		return exitFail
	}
	var err error
	if c.json {
		// Every counter, zeros too: a script's keys do not come and go
		// with the traffic. encoding/json sorts a map's keys.
		enc := json.NewEncoder(out.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(st.Counters)
	} else {
		err = stats.Write(out.stdout, st.Counters, c.all)
	}
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet stats: %v\n", err)
		return exitFail
	}
	return exitOK
}
