//go:build race

package integration

// raceEnabled: the race detector doubles goroutine stacks.
const raceEnabled = true
