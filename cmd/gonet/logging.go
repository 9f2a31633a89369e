package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
)

// The daemons (gonet up, gateway, run) log with log/slog: one event a
// line, as text (key=value, what a terminal and journald read) or JSON
// (what a log pipeline parses), at the level -log-level sets. What the
// daemons print for users and scripts to parse is not logged but printed
// on stdout as before: the ready line and the counters at exit. Usage
// errors, found before there is a logger, stay one plain line on stderr.

// logConfig is -log-level and -log-format.
type logConfig struct {
	level  slog.Level
	format logFormat
}

// logFormat is -log-format's value.
type logFormat string

const (
	logText logFormat = "text"
	logJSON logFormat = "json"
)

// register adds -log-level, with level as its default, and -log-format to
// fs.
func (c *logConfig) register(fs *flag.FlagSet, level slog.Level) {
	c.level, c.format = level, logText
	usage := "log events at `LEVEL` and above: debug, info, warn or error"
	if level == slog.LevelInfo {
		// flag leaves out a default that is the type's zero value, as
		// info is slog.Level's.
		usage += " (default info)"
	}
	fs.Var((*levelFlag)(&c.level), "log-level", usage)
	fs.Var((*formatFlag)(&c.format), "log-format", "write the log on stderr as `FORMAT`: text (key=value) or json, one event a line")
}

// logger returns the logger the flags ask for, writing to w.
func (c *logConfig) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.level}
	if c.format == logJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// levelFlag is a slog.Level by the four names slog gives them; slog's own
// parser also takes offsets ("info+2"), which the daemon has no use for.
type levelFlag slog.Level

var logLevels = []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}

func (f *levelFlag) String() string { return strings.ToLower(slog.Level(*f).String()) }

func (f *levelFlag) Set(s string) error {
	for _, l := range logLevels {
		if strings.EqualFold(s, l.String()) {
			*f = levelFlag(l)
			return nil
		}
	}
	return errors.New("not a log level: debug, info, warn or error")
}

// formatFlag is -log-format: text or json.
type formatFlag logFormat

func (f *formatFlag) String() string { return string(*f) }

func (f *formatFlag) Set(s string) error {
	switch v := logFormat(strings.ToLower(s)); v {
	case logText, logJSON:
		*f = formatFlag(v)
		return nil
	}
	return errors.New("not a log format: text or json")
}

// logErrors logs each error joined in err as an event of its own.
func logErrors(log *slog.Logger, msg string, err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		log.Error(msg, "err", e)
	}
}
