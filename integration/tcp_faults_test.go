package integration

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// GoNet's TCP against the kernel's through GoNet's fault-injecting link:
// frames lost, duplicated and reordered in both directions, and every byte
// must still arrive, in order.

// delayLink wraps the TAP in a link that delays every frame by d each way.
func delayLink(d time.Duration) func(*testing.T, link.Endpoint) link.Endpoint {
	return func(t *testing.T, ep link.Endpoint) link.Endpoint {
		return fault.New(ep, fault.Config{Delay: d})
	}
}

// faultLink wraps the TAP in a link injecting the faults of spec, and
// stores the fault endpoint in *f.
func faultLink(spec string, f **fault.Endpoint) func(*testing.T, link.Endpoint) link.Endpoint {
	return func(t *testing.T, ep link.Endpoint) link.Endpoint {
		cfg, err := fault.ParseSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		*f = fault.New(ep, cfg)
		return *f
	}
}

// faultyBulk is the size of the echoes through faults. Without SACK each
// loss costs NewReno dearly (20 MiB took 1-4 s at 1% loss and 10-25 s at
// 5%); with SACK and RACK-TLP on both sides, as here, far less
// (TestSACKRecoveryAgainstKernel compares).
const faultyBulk = 20 << 20

func TestEchoThroughFaultsBothWays(t *testing.T) {
	for i, spec := range []string{
		"loss=0.01,reorder=0.01,dup=0.01",
		"loss=0.05,reorder=0.02,dup=0.02",
	} {
		spec := fmt.Sprintf("%s,seed=%d", spec, 11+i)
		for _, dir := range []string{"kernel to GoNet's echo", "GoNet to the kernel's echo"} {
			t.Run(spec+"/"+dir, func(t *testing.T) {
				lookPath(t, "nstat")
				checkGoroutines(t)
				var f *fault.Endpoint
				h := newHost(t, options{
					wrap: faultLink(spec, &f),
					// The kernel's own RTO is at least 200 ms; GoNet's
					// may be shorter, to keep the test quick.
					stack: stack.Config{TCP: tcp.Config{RTOMin: 50 * time.Millisecond}},
				})
				defer h.logCounters(t, false)
				var c halfCloser
				if dir == "kernel to GoNet's echo" {
					h.serve(t, 7, services.ServeEchoTCP)
					c = h.kernelConn(t, gonetTCPAddr(7))
				} else {
					h.kernelServe(t, 7, func(c *net.TCPConn) {
						c.SetDeadline(time.Now().Add(3 * time.Minute))
						io.Copy(c, c)
						c.CloseWrite()
					})
					c = h.gonetDial(t, 7)
				}
				roundTrip(t, c, faultyBulk, 3*time.Minute)
				st := f.Stats()
				t.Logf("fault link: rx %d dropped %d duplicated %d reordered; tx %d dropped %d duplicated %d reordered",
					st.Rx.Dropped.Load(), st.Rx.Duplicated.Load(), st.Rx.Reordered.Load(),
					st.Tx.Dropped.Load(), st.Tx.Duplicated.Load(), st.Tx.Reordered.Load())
				t.Logf("GoNet: FastRetrans %d, Timeouts %d, RetransSegs %d, PartialAcks %d, DupAcks %d, OFOQueue %d",
					h.tcpCounter("FastRetrans"), h.tcpCounter("Timeouts"), h.tcpCounter("RetransSegs"),
					h.tcpCounter("PartialAcks"), h.tcpCounter("DupAcks"), h.tcpCounter("OFOQueue"))
				k := h.kernelCounters(t, "TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPFastRetrans", "TcpExtTCPSlowStartRetrans")
				t.Logf("kernel: RetransSegs %d, Timeouts %d, FastRetrans %d, SlowStartRetrans %d",
					k["TcpRetransSegs"], k["TcpExtTCPTimeouts"], k["TcpExtTCPFastRetrans"], k["TcpExtTCPSlowStartRetrans"])
				if st.Rx.Dropped.Load() == 0 || st.Tx.Dropped.Load() == 0 {
					t.Errorf("the fault link dropped nothing one way: it is not in the path")
				}
				if h.tcpCounter("FastRetrans") == 0 {
					t.Errorf("TCP.FastRetrans = 0: every loss waited for a timeout")
				}
			})
		}
	}
}

