package integration

import (
	"net"
	"testing"
	"time"

	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// ECN (RFC 3168) against the kernel's, with net.ipv4.tcp_ecn=1 in the
// test's namespace, through GoNet's fault link marking 1% of the ECN-capable
// packets CE each way, as a congested router would: the connection
// negotiates ECN, the marks come back as ECE, the sender reduces its window
// without any loss, and every byte arrives.

const ecnBulk = 8 << 20

func TestECNWithKernel(t *testing.T) {
	for _, dir := range []string{"GoNet sends", "kernel sends"} {
		t.Run(dir, func(t *testing.T) {
			lookPath(t, "nstat")
			checkGoroutines(t)
			var f *fault.Endpoint
			h := newHost(t, options{
				wrap:  faultLink("ce=0.01,seed=5", &f),
				stack: stack.Config{TCP: tcp.Config{ECN: tcp.ECNOn}},
			})
			defer h.logCounters(t, true)
			h.run(t, 5*time.Second, "sysctl", "-qw", "net.ipv4.tcp_ecn=1")
			sent, got := newDigest(), newDigest()
			var gc *tcp.Conn
			start := time.Now()
			if dir == "GoNet sends" {
				done := make(chan struct{})
				h.kernelServe(t, 5001, func(c *net.TCPConn) {
					defer close(done)
					c.SetDeadline(time.Now().Add(100 * time.Second))
					if err := recvAll(c, got); err != nil {
						t.Errorf("kernel: %v", err)
					}
				})
				gc = h.gonetDial(t, 5001)
				gc.SetDeadline(time.Now().Add(100 * time.Second))
				if err := sendAll(gc, 3, ecnBulk, sent); err != nil {
					t.Fatalf("GoNet: %v", err)
				}
				<-done
			} else {
				l := h.gonetListener(t, 5001)
				kc := h.kernelConn(t, gonetTCPAddr(5001))
				gc = accept(t, l)
				gc.SetDeadline(time.Now().Add(100 * time.Second))
				kc.SetDeadline(time.Now().Add(100 * time.Second))
				errc := make(chan error, 1)
				go func() { errc <- sendAll(kc, 3, ecnBulk, sent) }()
				if err := recvAll(gc, got); err != nil {
					t.Fatalf("GoNet: %v", err)
				}
				if err := <-errc; err != nil {
					t.Fatalf("kernel: %v", err)
				}
			}
			if got.n != ecnBulk || got.sum() != sent.sum() {
				t.Fatalf("sent %d bytes (sha256 %s), received %d (sha256 %s)", sent.n, sent.sum(), got.n, got.sum())
			}
			logRate(t, dir, ecnBulk, time.Since(start))
			ci := gc.Info()
			st := f.Stats()
			t.Logf("CE marks: %d on GoNet's packets, %d on the kernel's; kernel sockets:\n%s",
				st.Tx.CEMarked.Load(), st.Rx.CEMarked.Load(), h.run(t, 5*time.Second, "ss", "-tniH"))
			if !ci.ECN {
				t.Errorf("GoNet's connection did not negotiate ECN: %+v", ci)
			}
			want := []string{"ECNNegotiated"}
			marks := st.Tx.CEMarked.Load()
			k := h.kernelCounters(t, "IpExtInCEPkts", "TcpExtTCPDeliveredCE")
			t.Logf("kernel: InCEPkts %d, TCPDeliveredCE %d", k["IpExtInCEPkts"], k["TcpExtTCPDeliveredCE"])
			if dir == "GoNet sends" {
				// The kernel sees GoNet's marks and echoes them; GoNet
				// reduces and says CWR.
				want = append(want, "ECNEchoReceived", "ECNReductions", "ECNCWRSent")
				if k["IpExtInCEPkts"] == 0 {
					t.Errorf("the kernel counted no CE packet (IpExtInCEPkts)")
				}
			} else {
				// GoNet echoes the kernel's marks until its CWR, and the
				// kernel counts what it learnt was delivered CE.
				want = append(want, "ECNCEReceived")
				marks = st.Rx.CEMarked.Load()
				if k["TcpExtTCPDeliveredCE"] == 0 {
					t.Errorf("the kernel learnt of no CE mark from GoNet's echoes (TcpExtTCPDeliveredCE)")
				}
				if !ci.ECNSeen {
					t.Errorf("GoNet's connection saw no CE mark")
				}
			}
			if marks == 0 {
				t.Fatalf("the fault link marked no packet CE: nothing was ECN-capable")
			}
			for _, name := range want {
				if n := h.tcpCounter(name); n == 0 {
					t.Errorf("TCP.%s = 0", name)
				}
			}
		})
	}
}
