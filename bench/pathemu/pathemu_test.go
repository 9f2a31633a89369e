package pathemu

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/link/fault"
)

// ends makes two namespaces joined by a path with the given faults, the
// kernel addressed at both ends (10.98.0.1 in a, 10.98.0.2 in b), and runs
// the path until the test ends.
func ends(t *testing.T, f fault.Config) (a, b *netns.NS, p *Path) {
	t.Helper()
	a, b, p = open(t, f)
	ran := make(chan error, 1)
	go func() { ran <- p.Run() }()
	t.Cleanup(func() {
		p.Close()
		if err := <-ran; err != nil {
			t.Errorf("Run after Close: %v", err)
		}
	})
	return a, b, p
}

// open is ends without running the path; it is closed when the test ends.
func open(t *testing.T, f fault.Config) (a, b *netns.NS, p *Path) {
	t.Helper()
	netnstest.RequireTool(t, "ping")
	a, b = netnstest.New(t), netnstest.New(t)
	da, db := netns.DeviceName(), netns.DeviceName()
	p, err := Open(Config{A: da, ANS: a.Path(), B: db, BNS: b.Path(), MTU: 1500, Fault: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := a.ConfigureLink(da, netip.MustParsePrefix("10.98.0.1/24"), 1500); err != nil {
		t.Fatal(err)
	}
	if err := b.ConfigureLink(db, netip.MustParsePrefix("10.98.0.2/24"), 1500); err != nil {
		t.Fatal(err)
	}
	return a, b, p
}

var rttLine = regexp.MustCompile(`rtt min/avg/max/mdev = ([0-9.]+)/([0-9.]+)/([0-9.]+)`)

// ping pings 10.98.0.2 from a and returns the shortest round trip.
func ping(t *testing.T, a *netns.NS, count int) (time.Duration, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := a.Run(ctx, "ping", "-4", "-c", strconv.Itoa(count), "-i", "0.05", "-W", "2", "10.98.0.2")
	m := rttLine.FindSubmatch(out)
	if m == nil {
		return 0, string(out) + errString(err)
	}
	ms, _ := strconv.ParseFloat(string(m[1]), 64)
	return time.Duration(ms * float64(time.Millisecond)), string(out)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The path delays every frame by its delay in each direction: the kernel's
// ping across it (ARP included, which crosses it too) takes twice the delay,
// and not much more.
func TestRoundTripIsTwiceTheDelay(t *testing.T) {
	const delay = 15 * time.Millisecond
	a, _, p := ends(t, fault.Config{Delay: delay, Seed: 1})
	rtt, out := ping(t, a, 5)
	if rtt < 2*delay || rtt > 2*delay+10*time.Millisecond {
		t.Fatalf("shortest round trip %v, want %v to %v:\n%s", rtt, 2*delay, 2*delay+10*time.Millisecond, out)
	}
	c := p.Counters()
	if c["Fault.Tx.Delayed"] == 0 || c["Fault.Rx.Delayed"] == 0 {
		t.Errorf("frames not delayed both ways: %v", c)
	}
	if c["A.RxFrames"] == 0 || c["B.TxFrames"] == 0 || c["B.RxFrames"] == 0 || c["A.TxFrames"] == 0 {
		t.Errorf("frames did not cross both devices both ways: %v", c)
	}
}

// A path that loses every frame carries none; its counters say where they
// went.
func TestLossDropsFramesAndCountsThem(t *testing.T) {
	a, _, p := ends(t, fault.Config{Loss: 1, Seed: 1})
	if rtt, out := ping(t, a, 2); rtt != 0 {
		t.Fatalf("a ping crossed a path that loses everything (%v):\n%s", rtt, out)
	}
	c := p.Counters()
	if c["Fault.Tx.Dropped"] == 0 || c["Fault.Tx.Dropped"] != c["A.RxFrames"] || c["B.TxFrames"] != 0 {
		t.Fatalf("want every frame from A dropped and counted: %v", c)
	}
}

// The stats command answers with the counters; quit ends the session and
// the path.
func TestServeAnswersStatsSeedAndQuits(t *testing.T) {
	_, _, p := open(t, fault.Config{Seed: 1})
	var out bytes.Buffer
	ran := make(chan error, 1)
	go func() { ran <- p.Run() }()
	if err := serve(p, strings.NewReader("stats\nseed 42\nseed x\nquit\n"), &out, ran); err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("stats: %v in %q", err, out.String())
	}
	if _, ok := s.Counters["Fault.Tx.Frames"]; !ok || s.Time.IsZero() {
		t.Fatalf("stats without the fault endpoint's counters: %+v", s)
	}
	var seeded struct {
		Seed  *uint64
		Error string
	}
	if err := dec.Decode(&seeded); err != nil || seeded.Seed == nil || *seeded.Seed != 42 {
		t.Fatalf("seed 42: answered %+v, %v; want {\"seed\":42}", seeded, err)
	}
	seeded.Seed = nil
	if err := dec.Decode(&seeded); err != nil || seeded.Seed != nil || !strings.Contains(seeded.Error, "unsigned integer") {
		t.Fatalf("seed x: answered %+v, %v; want an error", seeded, err)
	}
	if err := dec.Decode(&s); err != io.EOF {
		t.Fatalf("more after quit: %v", err)
	}
}

// A path with a rate delivers a flood at that rate, Ethernet headers
// included, and drops at its queue's tail what the rate cannot carry.
func TestRateLimitsAFloodAndTheQueueDropsTheRest(t *testing.T) {
	const rate = 20_000_000 // bits/s
	a, b, p := ends(t, fault.Config{Rate: rate, Queue: 64 << 10, Delay: time.Millisecond, Seed: 1})
	rx, err := b.ListenUDP("10.98.0.2:9000")
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := a.DialUDP("10.98.0.2:9000")
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()

	// 1200-byte datagrams (1242-byte frames) at about twice the rate for
	// half a second: the receiver times the ones that arrive.
	const payload, frame = 1200, 1200 + 8 + 20 + 14
	got := make(chan []time.Time, 1)
	go func() {
		var at []time.Time
		buf := make([]byte, 2048)
		for {
			rx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, err := rx.Read(buf); err != nil {
				got <- at
				return
			}
			at = append(at, time.Now())
		}
	}()
	msg := make([]byte, payload)
	gap := time.Duration(frame*8) * time.Second / (2 * rate)
	for start, next := time.Now(), time.Now(); time.Since(start) < 500*time.Millisecond; next = next.Add(gap) {
		time.Sleep(time.Until(next))
		tx.Write(msg)
	}
	at := <-got
	if len(at) < 100 {
		t.Fatalf("%d datagrams arrived", len(at))
	}
	span := at[len(at)-1].Sub(at[0]).Seconds()
	bits := float64((len(at)-1)*frame) * 8
	// Never faster than the rate (10% for the receiver's own timing);
	// slower by up to 20%, since the bottleneck's clock is when the
	// forwarder reads a frame, and a test binary sharing busy CPUs
	// leaves the link idle while it waits for one.
	if got := bits / span; got < 0.8*rate || got > 1.1*rate {
		t.Errorf("delivered %.1f Mbit/s, want %.1f (-20%%, +10%%)", got/1e6, float64(rate)/1e6)
	}
	if c := p.Counters(); c["Fault.Tx.TailDropped"] == 0 {
		t.Errorf("a flood at twice the rate dropped nothing at the queue: %v", c)
	}
}
