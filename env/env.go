// Package env is what every layer of a stack shares: the clock, the random
// source, the buffer pool, the memory budget and the logger. Protocols take an *Env from
// the stack instead of reaching for globals, so tests can run several stacks
// side by side on a virtual clock with seeded randomness.
package env

import (
	crand "crypto/rand"
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"sync"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
)

// Env is a stack's shared environment.
type Env struct {
	Clock  clock.Clock
	Rand   *Rand
	Pool   *buffer.Pool
	Budget *budget.Budget
	// Log takes the layers' events: the stack sets it, to logs.Discard
	// when it was given none, and a layer treats nil as that. Paths run
	// per packet log only through a logs.Repeated, or after checking the
	// level.
	Log *slog.Logger
}

// Rand is a random source safe for concurrent use.
type Rand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewRand wraps src; with src nil it seeds a ChaCha8 generator from
// crypto/rand.
func NewRand(src rand.Source) *Rand {
	if src == nil {
		var seed [32]byte
		if _, err := crand.Read(seed[:]); err != nil {
			// crypto/rand does not fail on Linux; fall back to the runtime's seed.
			binary.LittleEndian.PutUint64(seed[:], rand.Uint64())
		}
		src = rand.NewChaCha8(seed)
	}
	return &Rand{r: rand.New(src)}
}

// Uint64 returns a random 64-bit value.
func (r *Rand) Uint64() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Uint64()
}

// Uint32 returns a random 32-bit value.
func (r *Rand) Uint32() uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Uint32()
}

// IntN returns a random int in [0, n).
func (r *Rand) IntN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.IntN(n)
}

// Float64 returns a random float in [0, 1).
func (r *Rand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64()
}
