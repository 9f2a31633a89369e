// Command gonet-bench is the benchmark suite of issue 5: GoNet against
// gVisor netstack and the Linux kernel on the same topology; and of issue
// 11: GoNet's gateway daemon against pasta and slirp4netns; and of issue
// 16: TCP over emulated wide-area paths.
//
//	gonet-bench run [-quick] [-only W,...] [-out DIR] [-md FILE] [-check]
//	gonet-bench server -stack gonet|gvisor|kernel -addr A.B.C.D/NN [-tap NAME]
//	gonet-bench client WORKLOAD [flags]
//	gonet-bench gnclient rr {-ring PATH | -tap NAME} -addr A.B.C.D/NN -server ADDR:PORT [flags]
//	gonet-bench relay -tap NAME -socket PATH [-mtu N]
//	gonet-bench pathemu -a NAME -b NAME [-a-netns PATH] [-b-netns PATH] -impair SPEC
//
// run (as root) is what make bench and make bench-quick do; it starts this
// same program as server and client inside the network namespaces it
// creates, and removes them when it ends, also on an interrupt.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gonetstack/gonet/bench/gnclient"
	"github.com/gonetstack/gonet/bench/load"
	"github.com/gonetstack/gonet/bench/pathemu"
	"github.com/gonetstack/gonet/bench/relay"
	"github.com/gonetstack/gonet/bench/server"
	"github.com/gonetstack/gonet/bench/suite"
	"github.com/gonetstack/gonet/internal/netns"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gonet-bench run|report|server|client|gnclient|relay|pathemu ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(os.Args[2:])
	case "report":
		err = report(os.Args[2:])
	case "server":
		err = server.Main(os.Args[2:])
	case "client":
		err = load.Main(os.Args[2:])
	case "gnclient":
		err = gnclient.Main(os.Args[2:])
	case "relay":
		err = relay.Main(os.Args[2:])
	case "pathemu":
		err = pathemu.Main(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: run, report, server, client, gnclient, relay or pathemu", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gonet-bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// report rewrites the markdown report and the plots from a run's
// results.json, so that a change to the report's text or layout needs no
// new run (and the numbers stay those of the run that measured them).
func report(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	out := fs.String("out", "results", "directory holding results.json; the plots are written there")
	md := fs.String("md", "", "where to write the markdown report (default: OUT/BENCHMARKS.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	absOut, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	mdPath := filepath.Join(absOut, "BENCHMARKS.md")
	if *md != "" {
		if mdPath, err = filepath.Abs(*md); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(filepath.Join(absOut, "results.json"))
	if err != nil {
		return err
	}
	var res suite.Results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(absOut, "results.json"), err)
	}
	return suite.Report(res, absOut, mdPath)
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "the smoke run: every stack and workload once at the smallest size")
	out := fs.String("out", "results", "directory for results.json, plots and profiles")
	md := fs.String("md", "", "where to write the markdown report (default: OUT/BENCHMARKS.md)")
	check := fs.Bool("check", false, "fail unless every stack and workload produced numbers")
	only := fs.String("only", "", "run only these comma-separated workloads (ping, short, bulk, bulk-cubic, rr, udp, scale; the IPv6 variants ping6, bulk6, rr6; issue 16's ping-pace, udprr, overload, daemon) or the gateway family (gateway) or its workloads (gw-bulk, gw-rr, gw-crr, gw-udp, gw-idle), or the multikernel family (multikernel) or its workloads (mk-tcp, mk-rr, mk-udp, mk-ring), or the real-world paths family (paths) or its workloads (path-cal, path-1mb, path-long, path-share)")
	mtus := fs.String("mtus", "", "the gateway family's guest MTUs, comma-separated (default: the plan's)")
	gateways := fs.String("gateways", "", "the gateway family compares only these comma-separated gateways (gonet, pasta, slirp4netns, gvproxy)")
	gonetBin := fs.String("gonet", "", "GoNet's daemon for the gateway family (default: built from -root next to this program)")
	reps := fs.Int("reps", 0, "repetitions, the gateway, multikernel and paths families' too (default: the plan's)")
	noProfile := fs.Bool("no-profile", false, "skip the CPU profiles")
	quietWait := fs.Duration("quiet-wait", -1, "how long the run may wait, in all, for other processes to leave the CPUs (default: the plan's)")
	root := fs.String("root", "..", "the GoNet module, whose own Go benchmarks the report includes")
	version := fs.String("gonet-version", "", "what to call the GoNet under test in the report (default: its git commit)")
	replace := fs.Bool("replace", false, "with -only naming the stack comparison's workloads, write over an earlier results.json in -out that holds others (such a run does not merge into it, as the gateway, multikernel and paths families do)")
	skip := fs.Bool("skip-unavailable", false, "without root, /dev/net/tun or ip, say so and succeed (but fail when CI=true), as the stack's tests skip")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := netns.Available(); err != nil {
		if *skip && os.Getenv("CI") != "true" {
			fmt.Fprintf(os.Stderr, "bench: skipped: %v\n", err)
			return nil
		}
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	plan := suite.Full
	if *quick {
		plan = suite.Quick
	}
	if *reps > 0 {
		plan.Reps, plan.Reps6, plan.Gateway.Reps, plan.Multikernel.Reps, plan.Paths.Reps = *reps, *reps, *reps, *reps, *reps
	}
	if *mtus != "" {
		plan.Gateway.MTUs = nil
		for m := range strings.SplitSeq(*mtus, ",") {
			n, err := strconv.Atoi(m)
			if err != nil || n < 68 {
				return fmt.Errorf("-mtus: %q is not an MTU", m)
			}
			plan.Gateway.MTUs = append(plan.Gateway.MTUs, n)
		}
	}
	if *noProfile {
		plan.ProfileDur = 0
	}
	if *quietWait >= 0 {
		plan.QuietWait = *quietWait
	}
	absOut, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	if *md != "" {
		if *md, err = filepath.Abs(*md); err != nil {
			return err
		}
	}
	s := &suite.Suite{Plan: plan, Bin: bin, OutDir: absOut, MDPath: *md, Log: os.Stderr, Root: *root, GoNetVersion: *version, GoNetBin: *gonetBin, Replace: *replace}
	if *only != "" {
		s.Only = strings.Split(*only, ",")
	}
	if *gateways != "" {
		s.Gateways = strings.Split(*gateways, ",")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// A pipe reading the run's output (| tail) dies with it on a ^C or a
	// kill of the process group; a write to it must then fail rather
	// than kill the run before it has removed its namespaces. Caught on
	// a channel nobody reads, not ignored: an ignored signal stays
	// ignored in the peers the run starts (pasta, iperf3), a caught one
	// goes back to its default at exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "\ngonet-bench: %v: stopping the servers and removing the namespaces\n", sig)
		cancel()
		suite.CloseAll()
		os.Exit(130)
	}()

	if err := s.Run(ctx); err != nil {
		suite.CloseAll()
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: results in %s\n", absOut)
	if !*check {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(absOut, "results.json"))
	if err != nil {
		return err
	}
	var res suite.Results
	if err := json.Unmarshal(b, &res); err != nil {
		return err
	}
	for _, r := range suite.PeerFailures(res) {
		fmt.Fprintf(os.Stderr, "bench: a peer gateway failed (its result, not the suite's): %s %s on %s: %s\n",
			r.Workload, r.Point, r.Stack, strings.SplitN(r.Error, "\n", 2)[0])
	}
	missing, checked := suite.Check(res)
	for _, m := range missing {
		fmt.Fprintf(os.Stderr, "bench: no numbers: %s\n", m)
	}
	// The closing line CI reads, in the plain form any runner may use.
	fmt.Printf("bench: %d passed, %d failed\n", checked-len(missing), len(missing))
	if len(missing) > 0 {
		return fmt.Errorf("%d stack/workload combinations produced no numbers", len(missing))
	}
	return nil
}
