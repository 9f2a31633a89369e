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

	// Delay holds every frame this long before delivery: the path's
	// propagation delay, after the bottleneck's queue and rate.
	Delay time.Duration

	// Rate makes each direction a bottleneck (bottleneck.go): frames are
	// serialised one after another at Rate bits per second; zero means no
	// limit.
	Rate int64

	// Queue is the bytes each direction's drop-tail queue holds ahead of
	// the Rate: a frame that would overflow it is dropped (counted in
	// Direction.TailDropped). Zero with a Rate means DefaultQueue; a Queue
	// needs a Rate. Sizing it to the path (a bandwidth-delay product, or
	// two) is the caller's choice.
	Queue int

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

// Validate reports a probability outside [0, 1], a negative duration, rate
// or queue, or a queue without a rate.
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
	if c.Rate < 0 {
		return fmt.Errorf("fault: rate=%d is negative", c.Rate)
	}
	if c.Queue < 0 {
		return fmt.Errorf("fault: queue=%d is negative", c.Queue)
	}
	if c.Queue > 0 && c.Rate == 0 {
		return fmt.Errorf("fault: queue=%s without a rate: a queue fills only ahead of a bottleneck", formatSize(int64(c.Queue), 1024))
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
	if c.Rate != 0 {
		parts = append(parts, "rate="+formatSize(c.Rate, 1000))
	}
	if c.Queue != 0 {
		parts = append(parts, "queue="+formatSize(int64(c.Queue), 1024))
	}
	parts = append(parts, "seed="+strconv.FormatUint(c.Seed, 10))
	return strings.Join(parts, ",")
}

// ParseSpec reads the command-line form of a Config: comma-separated
// key=value pairs, keys loss, dup, reorder, corrupt and ce (probabilities),
// delay and hold (time.Durations such as "1ms", for Delay and ReorderHold),
// rate (bits per second, with an optional suffix K, M or G for powers of
// 1000), queue (bytes, with an optional suffix K, M or G for powers of 1024)
// and seed (an unsigned integer), as in
// "loss=0.05,dup=0.01,reorder=0.02,corrupt=0.001,delay=1ms,seed=7" or
// "rate=100M,delay=20ms,queue=500K,loss=0.01".
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
		case "rate":
			c.Rate, err = parseSize(key, value, 1000, maxRate)
		case "queue":
			var q int64
			q, err = parseSize(key, value, 1024, maxQueue)
			c.Queue = int(q)
		case "seed":
			c.Seed, err = strconv.ParseUint(value, 10, 64)
			if err != nil {
				err = fmt.Errorf("fault: seed=%s: want an unsigned integer", value)
			}
		default:
			return Config{}, fmt.Errorf("fault: unknown key %q in %q (want loss, dup, reorder, corrupt, ce, delay, hold, rate, queue or seed)", key, field)
		}
		if err != nil {
			return Config{}, err
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
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

// The largest rate and queue ParseSpec takes: a terabit per second, and a
// gibibyte, far beyond any path the endpoint can emulate, and small enough
// that the bottleneck's arithmetic cannot overflow.
const (
	maxRate  = 1_000_000_000_000
	maxQueue = 1 << 30
)

// parseSize reads a non-negative integer with an optional suffix K, M or G
// multiplying it by unit, unit², unit³, up to max.
func parseSize(key, value string, unit, max int64) (int64, error) {
	digits, mult := value, int64(1)
	if n := len(value); n > 0 {
		switch value[n-1] {
		case 'K', 'k':
			digits, mult = value[:n-1], unit
		case 'M':
			digits, mult = value[:n-1], unit*unit
		case 'G':
			digits, mult = value[:n-1], unit*unit*unit
		}
	}
	n, err := strconv.ParseUint(digits, 10, 63)
	if err != nil {
		return 0, fmt.Errorf("fault: %s=%s: want an unsigned integer with an optional suffix K, M or G", key, value)
	}
	if n > uint64(max/mult) {
		return 0, fmt.Errorf("fault: %s=%s is more than %s", key, value, formatSize(max, unit))
	}
	return int64(n) * mult, nil
}

// formatSize writes n in parseSize's form with the largest suffix that
// divides it exactly.
func formatSize(n, unit int64) string {
	for _, s := range []struct {
		suffix string
		mult   int64
	}{{"G", unit * unit * unit}, {"M", unit * unit}, {"K", unit}} {
		if n != 0 && n%s.mult == 0 {
			return strconv.FormatInt(n/s.mult, 10) + s.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
