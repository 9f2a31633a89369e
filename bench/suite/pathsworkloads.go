package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/bench/handlers"
)

// pathSeed seeds every path's loss: each stack meets the same sequence of
// draws, frame by frame, in each repetition, and each flow its own
// (pathSet.reseed).
const pathSeed = 1

// tcpPayload and wireFrame are a full-sized TCP segment's payload (1500
// less the IPv4 and TCP headers and the timestamp option every stack here
// sends) and the Ethernet frame carrying it: the share of a path's rate a
// bulk flow can deliver is their ratio, 95.6%.
const (
	tcpPayload = 1448
	wireFrame  = 1514
)

// pathsGroups are the family's groups: the calibration (the kernel at both
// ends, each path without its loss), then each path with one set-up per
// stack for its transfers, then the sharing point.
func (s *Suite) pathsGroups() []group {
	p := s.Plan.Paths
	var gs []group
	setup := func(spec PathSpec, rival bool) func(ctx context.Context, stack string) (*Env, error) {
		return func(ctx context.Context, stack string) (*Env, error) {
			return SetupPath(ctx, s.Bin, stack, spec, pathSeed, rival)
		}
	}
	if p.CalDur > 0 {
		seen := map[[3]float64]bool{}
		for _, spec := range p.Paths {
			cal := spec
			cal.Loss = 0
			shape := [3]float64{cal.RateMbit, float64(cal.RTT), cal.QueueBDP}
			if seen[shape] {
				continue
			}
			seen[shape] = true
			gs = append(gs, group{workload: pathCal, family: pathsFamily, stacks: []string{"kernel"}, setup: setup(cal, false),
				points: []point{{
					name:  spec.Name,
					label: fmt.Sprintf("%s: calibration", spec.Name),
					run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
						return runPathCal(ctx, e, p)
					},
				}}})
		}
	}
	for _, spec := range p.Paths {
		g := group{workload: pathsFamily, family: pathsFamily, setup: setup(spec, false)}
		for _, dir := range p.Dirs {
			g.points = append(g.points, point{
				workload: pathShort,
				name:     spec.Name + "/" + dir,
				label:    fmt.Sprintf("%s, %s, %s ×%d", spec.Name, pathDirName(dir), mb(p.Short), p.ShortCount),
				run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
					return runPathShort(ctx, e, dir, p)
				},
			})
		}
		if p.LongDur > 0 && p.LongCap > 0 {
			what := p.LongDur.String()
			if spec.Long > 0 {
				what = mb(spec.Long)
			}
			for _, dir := range p.Dirs {
				g.points = append(g.points, point{
					workload: pathLong,
					name:     spec.Name + "/" + dir,
					label:    fmt.Sprintf("%s, %s, %s", spec.Name, pathDirName(dir), what),
					run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
						return runPathLong(ctx, e, dir, p)
					},
				})
			}
		}
		gs = append(gs, g)
	}
	if i := slices.IndexFunc(p.Paths, func(s PathSpec) bool { return s.Name == p.Share }); i >= 0 && p.ShareDur > 0 {
		spec := p.Paths[i]
		gs = append(gs, group{workload: pathShare, family: pathsFamily, setup: setup(spec, true), points: []point{{
			name:  spec.Name,
			label: fmt.Sprintf("%s, with a kernel CUBIC flow", spec.Name),
			run: func(ctx context.Context, e *Env) (map[string]float64, []byte, error) {
				return runPathShare(ctx, e, p)
			},
		}}})
	}
	return gs
}

// pathDirName is a direction as the progress and the report name it.
func pathDirName(dir string) string {
	return map[string]string{"down": "stack→kernel", "up": "kernel→stack"}[dir]
}

// mb is a size in MB (MiB, as the transfers count them).
func mb(n int64) string { return strconv.FormatInt(n>>20, 10) + " MB" }

// pathWindow is a point's counters before and after: the server's and the
// machine's (window), the forwarder's, and this process's CPU time, which
// drives the flows.
type pathWindow struct {
	w               window
	pBefore, pAfter map[string]int64
	hBefore, hAfter map[string]int64 // namespace A's kernel: its devices' drops
	cpu             float64
}