// TestKernelFastRetransmitsToGoNet has the kernel send to GoNet's echo
// through a link that loses a frame in 500. GoNet always has echo data to
// send, yet each segment that arrives beyond a hole must earn a duplicate
// ACK without data (RFC 5681 sections 2 and 4.2): an ACK riding on data is
// not a duplicate to the sender, whose losses would then all wait for its
// retransmission timer (at least 200 ms on Linux) instead of being repaired
// by fast retransmit.
func TestKernelFastRetransmitsToGoNet(t *testing.T) {
	lookPath(t, "nstat")
	checkGoroutines(t)
	var f *fault.Endpoint
	h := newHost(t, options{wrap: faultLink("loss=0.002,seed=1", &f)})
	defer h.logCounters(t, false)
	h.serve(t, 7, services.ServeEchoTCP)
	roundTrip(t, h.kernelConn(t, gonetTCPAddr(7)), 8<<20, time.Minute)
	k := h.kernelCounters(t, "TcpExtTCPTimeouts", "TcpExtTCPFastRetrans")
	fast, timeouts := k["TcpExtTCPFastRetrans"], k["TcpExtTCPTimeouts"]
	t.Logf("the link dropped %d frames on the way to GoNet; the kernel made %d fast retransmits, %d timeouts", f.Stats().Rx.Dropped.Load(), fast, timeouts)
	if fast == 0 || timeouts > fast/4 {
		t.Errorf("the kernel repaired its losses with %d fast retransmits and %d timeouts: GoNet's duplicate ACKs did not count", fast, timeouts)
	}
}

// TestSACKRecoveryAgainstKernel echoes 50 MiB each way between GoNet and
// the kernel through a link that loses, reorders, duplicates and corrupts
// frames, at 1%, 5% and 10% loss, with SACK and RACK-TLP (GoNet's default
// and the kernel's): every byte must come back in order, and SACK
// recovery and RACK-TLP must be seen at work. The same runs with both
// turned off on both sides, and must wait for the retransmission timer
// far more often: both figures are logged. Without SACK an echo at 5% and
// 10% loss crawls (50 MiB took 45 s and 5 minutes), so there it moves
// less, and the timeouts are compared per MiB. The subtests run in
// parallel: about 30 s in all.
func TestSACKRecoveryAgainstKernel(t *testing.T) {
	lookPath(t, "nstat")
	lookPath(t, "sysctl")
	checkGoroutines(t) // once for all: the subtests run in parallel
	for i, tt := range []struct {
		loss    float64
		offSize int64 // the echo without SACK
	}{{0.01, bulk}, {0.05, 10 << 20}, {0.10, 2 << 20}} {
		loss := tt.loss
		spec := fmt.Sprintf("loss=%g,reorder=%g,dup=%g,corrupt=%g,seed=%d", loss, loss, loss/2, loss/5, 21+i)
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			var perMiB [2]float64 // GoNet's timeouts per MiB, with SACK and without
			t.Run("modes", func(t *testing.T) {
				for m, size := range []int64{bulk, tt.offSize} {
					sack := m == 0
					name := "SACK and RACK-TLP"
					if !sack {
						name = "NewReno without SACK"
					}
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						n := sackTransfer(t, spec, sack, size)
						perMiB[m] = float64(n) / float64(size>>20)
						t.Logf("GoNet's retransmission timeouts: %d in %d MiB each way (%.2f per MiB)", n, size>>20, perMiB[m])
					})
				}
			})
			if t.Failed() {
				return
			}
			t.Logf("GoNet's retransmission timeouts per MiB: %.2f with SACK and RACK-TLP, %.2f without", perMiB[0], perMiB[1])
			// At 1% loss NewReno's figure is small too (16-31 in 50
			// MiB): up to 5 with SACK pass whatever it was.
			if perMiB[0]*2 > perMiB[1] && perMiB[0] > 0.1 {
				t.Errorf("%.2f timeouts per MiB with SACK against %.2f without: not far fewer", perMiB[0], perMiB[1])
			}
		})
	}
}

