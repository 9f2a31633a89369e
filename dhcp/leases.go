package dhcp

import (
	"net/netip"
	"time"
)

// The lease table: one record per pool address that has ever been handed
// out, keyed both by address and by client. It never holds more records
// than the pool has addresses, so a client that invents a new identifier
// for every message fills the pool, not the server's memory.
//
// A record is in use while its expiry is in the future (an offer held for
// the client, a bound lease, an address a client declined); once expired it
// still remembers its client, so that the client is given the same address
// again (RFC 2131 section 4.3.1, "the client's previous address"), until
// the address goes to someone else.

// state is what a record's address is held for.
type state uint8

const (
	offered  state = iota + 1 // reserved for a client between OFFER and REQUEST
	bound                     // leased (ACK sent)
	declined                  // a client found it in use (DECLINE): out of the pool for a while
)

func (s state) String() string {
	switch s {
	case offered:
		return "offered"
	case bound:
		return "bound"
	case declined:
		return "declined"
	}
	return "unknown"
}

// record is one address of the pool and who holds or last held it.
type record struct {
	addr   netip.Addr
	client string // the client's key (clientKey); empty once declined
	hw     []byte // the client's chaddr, for Leases
	state  state
	expiry time.Time
}

func (r *record) live(now time.Time) bool { return r.expiry.After(now) }

// table is the lease table. The Server's mutex guards it.
type table struct {
	first    netip.Addr // the pool's first address
	size     int        // the pool's number of addresses
	reserved map[netip.Addr]bool
	byAddr   map[netip.Addr]*record
	byClient map[string]*record
}

func newTable(first netip.Addr, size int, reserved []netip.Addr) *table {
	t := &table{
		first:    first,
		size:     size,
		reserved: map[netip.Addr]bool{},
		byAddr:   map[netip.Addr]*record{},
		byClient: map[string]*record{},
	}
	for _, a := range reserved {
		t.reserved[a] = true
	}
	return t
}

// inPool reports whether a is one of the pool's addresses the server may
// lease (not its own, the router's or a DNS server's).
func (t *table) inPool(a netip.Addr) bool {
	if !a.Is4() || t.reserved[a] {
		return false
	}
	off := u32(a) - u32(t.first)
	return u32(a) >= u32(t.first) && off < uint32(t.size)
}

// ofClient returns the client's record: its current or previous address.
func (t *table) ofClient(key string) *record { return t.byClient[key] }

// free reports whether a may be given to client key now: it is in the pool
// and nobody else holds it.
func (t *table) free(a netip.Addr, key string, now time.Time) bool {
	if !t.inPool(a) {
		return false
	}
	r := t.byAddr[a]
	return r == nil || r.client == key && r.state != declined || !r.live(now)
}

// pick chooses a new address for a client with no usable one: an address
// never handed out, else the one expired longest ago, so that a returning
// client's previous address is reused last (RFC 2131 section 4.3.1 leaves
// the choice to the server). It reports false when the pool is exhausted.
func (t *table) pick(now time.Time) (netip.Addr, bool) {
	var oldest *record
	a := t.first
	for range t.size {
		if !t.reserved[a] {
			r := t.byAddr[a]
			if r == nil {
				return a, true
			}
			if !r.live(now) && (oldest == nil || r.expiry.Before(oldest.expiry)) {
				oldest = r
			}
		}
		a = a.Next()
	}
	if oldest == nil {
		return netip.Addr{}, false
	}
	return oldest.addr, true
}

// hold gives address a to client key in state st until expiry, taking it
// from whoever held it before (the caller checked that it was free) and
// dropping the client's record of any other address.
func (t *table) hold(a netip.Addr, key string, hw []byte, st state, expiry time.Time) *record {
	if old := t.byClient[key]; old != nil && old.addr != a {
		// The client moves: its old address keeps no owner, and is free.
		delete(t.byClient, key)
		delete(t.byAddr, old.addr)
	}
	r := t.byAddr[a]
	if r == nil {
		r = &record{addr: a}
		t.byAddr[a] = r
	}
	if r.client != "" && r.client != key {
		delete(t.byClient, r.client)
	}
	r.client, r.hw, r.state, r.expiry = key, append(r.hw[:0], hw...), st, expiry
	t.byClient[key] = r
	return r
}

// decline takes r's address out of the pool until expiry: it belongs to
// nobody (RFC 2131 section 4.3.3, "mark the network address as not
// available").
func (t *table) decline(r *record, expiry time.Time) {
	delete(t.byClient, r.client)
	r.client, r.hw, r.state, r.expiry = "", nil, declined, expiry
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
