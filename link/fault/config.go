package fault

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// Config says which faults to inject. Each probability applies to every
// frame, independently, in each direction.
type Config struct {
	Loss    float64 // probability a frame is dropped
	Dup     float64 // probability a frame is delivered twice
	Reorder float64 // probability a frame is held back until after the next (hold.go)
	Corrupt float64 // probability one bit past the Ethernet header flips
	CE      float64 // probability an ECN-capable IPv4 packet is marked CE (ce.go)

	// Delay holds every frame this long before delivery.
	Delay time.Duration

	// ReorderHold bounds the wait of a frame held back to be reordered
	// when no next frame comes to pass it; zero means DefaultReorderHold
	// (hold.go).
	ReorderHold time.Duration

	// Seed seeds the generators: the same seed makes the same decisions
	// for the same sequence of frames, so a failing run can be replayed.
	Seed uint64

	// Clock times Delay and ReorderHold; nil means the wall clock. Tests pass a
	// clock.Virtual to release delayed frames without sleeping.
	Clock clock.Clock
}

// Validate reports a probability outside [0, 1] or a negative duration.
func (c Config) Validate() error {
	for _, p := range []struct {
		key string
		v   float64
	}{{"loss", c.Loss}, {"dup", c.Dup}, {"reorder", c.Reorder}, {"corrupt", c.Corrupt}, {"ce", c.CE}} {
		if !(p.v >= 0 && p.v <= 1) { // also catches NaN
			return fmt.Errorf("fault: %s=%v is not a probability in [0, 1]", p.key, p.v)
		}
	}
	if c.Delay < 0 {
		return fmt.Errorf("fault: delay=%v is negative", c.Delay)
	}
	if c.ReorderHold < 0 {
		return fmt.Errorf("fault: hold=%v is negative", c.ReorderHold)
	}
	return nil
}

// String returns c in the form ParseSpec reads, listing only what differs
// from zero except the seed, which is always given so that a run logged
// with it can be replayed.
func (c Config) String() string {
	var parts []string
	for _, p := range []struct {
		key string
		v   float64
	}{{"loss", c.Loss}, {"dup", c.Dup}, {"reorder", c.Reorder}, {"corrupt", c.Corrupt}, {"ce", c.CE}} {
		if p.v != 0 {
			parts = append(parts, p.key+"="+strconv.FormatFloat(p.v, 'g', -1, 64))
		}
	}
	if c.Delay != 0 {
		parts = append(parts, "delay="+c.Delay.String())
	}
	if c.ReorderHold != 0 {
		parts = append(parts, "hold="+c.ReorderHold.String())
	}
	parts = append(parts, "seed="+strconv.FormatUint(c.Seed, 10))
	return strings.Join(parts, ",")
}

// ParseSpec reads the command-line form of a Config: comma-separated
// key=value pairs, keys loss, dup, reorder, corrupt and ce (probabilities),
// delay and hold (time.Durations such as "1ms", for Delay and ReorderHold)
// and seed (an unsigned integer), as in
// "loss=0.05,dup=0.01,reorder=0.02,corrupt=0.001,delay=1ms,seed=7".
// Keys left out are zero; the empty string is no faults at all.
func ParseSpec(s string) (Config, error) {
	var c Config
	if strings.TrimSpace(s) == "" {
		return c, nil
	}
	seen := map[string]bool{}
	for _, field := range strings.Split(s, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(field), "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || key == "" {
			return Config{}, fmt.Errorf("fault: %q is not key=value", field)
		}
		if seen[key] {
			return Config{}, fmt.Errorf("fault: %s given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "loss":
			c.Loss, err = parseProbability(key, value)
		case "dup":
			c.Dup, err = parseProbability(key, value)
		case "reorder":
			c.Reorder, err = parseProbability(key, value)
		case "corrupt":
			c.Corrupt, err = parseProbability(key, value)
		case "ce":
			c.CE, err = parseProbability(key, value)
		case "delay":
			c.Delay, err = time.ParseDuration(value)
			if err == nil && c.Delay < 0 {
				err = fmt.Errorf("fault: delay=%s is negative", value)
			} else if err != nil {
				err = fmt.Errorf("fault: delay=%s: want a duration such as 1ms", value)
			}
		case "hold":
			c.ReorderHold, err = time.ParseDuration(value)
			if err == nil && c.ReorderHold < 0 {
				err = fmt.Errorf("fault: hold=%s is negative", value)
			} else if err != nil {
				err = fmt.Errorf("fault: hold=%s: want a duration such as 1ms", value)
			}
		case "seed":
			c.Seed, err = strconv.ParseUint(value, 10, 64)
			if err != nil {
				err = fmt.Errorf("fault: seed=%s: want an unsigned integer", value)
			}
		default:
			return Config{}, fmt.Errorf("fault: unknown key %q in %q (want loss, dup, reorder, corrupt, ce, delay, hold or seed)", key, field)
		}
		if err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

func parseProbability(key, value string) (float64, error) {
	p, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsNaN(p) {
		return 0, fmt.Errorf("fault: %s=%s: want a number", key, value)
	}
	if p < 0 || p > 1 {
		return 0, fmt.Errorf("fault: %s=%s is not a probability in [0, 1]", key, value)
	}
	return p, nil
}
