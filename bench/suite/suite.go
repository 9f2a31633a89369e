// Package suite runs the benchmark suite: for every repetition and
// workload it sets up each stack in turn (GoNet, gVisor netstack, the Linux
// kernel) on the same topology, drives it from the kernel's side with the
// load generators of package load, collects the server's own measurements,
// and writes JSON, BENCHMARKS.md and plots.
package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gonetstack/gonet/bench/server"
	"github.com/gonetstack/gonet/internal/netns"
)

// Record is one measurement: one point of one workload on one stack in one
// repetition.
type Record struct {
	Workload string             `json:"workload"`
	Point    string             `json:"point"`
	Stack    string             `json:"stack"`
	Rep      int                `json:"rep"`
	Metrics  map[string]float64 `json:"metrics,omitempty"`
	Counters map[string]float64 `json:"counters,omitempty"` // what changed: the client namespace's kernel (client.), the stack's own (stack.)
	Error    string             `json:"error,omitempty"`
	Client   json.RawMessage    `json:"client,omitempty"` // the load generator's own result
}

// Results is everything a run produced.
type Results struct {
	Machine  Machine          `json:"machine"`
	Plan     Plan             `json:"plan"`
	Started  time.Time        `json:"started"`
	WallS    float64          `json:"wall_s"`
	Records  []Record         `json:"records"`
	Profiles []ProfileSummary `json:"profiles,omitempty"`

	QuietWaitS float64 `json:"quiet_wait_s"` // time spent waiting for other processes to leave the CPUs

	Micro      []MicroBench `json:"micro,omitempty"`
	MicroError string       `json:"micro_error,omitempty"`

	// Workloads are the workloads the run planned, as records name them
	// (Check wants numbers from each); empty in older results: the six
	// of the stack comparison.
	Workloads []string `json:"workloads,omitempty"`
	// Gateway describes the gateway family's run, which -only gateway
	// merges into an earlier run's results.
	Gateway *GatewayRun `json:"gateway,omitempty"`
	// Multikernel describes the multikernel family's run, which -only
	// multikernel merges likewise.
	Multikernel *MultikernelRun `json:"multikernel,omitempty"`
	// Paths describes the real-world paths family's run, which -only
	// paths merges likewise.
	Paths *PathsRun `json:"paths,omitempty"`
}

// GatewayRun is when and with what the gateway family was measured.
type GatewayRun struct {
	Started  time.Time         `json:"started"`
	WallS    float64           `json:"wall_s"`
	Reps     int               `json:"reps"`
	GoNet    string            `json:"gonet"`
	Versions map[string]string `json:"versions"` // of each gateway, as it reports itself
}

// PathsRun is when the paths family was measured.
type PathsRun struct {
	Started time.Time `json:"started"`
	WallS   float64   `json:"wall_s"`
	Reps    int       `json:"reps"`
	GoNet   string    `json:"gonet"`
}

// Suite is one run.
type Suite struct {
	Plan   Plan
	Bin    string    // this program, run as server and client in the namespaces
	OutDir string    // results.json, plots, profiles
	MDPath string    // the markdown report ("": OutDir/BENCHMARKS.md)
	Log    io.Writer // progress
	Only   []string  // workloads to run; all when empty
	Root   string    // the stack's module, for its Go benchmarks and its gateway daemon
	// GoNetBin is GoNet's daemon for the gateway family; when empty the
	// run builds it from Root next to Bin.
	GoNetBin string
	// GvproxyBin is gvisor-tap-vsock's gvproxy; when empty the run
	// installs it from the module proxy next to Bin.
	GvproxyBin string
	// Gateways limits the gateway family to these; all when empty.
	Gateways []string
	// Replace lets a run of some of the stack comparison's workloads
	// (Only) write over an earlier results.json that holds others, which
	// it does not merge into (the gateway, multikernel and paths
	// families do); without it such a run refuses before it starts.
	Replace bool
	// GoNetVersion overrides the version the report gives GoNet (by
	// default the git commit of the work tree).
	GoNetVersion string

	res   Results
	total int
	done  int
	// quietBudget is how long the run may still wait for other
	// processes to leave the machine's CPUs alone.
	quietBudget time.Duration
	// pathsWall is the time the paths family's groups took.
	pathsWall time.Duration
}

