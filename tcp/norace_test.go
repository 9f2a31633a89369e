//go:build !race

package tcp

// raceEnabled: the race detector's instrumentation allocates.
const raceEnabled = false
