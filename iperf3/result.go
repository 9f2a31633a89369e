package iperf3

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"
)

// Summary is one direction of a stream, or of the whole test, as one
// side counted it.
type Summary struct {
	// Bytes sent by the sender, or received by the receiver.
	Bytes uint64
	// Seconds the side counted for.
	Seconds float64
	// Packets is, for UDP, the datagrams sent, or the highest count the
	// receiver saw.
	Packets int64
	// Lost is, for UDP, the datagrams the receiver found missing.
	Lost int64
	// OutOfOrder is, for UDP, the datagrams that came late; known only
	// when this side received.
	OutOfOrder int64
	// Jitter is, for UDP, the receiver's smoothed jitter.
	Jitter time.Duration
}

// BitsPerSecond is the rate the summary amounts to.
func (s Summary) BitsPerSecond() float64 {
	if s.Seconds <= 0 {
		return 0
	}
	return float64(s.Bytes) * 8 / s.Seconds
}

// LostPercent is the share of datagrams lost, as iperf3 computes it.
func (s Summary) LostPercent() float64 {
	if s.Packets <= 0 {
		return 0
	}
	return 100 * float64(s.Lost) / float64(s.Packets)
}

// StreamResult is one stream as its sender and receiver counted it.
type StreamResult struct {
	ID       int
	Sent     Summary
	Received Summary
}

// Result is a test's outcome: each stream and their sums, from both
// sides' counts.
type Result struct {
	// Config is the test as run, its defaults filled in.
	Config Config
	// Local and Remote are the control connection's addresses.
	Local, Remote net.Addr
	Streams       []StreamResult
	// Sent and Received sum the streams: the sender's and the
	// receiver's counts.
	Sent, Received Summary
}

// result joins the client's counts and the server's into a Result.
func (c *client) result(theirs Results) Result {
	r := Result{Config: c.cfg, Local: c.ctrl.LocalAddr(), Remote: c.ctrl.RemoteAddr()}
	peer := map[int]StreamResults{}
	for _, s := range theirs.Streams {
		peer[s.ID] = s
	}
	var jitter time.Duration
	for _, s := range c.streams {
		ours, p := s.results(c.elapsed), peer[s.id]
		mine := Summary{Bytes: ours.Bytes, Seconds: ours.EndTime - ours.StartTime, Packets: int64(ours.Packets)}
		other := Summary{Bytes: p.Bytes, Seconds: p.EndTime - p.StartTime, Packets: int64(p.Packets)}
		sr := StreamResult{ID: s.id}
		if s.sender {
			other.Lost, other.Jitter = int64(p.Errors), secondsToDuration(p.Jitter)
			sr.Sent, sr.Received = mine, other
		} else {
			mine.Lost, mine.Jitter, mine.OutOfOrder = int64(ours.Errors), secondsToDuration(ours.Jitter), s.outOfOrder()
			sr.Sent, sr.Received = other, mine
		}
		if c.cfg.UDP {
			// iperf3's loss is the receiver's gaps over the datagrams
			// the sender sent.
			sr.Sent.Lost = sr.Received.Lost
			sr.Received.Packets = max(sr.Received.Packets, sr.Sent.Packets)
		}
		r.Streams = append(r.Streams, sr)
		r.Sent.add(sr.Sent)
		r.Received.add(sr.Received)
		jitter += sr.Received.Jitter
	}
	if n := len(r.Streams); n > 0 {
		// iperf3 reports the streams' mean jitter.
		r.Sent.Jitter = jitter / time.Duration(n)
		r.Received.Jitter = r.Sent.Jitter
	}
	return r
}

func (s *Summary) add(o Summary) {
	s.Bytes += o.Bytes
	s.Seconds = max(s.Seconds, o.Seconds)
	s.Packets += o.Packets
	s.Lost += o.Lost
	s.OutOfOrder += o.OutOfOrder
}

func secondsToDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// WriteText prints the result as iperf3's client prints its summary.
func (r Result) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	mode := "sending to"
	if r.Config.Reverse {
		mode = "receiving from"
	}
	proto := "TCP"
	if r.Config.UDP {
		proto = "UDP"
	}
	ew.printf("Connecting to host %v, %s, %s, %d stream(s), %d-byte blocks\n", r.Remote, proto, mode, len(r.Streams), r.Config.Len)
	if r.Config.UDP {
		ew.printf("[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n")
	} else {
		ew.printf("[ ID] Interval           Transfer     Bitrate\n")
	}
	line := func(id string, s Summary, role string) {
		ew.printf("[%3s] %5.2f-%-5.2f sec  %s  %s", id, 0.0, s.Seconds, bytesText(s.Bytes), rateText(s.BitsPerSecond()))
		if r.Config.UDP {
			ew.printf("  %6.3f ms  %d/%d (%.2g%%)", float64(s.Jitter)/float64(time.Millisecond), s.Lost, s.Packets, s.LostPercent())
		}
		ew.printf("  %s\n", role)
	}
	for _, s := range r.Streams {
		id := fmt.Sprint(s.ID)
		line(id, s.Sent, "sender")
		line(id, s.Received, "receiver")
	}
	if len(r.Streams) > 1 {
		line("SUM", r.Sent, "sender")
		line("SUM", r.Received, "receiver")
	}
	ew.printf("\niperf Done.\n")
	return ew.err
}

