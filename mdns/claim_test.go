package mdns

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/miekg/dns"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/udp"
)

// Claiming a name (sections 8 and 9), between two stacks on one link.

// groupListener listens on s's eth0 for what is sent to the IPv4 mDNS
// group, as another responder would.
func groupListener(t *testing.T, s *stack.Stack) *udp.Conn {
	t.Helper()
	c, err := s.ListenMulticastUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.JoinGroup("eth0", Group4); err != nil {
		t.Fatal(err)
	}
	c.SetMulticastInterface("eth0")
	c.SetMulticastLoopback(false)
	return c
}

// nextQuery returns the next query c receives within d.
func nextQuery(t *testing.T, c *udp.Conn, d time.Duration) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 9000)
	for {
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("no query within %v: %v", d, err)
		}
		var m dns.Msg
		if m.Unpack(buf[:n]) == nil && !m.Response {
			return slices.Clone(buf[:n])
		}
	}
}

func TestProbeAsGopacketDecodesIt(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	c := groupListener(t, a)
	start(t, b, "gonet-b")
	var probes []*layers.DNS
	for range probeCount {
		p := gopacket.NewPacket(nextQuery(t, c, 2*time.Second), layers.LayerTypeDNS, gopacket.Default)
		d, ok := p.Layer(layers.LayerTypeDNS).(*layers.DNS)
		if !ok {
			t.Fatalf("gopacket finds no DNS message in the probe: %v", p.ErrorLayer())
		}
		probes = append(probes, d)
	}
	for i, d := range probes {
		// Section 8.1: a question of type ANY for the name, the first
		// asking for a unicast response; section 18.1: ID zero.
		wantClass := layers.DNSClassIN
		if i == 0 {
			wantClass |= unicastResponse
		}
		switch {
		case d.QR || d.ID != 0 || len(d.Questions) != 1:
			t.Fatalf("probe %d: QR %v ID %d, %d questions; want a query of ID 0 with one", i, d.QR, d.ID, len(d.Questions))
		case string(d.Questions[0].Name) != "gonet-b.local" || d.Questions[0].Type != layers.DNSType(dns.TypeANY) || d.Questions[0].Class != wantClass:
			t.Fatalf("probe %d asks %s type %v class %#x, want gonet-b.local ANY %#x", i, d.Questions[0].Name, d.Questions[0].Type, uint16(d.Questions[0].Class), uint16(wantClass))
		}
		// Section 8.2: the proposed records in the Authority Section,
		// without the cache-flush bit: the A record, and the link-local
		// address's AAAA once it is past DAD.
		var proposed []netip.Addr
		for _, rr := range d.Authorities {
			if string(rr.Name) != "gonet-b.local." && string(rr.Name) != "gonet-b.local" || rr.Class != layers.DNSClassIN {
				t.Fatalf("probe %d proposes a record of %s class %#x, want gonet-b.local IN", i, rr.Name, uint16(rr.Class))
			}
			a, _ := netip.AddrFromSlice(rr.IP)
			proposed = append(proposed, a.Unmap())
		}
		if !slices.Contains(proposed, stacktest.AddrB.Addr()) {
			t.Fatalf("probe %d proposes %v, want %v among them", i, proposed, stacktest.AddrB.Addr())
		}
	}
}

func TestResponderAnswersNothingBeforeItsNameIsClaimed(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	c := groupListener(t, a)
	r := start(t, b, "gonet-b")
	// Claiming takes three probes 250 ms apart and 250 ms more.
	if _, err := c.WriteToUDPAddrPort(query(t, "gonet-b.local.", dns.TypeA, false), netip.AddrPortFrom(Group4, Port)); err != nil {
		t.Fatal(err)
	}
	if m, err := nextResponse(c, 300*time.Millisecond); err == nil {
		t.Fatalf("a response while probing: %v", m)
	}
	if n := r.Stats.Ignored.Load(); n != 1 {
		t.Fatalf("Ignored = %d, want the query", n)
	}
}

func TestTakenNameMovesToTheNext(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	rb := startClaimed(t, b, "twin")
	ra := startClaimed(t, a, "twin")
	if got := ra.Name(); got != "twin-2.local." {
		t.Fatalf("the second host claimed %s, want twin-2.local.", got)
	}
	if got := rb.Name(); got != "twin.local." {
		t.Fatalf("the first host moved to %s", got)
	}
	if ra.Stats.Conflicts.Load() == 0 || ra.Stats.Renamed.Load() != 1 {
		t.Fatalf("second host: %d conflicts, %d renames; want some and one", ra.Stats.Conflicts.Load(), ra.Stats.Renamed.Load())
	}
}

