package tcp

import (
	"net/netip"
	"syscall"
	"unsafe"
)

// Memory bounds. Everything TCP holds for others comes out of the stack's
// memory budget (package budget): the send buffer's chunks as the
// application writes, received data as it arrives, and each connection
// itself for as long as it is in the connection table. The budget then
// bounds both how much data and how many connections the stack keeps, and
// at its limit TCP degrades instead of failing:
//
//   - A new connection is made only while the budget keeps half its bytes
//     free after it: the other half is for the data of the connections
//     already made, which a Write or an arriving segment must be able to
//     reserve (a budget filled with idle connections would let none of them
//     send), and a SYN flood cannot take more. Beyond that a listener
//     treats a SYN as one beyond its backlog (a SYN cookie, which holds
//     nothing, or a drop), the ACK returning a cookie is dropped (its
//     client retransmits it), and Dial fails with ENOBUFS.
//   - An established connection offers no more window than the budget can
//     back (RFC 9293 3.8.6.2.2 lets a receiver stop growing its window; it
//     never moves the right edge left, see windowField): its peer slows
//     down instead of sending data that would be dropped.
//   - A Write the budget cannot take waits, as one beyond the send buffer,
//     until memory is released anywhere in the stack (budget.Freed).

// connMemory is what the budget is charged for a connection, whatever data
// it holds: the Conn itself and 8 KiB for its goroutine's stack, channels,
// timer and deadlines. Its mailbox holds no slice when idle (mailbox.go).
// The integration test TestTenThousandConnections measures the real
// figure.
const connMemory = int(unsafe.Sizeof(Conn{})) + 8<<10

// ConnMemory is what the memory budget is charged for each connection, in
// bytes, whatever data it holds: a stack.Config.MemoryLimit of n times
// ConnMemory bounds a stack to fewer than n connections.
const ConnMemory = connMemory

// errNoBuffers is why an active open fails when the budget cannot back
// the connection (as Linux's connect fails with ENOBUFS).
var errNoBuffers = syscall.ENOBUFS

// reserveConn takes the share of the budget of a new connection from src
// to dst if connRoom says there is room, counting and logging a refusal.
func (p *Protocol) reserveConn(src, dst netip.AddrPort) bool {
	if !p.connRoom() || !p.env.Budget.Reserve(connMemory) {
		p.memoryRefused(src, dst)
		return false
	}
	return true
}

// releaseConn gives a connection's share back as it leaves the table.
func (p *Protocol) releaseConn() { p.env.Budget.Release(connMemory) }

// connRoom reports whether the budget has room for a new connection and
// still half of it free for data.
func (p *Protocol) connRoom() bool {
	b := p.env.Budget
	return b.Available()-int64(connMemory) >= b.Limit()/2
}

// budgetWindow bounds free, the receive space the buffer size allows, by
// what the budget can back now; mu is held. A connection held back counts
// once per episode (TcpExt TCPMemoryPressures).
func (c *Conn) budgetWindow(free int) int {
	avail := int(min(c.p.env.Budget.Available(), int64(free)))
	if avail < free {
		if !c.rcv.memPressure {
			c.rcv.memPressure = true
			c.p.Stats.MemoryPressures.Inc()
		}
		return avail
	}
	c.rcv.memPressure = false
	return free
}

// budgetFree is free bounded by what the budget can back now, for
// windowUpdateDue: an update must not promise what windowField would not
// advertise.
func (c *Conn) budgetFree(free int) int {
	return int(min(int64(free), c.p.env.Budget.Available()))
}
