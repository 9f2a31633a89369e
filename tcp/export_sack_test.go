package tcp

// SACKState returns the scoreboard's totals and whether the connection is
// in loss recovery, for the SACK and RACK tests.
func SACKState(c *Conn) (sacked, lost int, inRecovery bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snd.sb.sacked, c.snd.sb.lost, c.snd.inRecovery
}
