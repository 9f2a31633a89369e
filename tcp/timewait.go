package tcp

import (
	"github.com/gonetstack/gonet/wire"
)

// Reopening a connection from TIME-WAIT (RFC 6191, after RFC 1122
// 4.2.2.13). TIME-WAIT exists so that old duplicates of a connection
// cannot land in its next incarnation; a client that reconnects from the
// same port within 2 MSL would otherwise wait out the 60 s for nothing. A
// SYN that is provably newer than anything the old incarnation sent
// cannot be such a duplicate, and RFC 6191 section 2 honours it: with
// timestamps, "the timestamp contained in the incoming SYN segment is
// greater than the last timestamp seen on the previous incarnation";
// without them (either incarnation), "the sequence number of the incoming
// SYN segment is greater than the last sequence number seen". The TIME-WAIT
// connection then ends and the SYN goes to the listener, as in Linux's
// tcp_timewait_state_process (TCP_TW_SYN), or for a connection the
// forwarder accepted, to the forwarder's hook (forward.go).
//
// A SYN that fails the test, or finds no listener, is answered as before:
// a challenge ACK (RFC 5961 4.2), which tells a peer that lost its state
// where the old incarnation stood. RFC 6191 would drop it silently; Linux
// acknowledges it too. A SYN whose timestamp is older than TS.Recent never
// gets here: PAWS answers it first.

// timeWaitReopen hands a SYN that may reopen the connection to the
// listener of the port and ends TIME-WAIT. It reports whether it did; the
// listener then owns the segment's packet.
func (c *Conn) timeWaitReopen(seg *segment) bool {
	if c.state != TimeWait || seg.flags&(wire.TCPFlagSYN|wire.TCPFlagACK|wire.TCPFlagRST) != wire.TCPFlagSYN {
		return false
	}
	if c.tsOK && seg.opts.HasTimestamp {
		if int32(seg.opts.TSVal-c.rcv.tsRecent) <= 0 {
			return false
		}
	} else if !seg.seq.GreaterThan(c.rcv.nxt) {
		return false
	}
	// Leave the table now rather than when the goroutine exits, so that
	// the listener can register the new incarnation under the same
	// 4-tuple (exit's unregister then finds it is not ours to remove).
	p := c.p
	p.mu.Lock()
	l := p.listenerFor(c.net, c.id.local)
	// A connection the forwarder accepted reopens through it.
	fwd := l == nil && c.forwarded && p.fwd.hooked()
	if (l != nil || fwd) && p.conns[c.id] == c {
		delete(p.conns, c.id)
	}
	p.mu.Unlock()
	if l == nil && !fwd {
		return false
	}
	p.Stats.TWReopened.Inc()
	// RFC 1122 4.2.2.13: the new incarnation's ISS lies beyond anything
	// the old one sent, and beyond a whole unscaled window more, as
	// Linux's tcp_timewait_state_process makes it (tw_snd_nxt + 65537),
	// so that the peer cannot take an old duplicate of ours as new data.
	seg.reopenISS = c.snd.nxt + 65535 + 2
	if seg.reopenISS == 0 {
		seg.reopenISS = 1
	}
	c.finish(nil)
	if fwd {
		p.forward(seg, c.id)
		seg.release()
		return true
	}
	l.handle(seg, c.id, true)
	return true
}
