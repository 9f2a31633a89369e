package main

import (
	"strings"
	"testing"
)

// TestUpTakesAnIPv4LLFile: -ipv4ll-file goes with -addr ipv4ll, alone or
// beside dhcp, and is refused without it; gonet help up shows it.
func TestUpTakesAnIPv4LLFile(t *testing.T) {
	for _, args := range [][]string{
		{"-addr", "ipv4ll", "-ipv4ll-file", "/tmp/ll"},
		{"-no-ipv6", "-addr", "dhcp", "-addr", "ipv4ll", "-ipv4ll-file", "/tmp/ll"},
	} {
		c, err := parseUp(append([]string{"-tap", "tap0"}, args...))
		if err != nil {
			t.Fatalf("parseUp(%q): %v", args, err)
		}
		if !c.link.ipv4ll || c.link.ipv4llFile != "/tmp/ll" {
			t.Errorf("parseUp(%q): ipv4ll %v, file %q", args, c.link.ipv4ll, c.link.ipv4llFile)
		}
	}
	for _, args := range [][]string{
		{"-addr", "10.0.0.2/24", "-ipv4ll-file", "/tmp/ll"},
		{"-addr", "dhcp", "-ipv4ll-file", "/tmp/ll"},
	} {
		checkUsageError(t, append([]string{"up", "-tap", "tap0"}, args...), "-ipv4ll-file keeps a link-local address, and there is none without -addr ipv4ll")
	}
	if _, stdout, _ := runArgs(t, "help", "up"); !strings.Contains(stdout, "-ipv4ll-file") || !strings.Contains(stdout, "[-ipv4ll-file FILE]") {
		t.Errorf("gonet help up does not show -ipv4ll-file:\n%s", stdout)
	}
}
