package main

import (
	"bufio"
	"context"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stack"
)

// inProcess is a gonet command run in the test's process, as its users run
// it: its stdout a line at a time as it writes them, its stderr, and its
// exit code once it ends. The tests of the daemons (up, bridge) drive them
// so, with the peers as stacks in the test.
type inProcess struct {
	what   string // "gonet up", for messages
	cancel context.CancelFunc
	lines  chan string
	stderr lockedBuffer
	exited chan int
}

// lockedBuffer is stderr, written by the command while the test may read
// it to explain a failure.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startInProcess runs gonet with args until the test stops it (stop), or
// ends; the test's cleanup cancels it if it still runs.
func startInProcess(t *testing.T, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{what: "gonet " + args[0], cancel: cancel, lines: make(chan string, 200), exited: make(chan int, 1)}
	stdoutR, stdoutW := io.Pipe()
	go func() {
		code := run(ctx, args, stdoutW, &p.stderr)
		stdoutW.Close()
		p.exited <- code
	}()
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdoutR)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		io.Copy(io.Discard, stdoutR) // a line too long for the scanner must not block the command
	}()
	t.Cleanup(cancel)
	return p
}

// readyLine is the command's first line of output, which a daemon writes
// once it serves; the test fails when none comes within 10 s.
func (p *inProcess) readyLine(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if ok {
			return line
		}
		t.Fatalf("%s ended without a ready line; stderr %q", p.what, p.stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("no ready line from %s in 10s; stderr %q", p.what, p.stderr.String())
	}
	return ""
}

// stop interrupts the command as SIGTERM does, checks that it exits with
// exitOK within 10 s, and returns what it wrote after the ready line (a
// daemon's counters).
func (p *inProcess) stop(t *testing.T) string {
	t.Helper()
	p.cancel()
	select {
	case code := <-p.exited:
		if code != exitOK {
			t.Errorf("%s: exit code %d, stderr %q", p.what, code, p.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still running 10s after the signal", p.what)
	}
	var rest strings.Builder
	for line := range p.lines {
		rest.WriteString(line + "\n")
	}
	return rest.String()
}

// peerStack is a GoNet stack in the test on ep, with addrs (prefixes),
// as a VM or another gonet process would be on the daemon's link.
func peerStack(t *testing.T, ep link.Endpoint, cfg stack.Config, addrs ...string) *stack.Stack {
	t.Helper()
	s := stack.New(cfg)
	if err := s.AddNIC("eth0", ep); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	for _, a := range addrs {
		if err := s.AddAddress("eth0", netip.MustParsePrefix(a)); err != nil {
			s.Close()
			t.Fatal(err)
		}
	}
	return s
}

// echoed sends msg from s to the TCP echo service at to and checks that
// all of it comes back.
func echoed(t *testing.T, s *stack.Stack, to, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := s.DialContext(ctx, "tcp", to)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	go io.WriteString(conn, msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != msg {
		t.Errorf("echo of %d bytes from %s: %v", len(msg), to, err)
	}
}

// echo serves TCP echo on s's port 7 until the listener closes.
func echo(t *testing.T, s *stack.Stack) {
	ln, err := s.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
}
