package services

import (
	"testing"

	"go.uber.org/goleak"
)

// A service that returns must leave nothing running behind it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
