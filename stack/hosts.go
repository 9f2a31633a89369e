package stack

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
)

// Static host entries: the stack's own lookups (LookupNetIP, DialContext
// with a name, LookupAddr) answer a name from a table before asking DNS,
// as the "files" source before "dns" in nsswitch.conf does with
// /etc/hosts (hosts(5)), and as Go's resolver does. A name in the table
// is answered from it alone: an address of the other family is not asked
// of DNS, as neither glibc nor Go does. The table is GoNet's own and
// empty until SetHosts or AddHost fill it: the host's /etc/hosts names
// the host's neighbours, not those of the network GoNet is on, and the
// answers Go's resolver takes from it (before DNS, as nsswitch.conf says,
// which net.Resolver cannot be told not to) are dropped as no such host
// (lookupDNS). Stack.Resolver's own methods still give them.

// HostEntry is a name and its static addresses.
type HostEntry struct {
	// Name is a domain name, without a final dot; case does not matter
	// to lookups.
	Name string
	// Addrs are the name's addresses, in the order lookups return them.
	Addrs []netip.Addr
}

// hostTable is the static table: names to addresses and back.
type hostTable struct {
	// byName maps a lower-case name without its final dot to its
	// addresses.
	byName map[string][]netip.Addr
	// names are byName's names as first given, in that order.
	names []string
	// byAddr maps an address, without its zone, to its names, as
	// given.
	byAddr map[netip.Addr][]string
}

// add adds addrs to name's.
func (t *hostTable) add(name string, addrs []netip.Addr) {
	if t.byName == nil {
		t.byName = map[string][]netip.Addr{}
		t.byAddr = map[netip.Addr][]string{}
	}
	key := strings.ToLower(name)
	if _, ok := t.byName[key]; !ok {
		t.names = append(t.names, name)
	}
	for _, a := range addrs {
		if slices.Contains(t.byName[key], a) {
			continue
		}
		t.byName[key] = append(t.byName[key], a)
		// A link-local address's names are its names on any link:
		// GoNet's lookups do not tell zones apart.
		t.byAddr[a.WithZone("")] = append(t.byAddr[a.WithZone("")], name)
	}
}

// entries returns the table's entries, in the order their names came.
func (t *hostTable) entries() []HostEntry {
	list := make([]HostEntry, 0, len(t.names))
	for _, n := range t.names {
		list = append(list, HostEntry{Name: n, Addrs: slices.Clone(t.byName[strings.ToLower(n)])})
	}
	return list
}

// checkHostEntry checks one entry and returns its name in the table's
// form: without the final dot, addresses unmapped.
func checkHostEntry(e HostEntry) (HostEntry, error) {
	name := strings.TrimSuffix(e.Name, ".")
	if !validName(name) {
		return HostEntry{}, fmt.Errorf("stack: static host %q: not a domain name", e.Name)
	}
	if len(e.Addrs) == 0 {
		return HostEntry{}, fmt.Errorf("stack: static host %s: no address", name)
	}
	addrs := make([]netip.Addr, 0, len(e.Addrs))
	for _, a := range e.Addrs {
		if !a.IsValid() || a.IsUnspecified() {
			return HostEntry{}, fmt.Errorf("stack: static host %s: %v is not an address", name, a)
		}
		if a.Zone() != "" && !a.IsLinkLocalUnicast() {
			return HostEntry{}, fmt.Errorf("stack: static host %s: %v has a zone, which only a link-local address takes", name, a)
		}
		addrs = append(addrs, a.Unmap())
	}
	return HostEntry{Name: name, Addrs: addrs}, nil
}

// SetHosts replaces the static table by entries. On error the table is
// left as it was.
func (s *Stack) SetHosts(entries []HostEntry) error {
	var t hostTable
	for _, e := range entries {
		e, err := checkHostEntry(e)
		if err != nil {
			return err
		}
		t.add(e.Name, e.Addrs)
	}
	s.dns.mu.Lock()
	s.dns.hosts = t
	s.dns.mu.Unlock()
	s.env.Log.Info("static hosts set", "names", len(t.names))
	return nil
}

