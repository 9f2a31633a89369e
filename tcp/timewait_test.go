package tcp_test

import (
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// timeWait returns a passive connection the stack closed first, now in
// TIME-WAIT, and its listener; with timestamps, TS.Recent is 1000.
func timeWait(t *testing.T, opts rawtest.TCPOpts) (*rig, *tcp.Listener, *peer) {
	t.Helper()
	r := newRig(t, tcp.Config{})
	l := r.listen(0)
	p := r.synPeer(peerPort, peerISN, opts)
	p.handshake()
	c := acceptOne(t, l)
	if opts.HasTimestamp {
		p.sendTS(A, nil, 1000)
	}
	c.Close()
	p.expect(F|A, p.rcv, p.nxt, 0)
	p.send(F|A, nil)
	p.expectACK()
	p.waitState("TIME-WAIT")
	return r, l, p
}

// RFC 6191: a SYN for a 4-tuple in TIME-WAIT reopens the connection when it
// is newer than the old incarnation: by timestamp when both have them, by
// sequence number otherwise. An older one gets the challenge ACK of RFC
// 5961 4.2 and TIME-WAIT goes on.
func TestTimeWaitNewerSynReopens(t *testing.T) {
	tests := []struct {
		name     string
		opts     rawtest.TCPOpts // the old incarnation's SYN
		synTS    uint32          // the new SYN's timestamp (0: none)
		seqAfter int32           // the new SYN's sequence number - RCV.NXT
		reopens  bool
	}{
		{"timestamps, newer", tsOnly, 2000, -100000, true},
		{"timestamps, equal", tsOnly, 1000, 100000, false},
		{"timestamps, older (PAWS)", tsOnly, 500, 100000, false},
		{"timestamps, newer, sequence number old", tsOnly, 1001, -1, true},
		{"no timestamps, sequence number beyond RCV.NXT", rawtest.TCPOpts{}, 0, 100000, true},
		{"no timestamps, sequence number at RCV.NXT", rawtest.TCPOpts{}, 0, 0, false},
		{"no timestamps, sequence number before RCV.NXT", rawtest.TCPOpts{}, 0, -5, false},
		{"old incarnation with timestamps, SYN without: sequence number beyond", tsOnly, 0, 100000, true},
		{"old incarnation with timestamps, SYN without: sequence number old", tsOnly, 0, -5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, l, p := timeWait(t, tt.opts)
			syn := rawtest.TCPSegment{Seq: p.nxt + uint32(tt.seqAfter), Flags: S, Window: 65535,
				Opts: rawtest.TCPOpts{MSS: 1460}}
			if tt.synTS != 0 {
				syn.Opts.HasTimestamp, syn.Opts.TSVal = true, tt.synTS
			}
			p.inject(syn)
			s := p.nextSeg()
			if !tt.reopens {
				if s.Flags != A || s.Seq != p.rcv || s.Ack != p.nxt {
					t.Fatalf("answer %v, want the challenge ACK <SEQ=%d><ACK=%d>", s, p.rcv, p.nxt)
				}
				r.nothing()
				if st := p.state(); st != "TIME-WAIT" {
					t.Errorf("state %q, want TIME-WAIT", st)
				}
				if n := r.counter("TWReopened"); n != 0 {
					t.Errorf("TWReopened = %d, want 0", n)
				}
				return
			}
			if s.Flags != S|A || s.Ack != syn.Seq+1 {
				t.Fatalf("answer %v, want a SYN-ACK acknowledging %d", s, syn.Seq+1)
			}
			// RFC 1122 4.2.2.13: the new ISS beyond the old SND.NXT (p.rcv
			// here), by a whole window as Linux makes it.
			if s.Seq != p.rcv+65537 {
				t.Errorf("new ISS %d, want the old SND.NXT %d + 65537", s.Seq, p.rcv)
			}
			if s.Opts.HasTimestamp != (tt.synTS != 0) || s.Opts.TSEcr != tt.synTS {
				t.Errorf("SYN-ACK options %+v: the new incarnation negotiates its own", s.Opts)
			}
			r.nothing()
			if st := p.state(); st != "SYN-RECEIVED" {
				t.Errorf("state %q, want SYN-RECEIVED", st)
			}
			if n := r.counter("TWReopened"); n != 1 {
				t.Errorf("TWReopened = %d, want 1", n)
			}
			// The new incarnation completes and carries data.
			np := &peer{rig: r, addr: p.addr, stack: p.stack, iss: s.Seq, rcv: s.Seq + 1, nxt: syn.Seq + 1, wnd: 65535, opts: syn.Opts, ts: tt.synTS}
			np.ack()
			np.send(P|A, []byte("again"))
			checkData(t, readAll(t, acceptOne(t, l), 5), []byte("again"))
		})
	}
}

// Without a listener on the port there is nothing to reopen: a newer SYN
// gets the challenge ACK, and TIME-WAIT goes on.
func TestTimeWaitSynWithoutListenerIsAcknowledged(t *testing.T) {
	r, l, p := timeWait(t, rawtest.TCPOpts{})
	l.Close()
	p.inject(rawtest.TCPSegment{Seq: p.nxt + 100000, Flags: S, Window: 65535})
	p.expectACK()
	r.nothing()
	if st := p.state(); st != "TIME-WAIT" {
		t.Errorf("state %q, want TIME-WAIT", st)
	}
}
