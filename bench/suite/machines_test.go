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
