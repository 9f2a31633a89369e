package gateway

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"
)

func TestHostBatchRunsAreEqualSizesAndOneShorterLast(t *testing.T) {
	sizes := func(s ...int) [][]byte {
		p := make([][]byte, len(s))
		for i, n := range s {
			p[i] = make([]byte, n)
		}
		return p
	}
	many := make([]int, maxGSOSegments+5)
	for i := range many {
		many[i] = 100
	}
	tests := []struct {
		name     string
		payloads [][]byte
		want     int
	}{
		{"one", sizes(1000), 1},
		{"equal", sizes(1000, 1000, 1000), 3},
		{"a shorter one ends the run", sizes(1000, 1000, 500, 500), 3},
		{"a longer one starts another", sizes(1000, 1200), 1},
		{"an empty one is sent alone", sizes(1000, 0), 1},
		{"an empty first", sizes(0, 0), 1},
		{"no more than maxGSOSegments", sizes(many...), maxGSOSegments},
		{"no more than a datagram's payload", sizes(30000, 30000, 30000), 2},
	}
	for _, tt := range tests {
		var b hostBatch
		if got := b.run(tt.payloads); got != tt.want {
			t.Errorf("%s: run of %d, want %d", tt.name, got, tt.want)
		}
		b.noGSO = true
		if got := b.run(tt.payloads); got != 1 {
			t.Errorf("%s without GSO: run of %d, want 1", tt.name, got)
		}
	}
}

// Sent to a kernel socket over the loopback, segmented or not, each
// datagram arrives whole, in order, as the guest sent it.
func TestHostBatchDatagramsArriveAsSent(t *testing.T) {
	for _, noGSO := range []bool{false, true} {
		t.Run(fmt.Sprintf("noGSO=%v", noGSO), func(t *testing.T) {
			rcv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer rcv.Close()
			snd, err := net.DialUDP("udp4", nil, rcv.LocalAddr().(*net.UDPAddr))
			if err != nil {
				t.Fatal(err)
			}
			defer snd.Close()
			rc, err := snd.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var payloads [][]byte
			for i, n := range []int{1000, 1000, 1000, 500, 800, 800, 0, 1200} {
				payloads = append(payloads, bytes.Repeat([]byte{byte('a' + i)}, n))
			}
			b := newHostBatch(rc)
			b.noGSO = noGSO
			sent, segmented, err := b.sendAll(payloads)
			want := 6 // 1000×3 and 500, then 800×2
			if noGSO {
				want = 0
			}
			if err != nil || sent != len(payloads) || segmented != want {
				t.Fatalf("sent %d of %d, %d segmented (want %d): %v", sent, len(payloads), segmented, want, err)
			}
			rcv.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 65536)
			for i, p := range payloads {
				n, err := rcv.Read(buf)
				if err != nil {
					t.Fatalf("datagram %d: %v", i, err)
				}
				if !bytes.Equal(buf[:n], p) {
					t.Errorf("datagram %d: %d bytes of %q, want %d of %q", i, n, buf[:min(n, 1)], len(p), p[:min(len(p), 1)])
				}
			}
		})
	}
}
