// Package logtest gives tests a logger whose events they read back, each
// parsed from the JSON line slog wrote for it, as a log pipeline reading
// gonet -log-format json would.
package logtest

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Log is what a logger from New has written: safe to read while the
// stack's goroutines write to it.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// New returns a logger writing JSON at level and above, and its log.
func New(level slog.Level) (*slog.Logger, *Log) {
	l := &Log{}
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: level})), l
}

// Write takes one event's line from the handler.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Event is one logged event, as encoding/json decodes its line: numbers are
// float64, groups (the flow) nested maps.
type Event map[string]any

// Str returns the string at the dotted key ("flow.src"), or "".
func (e Event) Str(key string) string {
	v, _ := e.get(key).(string)
	return v
}

// Num returns the number at the dotted key, or -1 when there is none.
func (e Event) Num(key string) float64 {
	v, ok := e.get(key).(float64)
	if !ok {
		return -1
	}
	return v
}

func (e Event) get(key string) any {
	var v any = map[string]any(e)
	for _, k := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// Events parses every line logged so far, failing tb on one that is not a
// JSON object.
func (l *Log) Events(tb testing.TB) []Event {
	tb.Helper()
	l.mu.Lock()
	text := l.buf.String()
	l.mu.Unlock()
	var out []Event
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			tb.Fatalf("log line %q is not a JSON object: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// Messages returns the events whose msg is msg.
func (l *Log) Messages(tb testing.TB, msg string) []Event {
	tb.Helper()
	var out []Event
	for _, e := range l.Events(tb) {
		if e["msg"] == msg {
			out = append(out, e)
		}
	}
	return out
}

// Wait waits, on the wall clock, until n events with msg have been logged,
// and returns them; it fails tb after five seconds. An event logged by a
// stack's goroutine after the counter a test waits for has moved is waited
// for here.
func (l *Log) Wait(tb testing.TB, msg string, n int) []Event {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := l.Messages(tb, msg)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d events %q logged, want %d:\n%s", len(got), msg, n, l)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// String returns the log as written, for failure messages, or a
// process's output when a Log is its Stdout, read while it runs.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