// Two hosts probing for one name at once: the one whose records sort later
// (B, 10.0.0.2) keeps it, the other defers, probes again a second later,
// and finds the name taken.
func TestSimultaneousProbesTieBreak(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	ra := start(t, a, "twin")
	rb := startClaimed(t, b, "twin")
	ctx := t.Context()
	if _, err := ra.WaitClaimed(ctx); err != nil {
		t.Fatal(err)
	}
	if ra.Name() != "twin-2.local." || rb.Name() != "twin.local." {
		t.Fatalf("A claimed %s and B %s, want twin-2.local. and twin.local.", ra.Name(), rb.Name())
	}
	if ra.Stats.TiesLost.Load() == 0 || rb.Stats.TiesLost.Load() != 0 {
		t.Fatalf("ties lost: A %d, B %d; want A some, B none", ra.Stats.TiesLost.Load(), rb.Stats.TiesLost.Load())
	}
}

// Section 9: a response claiming a held name with other data sends the
// holder back to probing, which, unanswered, keeps the name.
func TestConflictAfterClaimProbesAgain(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	c := groupListener(t, a)
	r := startClaimed(t, b, "gonet-b")
	probes := r.Stats.Probes.Load()
	claim := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}}
	claim.Answer = records("gonet-b.local.", []netip.Addr{netip.MustParseAddr("10.0.0.99")}, dns.TypeA, dns.ClassINET|cacheFlush, hostTTL)
	out, err := claim.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteToUDPAddrPort(out, netip.AddrPortFrom(Group4, Port)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); r.Stats.Probes.Load() < probes+probeCount; {
		if time.Now().After(deadline) {
			t.Fatalf("%d probes after the conflict, want %d (%d conflicts)", r.Stats.Probes.Load()-probes, probeCount, r.Stats.Conflicts.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.Name() != "gonet-b.local." || r.Stats.Renamed.Load() != 0 {
		t.Fatalf("moved to %s after a conflict no host kept up", r.Name())
	}
}

func TestGoodbyeOnClose(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	c := groupListener(t, a)
	r := startClaimed(t, b, "gonet-b")
	time.Sleep(announceInterval + 100*time.Millisecond) // past the announcements
	r.Close()
	for {
		m, err := nextResponse(c, 2*time.Second)
		if err != nil {
			t.Fatalf("no goodbye: %v (%d announcements, %d errors)", err, r.Stats.Announcements.Load(), r.Stats.Errors.Load())
		}
		goodbye := len(m.Answer) > 0 && !slices.ContainsFunc(m.Answer, func(rr dns.RR) bool {
			return rr.Header().Ttl != 0 || rr.Header().Name != "gonet-b.local."
		})
		if goodbye {
			return
		}
	}
}

// Section 8.4: an address added is announced, and one removed said
// goodbye to, without a query asking.
func TestAddressChangesAreAnnounced(t *testing.T) {
	// IPv6 without DAD: b's addresses are all there when Pair returns,
	// so the only changes the responder sees are the test's (a
	// link-local address passing DAD would set off announcements of its
	// own).
	a, b := stacktest.Pair(t, stacktest.Options{IPv6: true})
	c := groupListener(t, a)
	startClaimed(t, b, "gonet-b")
	added := netip.MustParsePrefix("10.0.0.77/24")
	holds := func(m *dns.Msg, ttl uint32) bool {
		return slices.ContainsFunc(m.Answer, func(rr dns.RR) bool {
			v, ok := rr.(*dns.A)
			return ok && v.A.Equal(added.Addr().AsSlice()) && v.Hdr.Ttl == ttl
		})
	}
	// The deadline only bounds a failure: the watch and the
	// announcements are wall-clock timers a second apart, which a
	// loaded machine stretches.
	waitResponse := func(what string, ok func(*dns.Msg) bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			m, err := nextResponse(c, time.Until(deadline))
			if err != nil {
				t.Fatalf("no %s: %v", what, err)
			}
			if ok(m) {
				return
			}
		}
	}
	// Each change is made once the announcements before it are over, so
	// that the responder's watch, not its next announcement, finds it:
	// an announcement takes the addresses afresh, and one that found an
	// address gone would say no goodbye to it.
	for i := range announceCount {
		waitResponse(fmt.Sprintf("announcement %d of the name claimed", i+1), func(*dns.Msg) bool { return true })
	}
	if err := b.AddAddress("eth0", added); err != nil {
		t.Fatal(err)
	}
	for i := range announceCount {
		waitResponse(fmt.Sprintf("announcement %d of the address added", i+1), func(m *dns.Msg) bool { return holds(m, hostTTL) })
	}
	if err := b.RemoveAddress("eth0", added.Addr()); err != nil {
		t.Fatal(err)
	}
	waitResponse("goodbye to the address removed", func(m *dns.Msg) bool { return holds(m, 0) })
}

// TestAnAnnouncementSaysGoodbyeToAnAddressGone pins RFC 6762 section
// 10.1 for an address removed between a round's announcements: the next
// announcement, which takes the addresses afresh, says goodbye to it,
// since the responder's watch, coming after, finds nothing changed. The
// claim is the test's own, stepped by hand in the middle of a round, so
// that the order the responder's two timers fire in plays no part.
func TestAnAnnouncementSaysGoodbyeToAnAddressGone(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{IPv6: true})
	c := groupListener(t, a)
	r := startClaimed(t, b, "gonet-b")
	gone := netip.MustParseAddr("10.0.0.78")
	timer := b.Clock().NewTimer(time.Hour)
	defer timer.Stop()
	cl := &claim{ph: announcing, sent: 1, announced: append(r.addrs(), gone), timer: timer}
	r.step(cl)
	for deadline := time.Now().Add(10 * time.Second); ; {
		m, err := nextResponse(c, time.Until(deadline))
		if err != nil {
			t.Fatalf("no goodbye to %v: %v", gone, err)
		}
		if slices.ContainsFunc(m.Answer, func(rr dns.RR) bool {
			v, ok := rr.(*dns.A)
			return ok && v.A.Equal(gone.AsSlice()) && v.Hdr.Ttl == 0
		}) {
			break
		}
	}
	if slices.Contains(cl.announced, gone) {
		t.Errorf("announced %v after the announcement, still with %v", cl.announced, gone)
	}
}

