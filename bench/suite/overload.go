package suite

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gonetstack/gonet/bench/load"
)

// Issue 16's overload: thousands of connections from the kernel in the
// client namespace, each sending a request at the same moment, then a
// pause (load.Burst). On a loss-free path the kernel should drop no frame
// at the stack's door (the TAP device's queue; veth's for the kernel as
// server), and no one should retransmit.

const overloadWorkload = "overload"

// overloadGroup is the overload at each of p.BurstConns, each point on a
// set-up of its own: thousands of connections closing leave state behind
// that would weigh on the next point.
func overloadGroup(p Plan) group {
	g := group{workload: overloadWorkload, isolated: true}
	for _, n := range p.BurstConns {
		g.points = append(g.points, point{
			name:  fmt.Sprintf("n=%d", n),
			label: fmt.Sprintf("%d bursty connections", n),
			run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
				return runOverload(ctx, e, n, p.BurstPause, p.BurstDur)
			},
		})
	}
	return g
}

// phasedClient is a load generator that prints a first JSON line once it
// is ready and waits for a line on its standard input before the phase
// the suite measures.
type phasedClient struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	rd     *bufio.Reader
	stderr *limitedBuffer
	cancel context.CancelFunc
}

// startPhased starts the load generator args in the client namespace and
// decodes its first line into first.
func startPhased(ctx context.Context, e *Env, timeout time.Duration, first any, args ...string) (c *phasedClient, err error) {
	c = &phasedClient{stderr: &limitedBuffer{max: 16 << 10}}
	ctx, c.cancel = context.WithTimeout(ctx, timeout)
	defer func() {
		if err != nil {
			c.kill()
		}
	}()
	c.cmd = e.ClientCommand(ctx, args...)
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return c, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return c, err
	}
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		return c, err
	}
	c.rd = bufio.NewReader(stdout)
	line, err := c.rd.ReadBytes('\n')
	if err != nil {
		return c, fmt.Errorf("client %s: %v: %s", args[0], err, strings.TrimSpace(c.stderr.String()))
	}
	return c, json.Unmarshal(line, first)
}

// finish lets the client run its measured phase, decodes its last line
// into last, and waits for it to exit; it returns the line and the
// client's CPU time.
func (c *phasedClient) finish(last any) ([]byte, float64, error) {
	defer c.cancel()
	if _, err := io.WriteString(c.in, "go\n"); err != nil {
		c.kill()
		return nil, 0, err
	}
	line, err := c.rd.ReadBytes('\n')
	if err != nil {
		c.kill()
		return nil, 0, fmt.Errorf("client: %v: %s", err, strings.TrimSpace(c.stderr.String()))
	}
	c.in.Close()
	werr := c.cmd.Wait()
	cpu := (c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime()).Seconds()
	if err := json.Unmarshal(line, last); err != nil {
		return line, cpu, err
	}
	if werr != nil {
		return line, cpu, fmt.Errorf("client: %w: %s", werr, strings.TrimSpace(c.stderr.String()))
	}
	return line, cpu, nil
}

func (c *phasedClient) kill() {
	if c.cmd != nil && c.cmd.Process != nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
	c.cancel()
}

// runOverload holds n connections to the stack's request-response handler
// and measures the bursts they send (load.Burst): latency per request, and
// between two snapshots taken once the connections are up and after the
// last burst, what each side lost and repaired.
func runOverload(ctx context.Context, e *Env, n int, pause, d time.Duration) (map[string]float64, []byte, error) {
	var est, r load.BurstResult
	c, err := startPhased(ctx, e, d+3*time.Minute, &est, "burst", "-addr", e.Addr, "-n", strconv.Itoa(n),
		"-pause", dur(pause), "-dur", dur(d))
	if err != nil {
		return nil, nil, err
	}
	var w window
	if w.before, err = e.Stats(); err != nil {
		c.kill()
		return nil, nil, err
	}
	w.cBefore, w.sBefore = kernelCounters(e.C), stackCounters(e, w.before)
	w.sysBefore = readSysStat()
	out, clientCPU, err := c.finish(&r)
	w.sysAfter = readSysStat()
	w.clientCPU = clientCPU
	if err != nil {
		return nil, out, err
	}
	if w.after, err = e.Stats(); err != nil {
		return nil, out, err
	}
	w.cAfter, w.sAfter = kernelCounters(e.C), stackCounters(e, w.after)
	if r.Requests == 0 {
		return nil, out, fmt.Errorf("no request answered (%d of %d connections failed: %s)", est.Failed+int(r.Errors), n, r.FirstErr)
	}
	client, stack := map[string]float64{}, map[string]float64{}
	counterDelta("", w.cBefore, w.cAfter, client)
	counterDelta("", w.sBefore, w.sAfter, stack)
	m := map[string]float64{
		"conns":          float64(n - est.Failed),
		"failed_conns":   float64(est.Failed),
		"establish_s":    est.EstablishS,
		"mean_us":        r.Latency.MeanUS,
		"p50_us":         r.Latency.P50US,
		"p99_us":         r.Latency.P99US,
		"max_us":         r.Latency.MaxUS,
		"burst_p50_us":   r.Burst.P50US,
		"burst_max_us":   r.Burst.MaxUS,
		"bursts":         float64(r.Rounds),
		"requests":       float64(r.Requests),
		"errors":         float64(r.Errors),
		"transactions_s": r.PerSecond,
		"server_cpu_s":   w.serverCPU(),
		// Frames the kernel dropped on their way to the stack: the TAP
		// device's queue full (its tx_dropped), or veth's.
		"link_drops": client["Dev.TxDropped"],
		// The kernel client's repairs: segments retransmitted, and
		// retransmission timeouts among them.
		"client_retrans":  client["Tcp.RetransSegs"],
		"client_timeouts": client["TcpExt.TCPTimeouts"],
	}
	// The stack's own repairs, under each stack's names: GoNet's and
	// gVisor's from the server, the kernel's from its namespace.
	switch e.Stack {
	case "kernel":
		m["stack_retrans"] = stack["Tcp.RetransSegs"]
		m["stack_loss_probes"] = stack["TcpExt.TCPLossProbes"]
	case "gonet":
		m["stack_retrans"] = stack["TCP.RetransSegs"]
		m["stack_loss_probes"] = stack["TCP.LossProbes"]
		// Frames the TAP device refused (ethernet's TxLinkErrors,
		// counted per NIC), and segments a full connection queue
		// dropped.
		m["tap_write_fails"] = float64(counterSum(w.sAfter, ".TxLinkErrors") - counterSum(w.sBefore, ".TxLinkErrors"))
		m["stack_queue_drops"] = stack["TCP.InQueueDrops"]
	case "gvisor":
		m["stack_retrans"] = stack["TCP.RetransSegs"]
		m["tap_write_fails"] = stack["Link.TxErrors"]
	}
	w.packetRate(m, e.Stack)
	w.counters(m)
	return m, out, nil
}
