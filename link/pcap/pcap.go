// Package pcap wraps a link endpoint to record every frame it reads and
// writes in a capture file that tcpdump, Wireshark and gopacket read: the
// classic libpcap format (https://wiki.wireshark.org/Development/LibpcapFileFormat,
// draft-ietf-opsawg-pcap), with nanosecond timestamps.
//
// Frames are recorded as the Ethernet frames they are; their virtio-net
// offload metadata is not. A frame read with a partial checksum
// (Offload.NeedsCsum: the kernel left it to the device on a TAP with
// offloads) is recorded with the checksum finished, as it would have
// crossed a wire, so that readers do not report it as bad. The endpoint
// offers no transmit offloads, so the stack sends through it the segments
// and checksums a wire carries; a super-segment read (RxGSO) is recorded
// whole, as tcpdump on the host shows one.
package pcap

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// The file header's fields.
const (
	// MagicNanoseconds marks a file whose record timestamps have a
	// nanosecond fraction (rather than a microsecond one, 0xa1b2c3d4).
	MagicNanoseconds = 0xa1b23c4d
	VersionMajor     = 2
	VersionMinor     = 4
	// SnapLen is the longest frame recorded whole; it is what tcpdump uses
	// by default, and more than any frame a link carries.
	SnapLen = 262144
	// LinkTypeEthernet is LINKTYPE_ETHERNET, from tcpdump.org's list of
	// link-layer header types.
	LinkTypeEthernet = 1
)

const (
	fileHeaderLen   = 24
	recordHeaderLen = 16
)

// Stats are the capture's counters.
type Stats struct {
	Frames stats.Counter // frames recorded
	Bytes  stats.Counter // bytes of those frames
	// Errors counts write failures. The first stops the capture: a file
	// with a partial record is unreadable past it. Err returns it.
	Errors stats.Counter
}

// Option configures New and Create.
type Option func(*Endpoint)

// WithClock timestamps records with c instead of the wall clock.
func WithClock(c clock.Clock) Option { return func(e *Endpoint) { e.clk = c } }

// Endpoint records the frames of an inner endpoint. It implements
// link.Endpoint.
type Endpoint struct {
	inner link.Endpoint
	clk   clock.Clock
	stats Stats

	// mu serialises records: the reader and the writer capture from
	// their own goroutines.
	mu      sync.Mutex
	w       io.Writer
	scratch []byte // a record being assembled, written in one Write
	err     error  // the first write error; the capture stops there
	closed  bool

	// file is set by Create, which owns it.
	file *os.File

	closeOnce sync.Once
	closeErr  error
}

var _ link.Endpoint = (*Endpoint)(nil)

// New wraps inner and writes the capture to w, starting with the file
// header. The endpoint owns inner from then on (Close closes it) but not w.
func New(inner link.Endpoint, w io.Writer, opts ...Option) (*Endpoint, error) {
	e := newEndpoint(inner, w, opts)
	if err := e.writeFileHeader(); err != nil {
		return nil, fmt.Errorf("pcap: writing file header: %w", err)
	}
	return e, nil
}

func newEndpoint(inner link.Endpoint, w io.Writer, opts []Option) *Endpoint {
	e := &Endpoint{inner: inner, clk: clock.Real{}, w: w}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Create wraps inner and writes the capture to a new file at path,
// truncating one that exists. Close closes the file after inner.
func Create(inner link.Endpoint, path string, opts ...Option) (*Endpoint, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("pcap: %w", err)
	}
	// Unbuffered: each batch is one write, so the file is whole up to the
	// last batch even if the program dies.
	e := newEndpoint(inner, f, opts)
	if err := e.writeFileHeader(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("pcap: %s: writing file header: %w", path, err)
	}
	e.file = f
	return e, nil
}

