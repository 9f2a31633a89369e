package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// ProfileSummary is where a stack's server spent its CPU during a workload,
// from a CPU profile of the server process.
type ProfileSummary struct {
	Stack      string      `json:"stack"`
	Workload   string      `json:"workload"` // bulk (up then down, 1 stream), bulk6 (the same over IPv6) or rr (1 connection)
	File       string      `json:"file"`
	SampledS   float64     `json:"sampled_s"` // CPU seconds in the profile
	Top        []FuncShare `json:"top"`       // by flat time
	Categories []FuncShare `json:"categories"`
	Error      string      `json:"error,omitempty"`
}

// FuncShare is a function's (or category's) share of the profile.
type FuncShare struct {
	Name    string  `json:"name"`
	FlatPct float64 `json:"flat_pct"`
	CumPct  float64 `json:"cum_pct,omitempty"`
}

// profiles runs the profiled workloads: GoNet, and gVisor for comparison,
// each in a set-up of its own after the measured runs (profiling costs a
// few percent, which the measured numbers must not pay).
func (s *Suite) profiles(ctx context.Context) []ProfileSummary {
	dir := filepath.Join(s.OutDir, "profiles")
	os.MkdirAll(dir, 0o755)
	d := s.Plan.ProfileDur
	var out []ProfileSummary
	for _, stack := range []string{"gonet", "gvisor"} {
		wls := []string{"bulk", "rr"}
		if stack == "gonet" {
			// bulk over IPv6 beside bulk over IPv4: where the CPU goes
			// when IPv6 costs GoNet more than the 5% issue 12 allows.
			wls = append(wls, "bulk6")
		}
		for _, wl := range wls {
			ps := ProfileSummary{Stack: stack, Workload: wl, File: filepath.Join(dir, stack+"-"+wl+".pprof")}
			fmt.Fprintf(s.Log, "bench: profiling %s %s\n", stack, wl)
			err := func() error {
				s.waitQuiet(ctx)
				setup := Setup
				if wl == "bulk6" {
					setup = Setup6
				}
				e, err := setup(ctx, s.Bin, stack)
				if err != nil {
					return err
				}
				defer e.Close()
				if err := e.Command("profile-start " + ps.File); err != nil {
					return err
				}
				switch wl {
				case "bulk", "bulk6":
					if _, _, err := runBulk(ctx, e, "up", 1, d); err != nil {
						return err
					}
					if _, _, err := runBulk(ctx, e, "down", 1, d); err != nil {
						return err
					}
				case "rr":
					if _, _, err := runRR(ctx, e, 1, d); err != nil {
						return err
					}
				}
				if err := e.Command("profile-stop"); err != nil {
					return err
				}
				return summarizeProfile(&ps)
			}()
			if err != nil {
				ps.Error = err.Error()
				fmt.Fprintf(s.Log, "bench: profile %s %s: %v\n", stack, wl, err)
			}
			out = append(out, ps)
		}
	}
	return out
}

