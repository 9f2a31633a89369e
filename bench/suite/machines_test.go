package suite

import (
	"strings"
	"testing"
	"time"
)

func TestMachineKindFilesRunsByVendor(t *testing.T) {
	for _, tc := range []struct{ cpu, want string }{
		{"Intel(R) Xeon(R) Processor", "intel"},
		{"AMD EPYC", "amd"},
		{"AMD EPYC 7B13 64-Core Processor", "amd"},
		{"Neoverse-N1", "neoverse-n1"},
		{"", "unknown"},
	} {
		if got := (Machine{CPU: tc.cpu}).Kind(); got != tc.want {
			t.Errorf("Kind(%q) = %q, want %q", tc.cpu, got, tc.want)
		}
	}
}

// memRun is a run whose only figure is GoNet's memory per held
// connection, which the memory target (at most 16 KiB) judges.
func memRun(cpu string, bytesPerConn float64) Results {
	return Results{
		Machine: Machine{CPU: cpu},
		Started: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC),
		Records: []Record{{Workload: "scale", Point: "n=10000", Stack: "gonet", Metrics: map[string]float64{"mem_per_conn": bytesPerConn}}},
	}
}

func TestEveryMachineMeetsATargetOnlyWhereAllMeetIt(t *testing.T) {
	for _, tc := range []struct {
		name        string
		this, other float64
		want        string
	}{
		{"met on both", 12 << 10, 13 << 10, "| ✅ met |"},
		{"missed on the other", 12 << 10, 20 << 10, "| ❌ not met |"},
		{"missed here", 20 << 10, 12 << 10, "| ❌ not met |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReport(memRun("Intel(R) Xeon(R) Processor", tc.this))
			r.everyMachine(r.targets(), []Results{memRun("AMD EPYC", tc.other)})
			var row string
			for _, l := range strings.Split(r.b.String(), "\n") {
				if strings.HasPrefix(l, "| Memory per idle connection") {
					row = l
				}
			}
			if !strings.HasSuffix(row, tc.want) {
				t.Errorf("memory row = %q, want it to end %q", row, tc.want)
			}
		})
	}
}

// rrRun is a run of one machine with 1-byte request-response on one
// connection: GoNet's mean, gVisor's 100 µs and the kernel's 40 µs.
func rrRun(cpu string, gonetUS float64) Results {
	return Results{
		Machine: Machine{CPU: cpu, GoNet: "abc1234"},
		Started: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC),
		Records: []Record{
			rec("rr", "n=1", "gonet", map[string]float64{"mean_us": gonetUS}),
			rec("rr", "n=1", "gvisor", map[string]float64{"mean_us": 100}),
			rec("rr", "n=1", "kernel", map[string]float64{"mean_us": 40}),
		},
	}
}

// A target the other kind of machine missed and this one met is
// explained from the other run's own figures; one missed on both is left
// to this run's explanation, and one met on both needs none.
func TestWhyElsewhereExplainsWhatOnlyTheOtherMachineMissed(t *testing.T) {
	const heading = "### Why the other machines miss what this one meets"
	for _, tc := range []struct {
		name        string
		this, other float64
		want        []string // empty: no section
	}{
		{"missed on the other only", 50, 60, []string{heading, "On AMD EPYC (2026-11-27, GoNet abc1234): 1-byte request-response, 1 conn(s), mean.",
			"- **1-byte request-response** (1 conn(s) 60.0 µs, 1.50× the kernel's and 0.60× gVisor's)"}},
		{"missed on both", 60, 60, nil},
		{"met on both", 50, 50, nil},
		{"missed here only", 60, 50, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReport(rrRun("Intel(R) Xeon(R) Processor", tc.this))
			r.whyElsewhere(r.targets(), []Results{rrRun("AMD EPYC", tc.other)})
			md := r.b.String()
			if len(tc.want) == 0 && md != "" {
				t.Errorf("wrote %q, want nothing", md)
			}
			for _, w := range tc.want {
				if !strings.Contains(md, w) {
					t.Errorf("lacks %q:\n%s", w, md)
				}
			}
		})
	}
}

// A missed target the report has no reading for is named as such, not
// left out of the why section.
func TestWhyNamesAMissedTargetItCannotExplain(t *testing.T) {
	r := newReport(memRun("AMD EPYC", 20<<10))
	r.whyNotMet(r.targets())
	want := "- **Not explained yet**: Memory per idle connection (10000 held)."
	if !strings.Contains(r.b.String(), want) {
		t.Errorf("lacks %q:\n%s", want, r.b.String())
	}
}

// The report names the copy Go's runtime makes of 2 KiB or more, as its
// cpuflags_amd64.go picks it: REP MOVSQ only on Intel with ERMS and FSRM.
func TestMemmovePathFollowsGosRuntime(t *testing.T) {
	for _, c := range []struct {
		vendor string
		flags  string
		want   string
	}{
		{"GenuineIntel", "fpu avx erms fsrm", "REP MOVSQ to a 16-byte-aligned destination, AVX to any other"},
		{"GenuineIntel", "fpu avx erms", "AVX"},
		{"AuthenticAMD", "fpu avx erms fsrm", "AVX"},
		{"AuthenticAMD", "fpu sse2", "REP MOVS"},
	} {
		if got := memmovePath(c.vendor, strings.Fields(c.flags)); got != c.want {
			t.Errorf("%s with %q: %q, want %q", c.vendor, c.flags, got, c.want)
		}
	}
}