// busyThreshold is the share of the machine's CPU that other processes may
// use before a set-up waits for them (a quarter: half a core of two).
const busyThreshold = 0.25

// machineLoad is the share of all CPUs busy over d.
func machineLoad(d time.Duration) float64 {
	a := readSysStat()
	time.Sleep(d)
	b := readSysStat()
	return (b.busy - a.busy) / (d.Seconds() * float64(runtime.NumCPU()))
}

// waitQuiet waits, within the run's budget, until nothing else keeps the
// machine busy: the suite's measurements would pay for it.
func (s *Suite) waitQuiet(ctx context.Context) {
	began := time.Now()
	said := false
	for s.quietBudget > 0 && ctx.Err() == nil {
		t := time.Now()
		load := machineLoad(300 * time.Millisecond)
		if load < busyThreshold {
			break
		}
		if !said {
			fmt.Fprintf(s.Log, "bench: other processes use %.0f%% of the CPUs; waiting for them (at most %s more this run)\n",
				100*load, s.quietBudget.Round(time.Second))
			said = true
		}
		time.Sleep(2 * time.Second)
		s.quietBudget -= time.Since(t)
	}
	if said {
		s.res.QuietWaitS += time.Since(began).Seconds()
	}
}

// point is one measurement of a workload, run on an Env.
type point struct {
	name     string // "n=10"
	label    string // for progress: "10 pingers"
	workload string // the record's, when not the group's
	run      func(ctx context.Context, e *Env) (map[string]float64, []byte, error)
	// pairsItself: on an IPv6 set-up the run measures its IPv4 twin
	// itself (ping6Group), and withIPv4Twin leaves it be.
	pairsItself bool
}

// group is a workload: its points share one set-up per stack, unless
// isolated, when each point has a set-up of its own.
type group struct {
	workload string
	points   []point
	isolated bool
	// family is the name -only selects the group by besides its
	// workload's ("gateway").
	family string
	// ipv6: the workloads run over IPv6 (Setup6 is the default set-up).
	ipv6 bool
	// stacks are what the group sets up in turn, and setup sets one up;
	// by default server.Stacks and Setup.
	stacks []string
	setup  func(ctx context.Context, stack string) (*Env, error)
}

func (p point) workloadOf(g group) string {
	if p.workload != "" {
		return p.workload
	}
	return g.workload
}

// repsOf is how many repetitions g runs.
func (s *Suite) repsOf(g group) int {
	switch {
	case g.family == gatewayFamily && s.Plan.Gateway.Reps > 0:
		return min(s.Plan.Reps, s.Plan.Gateway.Reps)
	case g.family == multikernelFamily && s.Plan.Multikernel.Reps > 0:
		return min(s.Plan.Reps, s.Plan.Multikernel.Reps)
	case g.family == pathsFamily && s.Plan.Paths.Reps > 0:
		return min(s.Plan.Reps, s.Plan.Paths.Reps)
	case g.ipv6 && s.Plan.Reps6 > 0:
		return s.Plan.Reps6
	}
	return s.Plan.Reps
}

func (g group) stackList() []string {
	if g.stacks != nil {
		return g.stacks
	}
	return server.Stacks
}