// bytesText writes a byte count as iperf3 does, in binary units.
func bytesText(b uint64) string {
	f := float64(b)
	for _, u := range []string{"Bytes", "KBytes", "MBytes", "GBytes"} {
		if f < 1024 || u == "GBytes" {
			return fmt.Sprintf("%6.4g %-6s", f, u)
		}
		f /= 1024
	}
	return ""
}

// rateText writes a rate as iperf3 does, in decimal units.
func rateText(bps float64) string {
	for _, u := range []string{"bits/sec", "Kbits/sec", "Mbits/sec", "Gbits/sec"} {
		if bps < 1000 || u == "Gbits/sec" {
			return fmt.Sprintf("%6.4g %-9s", bps, u)
		}
		bps /= 1000
	}
	return ""
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// jsonSum is a summary in iperf3's JSON ("sum_sent", a stream's
// "receiver").
type jsonSum struct {
	Start         float64  `json:"start"`
	End           float64  `json:"end"`
	Seconds       float64  `json:"seconds"`
	Bytes         uint64   `json:"bytes"`
	BitsPerSecond float64  `json:"bits_per_second"`
	JitterMs      *float64 `json:"jitter_ms,omitempty"`
	LostPackets   *int64   `json:"lost_packets,omitempty"`
	Packets       *int64   `json:"packets,omitempty"`
	LostPercent   *float64 `json:"lost_percent,omitempty"`
	OutOfOrder    *int64   `json:"out_of_order,omitempty"`
	Sender        bool     `json:"sender"`
}

func (r Result) jsonSum(s Summary, sender bool) jsonSum {
	j := jsonSum{End: s.Seconds, Seconds: s.Seconds, Bytes: s.Bytes, BitsPerSecond: s.BitsPerSecond(), Sender: sender}
	if r.Config.UDP {
		jitter, lost, packets, pct, ooo := float64(s.Jitter)/float64(time.Millisecond), s.Lost, s.Packets, s.LostPercent(), s.OutOfOrder
		j.JitterMs, j.LostPackets, j.Packets, j.LostPercent, j.OutOfOrder = &jitter, &lost, &packets, &pct, &ooo
	}
	return j
}

// WriteJSON prints the result in the shape of iperf3's -J output: a
// "start" with the test's parameters and an "end" with each stream's
// "sender" and "receiver" and their sums, "sum_sent" and "sum_received"
// ("sum" too for UDP, with the loss and jitter). Interval reports are
// left out: the client measures the whole test only.
func (r Result) WriteJSON(w io.Writer) error {
	type jsonStream struct {
		Sender   jsonSum `json:"sender"`
		Receiver jsonSum `json:"receiver"`
		ID       int     `json:"id"`
	}
	type protocol struct {
		Protocol   string `json:"protocol"`
		NumStreams int    `json:"num_streams"`
		BlkSize    int    `json:"blksize"`
		Duration   int    `json:"duration"`
		Reverse    int    `json:"reverse"`
	}
	out := struct {
		Start struct {
			Connected []map[string]string `json:"connected"`
			TestStart protocol            `json:"test_start"`
		} `json:"start"`
		End struct {
			Streams     []jsonStream `json:"streams"`
			SumSent     jsonSum      `json:"sum_sent"`
			SumReceived jsonSum      `json:"sum_received"`
			Sum         *jsonSum     `json:"sum,omitempty"`
		} `json:"end"`
	}{}
	out.Start.Connected = []map[string]string{{"local": fmt.Sprint(r.Local), "remote": fmt.Sprint(r.Remote)}}
	out.Start.TestStart = protocol{Protocol: "TCP", NumStreams: len(r.Streams), BlkSize: r.Config.Len,
		Duration: int(r.Config.Duration / time.Second)}
	if r.Config.UDP {
		out.Start.TestStart.Protocol = "UDP"
	}
	if r.Config.Reverse {
		out.Start.TestStart.Reverse = 1
	}
	for _, s := range r.Streams {
		out.End.Streams = append(out.End.Streams, jsonStream{ID: s.ID, Sender: r.jsonSum(s.Sent, true), Receiver: r.jsonSum(s.Received, false)})
	}
	out.End.SumSent = r.jsonSum(r.Sent, true)
	out.End.SumReceived = r.jsonSum(r.Received, false)
	if r.Config.UDP {
		// iperf3's UDP "sum": the sender's bytes, the receiver's loss.
		sum := r.jsonSum(r.Received, false)
		sum.Bytes, sum.BitsPerSecond = r.Sent.Bytes, r.Sent.BitsPerSecond()
		out.End.Sum = &sum
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "\t")
	return enc.Encode(out)
}
