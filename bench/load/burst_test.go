package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/bench/handlers"
)

// serveLoopback serves h on an ephemeral port of the loopback for the
// test's duration and returns the port.
func serveLoopback(t *testing.T, h handlers.Handler) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n handlers.Counters
	go handlers.Serve(l, h, &n)
	return l.Addr().(*net.TCPAddr).Port
}

// Every connection sends once in every burst and is answered; the first
// line, printed before the bursts, says the connections are up.
func TestBurstAnswersEveryConnectionInEveryBurst(t *testing.T) {
	port := serveLoopback(t, handlers.RR)
	var out bytes.Buffer
	r, err := Burst("127.0.0.1", port, 20, 8, time.Millisecond, 50*time.Millisecond, strings.NewReader("go\n"), &out)
	if err != nil {
		t.Fatal(err)
	}
	var first BurstResult
	if err := json.NewDecoder(bufio.NewReader(&out)).Decode(&first); err != nil {
		t.Fatalf("first line: %v", err)
	}
	if first.Conns != 20 || first.Failed != 0 || first.Rounds != 0 {
		t.Errorf("first line %+v: want 20 connections up and no burst yet", first)
	}
	if r.Rounds == 0 || r.Requests != int64(20*r.Rounds) || r.Errors != 0 {
		t.Errorf("%+v: want each of 20 connections answered in each burst", r)
	}
	if r.Burst.Samples != r.Rounds || r.Latency.Samples != int(r.Requests) {
		t.Errorf("%+v: want a burst time per burst and a latency per request", r)
	}
}

// A connection that goes unanswered counts as an error and takes no
// further part; the others carry on.
func TestBurstCountsAConnectionThatFails(t *testing.T) {
	closeOne := make(chan struct{}, 1)
	closeOne <- struct{}{}
	port := serveLoopback(t, func(c net.Conn, n *handlers.Counters) {
		select {
		case <-closeOne:
			c.Close()
		default:
			handlers.RR(c, n)
		}
	})
	r, err := Burst("127.0.0.1", port, 5, 1, time.Millisecond, 30*time.Millisecond, strings.NewReader("go\n"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 1 || r.FirstErr == "" || r.Requests != int64(4*r.Rounds) {
		t.Errorf("%+v: want one connection failed and four answered in each burst", r)
	}
}

func TestUDPRRIsAnsweredByTheEcho(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var n handlers.Counters
	go handlers.UDPEcho(pc, &n)
	r, err := UDPRR("127.0.0.1", 3, pc.LocalAddr().(*net.UDPAddr).Port, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Transactions == 0 || r.Lost != 0 || r.Latency.Samples != int(r.Transactions) || r.FirstErr != "" {
		t.Errorf("%+v: want every request answered", r)
	}
}