func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func beginPath(e *Env) (*pathWindow, error) {
	pw := &pathWindow{cpu: selfCPU()}
	var err error
	if pw.w.before, err = e.Stats(); err != nil {
		return nil, err
	}
	pw.w.cBefore, pw.w.sBefore = kernelCounters(e.C), stackCounters(e, pw.w.before)
	snap, err := e.path.counters()
	if err != nil {
		return nil, fmt.Errorf("pathemu: %w", err)
	}
	pw.pBefore = snap.Counters
	pw.hBefore = kernelCounters(e.H)
	pw.w.sysBefore = readSysStat()
	return pw, nil
}

// end reads the counters again and adds to m the sender's retransmissions
// in dir (the stack's when it sends, the peer kernel's when it does), per
// 100 full-sized segments of the payload delivered, the frames the path
// lost and dropped in that direction, the frames a device's queue dropped
// on either side (the path's TAP devices when the forwarder falls behind,
// the stack's), and every counter that moved.
func (pw *pathWindow) end(e *Env, dir string, delivered int64, m map[string]float64) error {
	pw.w.sysAfter = readSysStat()
	pw.w.clientCPU = selfCPU() - pw.cpu
	var err error
	if pw.w.after, err = e.Stats(); err != nil {
		return err
	}
	pw.w.cAfter, pw.w.sAfter = kernelCounters(e.C), stackCounters(e, pw.w.after)
	snap, err := e.path.counters()
	if err != nil {
		return fmt.Errorf("pathemu: %w", err)
	}
	pw.pAfter = snap.Counters
	pw.hAfter = kernelCounters(e.H)
	m["dev_drops"] = float64(pw.hAfter["Dev.TxDropped"] - pw.hBefore["Dev.TxDropped"] + pw.w.cAfter["Dev.TxDropped"] - pw.w.cBefore["Dev.TxDropped"])
	d := map[string]float64{}
	if dir == "up" {
		counterDelta("", pw.w.cBefore, pw.w.cAfter, d)
	} else {
		counterDelta("", pw.w.sBefore, pw.w.sAfter, d)
	}
	re := d["Tcp.RetransSegs"] + d["TCP.RetransSegs"]
	m["retrans_segs"] = re
	// The receiver's segments per segment it sent back, ACKs nearly all:
	// how often it acknowledged, which paces a sender's window.
	rd := map[string]float64{}
	if dir == "up" {
		counterDelta("", pw.w.sBefore, pw.w.sAfter, rd)
	} else {
		counterDelta("", pw.w.cBefore, pw.w.cAfter, rd)
	}
	if acks := rd["Tcp.OutSegs"] + rd["TCP.OutSegs"]; acks > 0 {
		m["rcv_segs_per_ack"] = (rd["Tcp.InSegs"] + rd["TCP.InSegs"]) / acks
	}
	if delivered > 0 {
		m["retrans_pct"] = 100 * re / (float64(delivered) / tcpPayload)
	}
	p := map[string]float64{}
	counterDelta("", pw.pBefore, pw.pAfter, p)
	side := map[string]string{"down": "Fault.Tx.", "up": "Fault.Rx."}[dir]
	m["path_lost"] = p[side+"Dropped"]
	m["path_queue_drops"] = p[side+"TailDropped"]
	for k, v := range p {
		m["c:path."+k] = v
	}
	pw.w.counters(m)
	return nil
}

// flowResult is what one transfer between the peer and the stack measured.
type flowResult struct {
	bytes int64   // delivered to the receiving application
	secs  float64 // from before the connect to the last byte, or to the deadline
	done  bool    // the size asked for was delivered in time
}