// Run runs the plan and writes the results.
func (s *Suite) Run(ctx context.Context) error {
	if err := netns.Available(); err != nil {
		return err
	}
	if removed, err := netns.RemoveStale(nsPrefix); err != nil {
		fmt.Fprintf(s.Log, "bench: removing stale namespaces: %v\n", err)
	} else if len(removed) > 0 {
		fmt.Fprintf(s.Log, "bench: removed %d namespaces left by an interrupted run\n", len(removed))
	}
	if removed, err := removeStaleEtc(netnsEtc); err != nil {
		fmt.Fprintf(s.Log, "bench: removing stale %s directories: %v\n", netnsEtc, err)
	} else if len(removed) > 0 {
		fmt.Fprintf(s.Log, "bench: removed %d %s directories left by an interrupted run\n", len(removed), netnsEtc)
	}
	if err := os.MkdirAll(s.OutDir, 0o755); err != nil {
		return err
	}
	s.res = Results{Machine: describeMachine(), Plan: s.Plan, Started: time.Now()}
	s.quietBudget = s.Plan.QuietWait
	if s.GoNetVersion != "" {
		s.res.Machine.GoNet = s.GoNetVersion
	}
	groups := append(append(s.groups(), s.gatewayGroups()...), s.pathsGroups()...)
	groups = append(groups, s.multikernelGroups()...)
	if len(s.Only) > 0 {
		groups = s.selected(groups)
	}
	stacksRun, gateways, multikernel, daemon, paths := false, false, false, false, false
	for _, g := range groups {
		s.total += len(g.points) * len(g.stackList()) * s.repsOf(g)
		stacksRun = stacksRun || g.family == ""
		gateways = gateways || g.family == gatewayFamily
		multikernel = multikernel || g.family == multikernelFamily
		daemon = daemon || g.workload == daemonWorkload
		paths = paths || g.family == pathsFamily
		for _, p := range g.points {
			if w := p.workloadOf(g); !slices.Contains(s.res.Workloads, w) {
				s.res.Workloads = append(s.res.Workloads, w)
			}
		}
	}
	if stacksRun && len(s.Only) > 0 && !s.Replace {
		if err := s.wouldReplace(); err != nil {
			return err
		}
	}
	if daemon {
		if err := s.buildGoNet(ctx); err != nil {
			return err
		}
	}
	var gwStarted time.Time
	if gateways {
		if err := s.prepareGateways(ctx); err != nil {
			return err
		}
		gwStarted = time.Now()
	}
	if multikernel {
		if err := s.prepareMultikernel(ctx); err != nil {
			return err
		}
	}
	var families []string
	if stacksRun {
		families = append(families, fmt.Sprintf("stacks %s (%d repetitions)", strings.Join(server.Stacks, ", "), s.Plan.Reps))
	}
	if gateways {
		families = append(families, fmt.Sprintf("gateways %s (%d repetitions)", strings.Join(s.gateways(), ", "), s.repsOf(group{family: gatewayFamily})))
	}
	if multikernel {
		families = append(families, fmt.Sprintf("multikernel set-ups %s (%d repetitions)", strings.Join(MultikernelSetups, ", "), s.repsOf(group{family: multikernelFamily})))
	}
	if paths {
		reps := s.repsOf(group{family: pathsFamily})
		families = append(families, fmt.Sprintf("real-world paths %d (%d repetitions)", len(s.Plan.Paths.Paths), reps))
		s.res.Paths = &PathsRun{Started: time.Now(), Reps: reps, GoNet: s.res.Machine.GoNet}
	}
	fmt.Fprintf(s.Log, "bench: %s run: %d measurements; %s\n", s.Plan.Name, s.total, strings.Join(families, "; "))

	reps := 0
	for _, g := range groups {
		reps = max(reps, s.repsOf(g))
	}
	for rep := 1; rep <= reps; rep++ {
		for _, g := range groups {
			if rep > s.repsOf(g) {
				continue
			}
			// Interleaved stack by stack, starting with a different
			// stack each repetition so that none is always first.
			stacks := g.stackList()
			for i := range stacks {
				stack := stacks[(i+rep-1)%len(stacks)]
				if err := ctx.Err(); err != nil {
					return err
				}
				began := time.Now()
				s.runGroup(ctx, rep, g, stack)
				if g.family == pathsFamily {
					s.pathsWall += time.Since(began)
				}
			}
		}
	}
	if gateways {
		s.res.Gateway.WallS = time.Since(gwStarted).Seconds()
	}
	if multikernel {
		s.res.Multikernel.WallS = time.Since(s.res.Multikernel.Started).Seconds()
	}
	if paths {
		s.res.Paths.WallS = s.pathsWall.Seconds()
	}
	// Profiles and the stack's own benchmarks belong to the stack
	// comparison; a gateway-only run has none of it.
	if s.Plan.ProfileDur > 0 && stacksRun {
		s.res.Profiles = s.profiles(ctx)
	}
	if s.Plan.MicroBenchTime > 0 && s.Root != "" && stacksRun {
		fmt.Fprintf(s.Log, "bench: the stack's own Go benchmarks (go test -bench -benchmem in %s)\n", s.Root)
		var err error
		if s.res.Micro, err = microBenchmarks(ctx, s.Root, s.Plan.MicroBenchTime); err != nil {
			s.res.MicroError = err.Error()
			fmt.Fprintf(s.Log, "bench: %v\n", err)
		}
	}
	s.res.WallS = time.Since(s.res.Started).Seconds()
	if !stacksRun {
		if err := s.mergeEarlier(); err != nil {
			return err
		}
	}
	return s.write()
}

