package suite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The sessions that run the suite land on machines of two kinds, Intel
// Xeon and AMD EPYC, both 2 cores, and a target counts as met only when it
// holds on both. Each full run therefore also keeps its results as its
// kind's run of record, OUT/machines/KIND.json, and the report sets the
// targets of the other kinds' records beside this run's: a later run on
// one kind replaces only that kind's record.

// machinesDir is where the runs of record live, under the output directory.
const machinesDir = "machines"

// Kind is the kind of machine m is, as the runs of record are filed:
// "intel", "amd", or the CPU's first word in lower case.
func (m Machine) Kind() string {
	cpu := strings.ToLower(m.CPU)
	switch {
	case strings.Contains(cpu, "intel"):
		return "intel"
	case strings.Contains(cpu, "amd"):
		return "amd"
	}
	if f := strings.Fields(cpu); len(f) > 0 {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, f[0])
	}
	return "unknown"
}

// keepRecord writes results b, a full run's, as its machine kind's run of
// record.
func keepRecord(outDir string, m Machine, b []byte) error {
	dir := filepath.Join(outDir, machinesDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, m.Kind()+".json"), b, 0o644)
}

// otherRecords reads the runs of record of every machine kind but this
// run's, sorted by kind. A record that does not parse is an error: it is
// committed, so it should.
func otherRecords(outDir string, this Machine) ([]Results, error) {
	files, err := filepath.Glob(filepath.Join(outDir, machinesDir, "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []Results
	for _, f := range files {
		if strings.TrimSuffix(filepath.Base(f), ".json") == this.Kind() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var res Results
		if err := json.Unmarshal(b, &res); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// everyMachine sets this run's targets, ts, beside those of the other
// kinds' runs of record: a target is met only where every machine that
// measured it met it.
func (r *report) everyMachine(ts []target, others []Results) {
	if len(others) == 0 {
		return
	}
	r.p("### On every kind of machine\n\n")
	r.p("A target is met only when it holds on both kinds of machine the sessions run on. This run is on %s; beside it, the last full run on each other kind (`%s/KIND.json`, kept by each full run of `make bench`):\n\n",
		r.res.Machine.CPU, machinesDir)
	byWhat := make([]map[string]target, len(others))
	r.p("| workload | target | %s, %s |", r.res.Machine.CPU, r.res.Started.UTC().Format("2006-01-02"))
	for i, o := range others {
		byWhat[i] = map[string]target{}
		for _, t := range newReport(o).targets() {
			byWhat[i][t.what] = t
		}
		r.p(" %s, %s (GoNet %s) |", o.Machine.CPU, o.Started.UTC().Format("2006-01-02"), o.Machine.GoNet)
	}
	r.p(" every machine |\n|---|---|---|%s---|\n", strings.Repeat("---|", len(others)))
	for _, t := range ts {
		all := verdictOf(t.met)
		r.p("| %s | %s | %s %s |", t.what, t.goal, t.gonet, t.met)
		for i := range others {
			o, ok := byWhat[i][t.what]
			if !ok {
				r.p(" not measured |")
				all = combine(all, "n/a")
				continue
			}
			r.p(" %s %s |", o.gonet, o.met)
			all = combine(all, verdictOf(o.met))
		}
		r.p(" %s |\n", mark(all == "met", all != "n/a"))
	}
	r.p("\n")
}

// verdictOf reduces a mark to met, not met or n/a.
func verdictOf(m string) string {
	switch {
	case strings.HasSuffix(m, "not met"):
		return "not met"
	case strings.HasSuffix(m, "met"):
		return "met"
	}
	return "n/a"
}

// combine is the verdict of two machines together: not met if either
// missed, n/a if either could not judge, else met.
func combine(a, b string) string {
	switch {
	case a == "not met" || b == "not met":
		return "not met"
	case a == "n/a" || b == "n/a":
		return "n/a"
	}
	return "met"
}

// whyElsewhere explains, from each other kind's run of record and its own
// figures, the targets it missed where this run met them or did not
// measure them: those the section before this names as missed on every
// machine have their reasons there, from this run.
func (r *report) whyElsewhere(ts []target, others []Results) {
	missedHere := map[string]bool{}
	for _, t := range ts {
		missedHere[t.what] = strings.HasPrefix(t.met, "❌")
	}
	heading := false
	for _, o := range others {
		ro := newReport(o)
		var only []target
		for _, t := range ro.targets() {
			if strings.HasPrefix(t.met, "❌") && !missedHere[t.what] {
				only = append(only, t)
			}
		}
		if !ro.whyBullets(only) {
			continue
		}
		if !heading {
			r.p("### Why the other machines miss what this one meets\n\n")
			heading = true
		}
		names := make([]string, len(only))
		for i, t := range only {
			names[i] = t.what
		}
		r.p("On %s (%s, GoNet %s): %s.\n\n%s\n", o.Machine.CPU, o.Started.UTC().Format("2006-01-02"), o.Machine.GoNet,
			strings.Join(names, "; "), ro.why.String())
	}
}
