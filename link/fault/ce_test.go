package fault

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

// ipFrame returns an Ethernet frame carrying an IPv4 header with tos and a
// correct header checksum, or an ARP frame when arp is set.
func (r *rig) ipFrame(tos uint8, arp bool) *buffer.Packet {
	p := r.pool.Get(64)
	b := p.Bytes()
	clear(b)
	copy(b[0:6], macB)
	copy(b[6:12], macA)
	if arp {
		binary.BigEndian.PutUint16(b[12:14], 0x0806)
		return p
	}
	binary.BigEndian.PutUint16(b[12:14], etherTypeIPv4)
	ip := b[link.EthernetHeaderLen:]
	ip[0], ip[1] = 0x45, tos
	binary.BigEndian.PutUint16(ip[2:4], 50)
	ip[8], ip[9] = 64, 6
	copy(ip[12:20], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[10:12], headerChecksum(ip[:20]))
	return p
}

// headerChecksum computes an IPv4 header checksum from scratch (RFC 791),
// to check markCE's incremental one.
func headerChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		if i != 10 {
			sum += uint32(binary.BigEndian.Uint16(h[i:]))
		}
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// ce=1 marks every ECT(0) and ECT(1) packet CE with a correct checksum, and
// leaves not-ECT packets, packets already CE and non-IP frames alone, in
// both directions.
func TestCEOneMarksEveryECNCapablePacket(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tos     uint8
		arp     bool
		wantTOS uint8
		marked  bool
	}{
		{"ECT(0)", 0x02, false, 0x03, true},
		{"ECT(1)", 0x01, false, 0x03, true},
		{"ECT(0) with DSCP", 0xb8 | 0x02, false, 0xbb, true},
		{"not ECT", 0x00, false, 0x00, false},
		{"already CE", 0x03, false, 0x03, false},
		{"ARP", 0, true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{CE: 1, Seed: 1})
			p := r.ipFrame(tc.tos, tc.arp)
			want := bytes.Clone(p.Bytes())
			if _, err := r.f.WriteBatch([]*buffer.Packet{p}); err != nil {
				t.Fatal(err)
			}
			p.Release()
			got := r.drainPeer(t)
			if len(got) != 1 {
				t.Fatalf("%d frames delivered, want 1", len(got))
			}
			f := got[0]
			if tc.arp {
				if !bytes.Equal(f, want) {
					t.Errorf("ARP frame changed")
				}
			} else {
				ip := f[link.EthernetHeaderLen:]
				if ip[1] != tc.wantTOS {
					t.Errorf("TOS %#x, want %#x", ip[1], tc.wantTOS)
				}
				if got, want := binary.BigEndian.Uint16(ip[10:12]), headerChecksum(ip[:20]); got != want {
					t.Errorf("header checksum %#04x, want %#04x", got, want)
				}
				ip[1], want[link.EthernetHeaderLen+1] = 0, 0
				copy(ip[10:12], want[link.EthernetHeaderLen+10:])
				if !bytes.Equal(f, want) {
					t.Errorf("bytes other than TOS and checksum changed")
				}
			}
			wantN := map[bool]uint64{true: 1}[tc.marked]
			if n := r.f.Stats().Tx.CEMarked.Load(); n != wantN {
				t.Errorf("Tx.CEMarked = %d, want %d", n, wantN)
			}
		})
	}
}

// ce=0.25 marks about a quarter of ECN-capable packets.
func TestCEMarksAtItsRate(t *testing.T) {
	r := newRig(t, Config{CE: 0.25, Seed: 9})
	const n = 2000
	for range n / 8 {
		batch := make([]*buffer.Packet, 8)
		for i := range batch {
			batch[i] = r.ipFrame(0x02, false)
		}
		if _, err := r.f.WriteBatch(batch); err != nil {
			t.Fatal(err)
		}
		for _, p := range batch {
			p.Release()
		}
		r.drainPeer(t)
	}
	if got := r.f.Stats().Tx.CEMarked.Load(); got < n*20/100 || got > n*30/100 {
		t.Errorf("%d of %d packets marked, want about a quarter", got, n)
	}
}
