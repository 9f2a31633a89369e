package load

import (
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSummarise(t *testing.T) {
	var us []float64
	for i := 1; i <= 100; i++ {
		us = append(us, float64(101-i))
	}
	l := summarise(us)
	if l.Samples != 100 || l.MeanUS != 50.5 || l.P50US != 50 || l.P99US != 99 || l.MaxUS != 100 {
		t.Fatalf("%+v", l)
	}
	if l := summarise(nil); l.Samples != 0 {
		t.Fatalf("%+v", l)
	}
}

// Each generator dials the family of the server's address, so that an
// IPv6 workload never falls back to IPv4 and the reverse.
func TestGeneratorsDialTheFamilyOfTheAddress(t *testing.T) {
	for _, c := range []struct{ addr, tcp, udp string }{
		{"10.77.0.2", "tcp4", "udp4"},
		{"fd77::2", "tcp6", "udp6"},
		{"fe80::1%gn0", "tcp6", "udp6"},
		{"::ffff:10.77.0.2", "tcp4", "udp4"}, // an IPv4 node (RFC 4291 section 2.5.5.2)
	} {
		if got := tcpNet(c.addr); got != c.tcp {
			t.Errorf("tcpNet(%q) = %q, want %q", c.addr, got, c.tcp)
		}
		if got := udpNet(c.addr); got != c.udp {
			t.Errorf("udpNet(%q) = %q, want %q", c.addr, got, c.udp)
		}
	}
}

// RROver measures over the connections its dialer opens, to the address it
// is given (an echo service's port, not the RR handler's), in the
// address's family: a GoNet stack in the generator's process dials there.
func TestRROverDialsThroughItsDialer(t *testing.T) {
	var network, address string
	dial := func(n, a string) (net.Conn, error) {
		network, address = n, a
		client, server := net.Pipe()
		go func() { // an RFC 862 echo service
			defer server.Close()
			io.Copy(server, server)
		}()
		return client, nil
	}
	// A window the race detector on a shared machine still fits round
	// trips in.
	r, err := RROver(dial, "10.79.0.2:7", 1, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if network != "tcp4" || address != "10.79.0.2:7" {
		t.Errorf("dialled %s %s, want tcp4 10.79.0.2:7", network, address)
	}
	if r.Conns != 1 || r.Transactions == 0 || r.Latency.Samples != int(r.Transactions) {
		t.Errorf("result %+v: want transactions, each a sample", r)
	}
}

// Bulk reports the congestion control its sockets run, which is the
// namespace's default unless a route or the socket says otherwise; a
// connection that is not a kernel socket has none to report.
func TestCongestionControlIsTheSocketsOwn(t *testing.T) {
	want, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		t.Skipf("no /proc/sys/net/ipv4/tcp_congestion_control: %v", err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, err := congestionControl(c)
	if err != nil || cc != strings.TrimSpace(string(want)) {
		t.Errorf("congestionControl = %q, %v; want %q", cc, err, strings.TrimSpace(string(want)))
	}
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if cc, err := congestionControl(p); err == nil {
		t.Errorf("congestionControl of a pipe = %q, want an error", cc)
	}
}
