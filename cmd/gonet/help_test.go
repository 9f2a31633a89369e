package main

import (
	"strings"
	"testing"
)

func TestHelpListsEveryCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		onStderr bool // the list goes to stderr
	}{
		{"help", []string{"help"}, exitOK, false},
		{"-h", []string{"-h"}, exitOK, false},
		{"--help", []string{"--help"}, exitOK, false},
		{"no arguments is a usage error", nil, exitUsage, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			list := stdout
			if tt.onStderr {
				list = stderr
			}
			for _, c := range commands() {
				if !strings.Contains(list, "  "+c.name+" ") {
					t.Errorf("the list does not show %q:\n%s", c.name, list)
				}
			}
		})
	}
}

func TestHelpCommandShowsItsFlags(t *testing.T) {
	tests := []struct {
		cmd   string
		flags []string
	}{
		{"up", []string{"-tap", "-addr", "-gw", "-mac", "-mtu", "-serve", "-http-root", "-control", "-pcap", "-impair", "-memory", "/.gonet/"}},
		{"ss", []string{"-tap", "-control", "ss -tan"}},
		{"stats", []string{"-a", "-tap", "-control"}},
		{"ping", []string{"-tap", "-addr", "-gw", "-c", "-s", "-i", "-W", "DEST"}},
		{"demo", []string{"-mem"}},
		{"version", []string{"gonet version"}},
		{"help", []string{"gonet help [COMMAND]"}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			for _, args := range [][]string{{"help", tt.cmd}, {tt.cmd, "-h"}} {
				code, stdout, stderr := runArgs(t, args...)
				if code != exitOK || stderr != "" {
					t.Errorf("gonet %s: exit code %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, stderr)
				}
				for _, f := range tt.flags {
					if !strings.Contains(stdout, f) {
						t.Errorf("gonet %s does not show %s:\n%s", strings.Join(args, " "), f, stdout)
					}
				}
			}
		})
	}
}

func TestUnknownCommandsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"start"},
		{"help", "start"},
		{"help", "up", "ping"},
		{"version", "extra"},
		{"version", "-v"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(t, args...)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit code %d, stdout %q, stderr %q; want 2, nothing, one line", code, stdout, stderr)
			}
		})
	}
}

func TestVersionPrintsOneLine(t *testing.T) {
	code, stdout, _ := runArgs(t, "version")
	if code != exitOK || !strings.HasPrefix(stdout, "gonet ") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("gonet version: exit code %d, %q; want 0 and one line starting \"gonet \"", code, stdout)
	}
}
