package dhcpv6

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
)

// iaOption is an IA_NA (RFC 8415 section 21.4) built by hand, each
// address an IA Address (section 21.6) with its preferred and valid
// lifetimes.
func iaOption(iaid, t1, t2 uint32, addrs ...leased) layers.DHCPv6Option {
	d := binary.BigEndian.AppendUint32(nil, iaid)
	d = binary.BigEndian.AppendUint32(d, t1)
	d = binary.BigEndian.AppendUint32(d, t2)
	for _, a := range addrs {
		d = binary.BigEndian.AppendUint16(d, optIAAddr)
		d = binary.BigEndian.AppendUint16(d, 24)
		d = append(d, a.addr.AsSlice()...)
		d = binary.BigEndian.AppendUint32(d, a.preferred)
		d = binary.BigEndian.AppendUint32(d, a.valid)
	}
	return layers.NewDHCPv6Option(layers.DHCPv6OptIANA, d)
}

// answer builds, with gopacket, an Advertise or Reply to the request b.
func answer(t *testing.T, typ layers.DHCPv6MsgType, b []byte, opts ...layers.DHCPv6Option) []byte {
	t.Helper()
	m := decodeRequest(t, replyFor(t, b, opts...))
	m.MsgType = typ
	return serialize(t, m)
}

type leaseEvent struct {
	addr             netip.Addr
	valid, preferred time.Duration
}

func startManaged(t *testing.T) (*Client, *fakeConn, *clock.Virtual, chan leaseEvent) {
	t.Helper()
	conn, clk := newFakeConn(), clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	leases := make(chan leaseEvent, 8)
	c := Start(Config{Conn: conn, Servers: servers, MAC: mac,
		Env:     &env.Env{Clock: clk, Rand: env.NewRand(rand.NewPCG(5, 6))},
		Learned: func([]netip.Addr, []string) {},
		Lease:   func(a netip.Addr, v, p time.Duration) { leases <- leaseEvent{a, v, p} }})
	t.Cleanup(c.Close)
	c.Manage()
	return c, conn, clk, leases
}

func nextLease(t *testing.T, leases chan leaseEvent) leaseEvent {
	t.Helper()
	select {
	case e := <-leases:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no lease event")
		return leaseEvent{}
	}
}

func iaOf(t *testing.T, d *layers.DHCPv6) *lease {
	t.Helper()
	data, ok := option(d, layers.DHCPv6OptIANA)
	if !ok {
		t.Fatalf("%v without an IA_NA", d.MsgType)
	}
	ia, ok := parseIANA(data)
	if !ok {
		t.Fatalf("IA_NA %x", data)
	}
	return ia
}

var leasedAddr = netip.MustParseAddr("2001:db8::100")

