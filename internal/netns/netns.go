// Package netns creates Linux network namespaces for GoNet's tests and its
// demo, so that traffic between GoNet and the kernel never leaves a sandbox
// the caller made.
//
// A namespace is created with `ip netns add` under a unique name and deleted
// by Close. Commands run inside it through `ip netns exec`; Go code runs
// inside it through Do, which is how a test opens a TAP device or a kernel
// socket that lives in the namespace: a file descriptor keeps the namespace
// it was created in after the thread that made it has left.
//
// Everything here needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), /dev/net/tun
// and the iproute2 `ip` command; Available says which of these is missing.
package netns

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Dir is where `ip netns` keeps the bind mounts that name namespaces.
const Dir = "/run/netns"

// DefaultPrefix names the namespaces New makes when given no prefix.
const DefaultPrefix = "gonet"

// commandTimeout bounds every `ip` command this package runs for itself.
const commandTimeout = 30 * time.Second

// NS is a named network namespace created by New. Its methods are safe for
// concurrent use.
type NS struct {
	// Name is the namespace's name in `ip netns list`.
	Name string

	mu     sync.Mutex
	closed bool
}

// counter makes names unique within this process; the process ID makes them
// unique among processes running at the same time, such as the test binaries
// of `go test ./...`.
var counter atomic.Uint64

// New creates a network namespace named "<prefix>-<pid>-<n>" and brings its
// loopback interface up. An empty prefix means DefaultPrefix. The caller must
// Close the namespace.
func New(prefix string) (*NS, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "/ \t\n\x00") || prefix == "." || prefix == ".." {
		return nil, fmt.Errorf("netns: invalid prefix %q", prefix)
	}
	// A namespace left by a killed process whose ID has been reused may
	// hold the name; move on to the next number rather than fail.
	for range 100 {
		ns := &NS{Name: fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), counter.Add(1))}
		if _, err := os.Stat(ns.Path()); err == nil {
			continue
		}
		if _, err := ns.ip(context.Background(), "netns", "add", ns.Name); err != nil {
			return nil, err
		}
		if _, err := ns.IP(context.Background(), "link", "set", "dev", "lo", "up"); err != nil {
			return nil, errors.Join(err, ns.Close())
		}
		return ns, nil
	}
	return nil, fmt.Errorf("netns: no free name with prefix %q in %s", prefix, Dir)
}

// Path is the file that names the namespace; opening it gives a descriptor
// for setns(2).
func (ns *NS) Path() string { return filepath.Join(Dir, ns.Name) }

// String returns the namespace's name.
func (ns *NS) String() string { return ns.Name }

// Close kills the processes still running in the namespace (those started by
// Command, for example) and deletes it, which deletes its devices and the
// veth peers of those devices. Sockets and TAP devices opened through Do keep
// the kernel's namespace alive, though unnamed, until they are closed. Close
// is idempotent.
func (ns *NS) Close() error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.closed {
		return nil
	}
	if _, err := os.Stat(ns.Path()); errors.Is(err, fs.ErrNotExist) {
		ns.closed = true
		return nil
	}
	killErr := ns.killAll()
	if _, err := ns.ip(context.Background(), "netns", "delete", ns.Name); err != nil {
		if _, statErr := os.Stat(ns.Path()); !errors.Is(statErr, fs.ErrNotExist) {
			return errors.Join(err, killErr)
		}
	}
	ns.closed = true
	return killErr
}

// killAll sends SIGKILL to every process whose network namespace is this
// one. It never signals this process: a thread of ours may be inside the
// namespace through Do while the process as a whole is not.
func (ns *NS) killAll() error {
	out, err := ns.ip(context.Background(), "netns", "pids", ns.Name)
	if err != nil {
		return err
	}
	var errs []error
	for f := range strings.FieldsSeq(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("netns %s: kill %d: %w", ns.Name, pid, err))
		}
	}
	return errors.Join(errs...)
}

// DeviceName returns an interface name unique among running processes:
// "gn", this process's ID in base 36 (five digits, enough for any Linux PID),
// then a counter in base 36. It fits IFNAMSIZ (15 characters) for the first
// 36^8 names.
func DeviceName() string {
	pid := strconv.FormatInt(int64(os.Getpid()), 36)
	if len(pid) < 5 {
		pid = strings.Repeat("0", 5-len(pid)) + pid
	}
	return "gn" + pid + strconv.FormatUint(counter.Add(1), 36)
}

// RemoveStale deletes the namespaces named "<prefix>-<pid>-<n>" whose process
// no longer runs: those left behind by a test binary that was killed before
// its cleanups ran. It returns the names it deleted.
func RemoveStale(prefix string) ([]string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	entries, err := os.ReadDir(Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `-([0-9]+)-[0-9]+$`)
	var removed []string
	var errs []error
	for _, e := range entries {
		m := re.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if _, err := os.Stat("/proc/" + m[1]); err == nil {
			continue // still running, or the ID was reused: leave it
		}
		ns := &NS{Name: e.Name()}
		if err := ns.Close(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, ns.Name)
	}
	return removed, errors.Join(errs...)
}
