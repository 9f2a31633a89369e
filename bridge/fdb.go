package bridge

import (
	"net"
	"sync"
	"time"
)

// The filtering database of IEEE 802.1D-2004 section 7.9, dynamic entries
// only (7.9.2): which port a station's address was last seen on, forgotten
// after the ageing time (7.9.2, table 7-5: 300 s recommended). It is bounded
// (7.9 lets the capacity be finite): when full, the entry seen longest ago
// makes room. Entries sit on a list in the order they were last seen, so
// that ageing and eviction take the oldest without searching.

// mac is an Ethernet address as a map key.
type mac [6]byte

func (m mac) String() string { return net.HardwareAddr(m[:]).String() }

// isGroup reports an individual/group bit of 1: a multicast or broadcast
// address (IEEE 802-2014 section 8.2.2).
func (m mac) isGroup() bool { return m[0]&1 != 0 }

// isReserved reports one of the 16 addresses 01-80-C2-00-00-00 to -0F that
// a MAC bridge does not relay (802.1D-2004 section 7.12.6, table 7-10): the
// spanning tree's BPDUs, pause frames, LACP, 802.1X and LLDP among them.
func (m mac) isReserved() bool {
	return m[0] == 0x01 && m[1] == 0x80 && m[2] == 0xc2 && m[3] == 0 && m[4] == 0 && m[5]&0xf0 == 0
}

// entry is one dynamic entry: station addr was last seen on port at seen.
type entry struct {
	addr       mac
	port       *Port
	seen       time.Time
	prev, next *entry // in order of seen, oldest first
}

// fdb is the filtering database. Its methods take mu; the forwarding
// process holds it once per batch (lockedLearn, lockedLookup).
type fdb struct {
	mu      sync.Mutex
	entries map[mac]*entry
	// head and tail are the least and most recently seen entries.
	head, tail *entry
	max        int
	ageing     time.Duration
	stats      *Stats
}

func newFDB(max int, ageing time.Duration, st *Stats) *fdb {
	return &fdb{entries: make(map[mac]*entry, max), max: max, ageing: ageing, stats: st}
}

func (d *fdb) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		d.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		d.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (d *fdb) pushBack(e *entry) {
	e.prev = d.tail
	if d.tail != nil {
		d.tail.next = e
	} else {
		d.head = e
	}
	d.tail = e
}

func (d *fdb) remove(e *entry) {
	d.unlink(e)
	delete(d.entries, e.addr)
	d.stats.Entries.Add(-1)
}

// lockedLearn is the learning process (7.8): the source address src of a
// frame received on port at now creates or updates a dynamic entry. A
// station seen on another port than before has moved; the entry follows
// it. The caller holds mu and has checked src is individual (7.8 learns
// only from those: a group address names no station).
func (d *fdb) lockedLearn(src mac, port *Port, now time.Time) {
	if e, ok := d.entries[src]; ok {
		if e.port != port {
			e.port = port
			d.stats.Moved.Inc()
		}
		e.seen = now
		d.unlink(e)
		d.pushBack(e)
		return
	}
	if len(d.entries) >= d.max {
		d.lockedAge(now)
	}
	if len(d.entries) >= d.max {
		d.remove(d.head)
		d.stats.TableFull.Inc()
	}
	e := &entry{addr: src, port: port, seen: now}
	d.entries[src] = e
	d.pushBack(e)
	d.stats.Learnt.Inc()
	d.stats.Entries.Add(1)
}

// lockedLookup returns the port dst was learnt on, nil when unknown or aged
// out. The caller holds mu.
func (d *fdb) lockedLookup(dst mac, now time.Time) *Port {
	e, ok := d.entries[dst]
	if !ok {
		return nil
	}
	if d.expired(e, now) {
		d.remove(e)
		d.stats.Aged.Inc()
		return nil
	}
	return e.port
}

func (d *fdb) expired(e *entry, now time.Time) bool {
	return now.Sub(e.seen) >= d.ageing
}

// lockedAge removes the entries older than the ageing time (7.9.2), oldest
// first. The caller holds mu.
func (d *fdb) lockedAge(now time.Time) {
	for d.head != nil && d.expired(d.head, now) {
		d.remove(d.head)
		d.stats.Aged.Inc()
	}
}

// flush removes the entries of port, which has left the bridge: frames to
// its stations are flooded until they are learnt elsewhere (7.9.2 leaves
// entries of a port that is no longer forwarding to be removed).
func (d *fdb) flush(port *Port) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for e := d.head; e != nil; {
		next := e.next
		if e.port == port {
			d.remove(e)
		}
		e = next
	}
}

// Station is one entry of the filtering database, as Bridge.Table shows it.
type Station struct {
	MAC  net.HardwareAddr
	Port string
	// Age is how long ago the station last sent a frame.
	Age time.Duration
}

// table ages the database at now and returns what remains, the most
// recently seen first.
func (d *fdb) table(now time.Time) []Station {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lockedAge(now)
	out := make([]Station, 0, len(d.entries))
	for e := d.tail; e != nil; e = e.prev {
		out = append(out, Station{MAC: net.HardwareAddr(append([]byte(nil), e.addr[:]...)), Port: e.port.name, Age: now.Sub(e.seen)})
	}
	return out
}