// TestManagedClientLeasesRenewsRebindsAndDeclines walks RFC 8415 section
// 18.2: Solicit and the most preferred Advertise of the first timeout,
// Request to its server, the Reply's address leased; a Renew to that
// server at T1, a Rebind to any at T2, the lease extended by its answer;
// and an address declined once DAD finds it in use, then Solicit again.
func TestManagedClientLeasesRenewsRebindsAndDeclines(t *testing.T) {
	c, conn, clk, leases := startManaged(t)
	sol := conn.next(t)
	d := decodeRequest(t, sol)
	if d.MsgType != layers.DHCPv6MsgTypeSolicit || iaOf(t, d).iaid != c.iaid {
		t.Fatalf("%v with IA_NA %+v, want a Solicit for IAID %x", d.MsgType, iaOf(t, d), c.iaid)
	}
	if _, ok := option(d, layers.DHCPv6OptServerID); ok {
		t.Error("a Solicit names a server")
	}
	// Two Advertises within the first timeout: the more preferred wins.
	other := []byte{0, 3, 0, 1, 2, 0, 0, 0, 0x66, 0x98}
	low := answer(t, layers.DHCPv6MsgTypeAdvertise, sol, iaOption(c.iaid, 0, 0, leased{netip.MustParseAddr("2001:db8::200"), 3600, 7200}))
	copy(low[4+4:], other) // another server, preference 0
	conn.recv <- low
	conn.recv <- answer(t, layers.DHCPv6MsgTypeAdvertise, sol, layers.NewDHCPv6Option(layers.DHCPv6OptPreference, []byte{10}),
		iaOption(c.iaid, 0, 0, leased{leasedAddr, 3600, 7200}))
	for deadline := time.Now().Add(5 * time.Second); c.Stats.InAdvertises.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Advertises were not gathered")
		}
	}
	clk.WaitPending(1)
	clk.Advance(SolTimeout * 11 / 10)
	reqB := conn.next(t)
	req := decodeRequest(t, reqB)
	if id, _ := option(req, layers.DHCPv6OptServerID); req.MsgType != layers.DHCPv6MsgTypeRequest || string(id) != string(serverID) {
		t.Fatalf("%v to server %x, want a Request to %x", req.MsgType, id, serverID)
	}
	if ia := iaOf(t, req); len(ia.addrs) != 1 || ia.addrs[0].addr != leasedAddr {
		t.Errorf("Request's IA_NA %+v, want %v", ia, leasedAddr)
	}
	conn.recv <- answer(t, layers.DHCPv6MsgTypeReply, reqB, iaOption(c.iaid, 1800, 2880, leased{leasedAddr, 3600, 7200}))
	if e := nextLease(t, leases); e != (leaseEvent{leasedAddr, 7200 * time.Second, 3600 * time.Second}) {
		t.Fatalf("lease %+v", e)
	}

	// T1: a Renew to the server.
	clk.WaitPending(1)
	clk.Advance(1800 * time.Second)
	ren := decodeRequest(t, conn.next(t))
	if id, _ := option(ren, layers.DHCPv6OptServerID); ren.MsgType != layers.DHCPv6MsgTypeRenew || string(id) != string(serverID) {
		t.Fatalf("%v to %x at T1, want a Renew to the server", ren.MsgType, id)
	}
	// Unanswered until T2: a Rebind to any server.
	var reb []byte
	for deadline := time.Now().Add(5 * time.Second); reb == nil; {
		clk.WaitPending(1)
		clk.Advance(RenMaxRT)
		for _, b := range drain(conn) {
			if d := decodeRequest(t, b); d.MsgType == layers.DHCPv6MsgTypeRebind {
				reb = b
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no Rebind after T2")
		}
	}
	if _, ok := option(decodeRequest(t, reb), layers.DHCPv6OptServerID); ok {
		t.Error("a Rebind names a server")
	}
	conn.recv <- answer(t, layers.DHCPv6MsgTypeReply, reb, iaOption(c.iaid, 1800, 2880, leased{leasedAddr, 3600, 7200}))
	if e := nextLease(t, leases); e.addr != leasedAddr || e.valid != 7200*time.Second {
		t.Fatalf("extension %+v", e)
	}

	// DAD finds it in use: a Decline, the address taken away, a Solicit.
	c.Declined(leasedAddr)
	dec := conn.next(t)
	dd := decodeRequest(t, dec)
	if ia := iaOf(t, dd); dd.MsgType != layers.DHCPv6MsgTypeDecline || len(ia.addrs) != 1 || ia.addrs[0].addr != leasedAddr {
		t.Fatalf("%v with %+v, want a Decline of %v", dd.MsgType, ia, leasedAddr)
	}
	conn.recv <- answer(t, layers.DHCPv6MsgTypeReply, dec)
	if e := nextLease(t, leases); e != (leaseEvent{addr: leasedAddr}) {
		t.Fatalf("after the Decline %+v, want the address taken away", e)
	}
	if d := decodeRequest(t, conn.next(t)); d.MsgType != layers.DHCPv6MsgTypeSolicit {
		t.Errorf("%v after the Decline, want a Solicit", d.MsgType)
	}
	if n := c.Stats.LeasesLost.Load(); n != 1 {
		t.Errorf("LeasesLost = %d", n)
	}
}

