package fault

import (
	"strings"
	"testing"
	"time"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec string
		want Config
	}{
		{"", Config{}},
		{"  ", Config{}},
		{"loss=0.05,dup=0.01,reorder=0.02,corrupt=0.001,delay=1ms,seed=7",
			Config{Loss: 0.05, Dup: 0.01, Reorder: 0.02, Corrupt: 0.001, Delay: time.Millisecond, Seed: 7}},
		{"loss=1", Config{Loss: 1}},
		{"loss=0,dup=1", Config{Dup: 1}},
		{" loss = 0.5 , seed = 18446744073709551615 ", Config{Loss: 0.5, Seed: 1<<64 - 1}},
		{"delay=1.5s", Config{Delay: 1500 * time.Millisecond}},
		{"corrupt=1e-3", Config{Corrupt: 0.001}},
		{"ce=0.01,seed=2", Config{CE: 0.01, Seed: 2}},
		{"reorder=0.1,hold=2ms", Config{Reorder: 0.1, ReorderHold: 2 * time.Millisecond}},
		{"rate=100M,delay=20ms,queue=500K,loss=0.01",
			Config{Rate: 100_000_000, Delay: 20 * time.Millisecond, Queue: 500 << 10, Loss: 0.01}},
		{"rate=1G", Config{Rate: 1_000_000_000}},
		{"rate=64k,queue=3000", Config{Rate: 64_000, Queue: 3000}},
		{"rate=1500,queue=2M", Config{Rate: 1500, Queue: 2 << 20}},
		{"rate=10M,queue=0", Config{Rate: 10_000_000}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseSpec(tt.spec)
			if err != nil {
				t.Fatalf("ParseSpec(%q): %v", tt.spec, err)
			}
			if got != tt.want {
				t.Errorf("ParseSpec(%q) = %+v, want %+v", tt.spec, got, tt.want)
			}
		})
	}
}

func TestParseSpecErrorsNameTheBadPart(t *testing.T) {
	tests := []struct {
		spec string
		want string
	}{
		{"loss=1.5", "loss=1.5 is not a probability in [0, 1]"},
		{"dup=-0.1", "dup=-0.1 is not a probability in [0, 1]"},
		{"reorder=abc", "reorder=abc: want a number"},
		{"corrupt=NaN", "corrupt=NaN: want a number"},
		{"corrupt=", "corrupt=: want a number"},
		{"delay=5", "delay=5: want a duration"},
		{"delay=-1ms", "delay=-1ms is negative"},
		{"hold=5", "hold=5: want a duration"},
		{"hold=-1ms", "hold=-1ms is negative"},
		{"seed=-1", "seed=-1: want an unsigned integer"},
		{"seed=0x10", "seed=0x10: want an unsigned integer"},
		{"jitter=1ms", `unknown key "jitter"`},
		{"loss", `"loss" is not key=value`},
		{"loss=0.1,,dup=0.1", `"" is not key=value`},
		{"=0.1", `"=0.1" is not key=value`},
		{"loss=0.1,loss=0.2", "loss given twice"},
		{"rate=fast", "rate=fast: want an unsigned integer"},
		{"rate=-1M", "rate=-1M: want an unsigned integer"},
		{"rate=1.5G", "rate=1.5G: want an unsigned integer"},
		{"rate=2000G", "rate=2000G is more than 1000G"},
		{"rate=100Mbit", "rate=100Mbit: want an unsigned integer"},
		{"rate=10M,queue=2G", "queue=2G is more than 1G"},
		{"queue=64K", "queue=64K without a rate"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			c, err := ParseSpec(tt.spec)
			if err == nil {
				t.Fatalf("ParseSpec(%q) = %+v, want an error", tt.spec, c)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "fault: ") {
				t.Errorf("ParseSpec(%q) error %q, want it to start with \"fault: \" and contain %q", tt.spec, err, tt.want)
			}
		})
	}
}

func TestConfigStringParsesBack(t *testing.T) {
	tests := []struct {
		c    Config
		want string
	}{
		{Config{}, "seed=0"},
		{Config{Loss: 0.05, Dup: 0.01, Reorder: 0.02, Corrupt: 0.001, Delay: time.Millisecond, Seed: 7},
			"loss=0.05,dup=0.01,reorder=0.02,corrupt=0.001,delay=1ms,seed=7"},
		{Config{Loss: 1, Delay: 1500 * time.Microsecond, Seed: 1<<64 - 1}, "loss=1,delay=1.5ms,seed=18446744073709551615"},
		{Config{Reorder: 0.5, Delay: time.Millisecond, ReorderHold: 250 * time.Microsecond, Seed: 3}, "reorder=0.5,delay=1ms,hold=250µs,seed=3"},
		{Config{Loss: 0.01, Delay: 20 * time.Millisecond, Rate: 100_000_000, Queue: 500 << 10, Seed: 1},
			"loss=0.01,delay=20ms,rate=100M,queue=500K,seed=1"},
		{Config{Rate: 1_500_000_001, Queue: 1500, Seed: 1}, "rate=1500000001,queue=1500,seed=1"},
		{Config{Rate: 2_000_000_000, Queue: 1 << 30, Seed: 1}, "rate=2G,queue=1G,seed=1"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.c.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			back, err := ParseSpec(tt.c.String())
			if err != nil || back != tt.c {
				t.Errorf("ParseSpec(String()) = %+v, %v; want %+v", back, err, tt.c)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		want string // "" for valid
	}{
		{"zero", Config{}, ""},
		{"all certain", Config{Loss: 1, Dup: 1, Reorder: 1, Corrupt: 1, Delay: time.Second}, ""},
		{"loss above one", Config{Loss: 1.01}, "loss=1.01"},
		{"negative reorder", Config{Reorder: -1}, "reorder=-1"},
		{"negative delay", Config{Delay: -time.Millisecond}, "delay=-1ms is negative"},
		{"negative hold", Config{ReorderHold: -time.Millisecond}, "hold=-1ms is negative"},
		{"a bottleneck", Config{Rate: 1e9, Queue: 25 << 20, Delay: 50 * time.Millisecond}, ""},
		{"negative rate", Config{Rate: -1}, "rate=-1 is negative"},
		{"negative queue", Config{Rate: 1e6, Queue: -1}, "queue=-1 is negative"},
		{"queue without a rate", Config{Queue: 1 << 20}, "queue=1M without a rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// FuzzParseSpec checks that whatever ParseSpec accepts is a valid Config
// that prints back to a spec parsing to the same Config.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"",
		"loss=0.05,dup=0.01,reorder=0.02,corrupt=0.001,delay=1ms,seed=7",
		"loss=1",
		"delay=1h2m3.5s,seed=18446744073709551615",
		"reorder=0.3,hold=2ms",
		"rate=100M,delay=20ms,queue=500K,loss=0.01",
		"rate=999999999999,queue=1073741823",
		"corrupt=1e-9",
		"loss=0.1,loss=0.2",
		"x=y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := ParseSpec(spec)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseSpec(%q) = %+v, which Validate rejects: %v", spec, c, err)
		}
		back, err := ParseSpec(c.String())
		if err != nil || back != c {
			t.Fatalf("ParseSpec(%q) = %+v; its String %q parses to %+v, %v", spec, c, c.String(), back, err)
		}
	})
}
