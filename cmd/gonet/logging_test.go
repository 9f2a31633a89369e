package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// logLines decodes a -log-format json log, failing on any line that is not
// one JSON object.
func logLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// startStop is what a gateway logs at info as it starts and stops: the
// stack's events and the daemon's.
var startStop = []string{"collector set", "NIC up", "address added", "address added", "relaying pings", "forwarding DNS", "NIC down"}

// startStop6 is startStop with IPv6: the gateway's IPv6 addresses, its
// link-local one among them, each once past DAD, and its router
// advertising once they all are.
var startStop6 = []string{"collector set", "NIC up", "address added", "address added", "relaying pings", "forwarding DNS",
	"address added", "address added", "address added", "advertising IPv6", "NIC down"}

// The daemon's start-up events, logged by a gateway on a VM's socket (no
// privilege needed), parsed as a log pipeline would: each line a JSON
// object with its level, message and the fields that identify the event;
// -log-level drops what is below it.
func TestGatewayLogsJSONEventsAtTheFlagsLevel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string // messages logged, in order
	}{
		{"info logs the NIC, its addresses, how pings and DNS are relayed", []string{"-log-format", "json", "-no-ipv6"}, startStop},
		{"with IPv6, info logs its addresses and advertising too", []string{"-log-format", "json"}, startStop6},
		{"debug logs what info does", []string{"-log-format", "json", "-log-level", "debug", "-no-ipv6"}, startStop},
		{"warn suppresses info", []string{"-log-format", "json", "-log-level", "warn"}, nil},
		{"error suppresses info", []string{"-log-format", "JSON", "-log-level", "ERROR"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vm.sock")
			c, err := parseGateway(append([]string{"-socket", path, "-mtu", "1500", "-control", noControl,
				"-dns-upstream", "127.0.0.1:1"}, tc.flags...))
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			d, err := startGateway(context.Background(), c.log.logger(&b), c, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := d.stop(); err != nil {
				t.Fatal(err)
			}
			lines := logLines(t, b.String())
			var got []string
			for _, m := range lines {
				got = append(got, m["msg"].(string))
				if m["msg"] == "collector set" {
					// The process's event, not a NIC's.
					if m["gogc"] == nil || m["gomemlimit"] == nil {
						t.Errorf("event %v: want gogc and gomemlimit", m)
					}
					continue
				}
				if m["level"] != "INFO" || m["nic"] != socketNIC || m["time"] == nil {
					t.Errorf("event %v: want level INFO, nic %s and a time", m, socketNIC)
				}
				if m["msg"] == "relaying pings" && m["through"] == nil {
					t.Errorf("event %v: want how pings are relayed in through", m)
				}
				if up, _ := m["upstreams"].([]any); m["msg"] == "forwarding DNS" && (len(up) != 1 || up[0] != "127.0.0.1:1") {
					t.Errorf("event %v: want upstreams [127.0.0.1:1]", m)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("logged %q, want %q:\n%s", got, tc.want, b.String())
			}
		})
	}
}

func TestLogFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		parse     func([]string) (logConfig, error)
		args      []string
		wantLevel slog.Level
		wantJSON  bool
		wantErr   string
	}{
		{"gateway defaults to info as text", parseGatewayLog, nil, slog.LevelInfo, false, ""},
		{"run defaults to warn: its stderr is the command's too", parseRunLog, nil, slog.LevelWarn, false, ""},
		{"up defaults to info", parseUpLog, nil, slog.LevelInfo, false, ""},
		{"run takes a lower level", parseRunLog, []string{"-log-level", "info"}, slog.LevelInfo, false, ""},
		{"levels by name in any case", parseUpLog, []string{"-log-level", "Debug", "-log-format", "json"}, slog.LevelDebug, true, ""},
		{"an unknown level is refused", parseGatewayLog, []string{"-log-level", "verbose"}, 0, false, "debug, info, warn or error"},
		{"an offset level is refused", parseGatewayLog, []string{"-log-level", "info+2"}, 0, false, "debug, info, warn or error"},
		{"an unknown format is refused", parseUpLog, []string{"-log-format", "logfmt"}, 0, false, "text or json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.level != tc.wantLevel || (c.format == logJSON) != tc.wantJSON {
				t.Errorf("level %v, format %s; want %v, json %v", c.level, c.format, tc.wantLevel, tc.wantJSON)
			}
		})
	}
}

func parseGatewayLog(args []string) (logConfig, error) {
	fs, c := gatewayFlags("gateway")
	err := fs.Parse(args)
	return c.log, err
}

func parseRunLog(args []string) (logConfig, error) {
	fs, c := gatewayFlags("run")
	err := fs.Parse(args)
	return c.log, err
}

func parseUpLog(args []string) (logConfig, error) {
	fs, c := upFlags()
	err := fs.Parse(args)
	return c.log, err
}

// The default format is text: key=value on one line, which a terminal and
// journald show as it is.
func TestLogTextIsOneKeyValueLinePerEvent(t *testing.T) {
	var c logConfig
	fs := newFlagSet("test")
	c.register(fs, slog.LevelInfo)
	var b bytes.Buffer
	c.logger(&b).Info("a NIC is down", "nic", "tap0", "err", "read: input/output error\nsecond line")
	line := b.String()
	if strings.Count(line, "\n") != 1 || !strings.Contains(line, `level=INFO msg="a NIC is down" nic=tap0 err="read: input/output error\nsecond line"`) {
		t.Errorf("logged %q; want one key=value line", line)
	}
}
