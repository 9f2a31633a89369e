package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"strings"
	"sync/atomic"
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

// A single twin client holds a connection to each address and takes them
// in turn, one transaction each, so that both addresses' figures come from
// the same moments; each address's transactions are its own.
func TestRRTwinsTakeTheAddressesInTurn(t *testing.T) {
	var served [2]atomic.Int64
	var ports [2]int
	for i := range ports {
		ports[i] = serveLoopback(t, func(c net.Conn, n *handlers.Counters) {
			var b [1]byte
			for {
				if _, err := c.Read(b[:]); err != nil {
					return
				}
				served[i].Add(1)
				if _, err := c.Write(b[:]); err != nil {
					return
				}
			}
		})
	}
	const clients = 1
	rs, err := rrOver(func(network, address string) (net.Conn, error) {
		return net.DialTimeout(network, address, 5*time.Second)
	}, []string{fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])}, clients, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Conns != clients || r.Transactions == 0 || r.Latency.Samples != int(r.Transactions) {
			t.Errorf("address %d: %+v, want transactions, each a sample", i, r)
		}
	}
	// Each client meets the first address first and may stop after it:
	// the servers' counts differ by a turn at most per client, and so do
	// the recorded ones, whose warm-up may end between the two.
	if d := rs[0].Transactions - rs[1].Transactions; d < -clients || d > clients {
		t.Errorf("%d transactions at the first address, %d at the second: want them in turn", rs[0].Transactions, rs[1].Transactions)
	}
	if d := served[0].Load() - served[1].Load(); d < 0 || d > clients {
		t.Errorf("the servers answered %d and %d: want them in turn", served[0].Load(), served[1].Load())
	}
}

// More twin clients than addresses hold one connection each, half of them
// at each address, so that a point of n connections holds n as a run at
// one address does; each address's rate is the one all n would have had.
func TestRRTwinsSplitTheClientsBetweenTheAddresses(t *testing.T) {
	var accepted [2]atomic.Int64
	var ports [2]int
	for i := range ports {
		ports[i] = serveLoopback(t, func(c net.Conn, n *handlers.Counters) {
			accepted[i].Add(1)
			var b [1]byte
			for {
				if _, err := c.Read(b[:]); err != nil {
					return
				}
				if _, err := c.Write(b[:]); err != nil {
					return
				}
			}
		})
	}
	const clients, dur = 4, 300 * time.Millisecond
	rs, err := rrOver(func(network, address string) (net.Conn, error) {
		return net.DialTimeout(network, address, 5*time.Second)
	}, []string{fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])}, clients, dur)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if got := accepted[i].Load(); got != clients/2 {
			t.Errorf("address %d accepted %d connections, want %d", i, got, clients/2)
		}
		if r.Conns != clients || r.Transactions == 0 || r.Latency.Samples != int(r.Transactions) {
			t.Errorf("address %d: %+v, want transactions, each a sample", i, r)
		}
		// Half the clients, all the run: the rate over half of it.
		if want := float64(r.Transactions) / (dur.Seconds() / 2); math.Abs(r.PerSecond-want) > 1e-6*want {
			t.Errorf("address %d: %.0f transactions/s, want %.0f", i, r.PerSecond, want)
		}
	}
}