// drain returns what the client sent so far.
func drain(c *fakeConn) [][]byte {
	var out [][]byte
	for {
		select {
		case b := <-c.sent:
			out = append(out, b)
		case <-time.After(20 * time.Millisecond):
			return out
		}
	}
}

// leaseOnce has a managed client lease leasedAddr at once: an Advertise
// of preference 255 to its Solicit, a Reply to its Request (T1 1800 s, T2
// 2880 s).
func leaseOnce(t *testing.T, c *Client, conn *fakeConn, leases chan leaseEvent) {
	t.Helper()
	sol := conn.next(t)
	conn.recv <- answer(t, layers.DHCPv6MsgTypeAdvertise, sol, layers.NewDHCPv6Option(layers.DHCPv6OptPreference, []byte{255}),
		iaOption(c.iaid, 0, 0, leased{leasedAddr, 3600, 7200}))
	req := conn.next(t)
	conn.recv <- answer(t, layers.DHCPv6MsgTypeReply, req, iaOption(c.iaid, 1800, 2880, leased{leasedAddr, 3600, 7200}))
	nextLease(t, leases)
}

// TestRenewAnsweredNoBindingRequestsAgain pins section 18.2.10.1: a Renew
// answered with NoBinding for the IA_NA is followed by a Request for it.
func TestRenewAnsweredNoBindingRequestsAgain(t *testing.T) {
	c, conn, clk, leases := startManaged(t)
	leaseOnce(t, c, conn, leases)
	clk.WaitPending(1)
	clk.Advance(1800 * time.Second)
	ren := conn.next(t)
	noBinding := binary.BigEndian.AppendUint32(nil, c.iaid)
	noBinding = append(noBinding, make([]byte, 8)...)
	noBinding = append(noBinding, 0, optStatusCode, 0, 2, 0, statusNoBinding)
	conn.recv <- answer(t, layers.DHCPv6MsgTypeReply, ren, layers.NewDHCPv6Option(layers.DHCPv6OptIANA, noBinding))
	req := decodeRequest(t, conn.next(t))
	if id, _ := option(req, layers.DHCPv6OptServerID); req.MsgType != layers.DHCPv6MsgTypeRequest || string(id) != string(serverID) {
		t.Fatalf("%v to %x after NoBinding, want a Request to the server", req.MsgType, id)
	}
	if ia := iaOf(t, req); len(ia.addrs) != 1 || ia.addrs[0].addr != leasedAddr {
		t.Errorf("the Request's IA_NA %+v, want %v", ia, leasedAddr)
	}
}

// TestReleaseGivesTheLeaseBack pins Release: one Release message to the
// server naming the address, and the address taken away.
func TestReleaseGivesTheLeaseBack(t *testing.T) {
	c, conn, _, leases := startManaged(t)
	leaseOnce(t, c, conn, leases)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Release(ctx)
	rel := decodeRequest(t, conn.next(t))
	if id, _ := option(rel, layers.DHCPv6OptServerID); rel.MsgType != layers.DHCPv6MsgTypeRelease || string(id) != string(serverID) {
		t.Fatalf("%v to %x, want a Release to the server", rel.MsgType, id)
	}
	if ia := iaOf(t, rel); len(ia.addrs) != 1 || ia.addrs[0].addr != leasedAddr {
		t.Errorf("Release's IA_NA %+v, want %v", ia, leasedAddr)
	}
	if e := nextLease(t, leases); e != (leaseEvent{addr: leasedAddr}) {
		t.Errorf("after Release %+v, want the address taken away", e)
	}
}

// TestReleaseWithNothingLeasedReturnsAtOnce: a stateless client has
// nothing to give back.
func TestReleaseWithNothingLeasedReturnsAtOnce(t *testing.T) {
	c, conn, _, _ := startClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Release(ctx)
	if ctx.Err() != nil {
		t.Fatal("Release waited out its context")
	}
	conn.none(t)
}

