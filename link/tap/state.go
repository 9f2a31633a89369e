package tap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/link"
)

// The link's state, as the kernel tells it (link.StateWatcher): the TAP
// device is up while its kernel side is administratively up (IFF_UP) and
// operationally up (IFF_RUNNING: it has carrier, which a TAP has while a
// reader is attached), as ip link shows "state UP". The kernel announces
// each change on its rtnetlink link group (rtnetlink(7), RTMGRP_LINK); a
// socket joined to it in the device's namespace, where Open runs, hears
// them for as long as the endpoint is open, without polling.

// stateWatch follows the device's state.
type stateWatch struct {
	name  string
	index int32 // the device's ifindex, which its messages carry
	nl    *os.File
	// ctl is a socket of the device's namespace for its flags
	// (netdevice(7)): the reader runs on whatever thread, in the
	// process's namespace, where the device's name may be another's.
	ctl   int
	up    atomic.Bool
	stats *Stats

	mu       sync.Mutex
	watchers []func(up bool)
	done     chan struct{}
}

// ifinfomsgLen is struct ifinfomsg's size: family, pad, type, index,
// flags, change.
const ifinfomsgLen = 16

// watchState opens the rtnetlink socket and reads the device's state
// now. It runs in the device's namespace, as Open does.
func (e *Endpoint) watchState() (*stateWatch, error) {
	w := &stateWatch{name: e.name, stats: &e.stats, done: make(chan struct{})}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("tap %s: rtnetlink socket: %w", e.name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tap %s: join rtnetlink's link group: %w", e.name, err)
	}
	// Non-blocking, so that the runtime's poller waits for it and Close
	// wakes the reader.
	w.nl = os.NewFile(uintptr(fd), "rtnetlink")
	if w.ctl, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
		w.nl.Close()
		return nil, fmt.Errorf("tap %s: socket for the device's flags: %w", e.name, err)
	}
	// The index and the state now, read after joining the group, so that
	// no change falls between the two; the state as it starts is no
	// change to count or tell.
	index, flags, err := w.flags()
	if err != nil {
		w.nl.Close()
		unix.Close(w.ctl)
		return nil, err
	}
	w.index = index
	w.up.Store(upFlags(flags))
	go w.run()
	return w, nil
}

// flags returns the device's ifindex and flags (netdevice(7):
// SIOCGIFINDEX, SIOCGIFFLAGS).
func (w *stateWatch) flags() (int32, uint32, error) {
	ifr, err := unix.NewIfreq(w.name)
	if err != nil {
		return 0, 0, fmt.Errorf("tap %s: interface name: %w", w.name, err)
	}
	if err := unix.IoctlIfreq(w.ctl, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, 0, fmt.Errorf("tap %s: SIOCGIFINDEX: %w", w.name, err)
	}
	index := int32(ifr.Uint32())
	if err := unix.IoctlIfreq(w.ctl, unix.SIOCGIFFLAGS, ifr); err != nil {
		return 0, 0, fmt.Errorf("tap %s: SIOCGIFFLAGS: %w", w.name, err)
	}
	return index, uint32(ifr.Uint16()), nil
}

// upFlags says whether flags make the link up: administratively and
// operationally.
func upFlags(flags uint32) bool {
	return flags&unix.IFF_UP != 0 && flags&unix.IFF_RUNNING != 0
}

// run reads the link group's messages until Close, and follows the
// device's.
func (w *stateWatch) run() {
	defer close(w.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := w.nl.Read(buf)
		switch {
		case errors.Is(err, os.ErrClosed):
			return
		case errors.Is(err, unix.ENOBUFS):
			// The socket's buffer overflowed and messages were lost
			// (netlink(7)): ask the state outright.
			w.stats.StateLost.Inc()
			if _, flags, err := w.flags(); err == nil {
				w.set(upFlags(flags))
			}
			continue
		case err != nil:
			// Nothing more will be heard: the state stays as it was
			// last told.
			w.stats.StateLost.Inc()
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			w.stats.StateLost.Inc()
			continue
		}
		for _, m := range msgs {
			if len(m.Data) < ifinfomsgLen {
				continue
			}
			index := int32(binary.NativeEndian.Uint32(m.Data[4:8]))
			flags := binary.NativeEndian.Uint32(m.Data[8:12])
			if index != w.index {
				continue
			}
			switch m.Header.Type {
			case unix.RTM_NEWLINK:
				w.set(upFlags(flags))
			case unix.RTM_DELLINK:
				w.set(false)
			}
		}
	}
}

// set takes the device's state, and tells the watchers of a change.
func (w *stateWatch) set(up bool) {
	if w.up.Swap(up) == up {
		return
	}
	if up {
		w.stats.LinkUps.Inc()
	} else {
		w.stats.LinkDowns.Inc()
	}
	w.mu.Lock()
	fs := w.watchers
	w.mu.Unlock()
	for _, f := range fs {
		f(up)
	}
}

// close stops the reader and waits for it. An endpoint made without Open
// (a test's) has no watch.
func (w *stateWatch) close() {
	if w == nil {
		return
	}
	w.nl.Close()
	<-w.done
	unix.Close(w.ctl)
}

var _ link.StateWatcher = (*Endpoint)(nil)

// Up reports whether the device is up: its kernel side administratively
// up, with carrier.
func (e *Endpoint) Up() bool { return e.state == nil || e.state.up.Load() }

// WatchState has f called with the device's state at each change, from
// the endpoint's rtnetlink reader, until Close.
func (e *Endpoint) WatchState(f func(up bool)) {
	if e.state == nil {
		return
	}
	e.state.mu.Lock()
	e.state.watchers = append(e.state.watchers, f)
	e.state.mu.Unlock()
}