// pathDial connects from the peer's namespace to addr:port, with the
// family's congestion control set on the socket and checked.
func pathDial(e *Env, addr string, port int) (*net.TCPConn, error) {
	var c net.Conn
	err := e.C.Do(func() error {
		d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, pathCC)
			})
			return errors.Join(err, serr)
		}}
		var err error
		c, err = d.Dial("tcp4", net.JoinHostPort(addr, strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %s:%d across the path: %w", addr, port, err)
	}
	tc := c.(*net.TCPConn)
	rc, err := tc.SyscallConn()
	if err != nil {
		tc.Close()
		return nil, err
	}
	var cc string
	var gerr error
	rc.Control(func(fd uintptr) { cc, gerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
	if gerr != nil || cc != pathCC {
		tc.Close()
		return nil, fmt.Errorf("the peer's socket runs %q, not %s: %v", cc, pathCC, gerr)
	}
	return tc, nil
}

// abort ends a connection with a reset, dropping what its buffers still
// hold, so that nothing of it crosses the path after the measurement.
func abort(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// download reads from the stack's (or addr's) source handler: size bytes,
// or until d has passed when size is 0; count, when given, follows the
// bytes as they arrive. The deadline is d from start either way.
func download(e *Env, addr string, size int64, d time.Duration, count *atomic.Int64) (flowResult, error) {
	start := time.Now()
	c, err := pathDial(e, addr, handlers.SourcePort)
	if err != nil {
		return flowResult{}, err
	}
	defer abort(c)
	c.SetReadDeadline(start.Add(d))
	buf := make([]byte, handlers.BufSize)
	var r flowResult
	for size == 0 || r.bytes < size {
		n, err := c.Read(buf)
		r.bytes += int64(n)
		if count != nil {
			count.Add(int64(n))
		}
		if err != nil {
			if !isTimeout(err) {
				return r, fmt.Errorf("reading from the stack: %w", err)
			}
			break
		}
	}
	r.secs = time.Since(start).Seconds()
	r.done = size > 0 && r.bytes >= size
	if size > 0 {
		r.bytes = min(r.bytes, size)
	}
	return r, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// upload writes to the stack's discard handler: size bytes, then waits
// for the handler's close, which comes once it has read them all; or,
// when size is 0, until d has passed. What was delivered is the server's
// count of bytes its handlers read.
func upload(e *Env, size int64, d time.Duration) (flowResult, error) {
	before, err := e.Stats()
	if err != nil {
		return flowResult{}, err
	}
	start := time.Now()
	c, err := pathDial(e, e.Addr, handlers.DiscardPort)
	if err != nil {
		return flowResult{}, err
	}
	defer abort(c)
	c.SetDeadline(start.Add(d))
	buf := make([]byte, handlers.BufSize)
	var r flowResult
	var sent int64
	for size == 0 || sent < size {
		chunk := buf
		if size > 0 {
			chunk = buf[:min(int64(len(buf)), size-sent)]
		}
		n, werr := c.Write(chunk)
		sent += int64(n)
		if werr != nil {
			if !isTimeout(werr) {
				return r, fmt.Errorf("writing to the stack: %w", werr)
			}
			err = werr
			break
		}
	}
	if err == nil && size > 0 {
		// Every byte is written: the handler's close says it read them.
		if err = c.CloseWrite(); err == nil {
			_, err = io.Copy(io.Discard, c)
		}
		if err != nil && !isTimeout(err) {
			return r, fmt.Errorf("waiting for the stack to read everything: %w", err)
		}
		r.done = err == nil
	}
	r.secs = time.Since(start).Seconds()
	after, serr := e.Stats()
	if serr != nil {
		return r, serr
	}
	r.bytes = after.BytesIn - before.BytesIn
	if r.done {
		r.bytes = size
	}
	return r, nil
}

// transfer runs one flow in dir: size bytes within limit, or a flow of
// limit when size is 0.
func transfer(e *Env, dir string, size int64, limit time.Duration) (flowResult, error) {
	if dir == "up" {
		return upload(e, size, limit)
	}
	return download(e, e.Addr, size, limit, nil)
}

// settle waits until what a flow left in the path has crossed or been
// dropped: a round trip, and the bottleneck's full buffer drained at its
// rate.
func settle(spec PathSpec) {
	drain := time.Duration(spec.QueueBDP * float64(spec.RTT))
	time.Sleep(2*spec.RTT + drain + 100*time.Millisecond)
}

// runPathShort times ShortCount transfers of Short bytes in a row; the
// point's seconds are their median.
func runPathShort(ctx context.Context, e *Env, dir string, p PathsPlan) (map[string]float64, []byte, error) {
	pw, err := beginPath(e)
	if err != nil {
		return nil, nil, err
	}
	var secs []float64
	var delivered int64
	var failed []string
	for i := range p.ShortCount {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if i > 0 {
			settle(e.path.spec)
		}
		if err := e.path.reseed(e.rep); err != nil {
			return nil, nil, err
		}
		r, err := transfer(e, dir, p.Short, p.ShortCap)
		if err != nil {
			return nil, nil, err
		}
		delivered += r.bytes
		if !r.done {
			failed = append(failed, fmt.Sprintf("%d of %d bytes in %v", r.bytes, p.Short, p.ShortCap))
			continue
		}
		secs = append(secs, r.secs)
	}
	m := map[string]float64{}
	if err := pw.end(e, dir, delivered, m); err != nil {
		return nil, nil, err
	}
	settle(e.path.spec)
	if len(failed) > 0 {
		return nil, nil, fmt.Errorf("%d of %d transfers did not complete: %s", len(failed), p.ShortCount, failed[0])
	}
	slices.Sort(secs)
	med := secs[len(secs)/2]
	if len(secs)%2 == 0 {
		med = (secs[len(secs)/2-1] + secs[len(secs)/2]) / 2
	}
	m["seconds"] = med
	m["seconds_min"] = secs[0]
	m["seconds_max"] = secs[len(secs)-1]
	m["goodput_mbit_s"] = float64(p.Short) * 8 / med / 1e6
	m["transfers"] = float64(len(secs))
	return m, nil, nil
}

// runPathLong measures the path's goodput: the long transfer's size over
// its time, or the bytes a flow of LongDur delivered over LongDur. A long
// transfer still running at LongCap is aborted; its goodput is then over
// LongCap and its time is unknown (done = 0), a result, not a failure.
func runPathLong(ctx context.Context, e *Env, dir string, p PathsPlan) (map[string]float64, []byte, error) {
	spec := e.path.spec
	limit := p.LongDur
	if spec.Long > 0 {
		limit = p.LongCap
	}
	pw, err := beginPath(e)
	if err != nil {
		return nil, nil, err
	}
	if err := e.path.reseed(e.rep); err != nil {
		return nil, nil, err
	}
	r, err := transfer(e, dir, spec.Long, limit)
	if err != nil {
		return nil, nil, err
	}
	m := map[string]float64{"bytes": float64(r.bytes)}
	if err := pw.end(e, dir, r.bytes, m); err != nil {
		return nil, nil, err
	}
	settle(spec)
	m["goodput_mbit_s"] = float64(r.bytes) * 8 / r.secs / 1e6
	if spec.Long > 0 {
		m["done"] = 0
		if r.done {
			m["done"] = 1
			m["seconds"] = r.secs
		}
	}
	m["utilisation"] = m["goodput_mbit_s"] / (spec.RateMbit * tcpPayload / wireFrame)
	return m, nil, ctx.Err()
}

// readAt calls read at each offset after start (ascending) and returns
// the times it ran and what it read.
func readAt(start time.Time, offsets []time.Duration, read func() []float64) ([]time.Time, [][]float64) {
	var ts []time.Time
	var vs [][]float64
	for _, o := range offsets {
		time.Sleep(time.Until(start.Add(o)))
		ts = append(ts, time.Now())
		vs = append(vs, read())
	}
	return ts, vs
}

// runPathCal checks the path against its settings with the kernel at both
// ends: the round trip of an idle ping against twice the delay, and the
// rate of a bulk transfer (stack→kernel, the kernel under test sending,
// CalStreams flows) over the second half of CalDur against the bucket's,
// both on the wire (the frames the path delivered, Ethernet headers
// included) and as TCP goodput. Several flows, because one CUBIC flow
// whose slow start ends early (HyStart) takes tens of seconds to grow a
// window of 1 Gbit/s × 100 ms again: the calibration is the path's, not
// CUBIC's.
func runPathCal(ctx context.Context, e *Env, p PathsPlan) (map[string]float64, []byte, error) {
	spec := e.path.spec
	m, out, err := runPing(ctx, e, 1, 20*time.Millisecond, p.CalPing)
	if err != nil {
		return nil, out, fmt.Errorf("ping across the path: %w", err)
	}
	rtt := m["p50_us"] / 1e3
	set := float64(spec.RTT) / 1e6
	cal := map[string]float64{
		"rtt_ms":        rtt,
		"rtt_mean_ms":   m["mean_us"] / 1e3,
		"rtt_set_ms":    set,
		"rtt_err_pct":   100 * (rtt/set - 1),
		"rate_set_mbit": spec.RateMbit,
	}
	settle(spec)

	pw, err := beginPath(e)
	if err != nil {
		return nil, out, err
	}
	var got atomic.Int64
	type flowDone struct {
		r   flowResult
		err error
	}
	streams := max(1, p.CalStreams)
	done := make(chan flowDone, streams)
	start := time.Now()
	for range streams {
		go func() {
			r, err := download(e, e.Addr, 0, p.CalDur, &got)
			done <- flowDone{r, err}
		}()
	}
	var perr error
	ts, vs := readAt(start, []time.Duration{p.CalDur / 2, p.CalDur - 50*time.Millisecond}, func() []float64 {
		snap, err := e.path.counters()
		perr = errors.Join(perr, err)
		return []float64{float64(got.Load()), float64(snap.Counters["B.TxBytes"]), float64(snap.Counters["Fault.Tx.Dropped"] + snap.Counters["Fault.Tx.TailDropped"])}
	})
	var delivered int64
	var errs []error
	for range streams {
		f := <-done
		delivered += f.r.bytes
		errs = append(errs, f.err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("bulk flow across the path: %w", err)
	}
	if perr != nil {
		return nil, nil, fmt.Errorf("pathemu: %w", perr)
	}
	dt := ts[1].Sub(ts[0]).Seconds()
	goodput := (vs[1][0] - vs[0][0]) * 8 / dt / 1e6
	cal["goodput_mbit_s"] = goodput
	cal["tcp_wire_mbit_s"] = (vs[1][1] - vs[0][1]) * 8 / dt / 1e6
	cal["goodput_of_max_pct"] = 100 * goodput / (spec.RateMbit * tcpPayload / wireFrame)
	cal["path_drops"] = vs[1][2] - vs[0][2]
	if err := pw.end(e, "down", delivered, cal); err != nil {
		return nil, out, err
	}
	settle(spec)
	if err := calibrateRate(ctx, e, p, cal); err != nil {
		return nil, out, err
	}
	settle(spec)
	return cal, out, nil
}

// calUDPOver is how far above the path's rate the calibration's UDP flow
// is paced, on the wire.
const calUDPOver = 1.1

// calibrateRate measures the path's rate apart from any congestion
// control: the peer's kernel sends full-sized UDP datagrams paced 10%
// above the rate (kernel→stack) for CalDur, and what the path delivers on
// the wire over all but the first quarter is its rate, or what the
// forwarder sustains (then the frames it could not take show as device
// drops). It adds wire_mbit_s and rate_err_pct to cal.
func calibrateRate(ctx context.Context, e *Env, p PathsPlan, cal map[string]float64) error {
	spec := e.path.spec
	const payload = 1472 // a 1500-byte MTU's UDP payload
	offered := calUDPOver * spec.RateMbit * payload / (payload + 8 + 20 + 14)
	before := kernelCounters(e.H)
	cBefore := kernelCounters(e.C)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := e.Client(ctx, p.CalDur+time.Minute, "udp", "-addr", e.Addr, "-size", strconv.Itoa(payload),
			"-rate", strconv.FormatFloat(offered, 'f', 3, 64), "-dur", dur(p.CalDur))
		done <- err
	}()
	var perr error
	ts, vs := readAt(start, []time.Duration{p.CalDur / 4, p.CalDur - 50*time.Millisecond}, func() []float64 {
		snap, err := e.path.counters()
		perr = errors.Join(perr, err)
		return []float64{float64(snap.Counters["A.TxBytes"]), float64(snap.Counters["B.RxBytes"]), float64(snap.Counters["Fault.Rx.TailDropped"])}
	})
	if err := <-done; err != nil {
		return fmt.Errorf("paced UDP across the path: %w", err)
	}
	if perr != nil {
		return fmt.Errorf("pathemu: %w", perr)
	}
	dt := ts[1].Sub(ts[0]).Seconds()
	wire := (vs[1][0] - vs[0][0]) * 8 / dt / 1e6
	cal["wire_mbit_s"] = wire
	cal["rate_err_pct"] = 100 * (wire/spec.RateMbit - 1)
	cal["udp_offered_mbit_s"] = (vs[1][1] - vs[0][1]) * 8 / dt / 1e6
	cal["udp_tail_drops"] = vs[1][2] - vs[0][2]
	cal["udp_dev_drops"] = float64(kernelCounters(e.H)["Dev.TxDropped"] - before["Dev.TxDropped"] + kernelCounters(e.C)["Dev.TxDropped"] - cBefore["Dev.TxDropped"])
	return nil
}

// jain is Jain's fairness index of throughputs xs: 1 when all are equal,
// 1/n when one takes everything (Jain, Chiu and Hawe, DEC-TR-301, 1984).
func jain(xs ...float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// runPathShare runs the stack's flow (stack→kernel) alone for ShareGap,
// then with the rival kernel's CUBIC flow to the same peer through the same
// bottleneck for ShareDur: Jain's index of their goodputs over the time
// they share the path, and over its second half, when the newcomer has
// had time to converge.
func runPathShare(ctx context.Context, e *Env, p PathsPlan) (map[string]float64, []byte, error) {
	spec := e.path.spec
	pw, err := beginPath(e)
	if err != nil {
		return nil, nil, err
	}
	if err := e.path.reseed(e.rep); err != nil {
		return nil, nil, err
	}
	var mine, theirs atomic.Int64
	type flowDone struct {
		r   flowResult
		err error
	}
	done := make(chan flowDone, 2)
	start := time.Now()
	go func() {
		r, err := download(e, e.Addr, 0, p.ShareGap+p.ShareDur, &mine)
		done <- flowDone{r, err}
	}()
	go func() {
		time.Sleep(time.Until(start.Add(p.ShareGap)))
		r, err := download(e, pathRivalAddr.Addr().String(), 0, p.ShareDur, &theirs)
		done <- flowDone{r, err}
	}()
	ts, vs := readAt(start, []time.Duration{p.ShareGap, p.ShareGap + p.ShareDur/2, p.ShareGap + p.ShareDur - 50*time.Millisecond},
		func() []float64 { return []float64{float64(mine.Load()), float64(theirs.Load())} })
	var errs []error
	for range 2 {
		if f := <-done; f.err != nil {
			errs = append(errs, f.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	rate := func(i, from, to int) float64 {
		return (vs[to][i] - vs[from][i]) * 8 / ts[to].Sub(ts[from]).Seconds() / 1e6
	}
	x1, x2 := rate(0, 0, 2), rate(1, 0, 2)
	m := map[string]float64{
		"jain":           jain(x1, x2),
		"jain_last_half": jain(rate(0, 1, 2), rate(1, 1, 2)),
		"stack_mbit_s":   x1,
		"rival_mbit_s":   x2,
		"stack_share":    x1 / (x1 + x2),
		"alone_mbit_s":   vs[0][0] * 8 / ts[0].Sub(start).Seconds() / 1e6,
		"utilisation":    (x1 + x2) / (spec.RateMbit * tcpPayload / wireFrame),
	}
	if err := pw.end(e, "down", int64(vs[2][0]), m); err != nil {
		return nil, nil, err
	}
	settle(spec)
	return m, nil, ctx.Err()
}
