package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/iperf3"
)

func TestParseUnitsReadsIperf3Suffixes(t *testing.T) {
	tests := []struct {
		s    string
		base float64
		want uint64
	}{
		{"1460", 1024, 1460},
		{"128K", 1024, 128 << 10},
		{"1m", 1024, 1 << 20},
		{"50M", 1000, 50e6},
		{"1.5G", 1000, 1.5e9},
		{"0", 1000, 0},
	}
	for _, tt := range tests {
		got, err := parseUnits(tt.s, tt.base)
		if err != nil || got != tt.want {
			t.Errorf("parseUnits(%q, %g) = %d, %v; want %d", tt.s, tt.base, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "M", "-1", "1X", "NaN"} {
		if got, err := parseUnits(bad, 1000); err == nil {
			t.Errorf("parseUnits(%q) = %d, want an error", bad, got)
		}
	}
}

func TestParseIperf3(t *testing.T) {
	link := []string{"-tap", "tap0", "-addr", "10.0.0.2/24"}
	tests := []struct {
		name string
		args []string
		want iperf3.Config // Addr and the flags set
	}{
		{"defaults", []string{"-c", "10.0.0.1"},
			iperf3.Config{Addr: "10.0.0.1:5201", Parallel: 1, Duration: 10 * time.Second}},
		{"every flag", []string{"-c", "10.0.0.1", "-p", "5202", "-u", "-R", "-P", "4", "-b", "50M", "-l", "1K", "-t", "2"},
			iperf3.Config{Addr: "10.0.0.1:5202", UDP: true, Reverse: true, Parallel: 4, Rate: 50e6, Len: 1024, Duration: 2 * time.Second}},
		{"IPv6", []string{"-c", "fd00::1"},
			iperf3.Config{Addr: "[fd00::1]:5201", Parallel: 1, Duration: 10 * time.Second}},
		{"a name, resolved over GoNet", []string{"-dns", "10.0.0.1", "-c", "server.lan"},
			iperf3.Config{Addr: "server.lan:5201", Parallel: 1, Duration: 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseIperf3(append(append([]string{}, link...), tt.args...))
			if err != nil {
				t.Fatal(err)
			}
			if c.test != tt.want {
				t.Errorf("config %+v, want %+v", c.test, tt.want)
			}
		})
	}
}

func TestParseIperf3Refuses(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		mention string
	}{
		{"no server", []string{"-tap", "t", "-addr", "10.0.0.2/24"}, "missing -c"},
		{"a name without a DNS server", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-c", "server.lan"}, "give -dns"},
		{"neither an address nor a name", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-c", "server lan"}, "nor a host name"},
		{"no IPv4 address", []string{"-tap", "t", "-c", "10.0.0.1"}, "-addr is required"},
		{"too many streams", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-c", "10.0.0.1", "-P", "129"}, "-P 129"},
		{"UDP block under the header", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-c", "10.0.0.1", "-u", "-l", "8"}, "-l 8"},
		{"zero seconds", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-c", "10.0.0.1", "-t", "0"}, "whole number"},
		{"bad rate", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-c", "10.0.0.1", "-b", "fast"}, "not a count"},
		{"a positional", []string{"-tap", "t", "-addr", "10.0.0.2/24", "-c", "10.0.0.1", "10.0.0.3"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseIperf3(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %v, want one mentioning %q", err, tt.mention)
			}
		})
	}
}
