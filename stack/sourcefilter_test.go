package stack_test

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/udp"
)

// Source-specific multicast between two stacks: A sends to a group from
// two addresses; B's endpoints each take the sources their filters take,
// and B's NIC reports the filter they make together.
func TestUDPSourceFiltersBetweenStacks(t *testing.T) {
	for _, tt := range []struct {
		name       string
		group      string
		wildcard   netip.Addr
		src1, src2 netip.Prefix
	}{
		{"IPv4", "232.1.2.3", netip.IPv4Unspecified(), stacktest.AddrA, netip.MustParsePrefix("10.0.0.3/24")},
		{"IPv6", "ff3e::8000:1", netip.IPv6Unspecified(), stacktest.AddrA6, netip.MustParsePrefix("fd00::3/64")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := stacktest.Pair(t, stacktest.Options{IPv6: true})
			if err := a.AddAddress("eth0", tt.src2); err != nil {
				t.Fatal(err)
			}
			group := netip.MustParseAddr(tt.group)
			s1, s2 := tt.src1.Addr(), tt.src2.Addr()
			const port = 6000
			listen := func() *udp.Conn {
				c, err := b.ListenMulticastUDP(netip.AddrPortFrom(tt.wildcard, port))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			only1, all2, only2 := listen(), listen(), listen()
			if err := only1.JoinSourceGroup("eth0", group, s1); err != nil {
				t.Fatalf("join source: %v", err)
			}
			if err := all2.JoinGroup("eth0", group); err != nil {
				t.Fatal(err)
			}
			if err := all2.BlockSource("eth0", group, s1); err != nil {
				t.Fatalf("block: %v", err)
			}
			if err := only2.SetSourceFilter("", group, sourcefilter.New(sourcefilter.Include, s2)); err != nil {
				t.Fatalf("set filter: %v", err)
			}
			// EXCLUDE {s1} merged with INCLUDE {s1} and INCLUDE {s2}.
			if got := groupFilter(t, b, "eth0", group); !got.Equal(sourcefilter.Any) {
				t.Errorf("B's eth0 filter %v, want EXCLUDE {}", got)
			}
			if got := all2.SourceFilter("eth0", group); !got.Equal(sourcefilter.New(sourcefilter.Exclude, s1)) {
				t.Errorf("the blocking endpoint's filter %v", got)
			}

			send := func(from netip.Addr, msg string) {
				c, err := a.ListenUDP(netip.AddrPortFrom(from, 0))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := c.WriteToUDPAddrPort([]byte(msg), netip.AddrPortFrom(group, port)); err != nil {
					t.Fatalf("send from %v: %v", from, err)
				}
			}
			send(s1, "one")
			send(s2, "two")
			for _, w := range []struct {
				c    *udp.Conn
				want string
				from netip.Addr
			}{{only1, "one", s1}, {all2, "two", s2}, {only2, "two", s2}} {
				got, from := recvWithin(t, w.c, 5*time.Second)
				if got != w.want || from.Addr().WithZone("") != w.from {
					t.Errorf("received %q from %v, want %q from %v", got, from, w.want, w.from)
				}
				nothingWithin(t, w.c, 100*time.Millisecond)
			}

			// With the any-source endpoint gone, the NIC takes the two
			// sources listed and no other.
			if err := all2.LeaveGroup("eth0", group); err != nil {
				t.Fatal(err)
			}
			if got := groupFilter(t, b, "eth0", group); !got.Equal(sourcefilter.New(sourcefilter.Include, s1, s2)) {
				t.Errorf("B's eth0 filter %v, want INCLUDE {%v, %v}", got, s1, s2)
			}
			// The last source leaves the group.
			if err := only1.LeaveSourceGroup("eth0", group, s1); err != nil {
				t.Fatal(err)
			}
			if err := only2.LeaveSourceGroup("", group, s2); err != nil {
				t.Fatal(err)
			}
			if got := b.Groups("eth0"); len(got) != 0 {
				t.Errorf("B's eth0 still in %v", got)
			}
		})
	}
}

