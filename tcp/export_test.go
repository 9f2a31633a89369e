package tcp

// RecoverPoint is the connection's "recover" (RFC 6582).
func RecoverPoint(c *Conn) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return uint32(c.snd.recover)
}

// InQueueLen is the bound on a connection's mailbox, in segments.
const InQueueLen = inQueueLen

// Hold takes c's mutex, as run does while it works, so that segments wait
// in its mailbox; the function returned lets go.
func Hold(c *Conn) (release func()) {
	c.mu.Lock()
	return c.mu.Unlock
}

// RuntAckDelay is how long a super-segment's runt waits for its ACK.
const RuntAckDelay = runtAckDelay