// writeFileHeader writes the global header, little-endian: readers tell the
// byte order from the magic number.
func (e *Endpoint) writeFileHeader() error {
	var h [fileHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:4], MagicNanoseconds)
	le.PutUint16(h[4:6], VersionMajor)
	le.PutUint16(h[6:8], VersionMinor)
	// h[8:16]: thiszone and sigfigs, both zero: timestamps are UTC.
	le.PutUint32(h[16:20], SnapLen)
	le.PutUint32(h[20:24], LinkTypeEthernet)
	_, err := e.w.Write(h[:])
	return err
}

// capture records frames, all with one timestamp: they crossed the link in
// one batch.
func (e *Endpoint) capture(pkts []*buffer.Packet) {
	if len(pkts) == 0 {
		return
	}
	now := e.clk.Now()
	sec, nsec := uint32(now.Unix()), uint32(now.Nanosecond())
	le := binary.LittleEndian

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil || e.closed {
		return
	}
	b := e.scratch[:0]
	var bytes int
	for _, p := range pkts {
		data := p.Bytes()
		incl := min(len(data), SnapLen)
		b = le.AppendUint32(b, sec)
		b = le.AppendUint32(b, nsec)
		b = le.AppendUint32(b, uint32(incl))
		b = le.AppendUint32(b, uint32(len(data)))
		b = append(b, data[:incl]...)
		if o := p.Offload; o.Flags&buffer.NeedsCsum != 0 {
			wire.FinishChecksum(b[len(b)-incl:], int(o.CsumStart), int(o.CsumOffset))
		}
		bytes += len(data)
	}
	e.scratch = b
	if _, err := e.w.Write(b); err != nil {
		e.err = fmt.Errorf("pcap: writing records: %w", err)
		e.stats.Errors.Inc()
		return
	}
	e.stats.Frames.Add(uint64(len(pkts)))
	e.stats.Bytes.Add(uint64(bytes))
}

// ReadBatch reads from the inner endpoint and records the frames read.
func (e *Endpoint) ReadBatch(pkts []*buffer.Packet) (int, error) {
	n, err := e.inner.ReadBatch(pkts)
	e.capture(pkts[:n])
	return n, err
}

// WriteBatch writes to the inner endpoint and records the frames it took.
func (e *Endpoint) WriteBatch(pkts []*buffer.Packet) (int, error) {
	n, err := e.inner.WriteBatch(pkts)
	e.capture(pkts[:n])
	return n, err
}

// Up reports whether the inner endpoint's link is up (link.StateWatcher).
func (e *Endpoint) Up() bool { return link.IsUp(e.inner) }

// WatchState passes the inner endpoint's changes of state on to f.
func (e *Endpoint) WatchState(f func(up bool)) { link.WatchState(e.inner, f) }

// MTU returns the inner endpoint's MTU.
func (e *Endpoint) MTU() int { return e.inner.MTU() }

// MAC returns the inner endpoint's MAC.
func (e *Endpoint) MAC() net.HardwareAddr { return e.inner.MAC() }

// Capabilities returns the inner endpoint's receive offloads and no
// transmit offloads (see the package comment).
func (e *Endpoint) Capabilities() link.Capabilities {
	c := e.inner.Capabilities()
	return link.Capabilities{RxChecksum: c.RxChecksum, RxGSO: c.RxGSO}
}

// Stats returns the capture's live counters.
func (e *Endpoint) Stats() *Stats { return &e.stats }

// Err returns the write error that stopped the capture, or nil.
func (e *Endpoint) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Close closes the inner endpoint and stops the capture; with Create it
// also closes the file. It returns the first error of these;
// later calls return the same.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		err := e.inner.Close()
		e.mu.Lock()
		defer e.mu.Unlock()
		e.closed = true
		if e.file != nil {
			if ferr := e.file.Close(); ferr != nil && err == nil {
				err = fmt.Errorf("pcap: %w", ferr)
			}
		}
		e.closeErr = err
	})
	return e.closeErr
}