// wouldReplace refuses a run of some of the stack comparison's workloads
// whose results would replace an earlier results.json in OutDir holding
// workloads it does not run: the stack comparison is one run, written
// whole, and a record of many minutes is lost to a few.
func (s *Suite) wouldReplace() error {
	path := filepath.Join(s.OutDir, "results.json")
	old, ok, err := readResults(path)
	if !ok || err != nil {
		return err
	}
	var lost []string
	for _, r := range old.Records {
		if !slices.Contains(s.res.Workloads, r.Workload) && !slices.Contains(lost, r.Workload) {
			lost = append(lost, r.Workload)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("-only %s would replace %s, whose run has %s too, with its own workloads alone "+
		"(a run of the stack comparison's workloads is written whole; only the gateway, multikernel and paths families merge): "+
		"give another -out, or -replace", strings.Join(s.Only, ","), path, strings.Join(lost, ", "))
}

// readResults reads an earlier run's results.json at path; ok is false
// when there is none.
func readResults(path string) (res Results, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Results{}, false, nil
	}
	if err != nil {
		return Results{}, false, err
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return Results{}, false, fmt.Errorf("earlier results %s: %w", path, err)
	}
	return res, true, nil
}

// selected keeps the groups -only names, by workload or family, and the
// groups with a point whose workload it names (gw-crr), cut to those
// points.
func (s *Suite) selected(groups []group) []group {
	var kept []group
	for _, g := range groups {
		if slices.Contains(s.Only, g.workload) || (g.family != "" && slices.Contains(s.Only, g.family)) {
			kept = append(kept, g)
			continue
		}
		var ps []point
		for _, p := range g.points {
			if p.workload != "" && slices.Contains(s.Only, p.workload) {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			g.points = ps
			kept = append(kept, g)
		}
	}
	return kept
}

func (s *Suite) runGroup(ctx context.Context, rep int, g group, stack string) {
	if g.isolated && len(g.points) > 1 {
		for _, p := range g.points {
			if ctx.Err() != nil {
				return
			}
			s.runGroup(ctx, rep, group{workload: g.workload, points: []point{p}, family: g.family, ipv6: g.ipv6, stacks: g.stacks, setup: g.setup}, stack)
		}
		return
	}
	s.waitQuiet(ctx)
	setup := g.setup
	if setup == nil {
		setup = func(ctx context.Context, stack string) (*Env, error) { return Setup(ctx, s.Bin, stack) }
		if g.ipv6 {
			setup = func(ctx context.Context, stack string) (*Env, error) { return Setup6(ctx, s.Bin, stack) }
		}
	}
	e, err := setup(ctx, stack)
	if err != nil {
		for _, p := range g.points {
			s.record(Record{Workload: p.workloadOf(g), Point: p.name, Stack: stack, Rep: rep, Error: err.Error()}, p.label)
		}
		return
	}
	defer e.Close()
	e.rep = rep
	for _, p := range g.points {
		m, raw, err := p.run(ctx, e)
		r := Record{Workload: p.workloadOf(g), Point: p.name, Stack: stack, Rep: rep, Metrics: m}
		for k, v := range m {
			if c, ok := strings.CutPrefix(k, "c:"); ok {
				if r.Counters == nil {
					r.Counters = map[string]float64{}
				}
				r.Counters[c] = v
				delete(m, k)
			}
		}
		if len(raw) > 0 && json.Valid(raw) {
			r.Client = json.RawMessage(strings.TrimSpace(string(raw)))
		}
		if err != nil {
			r.Error = err.Error()
		}
		s.record(r, p.label)
	}
	if err := e.Close(); err != nil {
		fmt.Fprintf(s.Log, "bench: tear down %s: %v\n", stack, err)
	}
}

// headline is the metric progress shows for each workload.
var headline = map[string]struct {
	metric, unit string
}{
	"ping":       {"mean_us", "µs mean"},
	"short":      {"mbit_s", "Mbit/s"},
	"bulk":       {"gbit_s", "Gbit/s"},
	"bulk-cubic": {"gbit_s", "Gbit/s"},
	"rr":         {"mean_us", "µs mean"},
	"udp":        {"recv_mbit_s", "Mbit/s received"},
	"scale":      {"establish_s", "s to establish"},
	"ping6":      {"mean_us", "µs mean"},
	"bulk6":      {"gbit_s", "Gbit/s"},
	"rr6":        {"mean_us", "µs mean"},

	pacedPingWorkload: {"mean_us", "µs mean"},
	udpRRWorkload:     {"mean_us", "µs mean"},
	overloadWorkload:  {"p99_us", "µs p99"},
	daemonBulk:        {"gbit_s", "Gbit/s"},
	daemonRR:          {"mean_us", "µs mean"},

	gwBulk: {"gbit_s", "Gbit/s"},
	gwRR:   {"mean_us", "µs mean"},
	gwCRR:  {"conns_s", "connections/s"},
	gwUDP:  {"loss_pct", "% lost"},
	gwIdle: {"rss_per_flow", "B of RSS per flow"},

	mkTCP:     {"gbit_s", "Gbit/s"},
	mkRR:      {"mean_us", "µs mean"},
	mkUDP:     {"loss_pct", "% lost"},
	mkRing:    {"loss_pct", "% lost"},
	pathCal:   {"wire_mbit_s", "Mbit/s on the wire"},
	pathShort: {"seconds", "s (median)"},
	pathLong:  {"goodput_mbit_s", "Mbit/s goodput"},
	pathShare: {"jain", "Jain's index"},
}

func (s *Suite) record(r Record, label string) {
	s.res.Records = append(s.res.Records, r)
	s.done++
	elapsed := time.Since(s.res.Started)
	eta := ""
	if s.done > 0 && s.done < s.total {
		working := elapsed - time.Duration(s.res.QuietWaitS*float64(time.Second))
		left := time.Duration(float64(working) / float64(s.done) * float64(s.total-s.done))
		eta = fmt.Sprintf(", ~%s left", left.Round(time.Second))
	}
	what := "FAILED: " + firstLine(r.Error)
	if r.Error == "" {
		h := headline[r.Workload]
		what = fmt.Sprintf("%.4g %s", r.Metrics[h.metric], h.unit)
	}
	fmt.Fprintf(s.Log, "[%3d/%d %3.0f%% %s%s] rep %d/%d  %-6s  %-5s %-30s %s\n",
		s.done, s.total, 100*float64(s.done)/float64(s.total), elapsed.Round(time.Second), eta,
		r.Rep, s.Plan.Reps, r.Stack, r.Workload, label, what)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	return l
}

func (s *Suite) write() error {
	b, err := json.MarshalIndent(s.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.OutDir, "results.json"), b, 0o644); err != nil {
		return err
	}
	if s.Plan.Name == "full" && len(s.Only) == 0 {
		if err := keepRecord(s.OutDir, s.res.Machine, b); err != nil {
			return err
		}
	}
	return Report(s.res, s.OutDir, s.mdPath())
}

func (s *Suite) mdPath() string {
	if s.MDPath != "" {
		return s.MDPath
	}
	return filepath.Join(s.OutDir, "BENCHMARKS.md")
}

// familyWorkload reports whether w belongs to a family of its own (the
// gateways, the multikernel set-ups, the paths) rather than to the stack
// comparison.
func familyWorkload(w string) bool {
	return slices.Contains(gatewayWorkloads, w) || slices.Contains(multikernelWorkloads, w) || slices.Contains(pathWorkloads, w)
}

// PeerFailures are the gateway family's failed measurements of other
// gateways than GoNet's that were set up and measured otherwise: a peer's
// bug (pasta's half-close, say) is its figure, reported as failed with its
// reason, not a failure of the suite.
func PeerFailures(res Results) []Record {
	working := map[string]bool{}
	for _, r := range res.Records {
		if r.Error == "" && len(r.Metrics) > 0 && slices.Contains(gatewayWorkloads, r.Workload) {
			working[r.Stack] = true
		}
	}
	var out []Record
	for _, r := range res.Records {
		if r.Error != "" && r.Stack != "gonet" && working[r.Stack] && slices.Contains(gatewayWorkloads, r.Workload) {
			out = append(out, r)
		}
	}
	return out
}

// Check reports the (workload, point, stack) combinations of res without a
// successful measurement, and missing workloads and profiles: bench-quick's
// test. checked is how many things it checked.
func Check(res Results) (missing []string, checked int) {
	type key struct{ w, p, s string }
	ok := map[key]bool{}
	seen := map[key]bool{}
	var order []key
	for _, r := range res.Records {
		k := key{r.Workload, r.Point, r.Stack}
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
		if r.Error == "" && len(r.Metrics) > 0 {
			ok[k] = true
		}
	}
	want := res.Workloads
	if len(want) == 0 {
		want = []string{"ping", "short", "bulk", "rr", "udp", "scale"}
	}
	checked = len(order) + len(want) + len(res.Profiles)
	excused := map[key]bool{}
	for _, r := range PeerFailures(res) {
		excused[key{r.Workload, r.Point, r.Stack}] = true
	}
	for _, k := range order {
		if !ok[k] && !excused[k] {
			var why string
			for _, r := range res.Records {
				if r.Workload == k.w && r.Point == k.p && r.Stack == k.s && r.Error != "" {
					why = ": " + firstLine(r.Error)
				}
			}
			missing = append(missing, fmt.Sprintf("%s %s on %s%s", k.w, k.p, k.s, why))
		}
	}
	for _, w := range want {
		found := false
		for _, k := range order {
			found = found || k.w == w
		}
		if !found {
			missing = append(missing, w+": not run")
		}
	}
	if res.Plan.ProfileDur > 0 && len(res.Profiles) == 0 && slices.ContainsFunc(want, func(w string) bool { return !familyWorkload(w) }) {
		missing = append(missing, "profiles: none")
	}
	for _, p := range res.Profiles {
		if p.Error != "" {
			missing = append(missing, fmt.Sprintf("profile %s %s: %s", p.Stack, p.Workload, firstLine(p.Error)))
		}
	}
	return missing, checked
}
