package load

import (
	"math/rand/v2"
	"net"
	"time"

	"github.com/gonetstack/gonet/bench/handlers"
)

// UDPResult is what the UDP sender did; the sink's side comes from the
// server.
type UDPResult struct {
	Flow        uint64  `json:"flow"`
	Size        int     `json:"size"`
	OfferedMbps float64 `json:"offered_mbit_s"` // asked for; 0: as fast as possible
	Sent        int64   `json:"sent"`
	SendErrors  int64   `json:"send_errors"`
	Seconds     float64 `json:"seconds"`
	SentMbps    float64 `json:"sent_mbit_s"` // what the sender managed
}

// UDP sends datagrams of size bytes of payload to the sink at rate Mbit/s
// (of payload) for dur, paced in steps of at most a millisecond, each
// stamped with a flow, a sequence number and the time for the sink's loss
// and jitter; rate 0 sends as fast as the socket takes them.
func UDP(addr string, size int, rate float64, dur time.Duration) (UDPResult, error) {
	size = max(size, handlers.UDPHeaderLen)
	c, err := net.Dial(udpNet(addr), hostPort(addr, handlers.UDPSinkPort))
	if err != nil {
		return UDPResult{}, err
	}
	defer c.Close()
	r := UDPResult{Flow: rand.Uint64(), Size: size, OfferedMbps: rate}
	b := make([]byte, size)
	var gap time.Duration // between datagrams
	if rate > 0 {
		gap = time.Duration(float64(size*8) / (rate * 1e6) * 1e9)
	}
	pace := handlers.Pace{Start: time.Now(), Gap: gap}
	end := pace.Start.Add(dur)
	for {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		due := pace.Due(now)
		if r.Sent >= due {
			// Ahead of schedule: wait for the next datagram's time.
			pace.Wait(r.Sent, now)
			continue
		}
		for burst := 0; r.Sent < due && burst < 64; burst++ {
			handlers.PutUDPHeader(b, r.Flow, uint64(r.Sent), time.Now())
			r.Sent++
			if _, err := c.Write(b); err != nil {
				r.SendErrors++
			}
		}
	}
	r.Seconds = time.Since(pace.Start).Seconds()
	r.SentMbps = float64(r.Sent) * float64(size) * 8 / r.Seconds / 1e6
	return r, nil
}
