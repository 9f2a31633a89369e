// Package sourcefilter is multicast source filtering as IGMPv3 (RFC 3376)
// and MLDv2 (RFC 3810) define it, one implementation for both families
// (issue 12, item 7): the filter a socket asks for on a group (INCLUDE or
// EXCLUDE a list of sources, RFC 3376 section 3.1), the interface's state
// merged from its sockets' (section 3.2), the state-change records that
// tell routers of a change and their retransmission (section 5.1), and
// the current-state records that answer their queries (section 5.2).
// MLDv2 restates each of these sections word for word for IPv6 (RFC 3810
// sections 4.1, 4.2, 6.1 and 6.3), and gives its records the numbers
// IGMPv3 gives them, so igmp and ndp each keep the timers and the wire
// form and leave the set arithmetic here.
//
// Nothing here locks or keeps time: the protocols call it under their own
// mutex, from their own timers.
package sourcefilter

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Mode is a filter mode (RFC 3376 section 3.1).
type Mode uint8

const (
	// Include takes the sources listed and no other (MCAST_INCLUDE).
	Include Mode = iota
	// Exclude takes every source but those listed (MCAST_EXCLUDE).
	Exclude
)

func (m Mode) String() string {
	if m == Exclude {
		return "EXCLUDE"
	}
	return "INCLUDE"
}

// Filter is a filter mode and its source list, a socket's on a group or
// an interface's (RFC 3376 section 3.1). Sources are sorted and
// distinct: build filters with New, or as a zero value (INCLUDE {}).
type Filter struct {
	Mode    Mode
	Sources []netip.Addr
}

// None is INCLUDE {}, no reception: the state of a group not joined
// (section 3.1: "a filter-mode of INCLUDE and an empty source-list ...
// is equivalent to ... the socket not being a member of the group").
var None = Filter{Mode: Include}

// Any is EXCLUDE {}, every source: a plain join (IP_ADD_MEMBERSHIP,
// IPV6_JOIN_GROUP), any-source multicast.
var Any = Filter{Mode: Exclude}

// New returns a filter of mode over sources, sorted and made distinct,
// their zones dropped (a source is compared by address alone).
func New(mode Mode, sources ...netip.Addr) Filter {
	s := make([]netip.Addr, 0, len(sources))
	for _, a := range sources {
		s = append(s, a.WithZone(""))
	}
	slices.SortFunc(s, netip.Addr.Compare)
	return Filter{Mode: mode, Sources: slices.Compact(s)}
}

// Allows reports whether the filter takes datagrams from src.
func (f Filter) Allows(src netip.Addr) bool {
	_, in := slices.BinarySearchFunc(f.Sources, src.WithZone(""), netip.Addr.Compare)
	return in == (f.Mode == Include)
}

// Joined reports whether the filter takes anything: whether it is not
// None.
func (f Filter) Joined() bool { return f.Mode == Exclude || len(f.Sources) > 0 }

// Has reports whether src is on the source list.
func (f Filter) Has(src netip.Addr) bool {
	_, in := slices.BinarySearchFunc(f.Sources, src.WithZone(""), netip.Addr.Compare)
	return in
}

// With returns the filter with src on its list, leaving f as it was.
func (f Filter) With(src netip.Addr) Filter {
	return New(f.Mode, append(slices.Clone(f.Sources), src)...)
}

// Without returns the filter with src off its list, leaving f as it was.
func (f Filter) Without(src netip.Addr) Filter {
	src = src.WithZone("")
	return Filter{Mode: f.Mode, Sources: slices.DeleteFunc(slices.Clone(f.Sources), func(a netip.Addr) bool { return a == src })}
}

// Equal reports whether f and g filter alike.
func (f Filter) Equal(g Filter) bool { return f.Mode == g.Mode && slices.Equal(f.Sources, g.Sources) }

// String is the RFC's notation: "INCLUDE {192.0.2.1, 192.0.2.2}".
func (f Filter) String() string {
	s := make([]string, len(f.Sources))
	for i, a := range f.Sources {
		s[i] = a.String()
	}
	return fmt.Sprintf("%v {%s}", f.Mode, strings.Join(s, ", "))
}

// Set arithmetic over sorted, distinct lists.

func union(a, b []netip.Addr) []netip.Addr {
	return New(Include, append(slices.Clone(a), b...)...).Sources
}

func intersect(a, b []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, x := range a {
		if _, in := slices.BinarySearchFunc(b, x, netip.Addr.Compare); in {
			out = append(out, x)
		}
	}
	return out
}

func minus(a, b []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, x := range a {
		if _, in := slices.BinarySearchFunc(b, x, netip.Addr.Compare); !in {
			out = append(out, x)
		}
	}
	return out
}