// TestLinkUpConfirmsTheLease: the link coming up sends a Confirm (RFC 8415
// section 18.2.3) after up to CNF_MAX_DELAY, of the IA_NA's addresses
// with zero lifetimes, naming no server; a Reply of Success keeps the
// lease, no Reply within CNF_MAX_RD keeps it too, and NotOnLink ends it
// and the client solicits again.
func TestLinkUpConfirmsTheLease(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer []layers.DHCPv6Option // nil: no Reply
		lost   bool
	}{
		{"success: the lease stands", []layers.DHCPv6Option{}, false},
		{"no reply: the lease stands", nil, false},
		{"not on link: solicit again", []layers.DHCPv6Option{layers.NewDHCPv6Option(layers.DHCPv6OptStatusCode, []byte{0, statusNotOnLink})}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, conn, clk, leases := startManaged(t)
			leaseOnce(t, c, conn, leases)
			clk.WaitPending(1) // T1
			c.LinkUp()
			// The Confirm goes within CNF_MAX_DELAY.
			var cnfB []byte
			for step := 0; cnfB == nil; step++ {
				if step > 20 {
					t.Fatal("no Confirm within CNF_MAX_DELAY")
				}
				select {
				case cnfB = <-conn.sent:
				case <-time.After(10 * time.Millisecond):
					clk.Advance(CnfMaxDelay / 10)
				}
			}
			cnf := decodeRequest(t, cnfB)
			if cnf.MsgType != layers.DHCPv6MsgTypeConfirm {
				t.Fatalf("%v after the link came up, want a Confirm", cnf.MsgType)
			}
			if _, ok := option(cnf, layers.DHCPv6OptServerID); ok {
				t.Error("a Confirm names a server")
			}
			ia := iaOf(t, cnf)
			if len(ia.addrs) != 1 || ia.addrs[0] != (leased{addr: leasedAddr}) || ia.t1 != 0 || ia.t2 != 0 {
				t.Errorf("Confirm's IA_NA %+v, want %v with every lifetime zero", ia, leasedAddr)
			}
			if tt.answer != nil {
				conn.recv <- answer(t, layers.DHCPv6MsgTypeReply, cnfB, tt.answer...)
			} else {
				for clk.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) < CnfMaxRD+CnfMaxDelay {
					clk.WaitPending(1)
					clk.Advance(CnfMaxRT * 11 / 10)
					drain(conn)
				}
			}
			if tt.lost {
				if e := nextLease(t, leases); e != (leaseEvent{addr: leasedAddr}) {
					t.Fatalf("%+v after NotOnLink, want the address taken away", e)
				}
				if d := decodeRequest(t, conn.next(t)); d.MsgType != layers.DHCPv6MsgTypeSolicit {
					t.Errorf("%v after NotOnLink, want a Solicit", d.MsgType)
				}
				if c.Stats.NotOnLink.Load() != 1 {
					t.Errorf("NotOnLink = %d", c.Stats.NotOnLink.Load())
				}
				return
			}
			// The lease stands: renewed at T1.
			select {
			case e := <-leases:
				t.Fatalf("lease event %+v: the lease should stand", e)
			case <-time.After(50 * time.Millisecond):
			}
			for deadline := time.Now().Add(5 * time.Second); ; {
				clk.WaitPending(1)
				clk.Advance(1800 * time.Second)
				if slicesContainsType(t, drain(conn), layers.DHCPv6MsgTypeRenew) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no Renew at T1 after the Confirm")
				}
			}
			if c.Stats.LinkUps.Load() != 1 || c.Stats.OutConfirms.Load() == 0 {
				t.Errorf("LinkUps %d OutConfirms %d", c.Stats.LinkUps.Load(), c.Stats.OutConfirms.Load())
			}
		})
	}
}

func slicesContainsType(t *testing.T, bs [][]byte, typ layers.DHCPv6MsgType) bool {
	for _, b := range bs {
		if decodeRequest(t, b).MsgType == typ {
			return true
		}
	}
	return false
}