func TestTieBreakFollowsRFC6762(t *testing.T) {
	a := func(name, addr string) dns.RR {
		return records(name, []netip.Addr{netip.MustParseAddr(addr)}, dns.TypeANY, dns.ClassINET, hostTTL)[0]
	}
	flushed := a("x.local.", "10.0.0.2")
	flushed.Header().Class |= cacheFlush
	tests := []struct {
		name         string
		ours, theirs []dns.RR
		want         int
	}{
		{"later rdata wins", []dns.RR{a("x.local.", "10.0.0.2")}, []dns.RR{a("x.local.", "10.0.0.1")}, 1},
		{"earlier rdata loses", []dns.RR{a("x.local.", "10.0.0.1")}, []dns.RR{a("x.local.", "10.0.0.2")}, -1},
		{"the same records tie", []dns.RR{a("x.local.", "10.0.0.1")}, []dns.RR{a("x.local.", "10.0.0.1")}, 0},
		{"the cache-flush bit is no part of the class", []dns.RR{a("x.local.", "10.0.0.2")}, []dns.RR{flushed}, 0},
		{"AAAA (28) sorts after A (1)", []dns.RR{a("x.local.", "fd00::1")}, []dns.RR{a("x.local.", "10.0.0.9")}, 1},
		{"sorted before compared", []dns.RR{a("x.local.", "10.0.0.9"), a("x.local.", "10.0.0.1")}, []dns.RR{a("x.local.", "10.0.0.1"), a("x.local.", "10.0.0.5")}, 1},
		{"a set that runs out first loses", []dns.RR{a("x.local.", "10.0.0.1")}, []dns.RR{a("x.local.", "10.0.0.1"), a("x.local.", "fd00::1")}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tieBreak(tt.ours, tt.theirs); max(-1, min(1, got)) != tt.want {
				t.Fatalf("tieBreak = %d, want the sign of %d", got, tt.want)
			}
		})
	}
}