// sackTransfer runs one echo of TestSACKRecoveryAgainstKernel, GoNet
// dialling the kernel's echo so that both of GoNet's roles, sender and
// receiver, meet the faults; it moves size bytes each way and returns
// GoNet's retransmission timeouts.
func sackTransfer(t *testing.T, spec string, sack bool, size int64) int64 {
	var f *fault.Endpoint
	h := newHost(t, options{
		wrap: faultLink(spec, &f),
		stack: stack.Config{TCP: tcp.Config{RTOMin: 50 * time.Millisecond,
			DisableSACK: !sack, DisableRACK: !sack}},
	})
	defer h.logCounters(t, false)
	if !sack {
		h.run(t, 5*time.Second, "sysctl", "-qw", "net.ipv4.tcp_sack=0")
	}
	h.kernelServe(t, 7, func(c *net.TCPConn) {
		c.SetDeadline(time.Now().Add(5 * time.Minute))
		io.Copy(c, c)
		c.CloseWrite()
	})
	roundTrip(t, h.gonetDial(t, 7), size, 5*time.Minute)
	st := f.Stats()
	t.Logf("fault link: rx %d dropped %d corrupted; tx %d dropped %d corrupted",
		st.Rx.Dropped.Load(), st.Rx.Corrupted.Load(), st.Tx.Dropped.Load(), st.Tx.Corrupted.Load())
	t.Logf("fault link: %d frames held to be reordered, %d of them sent on by the hold timer (no next frame within %v)",
		st.Rx.Reordered.Load()+st.Tx.Reordered.Load(), st.Rx.HoldExpired.Load()+st.Tx.HoldExpired.Load(), fault.DefaultReorderHold)
	names := []string{"Timeouts", "RetransSegs", "FastRetrans", "SACKRecovery", "SACKRetrans", "DSACKRecv",
		"SACKDiscard", "RACKLoss", "RACKReorderTimeouts", "LossProbes", "LossProbeRecovery", "InCsumErrors"}
	var sb strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sb, " %s %d", n, h.tcpCounter(n))
	}
	t.Logf("GoNet:%s", sb.String())
	k := h.kernelCounters(t, "TcpExtTCPTimeouts", "TcpExtTCPSackRecovery", "TcpExtTCPLossProbes", "TcpExtTCPDSACKRecv")
	t.Logf("kernel: Timeouts %d, SackRecovery %d, LossProbes %d, DSACKRecv %d",
		k["TcpExtTCPTimeouts"], k["TcpExtTCPSackRecovery"], k["TcpExtTCPLossProbes"], k["TcpExtTCPDSACKRecv"])
	if sack {
		if h.tcpCounter("SACKRecovery") == 0 || h.tcpCounter("SACKRetrans") == 0 {
			t.Errorf("SACK recovery never ran")
		}
		if h.tcpCounter("RACKLoss") == 0 || h.tcpCounter("LossProbes") == 0 {
			t.Errorf("RACK found no loss or TLP sent no probe")
		}
		if k["TcpExtTCPSackRecovery"] == 0 {
			t.Errorf("the kernel never recovered with GoNet's SACK blocks")
		}
	} else if h.tcpCounter("SACKRecovery") != 0 || h.tcpCounter("LossProbes") != 0 {
		t.Errorf("SACK or TLP at work with both turned off")
	}
	return h.tcpCounter("Timeouts")
}
