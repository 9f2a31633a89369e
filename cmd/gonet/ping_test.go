package main

import (
	"strings"
	"testing"
	"time"
)

func TestPingSummaryReadsLikeTheKernels(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		sent int
		rtts []time.Duration
		want string
	}{
		{"every reply back", 4, []time.Duration{ms, 2 * ms, 3 * ms, 4 * ms},
			"4 packets transmitted, 4 received, 0% packet loss, time 3000ms\n" +
				"rtt min/avg/max/mdev = 1.000/2.500/4.000/1.118 ms\n"},
		{"a third lost", 3, []time.Duration{500 * time.Microsecond, 500 * time.Microsecond},
			"3 packets transmitted, 2 received, 33.33% packet loss, time 3000ms\n" +
				"rtt min/avg/max/mdev = 0.500/0.500/0.500/0.000 ms\n"},
		{"nothing back: no rtt line", 2, nil,
			"2 packets transmitted, 0 received, 100% packet loss, time 3000ms\n"},
		{"nothing sent", 0, nil,
			"0 packets transmitted, 0 received, 0% packet loss, time 3000ms\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := pingStats{sent: tt.sent, rtts: tt.rtts}
			var b strings.Builder
			st.writeSummary(&b, 3*time.Second)
			if b.String() != tt.want {
				t.Errorf("summary\n%q\nwant\n%q", b.String(), tt.want)
			}
		})
	}
}

func TestFormatMSKeepsThreeSignificantDigits(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{45 * time.Microsecond, "0.045"},
		{1234 * time.Microsecond, "1.23"},
		{12345 * time.Microsecond, "12.3"},
		{123456 * time.Microsecond, "123"},
		{0, "0.000"},
	}
	for _, tt := range tests {
		if got := formatMS(tt.d); got != tt.want {
			t.Errorf("formatMS(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
