package tcp

// SentRecords returns the retransmission queue of c: the [start, end) of
// each record, in order.
func SentRecords(c *Conn) [][2]uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][2]uint32, len(c.snd.sent))
	for i, s := range c.snd.sent {
		out[i] = [2]uint32{uint32(s.start), uint32(s.end)}
	}
	return out
}
