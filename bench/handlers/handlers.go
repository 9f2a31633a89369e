// Package handlers is the server side of every benchmark, written once over
// net.Conn and net.PacketConn so that the three stacks under test (GoNet,
// gVisor netstack through its gonet adapter, the Linux kernel through Go's
// net package) run exactly the same code: the stack is the only difference.
//
// The handlers count what they move in a Counters, which the benchmark
// server reports to the suite between measurements.
package handlers

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Ports on which a benchmark server offers each handler, over TCP (and UDP
// for the sink). Every stack uses the same ones.
const (
	EchoPort    = 5001 // Echo: the scale workload (connections held, used once)
	DiscardPort = 5002 // Discard: bulk upload and short transfers
	SourcePort  = 5003 // Source: bulk download
	RRPort      = 5004 // RR: request-response latency
	UDPSinkPort = 5005 // UDPSink over UDP
	UDPEchoPort = 5006 // UDPEcho over UDP: request-response on datagrams
	// UDPSourcePort is UDPSource's: datagrams sent to a client that asks,
	// in runs with UDP segmentation offload, as a QUIC server sends.
	UDPSourcePort = 5007
)

// BufSize is the size of the buffer each TCP handler reads into and writes
// from: large enough that a bulk transfer is not limited by the number of
// calls, as iperf's 128 KiB.
const BufSize = 128 << 10

// Counters is what the handlers moved, read by the server between
// measurements. Every field is updated atomically.
type Counters struct {
	Accepted  atomic.Int64 // connections accepted
	Active    atomic.Int64 // connections being served
	BytesIn   atomic.Int64 // bytes read by TCP handlers
	BytesOut  atomic.Int64 // bytes written by TCP handlers
	Exchanges atomic.Int64 // request-response exchanges and echoes answered
	Errors    atomic.Int64 // reads or writes that failed other than by EOF
}

// Handler serves one connection and closes it.
type Handler func(c net.Conn, n *Counters)

// Serve accepts connections on l and runs h on each in a goroutine of its
// own, until l is closed.
func Serve(l net.Listener, h Handler, n *Counters) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		n.Accepted.Add(1)
		n.Active.Add(1)
		go func() {
			defer n.Active.Add(-1)
			h(c, n)
		}()
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, BufSize); return &b }}

func getBuf() *[]byte  { return bufPool.Get().(*[]byte) }
func putBuf(b *[]byte) { bufPool.Put(b) }

// countErr counts err unless it is the peer's orderly or abrupt end, which
// every workload causes on purpose.
func countErr(err error, n *Counters) {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	n.Errors.Add(1)
}

// EchoBufSize is Echo's buffer: small, because the scale workload holds
// ten thousand echo connections and measures the memory each costs, and a
// blocked Read holds its buffer.
const EchoBufSize = 512

// Echo writes back whatever it reads (RFC 862), until the peer closes.
func Echo(c net.Conn, n *Counters) {
	defer c.Close()
	var b [EchoBufSize]byte
	for {
		m, err := c.Read(b[:])
		if m > 0 {
			n.BytesIn.Add(int64(m))
			w, werr := c.Write(b[:m])
			n.BytesOut.Add(int64(w))
			n.Exchanges.Add(1)
			if werr != nil {
				countErr(werr, n)
				return
			}
		}
		if err != nil {
			countErr(err, n)
			return
		}
	}
}

// Discard reads and drops everything until the peer's FIN (RFC 863), then
// closes: the peer learns every byte was received when it reads EOF.
func Discard(c net.Conn, n *Counters) {
	defer c.Close()
	b := getBuf()
	defer putBuf(b)
	for {
		m, err := c.Read(*b)
		n.BytesIn.Add(int64(m))
		if err != nil {
			countErr(err, n)
			return
		}
	}
}

// Source writes as fast as the connection takes it until the peer closes.
func Source(c net.Conn, n *Counters) {
	defer c.Close()
	b := getBuf()
	defer putBuf(b)
	for {
		m, err := c.Write(*b)
		n.BytesOut.Add(int64(m))
		if err != nil {
			// The peer ends a download by closing: a reset or a broken
			// pipe is the normal end here, not an error.
			return
		}
	}
}

