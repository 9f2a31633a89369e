package integration

import (
	"net"
	"testing"
	"time"

	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// TestKernelReconnectsThroughTimeWait closes a kernel client's connection
// from GoNet's side, which leaves GoNet in TIME-WAIT for 2*MSL (a minute
// here), and has the client connect again at once from the same port. Its
// SYN carries a newer timestamp (RFC 6191): GoNet ends TIME-WAIT and
// accepts, with no SYN retransmitted, where a challenge ACK would have
// held the client off until TIME-WAIT ran out.
func TestKernelReconnectsThroughTimeWait(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{stack: stack.Config{TCP: tcp.Config{MSL: 30 * time.Second}}})
	defer h.logCounters(t, false)
	l := h.gonetListener(t, 5004)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: kernelAddr.Addr().AsSlice(), Port: 41004}}
	k, err := h.dialKernel(t, d, gonetTCPAddr(5004))
	if err != nil {
		t.Fatalf("kernel dials: %v", err)
	}
	g := accept(t, l)
	exchangeByte(t, k, g)
	exchangeByte(t, g, k)
	local, remote := addrPort(g.LocalAddr()), addrPort(g.RemoteAddr())
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	readEOF(t, "kernel", k)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ci, ok := h.gonetRow(local, remote); ok && ci.State == "TIME-WAIT" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("GoNet's end did not reach TIME-WAIT")
		}
		time.Sleep(time.Millisecond)
	}
	// The kernel's end went through LAST-ACK to CLOSED: the port is free
	// on its side. Its timestamps tick once a millisecond, and RFC 6191
	// reopens only for a SYN whose TSval is greater than the FIN's (as
	// Linux's own TIME-WAIT does): a SYN sent in the FIN's millisecond is
	// rightly challenged, which made this test fail now and then.
	time.Sleep(2 * time.Millisecond)
	start := time.Now()
	d.Timeout = 5 * time.Second
	k2, err := h.dialKernel(t, d, gonetTCPAddr(5004))
	if err != nil {
		t.Fatalf("kernel reconnects from port 41004 through GoNet's TIME-WAIT: %v", err)
	}
	took := time.Since(start)
	g2 := accept(t, l)
	exchangeByte(t, k2, g2)
	exchangeByte(t, g2, k2)
	t.Logf("reconnected through TIME-WAIT in %v", took)
	if took > 500*time.Millisecond {
		t.Errorf("the reconnect took %v: a SYN was retransmitted", took)
	}
	if got := h.tcpCounter("TWReopened"); got != 1 {
		t.Errorf("TCP.TWReopened = %d, want 1", got)
	}
	if got := h.tcpCounter("ChallengeACKs"); got != 0 {
		t.Errorf("TCP.ChallengeACKs = %d, want 0", got)
	}
	if got := h.tcpCounter("TSOptMissing"); got != 0 {
		t.Errorf("TCP.TSOptMissing = %d: the kernel sends timestamps on every segment", got)
	}
}
