package handlers

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDPSourceRequest is what a client asks UDPSource to send it: a flow of
// datagrams of Size bytes of payload at RateMbps of payload for Dur, each
// stamped as the UDP workload's (PutUDPHeader), Run of them a send.
type UDPSourceRequest struct {
	Flow     uint64        `json:"flow"`
	Size     int           `json:"size"`
	RateMbps float64       `json:"rate_mbit_s"`
	Dur      time.Duration `json:"dur"`
	// Run is the datagrams a send carries: more than one go as one send
	// with UDP segmentation offload (UDP_SEGMENT, Linux 4.18), which the
	// kernel cuts into datagrams at the end of its send path or, across
	// a veth, at the receiving socket unless it takes runs whole
	// (UDP_GRO). Where the socket is not the kernel's, or the kernel
	// refuses, each datagram is a send.
	Run int `json:"run"`
}

// UDPSourceDone is the sequence number of the datagram that ends a
// UDPSource flow, sent three times after the last; its time field holds
// the number of datagrams sent instead.
const UDPSourceDone = math.MaxUint64

// maxSourceRun bounds a request's Run: the kernel's UDP_MAX_SEGMENTS.
const maxSourceRun = 64

// UDPSource serves requests read from pc until pc is closed: each starts
// a goroutine sending the flow asked for to the address the request came
// from. A request for a flow already served is ignored, so that a client
// may repeat a request it fears lost.
func UDPSource(pc net.PacketConn) error {
	served := map[uint64]bool{}
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		var req UDPSourceRequest
		if json.Unmarshal(buf[:n], &req) != nil || req.Size < UDPHeaderLen || req.Size > 65000 ||
			req.RateMbps <= 0 || req.Dur <= 0 || req.Dur > 10*time.Minute {
			continue
		}
		req.Run = min(max(req.Run, 1), maxSourceRun, 65000/req.Size)
		to, ok := from.(*net.UDPAddr)
		if !ok {
			continue
		}
		if !served[req.Flow] {
			served[req.Flow] = true
			go sendSource(pc, to.AddrPort(), req)
		}
	}
}

// sendSource sends one requested flow to, paced by runs: each run leaves
// when the datagrams before it are due at the rate asked.
func sendSource(pc net.PacketConn, to netip.AddrPort, req UDPSourceRequest) {
	s := newRunSender(pc, to, req.Size, req.Run)
	pace := Pace{Start: time.Now(), Gap: time.Duration(float64(req.Size*8) / (req.RateMbps * 1e6) * 1e9)}
	var sent int64
	end := pace.Start.Add(req.Dur)
	for now := pace.Start; now.Before(end); now = time.Now() {
		due := pace.Due(now)
		if sent >= due {
			pace.Wait(sent, now)
			continue
		}
		n := int(min(due-sent, int64(req.Run)))
		s.send(req.Flow, uint64(sent), n)
		sent += int64(n)
	}
	// The end, with the count, three times: what is lost of it the
	// client makes up for from the sequence numbers.
	done := make([]byte, UDPHeaderLen)
	binary.BigEndian.PutUint64(done[0:], req.Flow)
	binary.BigEndian.PutUint64(done[8:], UDPSourceDone)
	binary.BigEndian.PutUint64(done[16:], uint64(sent))
	for range 3 {
		time.Sleep(20 * time.Millisecond)
		pc.WriteTo(done, net.UDPAddrFromAddrPort(to))
	}
}

// runSender sends runs of equal datagrams to one address, as one
// segmented send each while the socket takes them so.
type runSender struct {
	pc    net.PacketConn
	uc    *net.UDPConn // nil: not the kernel's socket, a send a datagram
	to    netip.AddrPort
	size  int
	buf   []byte
	oob   []byte // UDP_SEGMENT with size
	noGSO bool
}

func newRunSender(pc net.PacketConn, to netip.AddrPort, size, run int) *runSender {
	s := &runSender{pc: pc, to: to, size: size, buf: make([]byte, size*run)}
	if uc, ok := pc.(*net.UDPConn); ok && run > 1 {
		s.uc = uc
		s.oob = make([]byte, unix.CmsgSpace(2))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&s.oob[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
		binary.NativeEndian.PutUint16(s.oob[unix.CmsgLen(0):], uint16(size))
	}
	return s
}

// send sends n datagrams numbered from seq; a send the socket refuses
// (its buffer full) loses its datagrams, as a paced sender's would.
func (s *runSender) send(flow, seq uint64, n int) {
	now := time.Now()
	for i := range n {
		PutUDPHeader(s.buf[i*s.size:], flow, seq+uint64(i), now)
	}
	if s.uc != nil && !s.noGSO && n > 1 {
		_, _, err := s.uc.WriteMsgUDPAddrPort(s.buf[:n*s.size], s.oob, s.to)
		if !errors.Is(err, unix.EIO) && !errors.Is(err, unix.EINVAL) {
			return
		}
		s.noGSO = true // no segmentation offload here: a send a datagram
	}
	to := net.UDPAddrFromAddrPort(s.to)
	for i := range n {
		s.pc.WriteTo(s.buf[i*s.size:(i+1)*s.size], to)
	}
}
