package ipv4_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/stack"
)

// Path MTU discovery's cache (RFC 1191): what a report does to the path
// MTU a route lookup gives, and who sees it.

func routeMTU(t *testing.T, v4 *ipv4.Protocol, dst netip.Addr) ip.Route {
	t.Helper()
	ri, err := v4.Route(dst)
	if err != nil {
		t.Fatal(err)
	}
	return ri
}

// Reports only ever lower the estimate (RFC 1191 section 6.3); bogus ones
// (below RFC 791's 68 bytes) are ignored; ones below MinPMTU lower it to
// MinPMTU and lock it, so that DF goes off; a next-hop MTU of zero takes
// the plateau of section 7 below the quoted datagram.
func TestPMTUReports(t *testing.T) {
	for _, tc := range []struct {
		name             string
		reports          [][2]int // next-hop MTU, quoted length
		wantMTU          int
		wantLocked       bool
		updates, ignored int64
		clamped          int64
	}{
		{"lowered", [][2]int{{1400, 1500}}, 1400, false, 1, 0, 0},
		{"lowered twice", [][2]int{{1400, 1500}, {1280, 1400}}, 1280, false, 2, 0, 0},
		{"never raised", [][2]int{{1280, 1500}, {1400, 1500}}, 1280, false, 1, 1, 0},
		{"not below the link", [][2]int{{1500, 1500}, {9000, 1500}}, 1500, false, 0, 2, 0},
		{"bogus below 68", [][2]int{{67, 1500}}, 1500, false, 0, 1, 0},
		{"floor", [][2]int{{300, 1500}}, 552, true, 1, 0, 1},
		{"plateau", [][2]int{{0, 1500}}, 1492, false, 1, 0, 0},
		{"plateau once per flight", [][2]int{{0, 1500}, {0, 1500}}, 1492, false, 1, 1, 0},
		{"plateaus down", [][2]int{{0, 1500}, {0, 1492}}, 1006, false, 2, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			ip := h.S.IPv4()
			for _, r := range tc.reports {
				ip.UpdatePMTU(rawtest.PeerAddr, r[0], r[1])
			}
			ri := routeMTU(t, ip, rawtest.PeerAddr)
			if ri.MTU != tc.wantMTU || ri.PMTULocked != tc.wantLocked {
				t.Errorf("path MTU %d, locked %v; want %d, %v", ri.MTU, ri.PMTULocked, tc.wantMTU, tc.wantLocked)
			}
			if other := routeMTU(t, ip, netip.MustParseAddr("10.1.0.9")); other.MTU != 1500 {
				t.Errorf("another destination's MTU %d, want the link's 1500", other.MTU)
			}
			for name, want := range map[string]int64{"IPv4.PMTUUpdates": tc.updates, "IPv4.PMTUIgnored": tc.ignored, "IPv4.PMTUClamped": tc.clamped} {
				if got := h.Counter(t, name); got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
		})
	}
}

// The estimate holds for PMTUExpiry, then the link's MTU is tried again
// (RFC 1191 section 6.3).
func TestPMTUExpires(t *testing.T) {
	h := rawtest.New(t, stack.Config{IPv4: ipv4.Config{PMTUExpiry: time.Minute}})
	ip := h.S.IPv4()
	ip.UpdatePMTU(rawtest.PeerAddr, 1280, 1500)
	h.Clock.Advance(time.Minute - time.Nanosecond)
	if got := routeMTU(t, ip, rawtest.PeerAddr).MTU; got != 1280 {
		t.Fatalf("path MTU %d before expiry, want 1280", got)
	}
	h.Clock.Advance(time.Nanosecond)
	if got := routeMTU(t, ip, rawtest.PeerAddr).MTU; got != 1500 {
		t.Fatalf("path MTU %d at expiry, want 1500", got)
	}
	// A new report starts a new entry.
	ip.UpdatePMTU(rawtest.PeerAddr, 1400, 1500)
	if got := routeMTU(t, ip, rawtest.PeerAddr).MTU; got != 1400 {
		t.Fatalf("path MTU %d after a new report, want 1400", got)
	}
}

// UDP sends through the same route lookup: a datagram larger than the path
// MTU is fragmented to fit it, not the link.
func TestUDPFragmentsToThePathMTU(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	h.S.IPv4().UpdatePMTU(rawtest.PeerAddr, 1006, 1500)
	c, err := h.S.ListenUDP(netip.AddrPortFrom(rawtest.StackAddr, 5000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteToUDPAddrPort(data(1400), netip.AddrPortFrom(rawtest.PeerAddr, 6000)); err != nil {
		t.Fatal(err)
	}
	whole, frags := datagram(t, h)
	if len(frags) != 2 {
		t.Fatalf("%d fragments, want 2", len(frags))
	}
	for _, f := range frags {
		if int(f.Length) > 1006 {
			t.Errorf("fragment of %d bytes exceeds the path MTU 1006", f.Length)
		}
	}
	if whole.Protocol != layers.IPProtocolUDP || int(whole.Length) != 20+8+1400 {
		t.Errorf("reassembled %v of %d bytes, want UDP of %d", whole.Protocol, whole.Length, 20+8+1400)
	}
}

// The cache holds at most 1024 destinations: a report for another one, once
// full, evicts the entry learnt longest ago (counted), never a fresher one.
func TestPMTUCacheEvictsTheOldestWhenFull(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	if err := h.S.SetDefaultGateway(rawtest.PeerAddr, rawtest.NIC); err != nil {
		t.Fatal(err)
	}
	ip := h.S.IPv4()
	dst := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}) }
	const full = 1024
	for i := range full + 1 {
		ip.UpdatePMTU(dst(i), 1400, 1500)
		h.Clock.Advance(time.Millisecond)
	}
	if got := h.Counter(t, "IPv4.PMTUEvictions"); got != 1 {
		t.Errorf("PMTUEvictions = %d, want 1", got)
	}
	if got := routeMTU(t, ip, dst(0)).MTU; got != 1500 {
		t.Errorf("the oldest destination's MTU %d, want 1500: evicted", got)
	}
	for _, i := range []int{1, full / 2, full} {
		if got := routeMTU(t, ip, dst(i)).MTU; got != 1400 {
			t.Errorf("destination %d's MTU %d, want 1400 still", i, got)
		}
	}
}