// RR answers each 1-byte request with a 1-byte response: the transaction
// of netperf's TCP_RR with request and response sizes of 1.
func RR(c net.Conn, n *Counters) {
	defer c.Close()
	var b [1]byte
	for {
		if _, err := io.ReadFull(c, b[:]); err != nil {
			countErr(err, n)
			return
		}
		if _, err := c.Write(b[:]); err != nil {
			countErr(err, n)
			return
		}
		n.Exchanges.Add(1)
	}
}

// UDPHeaderLen is the header every datagram of the UDP workload starts with:
// a flow identifier, a sequence number and the sender's clock (Unix
// nanoseconds; sender and sink run on the same machine and clock).
const UDPHeaderLen = 24

// PutUDPHeader writes the UDP workload's header into b.
func PutUDPHeader(b []byte, flow, seq uint64, sent time.Time) {
	binary.BigEndian.PutUint64(b[0:], flow)
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint64(b[16:], uint64(sent.UnixNano()))
}

// Pace is a paced sender's schedule: a datagram every Gap (0: unpaced)
// from Start.
type Pace struct {
	Start time.Time
	Gap   time.Duration
}

// Due returns how many datagrams are due by now: the one whose time has
// come and all before it; unpaced, as many as the sender can.
func (p Pace) Due(now time.Time) int64 {
	if p.Gap <= 0 {
		return 1 << 62
	}
	return int64(now.Sub(p.Start)/p.Gap) + 1
}

// Wait sleeps until datagram sent is due.
func (p Pace) Wait(sent int64, now time.Time) {
	time.Sleep(time.Duration(sent)*p.Gap - now.Sub(p.Start))
}

// UDPFlow is what the sink saw of one flow.
type UDPFlow struct {
	Flow      uint64  `json:"flow"`
	Datagrams int64   `json:"datagrams"`
	Bytes     int64   `json:"bytes"`
	Reordered int64   `json:"reordered"` // datagrams with a sequence number below the highest seen
	JitterUS  float64 `json:"jitter_us"` // RFC 3550 6.4.1 interarrival jitter
	FirstNS   int64   `json:"first_ns"`  // arrival of the first datagram, Unix ns
	LastNS    int64   `json:"last_ns"`   // arrival of the last datagram, Unix ns
}

// UDPSink counts the datagrams of the flow it last heard from and computes
// their jitter. A datagram of a new flow starts the count afresh.
type UDPSink struct {
	mu      sync.Mutex
	cur     UDPFlow
	maxSeq  uint64
	transit float64 // last transit time, ns
	jitter  float64 // ns
}

// Flow returns what the sink has seen of the current flow.
func (s *UDPSink) Flow() UDPFlow {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.cur
	f.JitterUS = s.jitter / 1e3
	return f
}

// Serve reads datagrams from pc until it is closed.
func (s *UDPSink) Serve(pc net.PacketConn) error {
	buf := make([]byte, 65536)
	for {
		m, _, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		now := time.Now().UnixNano()
		if m < UDPHeaderLen {
			continue
		}
		s.record(buf[:m], now)
	}
}

func (s *UDPSink) record(b []byte, now int64) {
	flow := binary.BigEndian.Uint64(b[0:])
	seq := binary.BigEndian.Uint64(b[8:])
	sent := int64(binary.BigEndian.Uint64(b[16:]))
	s.mu.Lock()
	defer s.mu.Unlock()
	if flow != s.cur.Flow {
		s.cur = UDPFlow{Flow: flow, FirstNS: now}
		s.maxSeq, s.transit, s.jitter = 0, 0, 0
	}
	transit := float64(now - sent)
	if s.cur.Datagrams > 0 {
		// RFC 3550 6.4.1: J += (|D| - J) / 16.
		d := transit - s.transit
		if d < 0 {
			d = -d
		}
		s.jitter += (d - s.jitter) / 16
	}
	s.transit = transit
	if seq < s.maxSeq {
		s.cur.Reordered++
	} else {
		s.maxSeq = seq
	}
	s.cur.Datagrams++
	s.cur.Bytes += int64(len(b))
	s.cur.LastNS = now
}

// UDPEcho sends every datagram read from pc back to its sender (RFC 862's
// UDP form), until pc is closed: the server side of the UDP
// request-response workload, a small-packet path with no connection state.
func UDPEcho(pc net.PacketConn, n *Counters) error {
	var b [EchoBufSize]byte
	for {
		m, from, err := pc.ReadFrom(b[:])
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if _, err := pc.WriteTo(b[:m], from); err != nil {
			countErr(err, n)
			continue
		}
		n.Exchanges.Add(1)
	}
}
