package load

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/gonetstack/gonet/bench/handlers"
)

// UDPDownResult is what a client received of a flow it asked the server's
// UDP source for.
type UDPDownResult struct {
	Flow        uint64  `json:"flow"`
	Size        int     `json:"size"`
	OfferedMbps float64 `json:"offered_mbit_s"`
	Run         int     `json:"run"`
	// Sent is the server's count, from the flow's end; when every copy
	// of the end was lost, the highest sequence number received and one.
	Sent      int64   `json:"sent"`
	EndSeen   bool    `json:"end_seen"`
	Received  int64   `json:"received"`
	Bytes     int64   `json:"bytes"`
	Reordered int64   `json:"reordered"`
	Seconds   float64 `json:"seconds"` // the flow's asked-for duration
	RecvMbps  float64 `json:"recv_mbit_s"`
	LossPct   float64 `json:"loss_pct"`
}

// UDPDown asks the server's UDP source (handlers.UDPSource) for a flow of
// datagrams of size bytes at rate Mbit/s for dur, run of them a send, and
// counts what arrives: a download over UDP, as QUIC's, whose server sends
// with segmentation offload. The client's socket keeps the kernel's
// default receive buffer, as most programs'.
func UDPDown(addr string, size int, rate float64, run int, dur time.Duration) (UDPDownResult, error) {
	size = max(size, handlers.UDPHeaderLen)
	c, err := net.Dial(udpNet(addr), hostPort(addr, handlers.UDPSourcePort))
	if err != nil {
		return UDPDownResult{}, err
	}
	defer c.Close()
	r := UDPDownResult{Flow: rand.Uint64(), Size: size, OfferedMbps: rate, Run: run, Seconds: dur.Seconds()}
	req, err := json.Marshal(handlers.UDPSourceRequest{Flow: r.Flow, Size: size, RateMbps: rate, Dur: dur, Run: run})
	if err != nil {
		return r, err
	}
	b := make([]byte, 65536)
	var maxSeq uint64
	// The request, again every half second until the flow starts (the
	// source ignores a repeat); then until the end comes, or long after
	// the flow should have ended.
	end := time.Now().Add(dur + 3*time.Second)
	for tries := 0; r.Received == 0 && tries < 3; tries++ {
		if _, err := c.Write(req); err != nil {
			return r, err
		}
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if err := r.receive(c, b, &maxSeq, end); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return r, err
		}
	}
	if r.Received == 0 {
		return r, errors.New("udpdown: the source sent nothing")
	}
	if !r.EndSeen {
		c.SetReadDeadline(end)
		if err := r.receive(c, b, &maxSeq, end); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return r, err
		}
	}
	if !r.EndSeen {
		r.Sent = int64(maxSeq) + 1
	}
	r.RecvMbps = float64(r.Bytes) * 8 / dur.Seconds() / 1e6
	r.LossPct = 100 * (1 - float64(r.Received)/float64(max(r.Sent, 1)))
	return r, nil
}

// receive counts the flow's datagrams until its end arrives or a read
// fails (its deadline passing among the ways).
func (r *UDPDownResult) receive(c net.Conn, b []byte, maxSeq *uint64, end time.Time) error {
	for {
		n, err := c.Read(b)
		if err != nil {
			return err
		}
		if n < handlers.UDPHeaderLen || binary.BigEndian.Uint64(b) != r.Flow {
			continue
		}
		seq := binary.BigEndian.Uint64(b[8:])
		if seq == handlers.UDPSourceDone {
			r.Sent, r.EndSeen = int64(binary.BigEndian.Uint64(b[16:])), true
			return nil
		}
		if r.Received > 0 && seq < *maxSeq {
			r.Reordered++
		}
		*maxSeq = max(*maxSeq, seq)
		r.Received++
		r.Bytes += int64(n)
		if r.Received == 1 {
			c.SetReadDeadline(end) // the flow has started
		}
	}
}
