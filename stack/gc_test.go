package stack

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestTuneGC pins the daemon's collector policy and that the environment
// wins over it.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	tests := []struct {
		name         string
		gogc, memlim string // "" leaves the variable unset
		budget       int64
		wantPercent  int
		wantLimit    int64
		fromEnvPct   bool
		fromEnvLimit bool
	}{
		{name: "default budget", budget: 0, wantPercent: -1, wantLimit: DefaultMemoryLimit + GCHeadroom},
		{name: "smaller budget", budget: 16 << 20, wantPercent: -1, wantLimit: 16<<20 + GCHeadroom},
		{name: "GOGC from the environment", gogc: "200", budget: 16 << 20, wantPercent: 200, wantLimit: 16<<20 + GCHeadroom, fromEnvPct: true},
		{name: "GOMEMLIMIT from the environment", memlim: "1GiB", budget: 16 << 20, wantPercent: -1, wantLimit: 1 << 30, fromEnvLimit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The runtime reads the environment at start; a test stands
			// in for that by setting what the variable would have set.
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(1<<63 - 1)
			for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
				t.Setenv(v, "") // restored after the test
				os.Unsetenv(v)
			}
			if tt.gogc != "" {
				t.Setenv("GOGC", tt.gogc)
				debug.SetGCPercent(200)
			}
			if tt.memlim != "" {
				t.Setenv("GOMEMLIMIT", tt.memlim)
				debug.SetMemoryLimit(1 << 30)
			}
			got := TuneGC(tt.budget)
			want := GCSettings{Percent: tt.wantPercent, Limit: tt.wantLimit, PercentFromEnv: tt.fromEnvPct, LimitFromEnv: tt.fromEnvLimit}
			if got != want {
				t.Errorf("TuneGC(%d) = %+v, want %+v", tt.budget, got, want)
			}
			if p := debug.SetGCPercent(100); p != tt.wantPercent {
				t.Errorf("GC percent in force = %d, want %d", p, tt.wantPercent)
			}
			if l := debug.SetMemoryLimit(-1); l != tt.wantLimit {
				t.Errorf("memory limit in force = %d, want %d", l, tt.wantLimit)
			}
		})
	}
}
