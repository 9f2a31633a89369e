package stack

import (
	"os"
	"runtime/debug"
)

// The collector for a process whose work is a GoNet stack (issue 14).
//
// Go's collector stops the world twice a cycle, and on a machine whose
// CPUs are all busy (a daemon beside the guests it serves) each stop waits
// for the OS to run every thread that must stop: pauses of milliseconds,
// whatever the stack does, and the kernel's own Go servers see the same.
// The stack allocates almost nothing in steady state (pooled buffers, a
// fraction of an allocation per megabyte moved, BENCHMARKS.md section 7),
// so a cycle paced by heap growth (GOGC) collects little and comes
// mostly from connection setup: 10,000 connections cost five cycles under
// Go's default. The daemon therefore turns heap-growth pacing off and
// bounds the heap instead: the collector runs only as the process nears
// its memory limit, which is the stack's own budget (the memory it may
// hold for others) plus GCHeadroom for everything else. What that buys:
// no collection during a bulk transfer or while 10,000 connections are
// opened and held, so no pause there. What it costs: garbage is kept
// until the limit nears, so a daemon whose connections come and go grows
// towards the limit before it collects (a connection opened and closed
// leaves a few KiB: 6.9 KiB for both ends of one, measured with two
// stacks in one process), and shows that much resident memory; -memory
// lowers both.

// GCHeadroom is what TuneGC allows above the stack's memory budget: the
// runtime, goroutine stacks and whatever the stack does not charge.
const GCHeadroom = 64 << 20

// GCSettings are the collector's settings TuneGC chose, for the daemon to
// report. Percent -1 is GOGC=off; Limit is GOMEMLIMIT in bytes.
type GCSettings struct {
	Percent int
	Limit   int64
	// FromEnv says which of the two the environment set (GOGC,
	// GOMEMLIMIT): those TuneGC leaves as the runtime read them.
	PercentFromEnv, LimitFromEnv bool
}

// TuneGC sets the Go collector of this process for a stack whose memory
// budget is memoryLimit (0: DefaultMemoryLimit), as the comment above
// explains: GOGC off and GOMEMLIMIT at the budget plus GCHeadroom. A GOGC
// or GOMEMLIMIT in the environment wins over TuneGC's choice. It is for a
// process that is mostly the stack (the gonet daemon); a program that
// embeds GoNet among other work keeps its own settings and does not call
// it.
func TuneGC(memoryLimit int64) GCSettings {
	if memoryLimit <= 0 {
		memoryLimit = DefaultMemoryLimit
	}
	s := GCSettings{Percent: -1, Limit: memoryLimit + GCHeadroom}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		s.LimitFromEnv = true
		s.Limit = debug.SetMemoryLimit(-1) // reads without changing
	} else {
		debug.SetMemoryLimit(s.Limit)
	}
	if _, ok := os.LookupEnv("GOGC"); ok {
		s.PercentFromEnv = true
		s.Percent = debug.SetGCPercent(-1)
		debug.SetGCPercent(s.Percent) // SetGCPercent reads only by writing
	} else {
		debug.SetGCPercent(s.Percent)
	}
	return s
}
