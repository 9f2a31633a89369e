package shm

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
)

// childEnv names the socket a re-executed test binary dials as the peer
// of TestPeerKilledMidTransfer.
const childEnv = "GONET_SHM_TEST_CHILD"

// A peer process killed with SIGKILL in the middle of a TCP transfer
// takes the link down on the other side: the blocked reader wakes with
// ErrLinkDown, the stack's NIC stops reading, and nothing spins
// afterwards: this process uses well under a tenth of a CPU over the
// next second, with the TCP connection still open on a dead link.
func TestPeerKilledMidTransfer(t *testing.T) {
	if path := os.Getenv(childEnv); path != "" {
		runChild(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "ring.sock")
	ln, err := Listen(path, Options{Offload: true, MAC: macL})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	child := exec.Command(os.Args[0], "-test.run=^TestPeerKilledMidTransfer$")
	child.Env = append(os.Environ(), childEnv+"="+path)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			child.Process.Kill()
			child.Wait()
		}
	}()
	type accepted struct {
		e   *Endpoint
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		e, err := ln.Accept()
		acc <- accepted{e, err}
	}()
	var e *Endpoint
	select {
	case a := <-acc:
		if a.err != nil {
			t.Fatal(a.err)
		}
		e = a.e
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not dial in 30s")
	}
	s := stack.New(stack.Config{NoIPv6: true})
	defer stacktest.Closed(t, s)
	if err := s.AddNIC("eth0", e); err != nil {
		e.Close()
		t.Fatal(err)
	}
	if err := s.AddAddress("eth0", stacktest.AddrB); err != nil {
		t.Fatal(err)
	}
	tl, err := s.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), 9))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	tl.SetDeadline(time.Now().Add(30 * time.Second))
	c, err := tl.Accept()
	if err != nil {
		t.Fatalf("the child's connection: %v", err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := io.CopyN(io.Discard, c, 8<<20); err != nil {
		t.Fatalf("read %d bytes from the child: %v", n, err)
	}

	child.Process.Kill()
	child.Wait()
	killed = true
	for deadline := time.Now().Add(5 * time.Second); e.Down() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("link still up 5s after the peer was killed: %v", counters(e))
		}
	}
	if !errors.Is(e.Down(), ErrLinkDown) || e.Stats().PeerGone.Load() != 1 {
		t.Errorf("link down with %v, counters %v", e.Down(), counters(e))
	}
	t.Logf("link down: %v", e.Down())

	before := cpuTime(t)
	time.Sleep(time.Second)
	if used := cpuTime(t) - before; used > 100*time.Millisecond {
		t.Errorf("%v of CPU in the second after the peer died: something spins", used)
	} else {
		t.Logf("%v of CPU in the second after the peer died", used)
	}
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runChild is the peer process: a stack on a ring link dialled to path,
// sending to the parent's stack over TCP until it is killed.
func runChild(t *testing.T, path string) {
	e, err := Dial(path, Options{Offload: true, MAC: macD})
	if err != nil {
		t.Fatal(err)
	}
	s := stack.New(stack.Config{NoIPv6: true})
	if err := s.AddNIC("eth0", e); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAddress("eth0", stacktest.AddrA); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.DialTCP(ctx, netip.AddrPortFrom(stacktest.AddrB.Addr(), 9))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	rand.Read(buf)
	for {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
}