func TestConflictingFollowsRFC6762(t *testing.T) {
	ours := []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fe80::2")}
	resp := func(ttl uint32, rrs ...dns.RR) *dns.Msg {
		for _, rr := range rrs {
			rr.Header().Ttl = ttl
		}
		return &dns.Msg{MsgHdr: dns.MsgHdr{Response: true}, Answer: rrs}
	}
	addr := func(name, a string) dns.RR {
		return records(name, []netip.Addr{netip.MustParseAddr(a)}, dns.TypeANY, dns.ClassINET|cacheFlush, hostTTL)[0]
	}
	txt := &dns.TXT{Hdr: dns.RR_Header{Name: "gonet.local.", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"x"}}
	tests := []struct {
		name             string
		m                *dns.Msg
		probing, claimed bool // a conflict while probing, once claimed
	}{
		{"another address for the name", resp(hostTTL, addr("gonet.local.", "10.0.0.9")), true, true},
		{"the name in another case", resp(hostTTL, addr("GONET.local.", "10.0.0.9")), true, true},
		{"our own records", resp(hostTTL, addr("gonet.local.", "10.0.0.2"), addr("gonet.local.", "fe80::2")), false, false},
		{"another name", resp(hostTTL, addr("other.local.", "10.0.0.9")), false, false},
		{"a goodbye", resp(0, addr("gonet.local.", "10.0.0.9")), false, false},
		{"another type for the name", resp(hostTTL, txt), true, false},
		{"in the additional section", &dns.Msg{MsgHdr: dns.MsgHdr{Response: true}, Extra: []dns.RR{addr("gonet.local.", "10.0.0.9")}}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := zone{host: "gonet.local.", addrs: ours}
			if got := len(conflicts(tt.m, z, true)) > 0; got != tt.probing {
				t.Errorf("while probing: conflict %v, want %v", got, tt.probing)
			}
			if got := len(conflicts(tt.m, z, false)) > 0; got != tt.claimed {
				t.Errorf("once claimed: conflict %v, want %v", got, tt.claimed)
			}
		})
	}
}

// Section 8.1: the link coming up sends a responder back to probing and
// announcing its name, as when it started: another host may hold the name
// on the link it is on now. Here the other host took the name while the
// link was down (its probes went nowhere); when the link comes up both
// probe, the simultaneous probes are decided by section 8.2's tie-break,
// and the loser moves to the next name.
func TestLinkUpProbesAgain(t *testing.T) {
	var cable *pipe.Endpoint
	a, b := stacktest.Pair(t, stacktest.Options{WrapA: func(e link.Endpoint) link.Endpoint {
		cable = e.(*pipe.Endpoint)
		return e
	}})
	rb := startClaimed(t, b, "roams")
	waitUntil(t, "B's announcements", func() bool { return rb.Stats.Announcements.Load() >= 2 })
	cable.SetUp(false)
	// What B sent before reaches A's NIC before A's responder starts.
	waitUntil(t, "A's NIC to read what B sent", func() bool { return cable.Queued() == 0 })
	time.Sleep(50 * time.Millisecond)
	ra := startClaimed(t, a, "roams")
	// Its announcements go nowhere too, so that only probing again can
	// find the conflict.
	waitUntil(t, "A's announcements", func() bool { return ra.Stats.Announcements.Load() >= 2 })
	if ra.Name() != rb.Name() {
		t.Fatalf("A took %s though B held %s: it heard B over a link down", ra.Name(), rb.Name())
	}
	probes := rb.Stats.Probes.Load()
	cable.SetUp(true)
	waitUntil(t, "one of them to give the name up", func() bool { return ra.Name() != rb.Name() })
	names := []string{ra.Name(), rb.Name()}
	slices.Sort(names)
	if !slices.Equal(names, []string{"roams-2.local.", "roams.local."}) {
		t.Errorf("names %q, want roams and roams-2", names)
	}
	// A responder yet to take its link's coming up is still claimed
	// and answers the other's probe, so the names can part before both
	// have taken it, and before B's first probe (up to 250 ms after):
	// the counters are given the time to catch up.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if rb.Stats.LinkUps.Load() >= 1 && ra.Stats.LinkUps.Load() >= 1 && rb.Stats.Probes.Load() > probes {
			break
		}
	}
	if rb.Stats.LinkUps.Load() != 1 || ra.Stats.LinkUps.Load() != 1 || rb.Stats.Probes.Load() == probes {
		t.Errorf("LinkUps %d and %d, probes %d after %d: want the link's coming up to send both back to probing",
			ra.Stats.LinkUps.Load(), rb.Stats.LinkUps.Load(), rb.Stats.Probes.Load(), probes)
	}
}

// waitUntil polls cond on the wall clock for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
	}
}
