package arp_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

// TestLinkUpProbesForDefendedAddressesAgain pins RFC 5227 section 2.1
// ("when a link-state change signals that an Ethernet cable has been
// connected") as arp.Protocol.Verify does it: the cable pulled and plugged
// in again, the defended address is probed for while it stays in use; a
// station that answers takes it, whatever its policy, and otherwise it is
// announced again. Another station's probe for it meanwhile is answered,
// since the address is ours, and is no conflict. The static address,
// which nothing defends, is announced at once as before.
func TestLinkUpProbesForDefendedAddressesAgain(t *testing.T) {
	other := net.HardwareAddr{0x02, 0, 0, 0, 0x60, 0x60}
	tests := []struct {
		name     string
		inject   func(h *rawtest.Host) // after the first probe
		conflict bool
	}{
		{"nobody answers", func(*rawtest.Host) {}, false},
		{"the holder answers the probe", func(h *rawtest.Host) {
			h.Inject(h.ARPFrame(t, layers.ARPReply, holderMAC, candidate, rawtest.StackMAC, zeroAddr))
		}, true},
		{"another station probes for it", func(h *rawtest.Host) {
			h.Inject(h.ARPFrame(t, layers.ARPRequest, other, zeroAddr, nil, candidate))
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{ARP: arp.Config{ACD: arp.ACDConfig{Announcements: 1}}})
			events := make(chan arp.Conflict, 2)
			addWithACD(t, h, stack.AddressOptions{Defend: arp.Keep, OnConflict: func(c arp.Conflict) { events <- c }})
			h.Wire.SetUp(false)
			h.Wire.SetUp(true)
			// The static address is announced at once; the defended
			// one is probed for.
			if f := h.Expect(t, rawtest.Timeout); !isAnnouncementOf(t, f, rawtest.StackAddr) {
				t.Fatalf("first frame after the link came up: %s, want the static address's announcement", rawtest.Describe(f))
			}
			p := &probing{h: h}
			p.fire(t)
			checkProbe(t, h.Expect(t, rawtest.Timeout), candidate)
			if !h.S.IPv4().IsLocal(candidate) {
				t.Fatal("the address was taken out of use while probed for")
			}
			tt.inject(h)
			seen := h.Barrier(t)
			if !tt.conflict {
				if tt.name == "another station probes for it" && (len(seen) != 1 || !isReplyFor(t, seen[0], other)) {
					t.Errorf("sent %d frames in answer to the other station's probe, want one reply", len(seen))
				}
				for range 3 {
					p.fire(t)
				}
				f := h.Expect(t, rawtest.Timeout)
				for isProbe(t, f) {
					f = h.Expect(t, rawtest.Timeout)
				}
				if !isAnnouncement(t, f) {
					t.Errorf("after the probes: %s, want the address announced", rawtest.Describe(f))
				}
				if !h.S.IPv4().IsLocal(candidate) {
					t.Error("the address was given up with nobody holding it")
				}
				if _, ok := mustARP(t, h).Defended(candidate); !ok {
					t.Error("the address is no longer defended")
				}
			} else {
				var c arp.Conflict
				select {
				case c = <-events:
				case <-time.After(rawtest.Timeout):
					t.Fatal("the conflict was not reported")
				}
				if !c.GaveUp || c.Defended || !bytes.Equal(c.MAC[:], holderMAC) {
					t.Errorf("conflict %+v, want given up to %v", c, holderMAC)
				}
				for _, f := range seen {
					if isAnnouncement(t, f) {
						t.Error("the address was defended while verified: a station holds it")
					}
				}
				eventuallyRemoved(t, h)
				if got := h.Counter(t, "ARP.eth0.AddressesLost"); got != 1 {
					t.Errorf("AddressesLost = %d, want 1", got)
				}
			}
			if got := h.Counter(t, "ARP.eth0.Verifications"); got != 1 {
				t.Errorf("Verifications = %d, want 1", got)
			}
		})
	}
}

// TestLinkDownEndsAVerification: the cable pulled again while the address
// is probed for ends the probe, the address kept; the next time the link
// comes up it is probed for again.
func TestLinkDownEndsAVerification(t *testing.T) {
	h := rawtest.New(t, stack.Config{ARP: arp.Config{ACD: arp.ACDConfig{Announcements: 1}}})
	addWithACD(t, h, stack.AddressOptions{Defend: arp.Keep})
	h.Wire.SetUp(false)
	h.Wire.SetUp(true)
	h.Expect(t, rawtest.Timeout) // the static address's announcement
	p := &probing{h: h}
	p.fire(t)
	checkProbe(t, h.Expect(t, rawtest.Timeout), candidate)
	h.Wire.SetUp(false)
	// The probe ends, its timer with it: none is left for the clock.
	deadline := time.Now().Add(rawtest.Timeout)
	for h.Clock.Pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the probe did not end when the link went down")
		}
		time.Sleep(time.Millisecond)
	}
	h.Wire.SetUp(true)
	h.Expect(t, rawtest.Timeout)
	for sent := 0; sent < 3; {
		p.fire(t)
		if f := h.Expect(t, rawtest.Timeout); isProbe(t, f) {
			sent++
		}
	}
	p.fire(t)
	if f := h.Expect(t, rawtest.Timeout); !isAnnouncement(t, f) {
		t.Errorf("after the second verification's probes: %s, want the announcement", rawtest.Describe(f))
	}
	if got := h.Counter(t, "ARP.eth0.Verifications"); got != 2 {
		t.Errorf("Verifications = %d, want 2", got)
	}
	if !h.S.IPv4().IsLocal(candidate) {
		t.Error("the address was lost")
	}
}

func isProbe(t *testing.T, frame []byte) bool {
	t.Helper()
	_, a := rawtest.ARPOf(t, frame)
	return a.Operation == layers.ARPRequest && rawtest.Addr(a.SourceProtAddress) == zeroAddr && rawtest.Addr(a.DstProtAddress) == candidate
}

func isReplyFor(t *testing.T, frame []byte, mac net.HardwareAddr) bool {
	t.Helper()
	_, a := rawtest.ARPOf(t, frame)
	return a.Operation == layers.ARPReply && rawtest.Addr(a.SourceProtAddress) == candidate && bytes.Equal(a.DstHwAddress, mac)
}

func eventuallyRemoved(t *testing.T, h *rawtest.Host) {
	t.Helper()
	deadline := time.Now().Add(rawtest.Timeout)
	for h.S.IPv4().IsLocal(candidate) {
		if time.Now().After(deadline) {
			t.Fatal("the address given up is still assigned")
		}
		time.Sleep(time.Millisecond)
	}
}
