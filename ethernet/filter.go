package ethernet

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gonetstack/gonet/wire"
)

// Multicast filtering, as a NIC's hardware filter does it: a frame to a
// multicast address is taken only when a protocol listens to it (IPv4's
// groups at 01:00:5e plus the low 23 bits of the group, RFC 1112 section
// 6.4; IPv6's at 33:33 plus the low 32 bits, RFC 2464 section 7), or is
// the broadcast address; the rest are counted in RxMulticastFiltered and
// dropped before they cost a protocol anything. Each protocol sets its own
// list under its own name whenever its groups change; the receive path
// reads the union through one atomic pointer. A NIC no protocol has given
// a list takes every multicast frame, as a promiscuous one does.

// mcastFilter is the union of the protocols' lists, never changed once
// stored.
type mcastFilter struct{ macs []wire.MAC }

// filterState is the filter and the lists it is built from, which mu
// guards.
type filterState struct {
	mu    sync.Mutex
	lists map[string][]wire.MAC
	cur   atomic.Pointer[mcastFilter]
}

// SetMulticastFilter sets the multicast addresses the protocol named owner
// listens to ("ipv4", "ipv6"), replacing its previous list, and rebuilds
// the filter. From the first call on, multicast frames to addresses no
// protocol listens to are dropped.
func (n *NIC) SetMulticastFilter(owner string, macs []wire.MAC) {
	f := &n.filter
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lists == nil {
		f.lists = map[string][]wire.MAC{}
	}
	f.lists[owner] = slices.Clone(macs)
	var all []wire.MAC
	for _, o := range slices.Sorted(maps.Keys(f.lists)) {
		for _, m := range f.lists[o] {
			if !slices.Contains(all, m) {
				all = append(all, m)
			}
		}
	}
	f.cur.Store(&mcastFilter{all})
}

// MulticastFilter returns the multicast addresses the NIC takes frames
// for, and false when it takes every one (no protocol set a list).
func (n *NIC) MulticastFilter() ([]wire.MAC, bool) {
	f := n.filter.cur.Load()
	if f == nil {
		return nil, false
	}
	return slices.Clone(f.macs), true
}

// takesMulticast reports whether a frame to the multicast address dst
// passes the filter. It runs per multicast frame in the receive
// goroutine: a load and a scan of a few addresses.
func (n *NIC) takesMulticast(dst wire.MAC) bool {
	if dst == wire.Broadcast {
		return true
	}
	f := n.filter.cur.Load()
	return f == nil || slices.Contains(f.macs, dst)
}
