//go:build race

package gateway

// raceEnabled: the race detector's shadow memory and instrumentation
// inflate what a flow costs.
const raceEnabled = true
