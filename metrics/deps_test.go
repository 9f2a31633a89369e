package metrics_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The stack's packages depend on the standard library and golang.org/x/sys
// alone, so that embedding GoNet brings in nothing else; Prometheus' modules
// are this package's, for the daemon and the status page.
func TestTheStackDependsOnNoModuleButXSys(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if .Module}}{{.Module.Path}}{{end}}",
		"github.com/gonetstack/gonet/stack").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, mod := range strings.Fields(string(out)) {
		if mod != "github.com/gonetstack/gonet" && mod != "golang.org/x/sys" {
			t.Errorf("package stack depends on module %s", mod)
		}
	}
}
