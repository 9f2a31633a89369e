package tcp

import (
	"syscall"
	"unsafe"

	"github.com/gonetstack/gonet/buffer"
)

// Memory bounds. Everything TCP holds for others comes out of the stack's
// memory budget (package budget): the send buffer's chunks as the
// application writes, received data as it arrives, and each connection
// itself for as long as it is in the connection table. The budget then
// bounds both how much data and how many connections the stack keeps, and
// at its limit TCP degrades instead of failing:
//
//   - A new connection that the budget cannot back is not made: a listener
//     treats the SYN as it treats one beyond its backlog (a SYN cookie, which
//     holds nothing, or a drop), the ACK returning a cookie is dropped (its
//     client retransmits it), and Dial fails with ENOBUFS. Half-open
//     connections may take at most half of the budget, so a SYN flood
//     cannot starve the established ones.
//   - An established connection offers no more window than the budget can
//     back (RFC 9293 3.8.6.2.2 lets a receiver stop growing its window; it
//     never moves the right edge left, see windowField): its peer slows
//     down instead of sending data that would be dropped.
//   - A Write the budget cannot take waits, as one beyond the send buffer.

// connMemory is what the budget is charged for a connection, whatever data
// it holds: the Conn itself, its input queue (inQueueLen pointers), and
// 8 KiB for its goroutine's stack, channels, timer and deadlines. The
// integration test TestTenThousandConnections measures the real figure.
const connMemory = int(unsafe.Sizeof(Conn{})) + inQueueLen*int(unsafe.Sizeof((*buffer.Packet)(nil))) + 8<<10

// errNoBuffers is why an active open fails when the budget cannot back
// the connection (as Linux's connect fails with ENOBUFS).
var errNoBuffers = syscall.ENOBUFS

// reserveConn takes a connection's share of the budget, counting a refusal.
func (p *Protocol) reserveConn() bool {
	if !p.env.Budget.Reserve(connMemory) {
		p.Stats.MemoryRefusals.Inc()
		return false
	}
	return true
}

// releaseConn gives a connection's share back as it leaves the table.
func (p *Protocol) releaseConn() { p.env.Budget.Release(connMemory) }

// halfOpenRoom reports whether the budget has room for a half-open
// connection: one whose peer has not proved it can receive, so that a
// flood of forged SYNs holds at most half of the budget and the rest stays
// for connections that carry data. Without room a listener answers as
// with a full backlog.
func (p *Protocol) halfOpenRoom() bool {
	b := p.env.Budget
	return b.Available()-int64(connMemory) >= b.Limit()/2
}

// budgetWindow bounds free, the receive space the buffer size allows, by
// what the budget can back now; mu is held. A connection held back counts
// once per episode (TcpExt TCPMemoryPressures).
func (c *Conn) budgetWindow(free int) int {
	avail := int(min(c.p.env.Budget.Available(), int64(free)))
	if avail < free {
		if !c.memPressure {
			c.memPressure = true
			c.p.Stats.MemoryPressures.Inc()
		}
		return avail
	}
	c.memPressure = false
	return free
}

// budgetFree is free bounded by what the budget can back now, for
// windowUpdateDue: an update must not promise what windowField would not
// advertise.
func (c *Conn) budgetFree(free int) int {
	return int(min(int64(free), c.p.env.Budget.Available()))
}
