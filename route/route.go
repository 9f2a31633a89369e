// Package route is the routing table both IP families keep: routes to
// prefixes, on-link or through a gateway, searched longest prefix first
// and, among routes to one prefix, the most preferred first (RFC 4191
// section 3, default router preferences; an IPv4 route is of medium
// preference), then the oldest.
//
// A Table is a value that each family keeps in its copy-on-write snapshot
// of interfaces, addresses and routes (ipv4's and ipv6's table), read
// without locks by the data path: a change clones the table, changes the
// clone and publishes it. What a gateway must be to be accepted (on an
// on-link prefix of the interface; for IPv6 link-local too, RFC 4861
// section 4.2) and which routes go with an address stay the family's.
package route

import (
	"fmt"
	"net/netip"
	"slices"
)

// Iface is the interface a route leaves through: a family's own.
type Iface interface {
	comparable
	Name() string
}

// Preference is a router's preference (RFC 4191 section 2.1), ordered: a
// higher one is chosen first.
type Preference int8

// The preferences.
const (
	PreferenceLow    Preference = -1
	PreferenceMedium Preference = 0
	PreferenceHigh   Preference = 1
)

// PreferenceFromBits decodes the two-bit Prf field of a router
// advertisement or route information option (RFC 4191 section 2.1): 01
// high, 00 medium, 11 low; the reserved 10 counts as medium (section 2.2).
func PreferenceFromBits(prf uint8) Preference {
	switch prf & 3 {
	case 1:
		return PreferenceHigh
	case 3:
		return PreferenceLow
	}
	return PreferenceMedium
}

func (p Preference) String() string {
	switch {
	case p < PreferenceMedium:
		return "low"
	case p > PreferenceMedium:
		return "high"
	}
	return "medium"
}

// Route is an entry of the routing table: Dst on-link out of Iface when
// Gateway is invalid, else through the router Gateway (without a zone:
// Iface says which link).
type Route[I Iface] struct {
	Dst        netip.Prefix
	Gateway    netip.Addr
	Iface      I
	Preference Preference // among routes to one prefix, higher first
}

// OnLink reports whether r reaches Dst without a gateway.
func (r Route[I]) OnLink() bool { return !r.Gateway.IsValid() }

// String is r as ip route shows it; the preference only when not medium.
func (r Route[I]) String() string {
	if r.OnLink() {
		return fmt.Sprintf("%v dev %s", r.Dst, r.Iface.Name())
	}
	s := fmt.Sprintf("%v via %v dev %s", r.Dst, r.Gateway, r.Iface.Name())
	if r.Preference != PreferenceMedium {
		s += " pref " + r.Preference.String()
	}
	return s
}

// sameRoute reports whether a and b are one route, whatever their
// preferences: a router's advertisement may change its preference.
func (r Route[I]) sameRoute(o Route[I]) bool {
	return r.Dst == o.Dst && r.Gateway == o.Gateway && r.Iface == o.Iface
}

// searchedBefore reports whether r is tried before o: a longer prefix,
// or an equal prefix of a higher preference.
func (r Route[I]) searchedBefore(o Route[I]) bool {
	if r.Dst.Bits() != o.Dst.Bits() {
		return r.Dst.Bits() > o.Dst.Bits()
	}
	return r.Preference > o.Preference
}

// Table is a list of routes in the order they are searched. The zero value
// is an empty table. A Table shares its list with the copies of it
// assigned: change only a Clone of one that others may be reading.
type Table[I Iface] struct {
	routes []Route[I]
}

// Clone returns a copy of t that can be changed without changing t.
func (t Table[I]) Clone() Table[I] { return Table[I]{routes: slices.Clone(t.routes)} }

// All returns a copy of the routes, in the order they are searched.
func (t Table[I]) All() []Route[I] { return slices.Clone(t.routes) }

// Len returns the number of routes.
func (t Table[I]) Len() int { return len(t.routes) }

// Lookup returns the first route in search order whose prefix covers a,
// out of only when only is not the zero I: the longest prefix match. The
// walks here go by index, not by a copy of each 72-byte route.
func (t Table[I]) Lookup(a netip.Addr, only I) (Route[I], bool) {
	var none I
	for i := range t.routes {
		if r := &t.routes[i]; r.Dst.Contains(a) && (only == none || r.Iface == only) {
			return *r, true
		}
	}
	return Route[I]{}, false
}

// Searched returns the routes in the order they are searched, for a
// family whose search skips a route it cannot use (IPv4's, out of an
// interface with no source address for the destination). The slice is
// t's own: read it, never change it.
func (t Table[I]) Searched() []Route[I] { return t.routes }

// OnLink reports whether an on-link route of iface covers a.
func (t Table[I]) OnLink(a netip.Addr, iface I) bool {
	for i := range t.routes {
		if r := &t.routes[i]; r.Iface == iface && r.OnLink() && r.Dst.Contains(a) {
			return true
		}
	}
	return false
}

// Has reports whether t holds r, preference included.
func (t Table[I]) Has(r Route[I]) bool { return slices.Contains(t.routes, r) }

// Add puts r in its place in the search order, after the routes it ties
// with, and in place of the same route (same prefix, gateway and
// interface) of another preference; a route t holds already keeps its
// place. Dst is taken masked.
func (t *Table[I]) Add(r Route[I]) {
	r.Dst = r.Dst.Masked()
	if t.Has(r) {
		return
	}
	t.routes = slices.DeleteFunc(t.routes, r.sameRoute)
	i := slices.IndexFunc(t.routes, r.searchedBefore)
	if i < 0 {
		i = len(t.routes)
	}
	t.routes = slices.Insert(t.routes, i, r)
}

// Remove removes the route to r.Dst (masked) through r.Gateway out of
// r.Iface, whatever its preference, and reports whether there was one.
func (t *Table[I]) Remove(r Route[I]) bool {
	r.Dst = r.Dst.Masked()
	return t.DeleteFunc(r.sameRoute)
}

// DeleteFunc removes every route for which del returns true and reports
// whether it removed any.
func (t *Table[I]) DeleteFunc(del func(Route[I]) bool) bool {
	n := len(t.routes)
	t.routes = slices.DeleteFunc(t.routes, del)
	return len(t.routes) < n
}