// The errors of RFC 3678's calls are Linux's, so that a program ported
// from C meets the same ones; each row starts from a fresh endpoint.
func TestUDPSourceFilterErrorsAreLinuxs(t *testing.T) {
	_, b := stacktest.Pair(t, stacktest.Options{})
	group := netip.MustParseAddr("232.7.7.7")
	src := func(i byte) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, i}) }
	join := func(c *udp.Conn) error { return c.JoinGroup("eth0", group) }
	joinSrc := func(i byte) func(*udp.Conn) error {
		return func(c *udp.Conn) error { return c.JoinSourceGroup("eth0", group, src(i)) }
	}
	leaveSrc := func(i byte) func(*udp.Conn) error {
		return func(c *udp.Conn) error { return c.LeaveSourceGroup("eth0", group, src(i)) }
	}
	block := func(i byte) func(*udp.Conn) error {
		return func(c *udp.Conn) error { return c.BlockSource("eth0", group, src(i)) }
	}
	unblock := func(i byte) func(*udp.Conn) error {
		return func(c *udp.Conn) error { return c.UnblockSource("eth0", group, src(i)) }
	}
	// many calls add for sources 10.0.0.10 on, as many as a filter
	// holds; held are those sources.
	var many []byte
	var held []netip.Addr
	for i := range udp.MaxSourcesIPv4 {
		many = append(many, byte(10+i))
		held = append(held, src(byte(10+i)))
	}
	each := func(add func(byte) func(*udp.Conn) error) []func(*udp.Conn) error {
		var out []func(*udp.Conn) error
		for _, i := range many {
			out = append(out, add(i))
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		setup []func(*udp.Conn) error
		call  func(*udp.Conn) error
		want  error // nil for success
		after sourcefilter.Filter
	}{
		{"a source joined twice", []func(*udp.Conn) error{joinSrc(1)}, joinSrc(1), syscall.EADDRNOTAVAIL, sourcefilter.New(sourcefilter.Include, src(1))},
		{"any source joined over sources", []func(*udp.Conn) error{joinSrc(1)}, join, syscall.EADDRINUSE, sourcefilter.New(sourcefilter.Include, src(1))},
		{"a block on an include", []func(*udp.Conn) error{joinSrc(1)}, block(2), syscall.EINVAL, sourcefilter.New(sourcefilter.Include, src(1))},
		{"a source left that was not joined", []func(*udp.Conn) error{joinSrc(1)}, leaveSrc(2), syscall.EADDRNOTAVAIL, sourcefilter.New(sourcefilter.Include, src(1))},
		{"a block without a join", nil, block(1), syscall.EINVAL, sourcefilter.None},
		{"an unblock without a join", nil, unblock(1), syscall.EINVAL, sourcefilter.None},
		{"a source left without a join", nil, leaveSrc(1), syscall.EINVAL, sourcefilter.None},
		{"a source joined over any source narrows it", []func(*udp.Conn) error{join}, joinSrc(1), nil, sourcefilter.New(sourcefilter.Include, src(1))},
		{"a source joined over blocked ones", []func(*udp.Conn) error{join, block(2)}, joinSrc(1), syscall.EINVAL, sourcefilter.New(sourcefilter.Exclude, src(2))},
		{"a source blocked twice", []func(*udp.Conn) error{join, block(2)}, block(2), syscall.EADDRNOTAVAIL, sourcefilter.New(sourcefilter.Exclude, src(2))},
		{"a source unblocked that was not blocked", []func(*udp.Conn) error{join, block(2)}, unblock(3), syscall.EADDRNOTAVAIL, sourcefilter.New(sourcefilter.Exclude, src(2))},
		{"the last unblock leaves any source", []func(*udp.Conn) error{join, block(2)}, unblock(2), nil, sourcefilter.Any},
		{"the last source left leaves the group", []func(*udp.Conn) error{joinSrc(1)}, leaveSrc(1), nil, sourcefilter.None},
		{"an eleventh source", each(joinSrc), joinSrc(1), syscall.ENOBUFS, sourcefilter.New(sourcefilter.Include, held...)},
		{"an eleventh block", append([]func(*udp.Conn) error{join}, each(block)...), block(1), syscall.ENOBUFS, sourcefilter.New(sourcefilter.Exclude, held...)},
		{"a multicast source", nil, func(c *udp.Conn) error { return c.JoinSourceGroup("eth0", group, group) }, syscall.EINVAL, sourcefilter.None},
		{"an IPv6 source of an IPv4 group", nil, func(c *udp.Conn) error { return c.JoinSourceGroup("eth0", group, netip.MustParseAddr("fd00::1")) }, syscall.EINVAL, sourcefilter.None},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := b.ListenMulticastUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 6001))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for i, f := range tt.setup {
				if err := f(c); err != nil {
					t.Fatalf("setup step %d: %v", i, err)
				}
			}
			err = tt.call(c)
			if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if got := c.SourceFilter("eth0", group); !got.Equal(tt.after) {
				t.Errorf("filter after: %v, want %v", got, tt.after)
			}
			if got, want := groupFilter(t, b, "eth0", group), tt.after; !got.Equal(want) {
				t.Errorf("NIC's filter after: %v, want %v", got, want)
			}
		})
	}
	if got := b.Groups("eth0"); len(got) != 0 {
		t.Errorf("groups left joined after every endpoint closed: %v", got)
	}
}

// groupFilter is s's NIC's filter on group: None when it does not listen
// to it.
func groupFilter(t *testing.T, s *stack.Stack, nic string, group netip.Addr) sourcefilter.Filter {
	t.Helper()
	fs, err := s.GroupFilters(nic)
	if err != nil {
		t.Fatal(err)
	}
	return fs[group]
}

func TestGroupFiltersShowTheGroupsEveryInterfaceIsIn(t *testing.T) {
	_, b := stacktest.Pair(t, stacktest.Options{IPv6: true})
	fs, err := b.GroupFilters("eth0")
	if err != nil {
		t.Fatal(err)
	}
	solicited := netip.MustParseAddr("ff02::1:ff00:2") // fd00::2's
	for _, g := range []string{"224.0.0.1", "ff02::1", solicited.String()} {
		if f := fs[netip.MustParseAddr(g)]; !f.Equal(sourcefilter.Any) {
			t.Errorf("%s: %v, want EXCLUDE {}", g, f)
		}
	}
	if _, err := b.GroupFilters("nosuch"); err == nil {
		t.Error("no error for a NIC that is not there")
	}
}
