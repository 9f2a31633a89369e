package main

import (
	"testing"

	"go.uber.org/goleak"
)

// Every command, the demo included, must stop every goroutine it started
// before it returns: gonet's run is also what tests and embedders call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