// categories sort a sample by the function it was in (its leaf), first
// match wins: what kind of work the CPU did.
var categories = []struct {
	name  string
	match func(fn string) bool
}{
	{"scheduler: sleeping and waking threads and goroutines", func(fn string) bool {
		return hasAnyPrefix(fn, "runtime.futex", "runtime.netpoll", "runtime.epoll", "runtime.usleep", "runtime.osyield",
			"runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.ready", "runtime.goready", "runtime.runqget",
			"runtime.runqput", "runtime.runqgrab", "runtime.runqsteal", "runtime.stealWork", "runtime.wakep", "runtime.notewakeup",
			"runtime.notesleep", "runtime.mcall", "runtime.gopark", "runtime.casgstatus", "runtime.execute", "runtime.gogo",
			"runtime.startm", "runtime.stopm", "runtime.handoffp", "runtime.resetspinning", "runtime.checkTimers",
			"runtime.nanotime", "runtime.(*timer)", "runtime.(*timers)", "runtime.gosched", "runtime.goschedImpl",
			"runtime.entersyscall", "runtime.exitsyscall", "runtime.reentersyscall", "runtime.lock2", "runtime.unlock2")
	}},
	{"channels and select", func(fn string) bool {
		return hasAnyPrefix(fn, "runtime.chansend", "runtime.chanrecv", "runtime.selectgo", "runtime.send", "runtime.recv",
			"runtime.closechan", "runtime.sellock", "runtime.selunlock", "runtime.(*waitq)")
	}},
	{"garbage collection", func(fn string) bool {
		return hasAnyPrefix(fn, "runtime.gc", "runtime.scanobject", "runtime.greyobject", "runtime.findObject", "runtime.scanblock",
			"runtime.markBits", "runtime.(*gcWork)", "runtime.(*mspan).sweep", "runtime.sweepone", "runtime.bgsweep", "runtime.wbBuf",
			"runtime.bulkBarrier", "runtime.scanstack", "runtime.(*gcBits)", "runtime.typePointers", "runtime.(*mspan).typePointers",
			"runtime.spanOf", "runtime.pageIndexOf", "runtime.(*gcControllerState)", "runtime.markroot", "runtime.(*mheap).reclaim")
	}},
	{"allocation", func(fn string) bool {
		return hasAnyPrefix(fn, "runtime.mallocgc", "runtime.(*mcache)", "runtime.(*mcentral)", "runtime.(*mheap)",
			"runtime.nextFreeFast", "runtime.memclrNoHeapPointers", "runtime.newobject", "runtime.makeslice", "runtime.growslice",
			"runtime.heapSetType", "runtime.(*mspan).nextFreeIndex", "sync.(*Pool)")
	}},
	{"copying (memmove)", func(fn string) bool { return fn == "runtime.memmove" }},
	{"checksums", func(fn string) bool { return strings.Contains(strings.ToLower(fn), "checksum") }},
	{"the stack's own code", func(fn string) bool {
		return hasAnyPrefix(fn, "github.com/gonetstack/gonet/", "gvisor.dev/gvisor/")
	}},
}

func isSyscall(fn string) bool {
	return hasAnyPrefix(fn, "syscall.", "internal/runtime/syscall", "golang.org/x/sys/unix.", "runtime/internal/syscall")
}

// syscallKind tells a system call that reads from one that writes, by the
// nearest caller that says which.
func syscallKind(s *profile.Sample) string {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function == nil {
				continue
			}
			fn := strings.ToLower(l.Function.Name[strings.LastIndex(l.Function.Name, ".")+1:])
			switch {
			case strings.Contains(fn, "read") || strings.Contains(fn, "recv"):
				return "system calls: reading (TAP device, sockets)"
			case strings.Contains(fn, "write") || strings.Contains(fn, "send"):
				return "system calls: writing (TAP device, sockets)"
			case strings.Contains(fn, "epoll"):
				return "scheduler: sleeping and waking threads and goroutines"
			}
		}
	}
	return "system calls: other"
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func summarizeProfile(ps *ProfileSummary) error {
	f, err := os.Open(ps.File)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return err
	}
	vi := len(p.SampleType) - 1 // cpu nanoseconds
	flat := map[string]int64{}
	cum := map[string]int64{}
	cat := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		seen := map[string]bool{}
		leaf := ""
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function == nil {
					continue
				}
				if leaf == "" {
					leaf = l.Function.Name
				}
				if !seen[l.Function.Name] {
					seen[l.Function.Name] = true
					cum[l.Function.Name] += v
				}
			}
		}
		flat[leaf] += v
		c := "other (runtime and libraries)"
		if isSyscall(leaf) {
			c = syscallKind(s)
		}
		for _, k := range categories {
			if c != "other (runtime and libraries)" {
				break
			}
			if k.match(leaf) {
				c = k.name
				break
			}
		}
		cat[c] += v
	}
	if total == 0 {
		return fmt.Errorf("empty profile")
	}
	ps.SampledS = float64(total) / 1e9
	pct := func(v int64) float64 { return 100 * float64(v) / float64(total) }
	names := make([]string, 0, len(flat))
	for n := range flat {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return flat[names[i]] > flat[names[j]] })
	for _, n := range names[:min(15, len(names))] {
		ps.Top = append(ps.Top, FuncShare{Name: n, FlatPct: pct(flat[n]), CumPct: pct(cum[n])})
	}
	cnames := make([]string, 0, len(cat))
	for n := range cat {
		cnames = append(cnames, n)
	}
	sort.Slice(cnames, func(i, j int) bool { return cat[cnames[i]] > cat[cnames[j]] })
	for _, n := range cnames {
		ps.Categories = append(ps.Categories, FuncShare{Name: n, FlatPct: pct(cat[n])})
	}
	return nil
}
