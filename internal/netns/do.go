package netns

import (
	"errors"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread that has joined the namespace, then returns the
// thread to the namespace it came from.
//
// Namespaces belong to threads, not to processes, so Do locks the calling
// goroutine to its thread for the duration. File descriptors fn opens (a
// socket, a TAP device) stay in the namespace after Do returns. Goroutines fn
// starts run on other threads, outside the namespace, and so does a name
// lookup that goes through the cgo resolver: pass fn literal addresses.
//
// If fn panics, the thread is restored before the panic goes on. If the
// thread cannot be restored, Do returns an error and leaves the goroutine
// locked to the thread, so that the runtime discards the thread when the
// goroutine exits rather than run other goroutines in the namespace.
func (ns *NS) Do(fn func() error) error {
	var fnErr error // fn's own, returned as it is
	if err := DoPath(ns.Path(), func() error { fnErr = fn(); return nil }); err != nil {
		return errors.Join(fnErr, fmt.Errorf("netns %s: %w", ns.Name, err))
	}
	return fnErr
}

// DoPath is Do for the namespace at path: a bind mount such as
// /run/netns/NAME, or a process's /proc/PID/ns/net. It returns fn's error
// as it is, joined with the thread's if it could not be restored.
func DoPath(path string, fn func() error) (err error) {
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(target)

	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open this thread's namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", path, err)
	}
	defer func() {
		if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil {
			// Stay locked: the thread dies with the goroutine.
			err = errors.Join(err, fmt.Errorf("restore thread's namespace: %w", rerr))
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}

// ListenUDP opens a kernel UDP socket inside the namespace bound to addr, a
// literal "ip:port" ("127.0.0.1:0", "10.1.2.1:7").
func (ns *NS) ListenUDP(addr string) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := ns.Do(func() error {
		a, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		c, err = net.ListenUDP("udp", a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns %s: listen udp %s: %w", ns.Name, addr, err)
	}
	return c, nil
}

// DialUDP opens a kernel UDP socket inside the namespace connected to raddr,
// a literal "ip:port", from an address the kernel chooses.
func (ns *NS) DialUDP(raddr string) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := ns.Do(func() error {
		a, err := net.ResolveUDPAddr("udp", raddr)
		if err != nil {
			return err
		}
		c, err = net.DialUDP("udp", nil, a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netns %s: dial udp %s: %w", ns.Name, raddr, err)
	}
	return c, nil
}