// AddHost adds addrs to name's in the static table, after those it has.
func (s *Stack) AddHost(name string, addrs ...netip.Addr) error {
	e, err := checkHostEntry(HostEntry{Name: name, Addrs: addrs})
	if err != nil {
		return err
	}
	s.dns.mu.Lock()
	s.dns.hosts.add(e.Name, e.Addrs)
	s.dns.mu.Unlock()
	return nil
}

// Hosts returns the static table's entries, in the order their names
// were first given.
func (s *Stack) Hosts() []HostEntry {
	s.dns.mu.Lock()
	defer s.dns.mu.Unlock()
	return s.dns.hosts.entries()
}

// lookupStatic returns the static addresses of host, and whether the
// table has it at all.
func (s *Stack) lookupStatic(host string) ([]netip.Addr, bool) {
	key := strings.ToLower(strings.TrimSuffix(host, "."))
	s.dns.mu.Lock()
	defer s.dns.mu.Unlock()
	addrs, ok := s.dns.hosts.byName[key]
	return slices.Clone(addrs), ok
}

// LookupAddr returns the names of addr: the static table's (absolute,
// with the final dot, as Go's resolver gives /etc/hosts's), or when it
// has none those of the PTR records DNS holds for it (RFC 1035 section
// 3.5; RFC 3596 section 2.5 for IPv6).
func (s *Stack) LookupAddr(ctx context.Context, addr netip.Addr) ([]string, error) {
	addr = addr.Unmap().WithZone("")
	s.dns.mu.Lock()
	names := slices.Clone(s.dns.hosts.byAddr[addr])
	s.dns.mu.Unlock()
	if len(names) > 0 {
		for i, n := range names {
			names[i] = n + "."
		}
		return names, nil
	}
	dialed := new(atomic.Bool)
	names, err := s.Resolver().LookupAddr(context.WithValue(ctx, dialedKey{}, dialed), addr.String())
	if err == nil && !dialed.Load() {
		// The machine's /etc/hosts answered (lookupDNS).
		return nil, &net.DNSError{Err: "no such host (the machine's /etc/hosts has it, which GoNet does not read)", Name: addr.String(), IsNotFound: true}
	}
	return names, err
}

// ParseHosts reads a static table in the format of /etc/hosts (hosts(5)):
// on each line an address and its names, the canonical name first, then
// its aliases; from # to the end of a line is a comment. A name on several
// lines has the addresses of all of them, in the order of the lines.
// Unlike the C library, which skips a line it cannot read, ParseHosts
// fails on it, saying which: the file is GoNet's own, written for it.
func ParseHosts(r io.Reader) ([]HostEntry, error) {
	var t hostTable
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f) == 1 {
			return nil, fmt.Errorf("stack: hosts line %d: address %s with no name", line, f[0])
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			return nil, fmt.Errorf("stack: hosts line %d: %q is not an IP address", line, f[0])
		}
		for _, name := range f[1:] {
			e, err := checkHostEntry(HostEntry{Name: name, Addrs: []netip.Addr{a}})
			if err != nil {
				return nil, fmt.Errorf("stack: hosts line %d: %s", line, strings.TrimPrefix(err.Error(), "stack: "))
			}
			t.add(e.Name, e.Addrs)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stack: reading hosts: %w", err)
	}
	return t.entries(), nil
}

// staticAnswer is LookupNetIP's answer from the static table for host:
// its addresses of family ("ip", "ip4" or "ip6"), or not found when it
// has none of that family.
func staticAnswer(host, family string, addrs []netip.Addr) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range addrs {
		if family == "ip" || (family == "ip4") == a.Is4() {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no " + familyName(family) + " address in the static host table", Name: host, IsNotFound: true}
	}
	return out, nil
}

// familyName names a lookup's family as messages do.
func familyName(family string) string {
	switch family {
	case "ip4":
		return "IPv4"
	case "ip6":
		return "IPv6"
	}
	return "IP"
}
