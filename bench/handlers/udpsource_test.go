package handlers

import (
	"encoding/binary"
	"encoding/json"
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The UDP source sends the flow asked for, once however often it is asked,
// every datagram numbered and the count in the end; over the kernel's
// socket, a run a send with segmentation offload (a receiver with UDP_GRO
// reads them as runs of the size asked for), and elsewhere a datagram a
// send.
func TestUDPSourceSendsTheFlowAskedFor(t *testing.T) {
	for _, tt := range []struct {
		name     string
		wrap     bool // the server's socket not a *net.UDPConn
		wantRuns bool
	}{
		{"the kernel's socket: runs", false, true},
		{"another socket: a datagram a send", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			var served net.PacketConn = pc
			if tt.wrap {
				served = struct{ net.PacketConn }{pc}
			}
			go UDPSource(served)
			c, err := net.DialUDP("udp4", nil, pc.LocalAddr().(*net.UDPAddr))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rc, _ := c.SyscallConn()
			rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1) })
			const size, rate, dur, run = 1200, 40.0, 100 * time.Millisecond, 16
			req, _ := json.Marshal(UDPSourceRequest{Flow: 7, Size: size, RateMbps: rate, Dur: dur, Run: run})
			for range 2 { // the repeat is ignored
				if _, err := c.Write(req); err != nil {
					t.Fatal(err)
				}
			}
			c.Write([]byte("not a request"))
			seen := map[uint64]int{}
			var sent uint64
			runs := 0
			b, oob := make([]byte, 65536), make([]byte, 64)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for sent == 0 {
				n, oobn, _, _, err := c.ReadMsgUDPAddrPort(b, oob)
				if err != nil {
					t.Fatalf("after %d datagrams: %v", len(seen), err)
				}
				seg := groSize(oob[:oobn])
				if seg == 0 {
					seg = n
				} else {
					runs++
					if seg != size {
						t.Fatalf("a run of %d-byte segments, want %d", seg, size)
					}
				}
				for off := 0; off < n; off += seg {
					d := b[off:min(off+seg, n)]
					if binary.BigEndian.Uint64(d) != 7 {
						t.Fatalf("a datagram of flow %d", binary.BigEndian.Uint64(d))
					}
					if seq := binary.BigEndian.Uint64(d[8:]); seq == UDPSourceDone {
						sent = binary.BigEndian.Uint64(d[16:])
					} else {
						seen[seq]++
						if len(d) != size {
							t.Fatalf("datagram %d of %d bytes, want %d", seq, len(d), size)
						}
					}
				}
			}
			// 40 Mbit/s of 1200 bytes for 100 ms is some 416 datagrams.
			if want := rate * 1e6 * dur.Seconds() / (size * 8); float64(sent) < 0.8*want || float64(sent) > 1.2*want {
				t.Errorf("the end counts %d datagrams, want about %.0f", sent, want)
			}
			for seq := range sent {
				if seen[seq] != 1 {
					t.Fatalf("datagram %d received %d times, want once (%d of %d received)", seq, seen[seq], len(seen), sent)
				}
			}
			if len(seen) != int(sent) {
				t.Errorf("%d datagrams received, the end counts %d", len(seen), sent)
			}
			if tt.wantRuns != (runs > 0) {
				t.Errorf("%d reads were runs; want runs %v", runs, tt.wantRuns)
			}
		})
	}
}

// groSize returns the segment size of a UDP_GRO control message in oob, 0
// without one.
func groSize(oob []byte) int {
	if len(oob) < unix.CmsgLen(4) {
		return 0
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	if h.Level != unix.SOL_UDP || h.Type != unix.UDP_GRO {
		return 0
	}
	return int(binary.NativeEndian.Uint32(oob[unix.CmsgLen(0):]))
}
